"""The command line as a new user meets it: fast --help, one-line refusals before any work, one run writer at
a time, a failed rerun that leaves a marker instead of a stale report, Ctrl-C in one line, and a console with
one progress line per configuration and none of the kernels' chatter."""

import contextlib
import io
import os
import subprocess
import sys

import nbformat
import pytest

import cnnbench
from cnnbench import paths, pipeline, progress
from conftest import ROOT

SMOKE = ROOT / "params" / "smoke.yaml"


@pytest.fixture(autouse=True)
def _machinery_loggers_restored(monkeypatch):
    """main()'s Ctrl-C path silences the notebook machinery's loggers for the exit; give them back after."""
    import logging

    for name in pipeline.MACHINERY_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)


def cli(*args) -> subprocess.CompletedProcess:
    """``cnnbench *args`` in this process, its exit status and console captured (a process of its own costs
    seconds of imports; test_pipeline's bad-params test runs the real command's refusal in one)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = pipeline.main(list(args))
        except SystemExit as exit:
            code = exit.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def refused(proc, text):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and text in proc.stderr, (
        proc.stderr
    )


def test_cli_help_and_package_import_do_not_import_torch():
    code = (
        "import sys, cnnbench, cnnbench.pipeline; assert 'torch' not in sys.modules, 'torch imported'; "
        "cnnbench.open_run, cnnbench.Run; assert 'torch' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    assert callable(cnnbench.open_run) and cnnbench.Run.__name__ == "Run"


def test_outputs_at_a_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "f").write_text("x")
    refused(cli("--params", str(SMOKE), "--outputs", str(tmp_path / "f")), "is a file, not a folder")
    refused(cli("--params", str(SMOKE), "--outputs", str(tmp_path / "f" / "sub")), "cannot be created")


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b"])
def test_unsafe_run_name_is_refused_in_one_line(tmp_path, name):
    refused(
        cli("--params", str(SMOKE), "--outputs", str(tmp_path / "out"), "--run-name", name),
        "not a safe run name",
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_set_errors_name_set_and_a_folder_is_not_a_params_file(tmp_path):
    refused(
        cli("--params", str(SMOKE), "--set", "batch_size=0", "--outputs", str(tmp_path)),
        "cnnbench: --set key 'batch_size'",
    )
    refused(cli("--params", str(tmp_path), "--outputs", str(tmp_path)), "is a folder, not a params file")


def test_second_writer_of_a_run_refuses_in_one_line(tmp_path):
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / ".lock").write_text(f"{os.getppid()}\n")  # this test's parent: alive, not the CLI
    refused(cli("--params", str(SMOKE), "--outputs", str(tmp_path)), "is being written by process")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_run_lock_takes_over_a_stale_lock_and_releases_on_exit(tmp_path):
    (tmp_path / ".lock").write_text(f"{_dead_pid()}\n")
    with paths.RunLock(tmp_path) as lock:
        assert (tmp_path / ".lock").read_text().strip() == str(os.getpid()) and lock.held
        assert os.environ[paths.LOCK_ENV] == str(tmp_path.resolve())
    assert not (tmp_path / ".lock").exists() and paths.LOCK_ENV not in os.environ


def test_open_run_refuses_a_run_another_process_writes_and_warns_about_threads(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").write_text(f"{os.getppid()}\n")
    with pytest.raises(paths.RunLocked, match="is being written by process"):
        cnnbench.open_run(SMOKE, {}, tmp_path / "run")
    with pytest.warns(UserWarning, match="above the .* CPU cores"):
        cnnbench.open_run(SMOKE, {"threads": (os.cpu_count() or 1) + 1}, tmp_path / "other")


def _main(monkeypatch, tmp_path, outcome):
    def execute(*args, **kwargs):
        if isinstance(outcome, BaseException):
            raise outcome
        return []

    def build_run_report(run_dir, executed):
        (run_dir / "report.html").write_text("new report")
        return run_dir / "report.html"

    monkeypatch.setattr(pipeline, "execute", execute)
    monkeypatch.setattr("cnnbench.report.build_run_report", build_run_report)
    monkeypatch.setattr("cnnbench.report.build_combined_report", lambda outputs: None)
    return pipeline.main(["--params", str(SMOKE), "--outputs", str(tmp_path), "--set", "repeats=2"])


def test_failed_rerun_leaves_a_marker_and_no_current_looking_report(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "smoke"
    run_dir.mkdir()
    (run_dir / "report.html").write_text("old report")
    failure = pipeline.NotebookFailed("02_scenario_a", 3, "ValueError: boom", run_dir / "x.ipynb")
    assert _main(monkeypatch, tmp_path, failure) == 1
    assert (
        not (run_dir / "report.html").exists() and (run_dir / "report.stale.html").read_text() == "old report"
    )
    marker = (run_dir / "FAILED.txt").read_text()
    assert (
        "ValueError: boom" in marker
        and "params file: params/smoke.yaml" in marker  # relative to the workbook, not this machine's path
        and '"repeats": 2' in marker
        and "when:" in marker
    )
    assert not (run_dir / ".lock").exists()
    assert _main(monkeypatch, tmp_path, None) == 0  # the successful rerun: a current report, no marker
    assert (run_dir / "report.html").read_text() == "new report"
    assert not (run_dir / "FAILED.txt").exists() and not (run_dir / "report.stale.html").exists()


def test_ctrl_c_stops_with_one_line(tmp_path, monkeypatch, capsys):
    assert _main(monkeypatch, tmp_path, KeyboardInterrupt()) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err
    assert "interrupted" in (tmp_path / "smoke" / "FAILED.txt").read_text()
    assert not (tmp_path / "smoke" / ".lock").exists()


def _kernel_dies(outcome):
    """papermill as it behaves when the kernel dies: nbclient logs, then ``outcome`` is raised."""
    import logging

    def execute_notebook(*args, **kwargs):
        for name in ("traitlets", "papermill"):  # nbclient's own logger, and papermill's client's
            logging.getLogger(name).error("Kernel died while waiting for execute reply.")
        raise outcome

    return execute_notebook


def test_a_kernel_that_dies_fails_the_notebook_in_one_line_and_logs_to_kernel_log(
    tmp_path, monkeypatch, capfd
):
    from nbclient.exceptions import DeadKernelError

    monkeypatch.setattr("papermill.execute_notebook", _kernel_dies(DeadKernelError("Kernel died")))
    with pytest.raises(pipeline.NotebookFailed, match="00_setup failed: the kernel died"):
        pipeline.execute(SMOKE, tmp_path, ["00_setup"], 60, log=lambda *a, **k: None)
    assert capfd.readouterr().err == ""  # was: "Kernel died while waiting ..." and a traceback
    assert "Kernel died while waiting for execute reply." in (tmp_path / "kernel.log").read_text()


def test_ctrl_c_as_the_kernel_dies_still_prints_one_line(tmp_path, monkeypatch, capfd):
    # CI saw SIGINT reach the kernel and the pipeline together: nbclient's "Kernel died" line came first and an
    # unretrieved task's DeadKernelError traceback last, around the pipeline's own line.
    import logging

    monkeypatch.setattr("papermill.execute_notebook", _kernel_dies(KeyboardInterrupt()))
    code = pipeline.main(
        ["--params", str(SMOKE), "--outputs", str(tmp_path), "--set", "notebooks=[00_setup]"]
    )
    logging.getLogger("asyncio").error("Task exception was never retrieved")  # what interpreter exit logs
    err = capfd.readouterr().err
    assert code == 130 and err.count("\n") == 1 and "interrupted" in err, err


def test_progress_lines_reach_the_console_while_a_notebook_runs(tmp_path, monkeypatch):
    path = tmp_path / "progress.log"
    path.write_text("")
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    printed = []
    with pipeline._Tail(path, lambda line, **kw: printed.append(line), interval_s=0.01):
        progress.row_done(
            {
                "model": "resnet18",
                "phase": "train",
                "batch_size": 32,
                "precision": "fp32",
                "status": "ok",
                "throughput_img_s": 123.45,
                "throughput_ci95_img_s": 1.5,
                "noisy": False,
            }
        )
        progress.row_done(
            {"model": "mnist_cnn", "phase": "eval", "status": "ok", "throughput_img_s": 9.0, "noisy": True}
        )
        progress.row_done(
            {
                "model": "resnet50",
                "phase": "eval",
                "batch_size": 512,
                "status": "oom",
                "error": "OutOfMemoryError: CUDA out of memory",
            }
        )
    assert printed == [
        "    resnet18 train bs=32 fp32: 123.5 +- 1.5 img/s",
        "    mnist_cnn eval: 9.0 img/s (one process: no interval) (noisy)",
        "    resnet50 eval bs=512: oom OutOfMemoryError: CUDA out of memory",
    ]


def test_engine_reports_each_finished_configuration(tmp_path, monkeypatch):
    from cnnbench.measure import engine, runner

    path = tmp_path / "progress.log"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(path))
    from cnnbench.params import Params

    monkeypatch.setattr(
        engine,
        "measure",
        lambda cfg, device, protocol, dataset=None, **kw: {
            **engine.config_key(cfg, device, protocol),
            "status": "ok",
            "throughput_img_s": 10.0,
        },
    )
    cfgs = [engine.Config.of("mnist_cnn", phase, 28, 10, 1, batch_size=8) for phase in ("train", "eval")]
    runner.run_configs(cfgs, engine.torch.device("cpu"), Params(), tmp_path / "r.csv")
    lines = path.read_text().splitlines()
    assert [line.split(":")[0] for line in lines if not line.startswith("  ")] == [
        "mnist_cnn train bs=8 fp32",
        "mnist_cnn eval bs=8 fp32",
        "kept 0 of 2 configurations from r.csv; measured 2",
    ]
    # and one line per process, in interleaved rounds, so the console moves while rounds run
    procs = [line.split(":")[0].strip() for line in lines if line.startswith("  ")]
    assert sorted(procs[:2]) == ["mnist_cnn eval bs=8", "mnist_cnn train bs=8"]  # the first round has both


def test_kernel_chatter_goes_to_kernel_log_not_the_console(tmp_path, monkeypatch, capfd):
    root = tmp_path / "workbook"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    params = nbformat.v4.new_code_cell('params_file = ""\noverrides = {}\nrun_dir = ""')
    params.metadata["tags"] = ["parameters"]
    cell = nbformat.v4.new_code_cell(
        "import os\nos.write(2, b'USDT: fake profiler_start\\n')\n"
        "from cnnbench import progress\nprogress.row_done({'model': 'm', 'phase': 'train'})"
    )
    nb = nbformat.v4.new_notebook(cells=[params, cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "notebooks" / "00_setup.ipynb")
    monkeypatch.setenv("CNNBENCH_ROOT", str(root))
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "lib"))
    for key in (progress.PROGRESS_ENV, "CNNBENCH_HEADLESS"):
        monkeypatch.delenv(key, raising=False)
    run_dir = tmp_path / "out" / "r"
    pipeline.execute(root / "params" / "p.yaml", run_dir, ["00_setup"], timeout_s=120)
    out, err = capfd.readouterr()
    assert "    m train" in out and "done in" in out
    assert "USDT" not in out + err and "without encryption" not in out + err
    assert "USDT: fake profiler_start" in (run_dir / "kernel.log").read_text()


def test_zip_run_does_not_follow_links_out_of_the_run_folder(tmp_path):
    import zipfile

    from cnnbench import analysis

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("private")
    run_dir = tmp_path / "outputs" / "r"
    (run_dir / "figures").mkdir(parents=True)
    (run_dir / "scenario_a.csv").write_text("a\n1\n")
    (run_dir / "figures" / "f.png").write_bytes(b"png")
    (run_dir / "leak.txt").symlink_to(secret / "key.txt")
    (run_dir / "leakdir").symlink_to(secret)
    archive = analysis.zip_run(run_dir)
    with zipfile.ZipFile(archive) as zf:
        names = sorted(zf.namelist())
        assert names == ["r/figures/f.png", "r/scenario_a.csv"]
        assert all(b"private" not in zf.read(n) for n in names)


@pytest.mark.slow
def test_ctrl_c_on_the_real_pipeline_prints_one_line(tmp_path):
    """SIGINT to the whole process group (as a terminal sends it) while a notebook runs. The command starts with
    SIGINT at its default, as under a terminal: a test suite run as a background job (`make test &`) inherits
    SIGINT ignored, and a Python started so ignores Ctrl-C by POSIX rule (the run then rightly finished, exit 0)."""
    import signal
    import time

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
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while not (tmp_path / "smoke" / "progress.log").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (1, 130), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert (tmp_path / "smoke" / "FAILED.txt").is_file() and not (tmp_path / "smoke" / ".lock").exists()


# --- issue 21: argument validation (--run-name, --set, the params file) ----------------------------------------


@pytest.mark.parametrize(
    "args, text",
    [
        (["--run-name", ""], "--run-name is empty"),
        (["--run-name", "a/b"], "cnnbench: --run-name: 'a/b' is not a safe run name"),
        (["--run-name", "a\nb"], "cnnbench: --run-name: 'a\\nb' is not a safe run name"),
        (["--set", "expect_device=T4"], "cnnbench: --set key 'expect_device'"),
        (["--set", "notebooks=[]"], "cnnbench: --set key 'notebooks'"),
        (["--set", "window_s=.nan"], "cnnbench: --set key 'window_s' must be a finite number"),
        (["--set", "models={a: 1, a: 2}"], "duplicate key 'a'"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_naming_what_the_user_typed(tmp_path, args, text):
    refused(cli("--params", str(SMOKE), "--outputs", str(tmp_path / "out"), *args), text)
    assert "--set key 'run_name'" not in text
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_unreadable_params_files_are_refused_in_one_line(tmp_path):
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"device: cpu\n# caf\xe9\n")
    refused(cli("--params", str(latin1), "--outputs", str(tmp_path)), "not UTF-8")
    refused(cli("--params", "/dev/zero", "--outputs", str(tmp_path)), "not a regular file")


def test_python_dash_m_cnnbench_is_the_cnnbench_command():
    """Issue 21 barrage: `python -m cnnbench` failed with "No module named cnnbench.__main__"."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "cnnbench", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "--params" in done.stdout


def test_batch_runner_without_the_notebook_extra_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    """Issue 19: papermill, nbconvert and ipykernel moved to the [notebook] extra (a Colab kernel lacks papermill)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "papermill" else real(name, *a)
    )
    assert pipeline.main(["--params", "params/smoke.yaml", "--outputs", str(tmp_path), "--no-report"]) == 2
    assert list(tmp_path.iterdir()) == []
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "cnnbench: the batch runner needs papermill: pip install 'cnnbench[notebook]' (make report installs it)"
    )


def test_a_finished_pipeline_run_zips_again_without_its_lock_or_the_not_finished_marker(tmp_path):
    """The committed example's zip (made by 08 while the pipeline still ran) held `.lock` and a FAILED.txt saying
    "This run has not finished", and no report.html: unzipped on a laptop, the combined report left it out as
    failed."""
    import zipfile

    from cnnbench import analysis, pipeline
    from cnnbench.results import runs

    run_dir = tmp_path / "outputs" / "colab"
    run_dir.mkdir(parents=True)
    (run_dir / "scenario_a.csv").write_text("a\n1\n")
    (run_dir / ".lock").write_text("123")
    (run_dir / paths.FAILED).write_text("This run has not finished: it started at ...\n")
    analysis.zip_run(run_dir)  # 08, inside the pipeline
    (run_dir / "report.html").write_text("<html></html>")  # the pipeline goes on after 08
    pipeline.finished(run_dir)
    assert not (run_dir / paths.FAILED).exists()
    with zipfile.ZipFile(tmp_path / "outputs" / "colab.zip") as zf:
        assert sorted(zf.namelist()) == ["colab/report.html", "colab/scenario_a.csv"]
        zf.extractall(tmp_path / "laptop")
    assert runs.failed_run_reason(tmp_path / "laptop" / "colab") is None
    # a run that 08 did not zip (the notebooks chosen left it out) gets no zip at the end either
    other = tmp_path / "outputs" / "no-zip"
    other.mkdir()
    pipeline.finished(other)
    assert not (tmp_path / "outputs" / "no-zip.zip").exists()


def test_a_bug_before_the_lock_fails_with_exit_1_not_as_a_refusal(tmp_path, monkeypatch):
    """Exit 2 means "refused before any work" (docs/running.md): an unexpected error is a failure (1), in one line;
    a run folder that cannot be locked is still refused (2)."""
    from cnnbench import params

    def bug(p):
        raise TypeError("unexpected")

    monkeypatch.setattr(params, "run_data_problem", bug)
    proc = cli("--params", str(SMOKE), "--outputs", str(tmp_path))
    assert proc.returncode == 1 and proc.stderr == "cnnbench: TypeError: unexpected\n", proc.stderr
    monkeypatch.undo()

    def unwritable(self):
        raise PermissionError(13, "Permission denied", str(tmp_path / "run" / ".lock"))

    monkeypatch.setattr(paths.RunLock, "acquire", unwritable)
    refused(cli("--params", str(SMOKE), "--outputs", str(tmp_path), "--run-name", "run"), "Permission denied")
