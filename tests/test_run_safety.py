"""Issue 21: a run that never lies, hangs or dies with a traceback. Parameters resolved once for the whole run,
SIGTERM handled as Ctrl-C is, every failure in one line with FAILED.txt and no half-written file, a run lock
that one process holds at a time, and an archive that never writes through a planted link."""

import contextlib
import errno
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import nbformat
import pytest

from cnnbench import data, params, paths, pipeline
from conftest import ROOT

SMOKE = ROOT / "params" / "smoke.yaml"


@pytest.fixture(autouse=True)
def _pipeline_state_restored(monkeypatch):
    """main() sets these for its kernels and silences the notebook machinery's loggers at a Ctrl-C exit."""
    import logging

    for name in pipeline.MACHINERY_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)
    for key in ("CNNBENCH_HEADLESS", "CNNBENCH_ROOT", "CNNBENCH_PROGRESS", paths.LOCK_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CNNBENCH_ROOT", str(ROOT))


def _one_line(err: str, *texts: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for text in texts:
        assert text in err, err


def _workbook(tmp_path, notebooks: dict):
    """A workbook folder whose notebooks are the given cells (each after the papermill parameters cell)."""
    root = tmp_path / "workbook"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    for name, cells in notebooks.items():
        params = nbformat.v4.new_code_cell('params_file = ""\noverrides = {}\nrun_dir = ""')
        params.metadata["tags"] = ["parameters"]
        nb = nbformat.v4.new_notebook(cells=[params, *[nbformat.v4.new_code_cell(c) for c in cells]])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, root / "notebooks" / f"{name}.ipynb")
    return root


# --- 1. one resolved parameter set for the whole run -----------------------------------------------------------

SEEN = """import json, pathlib
import cnnbench
run = cnnbench.open_run(params_file, overrides, run_dir)
pathlib.Path(run.dir, "seen_{nb}.json").write_text(json.dumps(
    {{"batch_size": run.params.batch_size, "repeats": run.params.repeats, "data_path": run.params.data_path,
     "params_file": str(run.params_file), "overrides": run.overrides}}))"""

EDIT = """p = pathlib.Path({yaml!r})  # the user edits the params file while the run goes on
p.write_text(p.read_text().replace("batch_size: 16", "batch_size: 32").replace("repeats: 2", "repeats: 4"))"""


def test_every_notebook_gets_the_parameters_resolved_when_the_run_started(tmp_path, monkeypatch, capsys):
    caller = tmp_path / "caller"
    caller.mkdir()
    yaml = tmp_path / "mine.yaml"
    yaml.write_text(
        "device: cpu\nrun_name: r\nthreads: 1\nmodels: [mnist_cnn]\nbatch_size: 16\nrepeats: 2\n"
        "dataset: mnist\ndata_path: mnist_here\ndownload: true\n"
    )
    root = _workbook(
        tmp_path,
        {
            "00_setup": [SEEN.format(nb="00"), EDIT.format(yaml=str(yaml))],
            "01_complexity": [SEEN.format(nb="01")],
        },
    )
    monkeypatch.setenv("CNNBENCH_ROOT", str(root))
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "lib"))
    monkeypatch.chdir(caller)  # data_path is relative: to the caller's folder, where it was validated
    monkeypatch.setattr(data, "download_problem", lambda name, folder: "")  # as if MNIST's host answered
    outputs = tmp_path / "out"
    code = pipeline.main(
        [
            "--params",
            str(yaml),
            "--outputs",
            str(outputs),
            "--set",
            "seed=3",
            "--set",
            "notebooks=[00_setup, 01_complexity]",
            "--no-report",
        ]
    )
    assert code == 0, capsys.readouterr()
    assert "batch_size: 32" in yaml.read_text()  # the edit happened between the two notebooks
    seen = [json.loads((outputs / "r" / f"seen_{nb}.json").read_text()) for nb in ("00", "01")]
    assert seen[0] == seen[1], seen  # was: 01 measured batch 32 and repeats 4 while 00 said 16 and 2
    assert seen[1]["batch_size"] == 16 and seen[1]["repeats"] == 2
    assert seen[1]["data_path"] == str(caller / "mnist_here")  # absolute, not opened from the workbook's root
    assert seen[1]["params_file"] == str(yaml) and seen[1]["overrides"]["seed"] == 3  # provenance kept
    recorded = json.loads((outputs / "r" / "params.json").read_text())
    assert recorded["params_file"] == str(yaml) and recorded["batch_size"] == 16 and recorded["seed"] == 3


def test_a_runs_params_json_edited_between_notebooks_stops_the_run_in_one_line(tmp_path, monkeypatch, capsys):
    """Issue 30: params.json edited by hand between notebooks of one run: 02 measured the edited models with no
    word, while environment.json said otherwise. The next notebook is refused instead."""
    edit = (
        "import pathlib\np = pathlib.Path(run_dir, 'params.json')\n"
        "p.write_text(p.read_text().replace('\"batch_size\": 16', '\"batch_size\": 32'))"
    )
    root = _workbook(
        tmp_path, {"00_setup": [SEEN.format(nb="00"), edit], "01_complexity": [SEEN.format(nb="01")]}
    )
    yaml = tmp_path / "mine.yaml"
    yaml.write_text("device: cpu\nrun_name: r\nthreads: 1\nmodels: [mnist_cnn]\nbatch_size: 16\n")
    monkeypatch.setenv("CNNBENCH_ROOT", str(root))
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "lib"))
    outputs = tmp_path / "out"
    code = pipeline.main(
        [
            "--params",
            str(yaml),
            "--outputs",
            str(outputs),
            "--set",
            "notebooks=[00_setup, 01_complexity]",
            "--no-report",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and '"batch_size": 32' in (outputs / "r" / "params.json").read_text()
    _one_line(err, "01_complexity", "params.json changed since the run started")
    assert not (outputs / "r" / "seen_01.json").exists()
    assert "params.json changed" in (outputs / "r" / "FAILED.txt").read_text()


def test_open_run_of_a_resolved_set_reads_it_and_a_params_file_still_works(tmp_path):
    import cnnbench
    from cnnbench import params, run

    p = params.load(SMOKE, {"repeats": 5})
    resolved = run.write_resolved(tmp_path / "a", p, SMOKE, {"repeats": 5})
    opened = cnnbench.open_run(resolved, {}, tmp_path / "a")
    assert opened.params == p and opened.params_file == SMOKE and opened.overrides == {"repeats": 5}
    again = cnnbench.open_run(resolved, {"batch_size": 4}, tmp_path / "a")  # by hand, on top of the set
    assert again.params.batch_size == 4 and again.params.repeats == 5
    assert cnnbench.open_run(SMOKE, {}, tmp_path / "b").params.repeats == params.load(SMOKE).repeats


# --- 2. SIGTERM is handled as Ctrl-C is ---------------------------------------------------------------------------


def _fake_execute(outcome):
    def execute(*args, **kwargs):
        if callable(outcome):
            outcome()
        return []

    return execute


def test_sigterm_stops_with_one_line_failed_txt_and_exit_143(tmp_path, monkeypatch, capsys):
    def sigterm():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here

    class Unhandled(Exception):
        pass

    def unhandled(signum, frame):  # what reaches the test when main() does not handle SIGTERM itself
        raise Unhandled("SIGTERM not handled by main()")

    monkeypatch.setattr(pipeline, "execute", _fake_execute(sigterm))
    before = signal.signal(signal.SIGTERM, unhandled)
    try:
        code = pipeline.main(["--params", str(SMOKE), "--outputs", str(tmp_path), "--no-report"])
    finally:
        assert signal.signal(signal.SIGTERM, before) == unhandled  # main() gave the handler back
    assert code == 143
    _one_line(capsys.readouterr().err, "SIGTERM")
    assert "SIGTERM" in (tmp_path / "smoke" / "FAILED.txt").read_text()
    assert not (tmp_path / "smoke" / ".lock").exists()


def test_sigint_stops_cnnbench_report_where_sigint_was_ignored(tmp_path, monkeypatch, capsys):
    def interrupted(args):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises here
        raise AssertionError("SIGINT ignored")

    monkeypatch.setattr(pipeline, "_rebuild", interrupted)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a script's `cnnbench report &` starts it
    try:
        assert pipeline.main(["report", str(tmp_path)]) == 130
    finally:
        assert signal.signal(signal.SIGINT, before) == signal.SIG_IGN  # given back as it was
    _one_line(capsys.readouterr().err, "cnnbench report: interrupted")  # was: nothing said


@pytest.mark.slow
def test_sigterm_to_the_real_pipeline_shuts_its_kernel_down(tmp_path):
    """SIGTERM to the pipeline alone (docker stop, a scheduler): the kernel must not outlive it."""
    import psutil

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cnnbench.pipeline",
            "--params",
            str(SMOKE),
            "--outputs",
            str(tmp_path),
            "--set",
            "notebooks=[00_setup, 01_complexity]",
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.time() + 120
    while not (tmp_path / "smoke" / "progress.log").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(3)
    kernels = [
        c for c in psutil.Process(proc.pid).children(recursive=True) if "ipykernel" in " ".join(c.cmdline())
    ]
    assert kernels
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    alive = [k for k in kernels if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
    for kernel in alive:  # was: the kernel went on running the notebook's cell after the pipeline died
        kernel.kill()
    assert proc.returncode == 143, err
    _one_line(err, "SIGTERM")
    assert not alive
    assert (tmp_path / "smoke" / "FAILED.txt").is_file() and not (tmp_path / "smoke" / ".lock").exists()


def test_sigint_stops_a_run_started_in_the_background_where_sigint_was_ignored(tmp_path):
    """Issue 44: a shell's `cnnbench ... &` (no job control) starts it with SIGINT ignored: `kill -INT` during 02,
    06 or `cnnbench report` let the run finish and exit 0 with no FAILED.txt. SIGINT stops a run as SIGTERM does."""
    started = tmp_path / "started"
    cell = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(40)"
    root = _workbook(tmp_path, {"00_setup": [cell], "01_complexity": ["1"]})
    yaml = tmp_path / "mine.yaml"
    yaml.write_text("device: cpu\nrun_name: r\nthreads: 1\nmodels: [mnist_cnn]\n")
    env = {**os.environ, "CNNBENCH_ROOT": str(root), "PYTHONPATH": str(ROOT / "lib")}
    args = ["--params", str(yaml), "--outputs", str(tmp_path / "out"), "--no-report"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cnnbench.pipeline", *args, "--set", "notebooks=[00_setup, 01_complexity]"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `&` in a script starts it
    )
    deadline = time.time() + 120
    while not started.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err  # was: 0, the cell's 40 s slept out and 01 run
    _one_line(err, "interrupted")
    run_dir = tmp_path / "out" / "r"
    assert "interrupted" in (run_dir / "FAILED.txt").read_text()
    assert (run_dir / "notebooks" / "00_setup.ipynb").is_file()  # the partial notebook kept
    assert not (run_dir / "notebooks" / "01_complexity.ipynb").exists()


# --- 3. every failure in one line, FAILED.txt, no half-written file ---------------------------------------------


def test_full_disk_while_a_notebook_is_written_fails_in_one_line_and_leaves_no_truncated_copy(
    tmp_path, monkeypatch, capsys
):
    def execute_notebook(source, target, **kwargs):
        with open(target, "w") as f:
            f.write('{"cells": [{"cell_type": "code", "sou')  # as far as the disk had room
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), target)

    monkeypatch.setattr("papermill.execute_notebook", execute_notebook)
    code = pipeline.main(
        ["--params", str(SMOKE), "--outputs", str(tmp_path), "--set", "notebooks=[00_setup]"]
    )
    assert code == 1
    _one_line(capsys.readouterr().err, "00_setup", "No space left on device")
    run_dir = tmp_path / "smoke"
    assert "No space left on device" in (run_dir / "FAILED.txt").read_text()
    assert list((run_dir / "notebooks").iterdir()) == []  # was: a truncated 00_setup.ipynb
    assert not (run_dir / ".lock").exists() and not (run_dir / "report.html").exists()


def test_a_notebook_that_is_not_json_fails_in_one_line(tmp_path, monkeypatch, capsys):
    root = _workbook(tmp_path, {})
    (root / "notebooks" / "00_setup.ipynb").write_text('{"cells": [')
    monkeypatch.setenv("CNNBENCH_ROOT", str(root))
    code = pipeline.main(
        ["--params", str(SMOKE), "--outputs", str(tmp_path / "out"), "--set", "notebooks=[00_setup]"]
    )
    assert code == 1
    _one_line(capsys.readouterr().err, "00_setup")
    assert "00_setup" in (tmp_path / "out" / "smoke" / "FAILED.txt").read_text()


def test_a_read_only_run_folder_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "smoke"
    run_dir.mkdir()
    real_open = os.open

    def read_only(path, *args, **kwargs):
        if str(path).startswith(str(run_dir)) and args and args[0] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    code = pipeline.main(["--params", str(SMOKE), "--outputs", str(tmp_path)])
    assert code == 2
    _one_line(capsys.readouterr().err, "Read-only file system", str(run_dir))


def test_a_report_that_cannot_be_written_fails_the_run_in_one_line(tmp_path, monkeypatch, capsys):
    def build_run_report(run_dir, executed):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(run_dir / "report.html"))

    monkeypatch.setattr(pipeline, "execute", _fake_execute(None))
    monkeypatch.setattr("cnnbench.report.build_run_report", build_run_report)
    assert pipeline.main(["--params", str(SMOKE), "--outputs", str(tmp_path)]) == 1
    _one_line(capsys.readouterr().err, "No space left on device")
    marker = (tmp_path / "smoke" / "FAILED.txt").read_text()
    assert "No space left on device" in marker and "Traceback" in marker  # the detail is in the file


def test_a_run_killed_outright_is_marked_unfinished(tmp_path, monkeypatch):
    """SIGKILL (OOM killer, power loss) cannot be handled: the marker is there from the start, removed only by a
    successful finish, so a half-finished run is never merged as complete."""
    seen = {}

    def execute(*args, **kwargs):
        seen["marker"] = (tmp_path / "smoke" / paths.FAILED).read_text()
        return []

    monkeypatch.setattr(pipeline, "execute", execute)
    assert pipeline.main(["--params", str(SMOKE), "--outputs", str(tmp_path), "--no-report"]) == 0
    assert "has not finished" in seen["marker"].splitlines()[0]
    assert not (tmp_path / "smoke" / paths.FAILED).exists()


def test_a_run_stopped_while_its_notebook_is_written_leaves_no_empty_notebook(tmp_path, monkeypatch):
    """Issue 44: `cnnbench report` stopped mid-08 left a 0-byte notebook (the barrage killed it at its time limit,
    SIGINT having been ignored). Stopped by a signal, the run removes a partial copy that is not a whole notebook;
    one a kill -9 leaves is hidden (.NAME.partial.ipynb) and removed when the next run starts."""

    def execute_notebook(source, target, **kwargs):
        open(target, "w").close()  # papermill's write had truncated it when the signal came
        raise KeyboardInterrupt

    monkeypatch.setattr("papermill.execute_notebook", execute_notebook)
    with pytest.raises(KeyboardInterrupt):
        pipeline.execute(SMOKE, tmp_path, ["08_analysis"], 60, log=lambda *a, **k: None)
    assert list((tmp_path / "notebooks").iterdir()) == []


def test_a_failed_notebook_keeps_its_executed_copy_written_whole(tmp_path, monkeypatch):
    from papermill.exceptions import PapermillExecutionError

    def execute_notebook(source, target, **kwargs):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1/0")]), target)
        raise PapermillExecutionError(0, 1, "1/0", "ZeroDivisionError", "division by zero", [])

    monkeypatch.setattr("papermill.execute_notebook", execute_notebook)
    with pytest.raises(pipeline.NotebookFailed, match="ZeroDivisionError"):
        pipeline.execute(SMOKE, tmp_path, ["00_setup"], 60, log=lambda *a, **k: None)
    assert [p.name for p in (tmp_path / "notebooks").iterdir()] == ["00_setup.ipynb"]
    nbformat.read(tmp_path / "notebooks" / "00_setup.ipynb", as_version=4)


# --- 4. the run lock: one holder at a time ---------------------------------------------------------------------


def _contend(run_dir, start, done, holders):
    start.wait()
    try:
        paths.RunLock(run_dir).acquire()
        holders.put(os.getpid())
    except paths.RunLocked:
        pass
    done.wait()  # a holder stays alive (and holding) until every contender has tried


def _race(run_dir, n=3):
    ctx = multiprocessing.get_context("fork")
    start, done, holders = ctx.Barrier(n), ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(run_dir, start, done, holders)) for _ in range(n)]
    for p in procs:
        p.start()
    done.wait(timeout=30)
    for p in procs:
        p.join(timeout=30)
    won = []
    while not holders.empty():
        won.append(holders.get())
    return won


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_run_lock_is_held_by_one_process_at_a_time(tmp_path):
    """Three processes take the same free lock, or the same stale one (its process gone), at once; 60 trials:
    exactly one wins each time (was: two of three in most trials, each reading the other's still-empty file)."""
    dead = _dead_pid()
    results = []
    for trial in range(60):
        run_dir = tmp_path / f"t{trial}"
        run_dir.mkdir()
        if trial % 2:
            (run_dir / ".lock").write_text(f"{dead}\n")
        results.append(len(_race(run_dir)))
    assert results == [1] * len(results), results


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_an_empty_lock_is_held_until_it_is_old(tmp_path):
    lock = tmp_path / ".lock"
    lock.write_text("")  # a writer between creating its lock and writing its PID (an older cnnbench)
    with pytest.raises(paths.RunLocked):
        paths.RunLock(tmp_path).acquire()
    old = time.time() - paths.LOCK_UNREADABLE_STALE_S - 1
    os.utime(lock, (old, old))
    with paths.RunLock(tmp_path) as taken:
        assert taken.held and lock.read_text().strip() == str(os.getpid())
    assert not lock.exists() and [p.name for p in tmp_path.iterdir()] == []  # no temporary file left


# --- 5. the archive replaces a planted link instead of writing through it ---------------------------------------


def test_zip_run_replaces_a_link_planted_at_the_archive(tmp_path):
    import zipfile

    from cnnbench import analysis

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    run_dir = tmp_path / "outputs" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "scenario_a.csv").write_text("a\n1\n")
    (tmp_path / "outputs" / "r.zip").symlink_to(victim)
    archive = analysis.zip_run(run_dir)
    assert victim.read_text() == "precious"  # was: overwritten with the archive
    assert not archive.is_symlink() and zipfile.ZipFile(archive).namelist() == ["r/scenario_a.csv"]
    assert sorted(p.name for p in archive.parent.iterdir()) == ["r", "r.zip"]  # no temporary file left


def test_replacing_writes_whole_or_not_at_all(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    with pytest.raises(OSError), paths.replacing(target) as f:
        f.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f.bin"]
    with paths.replacing(target) as f:
        f.write(b"new")
    assert target.read_bytes() == b"new" and oct(target.stat().st_mode & 0o777) != oct(0o600)


def test_logs_in_a_run_folder_never_write_through_a_planted_link(tmp_path, monkeypatch):
    """Issue 21 barrage: progress.log and kernel.log planted as links to files outside the run folder: the first
    was truncated (its content lost), the second appended to."""
    from cnnbench import progress

    outside = {
        name: tmp_path / f"precious_{name}" for name in ("progress.log", "kernel.log", "machinery.log")
    }
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name, target in outside.items():
        target.write_text("precious\n")
        (run_dir / name).symlink_to(target)
    paths.open_own(run_dir / "progress.log", "wb").close()  # as the pipeline empties it
    monkeypatch.setenv(progress.PROGRESS_ENV, str(run_dir / "progress.log"))
    progress.note("a line")
    with paths.open_own(run_dir / "kernel.log", "ab") as log:  # as the kernel's stdout is opened
        log.write(b"kernel chatter\n")
    with pipeline._logs_to(run_dir / "machinery.log"):
        import logging

        logging.getLogger("nbclient").warning("a record")
    assert all(t.read_text() == "precious\n" for t in outside.values())
    assert not any((run_dir / n).is_symlink() for n in outside)
    assert (run_dir / "progress.log").read_text() == "a line\n"


@pytest.mark.parametrize("failure", [RuntimeError("08 broke"), KeyboardInterrupt()])
def test_a_failed_combined_analysis_never_leaves_the_old_combined_report_as_current(
    tmp_path, monkeypatch, failure
):
    """Issue 21 barrage: when the combined step failed (or was stopped by SIGTERM), outputs/report.html kept the
    previous runs only and nothing said it was stale."""
    from cnnbench import params, report
    from cnnbench import run as run_mod

    (tmp_path / "report.html").write_text("<h1>9 runs compared</h1>")
    monkeypatch.setattr(report, "combined_runs", lambda outputs: ([tmp_path / "a", tmp_path / "b"], {}))
    monkeypatch.setattr(run_mod, "write_resolved", lambda folder, *a: folder / "params.json")

    def fail(*a, **k):
        raise failure

    monkeypatch.setattr(pipeline, "execute", fail)
    p = params.Params(notebooks=["00_setup", "08_analysis"])
    if isinstance(failure, Exception):
        assert pipeline._combined(p, tmp_path / "p.yaml", {}, tmp_path) == 1
    else:
        with pytest.raises(KeyboardInterrupt):
            pipeline._combined(p, tmp_path / "p.yaml", {}, tmp_path)
    assert not (tmp_path / "report.html").exists() and (tmp_path / pipeline.STALE_REPORT).is_file()
    assert (
        (tmp_path / report.COMBINED / paths.FAILED)
        .read_text()
        .startswith("The combined analysis did not finish")
    )


# --- issue 21, second barrage ----------------------------------------------------------------------------------


def test_a_full_disk_names_the_notebook_being_written(tmp_path, monkeypatch, capsys):
    """A real write() on a full disk raises ENOSPC with no file name: the line said only "No space left on
    device"; it names the executed copy being written, and no half-written copy is left."""

    def execute_notebook(source, target, **kwargs):
        with open(target, "w") as f:
            f.write('{"cells": [{"cell_type": "code", "sou')
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as write() raises it: no filename

    monkeypatch.setattr("papermill.execute_notebook", execute_notebook)
    code = pipeline.main(
        ["--params", str(SMOKE), "--outputs", str(tmp_path), "--set", "notebooks=[00_setup]"]
    )
    assert code == 1
    run_dir = tmp_path / "smoke"
    target = run_dir / "notebooks" / "00_setup.ipynb"
    _one_line(capsys.readouterr().err, "No space left on device", str(target))
    assert str(target) in (run_dir / "FAILED.txt").read_text()
    assert list((run_dir / "notebooks").iterdir()) == []


def test_replacing_names_the_file_when_the_disk_is_full(tmp_path, monkeypatch):
    """Every file the package writes whole (results tables, params.json, FAILED.txt, report.html) goes through
    paths.replacing: an ENOSPC from write() or fsync() names the file being written, and no temporary is left."""
    target = tmp_path / "scenario_a.csv"

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as err, paths.replacing(target) as f:
        f.write(b"rows")
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert str(target) in str(err.value) and list(tmp_path.iterdir()) == []


def test_a_closed_console_pipe_does_not_stop_the_run(tmp_path, monkeypatch, capsys):
    """`cnnbench ... | head -3`: once head exits, every print raised BrokenPipeError and the run failed. Console
    lines to a closed pipe are dropped and the run completes (progress.log still has every line)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # head has exited

    class ClosedPipe:
        lines = 0

        def write(self, text):
            self.lines += 1
            if self.lines > 3:
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
            return len(text)

        def flush(self):
            if self.lines > 3:
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

        def fileno(self):
            return write_end

    def fake_execute(params_file, run_dir, notebooks, timeout_s, log=print, **estimates):
        for i in range(20):
            log(f"line {i}", flush=True)
        (run_dir / "progress.log").write_text("kept\n")
        return []

    console = ClosedPipe()
    monkeypatch.setattr(sys, "stdout", console)
    monkeypatch.setattr(pipeline, "execute", fake_execute)
    monkeypatch.setattr("cnnbench.report.build_run_report", lambda run_dir, executed: run_dir / "report.html")
    try:
        code = pipeline.main(
            ["--params", str(SMOKE), "--outputs", str(tmp_path), "--set", "notebooks=[00_setup]"]
        )
    finally:
        os.close(write_end)
    assert code == 0, capsys.readouterr().err
    assert sys.stdout is console  # main() gives the console back as it found it
    assert not (tmp_path / "smoke" / "FAILED.txt").exists()
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--params", "--outputs"])
def test_a_symlink_loop_given_as_a_path_is_refused_in_one_line(tmp_path, capsys, option):
    """Issue 21 barrage: a params file (or --outputs) that is a link to itself exited 1 with "RuntimeError:
    Symlink loop from ..."; it is a bad argument: exit 2, one line naming the option and the path."""
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    args = {"--params": str(SMOKE), "--outputs": str(tmp_path / "out"), option: str(loop)}
    code = pipeline.main([arg for pair in args.items() for arg in pair])
    assert code == 2
    _one_line(capsys.readouterr().err, option, str(loop), "link")


def test_a_usage_error_is_one_line(capsys):
    """argparse printed its whole usage block before the error (--run-name -x: 'expected one argument')."""
    with pytest.raises(SystemExit) as exit_:
        pipeline.main(["--params", str(SMOKE), "--run-name", "-x"])
    assert exit_.value.code == 2
    _one_line(capsys.readouterr().err, "--run-name", "expected one argument", "--help")


def test_absent_mnist_for_05_is_refused_before_the_first_notebook(tmp_path, monkeypatch, capsys):
    """scratch_dataset mnist with no folder and no download: 05 said so only after 00-04 had measured."""
    monkeypatch.setattr(pipeline, "execute", lambda *a, **k: pytest.fail("a notebook ran"))
    code = pipeline.main(
        [
            "--params",
            str(SMOKE),
            "--outputs",
            str(tmp_path),
            "--set",
            "scratch_dataset=mnist",
            "--set",
            f"scratch_data_path={tmp_path / 'none'}",
        ]
    )
    assert code == 2
    _one_line(capsys.readouterr().err, "scratch_data_path", "does not exist")
    assert not (tmp_path / "smoke").exists()


def test_absent_oxford_pet_for_06_is_refused_before_the_first_notebook(tmp_path, monkeypatch, capsys):
    """Issue 21 barrage rerun: transfer_dataset oxford_pet, no folder, no download: 06 said so only after 00-05 had
    measured (the run was stopped at 8 s in 00_setup)."""
    monkeypatch.setattr(pipeline, "execute", lambda *a, **k: pytest.fail("a notebook ran"))
    code = pipeline.main(
        [
            "--params",
            str(SMOKE),
            "--outputs",
            str(tmp_path),
            "--set",
            "transfer_dataset=oxford_pet",
            "--set",
            f"transfer_data_path={tmp_path / 'none'}",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    _one_line(err, "transfer_data_path", "does not exist", "set download: true")
    assert "--set key 'transfer_data_path'" in err, err  # said by the source that set the key
    assert not (tmp_path / "smoke").exists()
    own = tmp_path / "pets.yaml"
    own.write_text(
        f"{SMOKE.read_text()}\ntransfer_dataset: oxford_pet\ntransfer_data_path: {tmp_path / 'none'}\n"
    )
    assert pipeline.main(["--params", str(own), "--outputs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cnnbench: {own}: key 'transfer_data_path'"), err
    # a key left at its default is not blamed on the file that did not set it
    own.write_text(f"{SMOKE.read_text()}\nscratch_dataset: mnist\n")
    monkeypatch.setattr(
        params,
        "scratch_data_problem",
        lambda p, absent_ok=False: "" if absent_ok else "key 'scratch_data_path': gone",
    )
    assert pipeline.main(["--params", str(own), "--outputs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cnnbench: by default, key 'scratch_data_path': gone"), err


def test_a_notebook_opened_on_a_run_being_written_says_which_run_and_what_to_do_in_one_line(tmp_path):
    """Issue 31: 08 opened in JupyterLab while a run was writing showed a RunLocked traceback in red. IPython
    shows the one line of an error that renders its own traceback, as it does for 08 opened before any run."""
    import papermill

    run_dir = tmp_path / "outputs" / "smoke"
    run_dir.mkdir(parents=True)
    (run_dir / ".lock").write_text(f"{os.getpid()}\n")  # this test's process: alive, and not the kernel
    with pytest.raises(papermill.PapermillExecutionError) as err:
        papermill.execute_notebook(
            str(ROOT / "notebooks" / "08_analysis.ipynb"),
            str(tmp_path / "08.ipynb"),
            parameters={"params_file": str(SMOKE), "run_dir": str(run_dir)},
            kernel_name="python3",
            cwd=str(ROOT),
            progress_bar=False,
        )
    assert err.value.ename == "RunLocked"
    shown = nbformat.read(tmp_path / "08.ipynb", as_version=4)
    error = next(
        o
        for c in shown.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "error"
    )
    assert len(error.traceback) == 1 and "\n" not in error.traceback[0], error.traceback
    _says_who_and_what_to_do(error.traceback[0], os.getpid())


def _says_who_and_what_to_do(line: str, pid: int) -> None:
    assert f"run 'smoke' is being written by process {pid}" in line, line
    assert "try again when it has finished" in line and "run_dir" in line and "run_name" in line, line


def test_every_refusal_of_a_locked_run_names_the_run_the_holder_and_what_to_do(tmp_path):
    import cnnbench

    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / ".lock").write_text(f"{os.getppid()}\n")
    for attempt in (
        lambda: cnnbench.open_run(SMOKE, {}, tmp_path / "smoke"),
        lambda: paths.RunLock(tmp_path / "smoke").acquire(),
    ):
        with pytest.raises(paths.RunLocked) as err:
            attempt()
        assert err.value._render_traceback_() == [str(err.value)]
        _says_who_and_what_to_do(str(err.value), os.getppid())


# --- issue 30: processes die with their run, however it dies, and a new run names those of an earlier one ------


def test_a_new_run_names_the_leftover_processes_of_an_earlier_run(tmp_path, monkeypatch, capsys):
    """Issue 30: a worker left under PID 1 by a killed run burned a core for minutes, and every later run measured
    under that load without a word."""
    left = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, paths.LOCK_ENV: str(tmp_path / "earlier")},
    )
    monkeypatch.setattr(pipeline, "execute", _fake_execute(None))
    try:
        code = pipeline.main(["--params", str(SMOKE), "--outputs", str(tmp_path), "--no-report"])
    finally:
        left.kill()
    out = capsys.readouterr().out
    line = next((ln for ln in out.splitlines() if str(left.pid) in ln), "")
    assert code == 0 and "earlier" in line and "still run" in line and f"kill {left.pid}" in line, out


def _processes_of(run_dir) -> list:
    return [p for p in paths.run_processes() if p[1] == str(run_dir)]


@pytest.mark.slow
def test_a_run_killed_with_sigkill_to_its_group_leaves_no_process_behind(tmp_path):
    """Issue 30: `timeout -s KILL` (a CI cancel, a scheduler) to the pipeline's process group left the kernel's
    forkserver and a measuring worker under PID 1, the worker burning a core for 6+ minutes: the kernel runs in a
    session of its own, out of the group's reach. Every process of the run is gone 10 s after the kill."""
    run_dir = tmp_path / "out" / "killed"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cnnbench",
            "--params",
            str(SMOKE),
            "--outputs",
            str(tmp_path / "out"),
            "--run-name",
            "killed",
            "--set",
            "notebooks=[00_setup, 02_scenario_a]",
            "--set",
            "measured_steps=0",
            "--set",
            "window_s=60",
            "--set",
            "repeats=1",
            "--set",
            "models=[mnist_cnn]",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while (
            time.monotonic() < deadline
            and len([p for p in _processes_of(run_dir) if "forkserver" in p[2]]) < 2
        ):
            assert proc.poll() is None, "the pipeline ended before a worker measured"
            time.sleep(1)
        measuring = _processes_of(run_dir)
        assert len([p for p in measuring if "forkserver" in p[2]]) >= 2, (
            measuring
        )  # the forkserver and a worker
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    gone_by = time.monotonic() + 10
    while (left := _processes_of(run_dir)) and time.monotonic() < gone_by:
        time.sleep(0.5)
    for pid, *_ in left:  # not to burn the machine's cores for the tests after this one
        os.kill(pid, signal.SIGKILL)
    assert not left, f"alive 10 s after the kill: {left} (were: {measuring})"
