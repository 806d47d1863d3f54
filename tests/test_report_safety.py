"""Issue 30: a report runs no one's script, whatever run folders it merged, and `cnnbench report` and `compare`
read run folders one way: the names they take, the paths they write, the runs they refuse (with the same verdict
and exit 2), and nothing of a run's own record (progress.log) truncated."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from cnnbench import paths, pipeline, results
from cnnbench.analysis import cli
from conftest import ROOT

EXAMPLE = ROOT / "examples" / "example-cpu-2core"
SCRIPT = "<script>alert('x')</script>"
IMG = "<img src=x onerror=alert(2)>"
# free-text columns a hostile run folder fills; the rest keep what the analysis needs to run at all
TEXT_COLUMNS = (
    "device_name",
    "host",
    "host_id",
    "machine_note",
    "error",
    "bandwidth_note",
    "roof_note",
    "level",
    "cpu_fallback_ops",
    "gpu_throttle_reasons",
    "isolation",
    "step_time_source",
    "config",
    "note",
)


@pytest.fixture(autouse=True)
def _pipeline_state_restored(monkeypatch):
    import logging

    for name in pipeline.MACHINERY_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)
    for key in ("CNNBENCH_HEADLESS", "CNNBENCH_PROGRESS", paths.LOCK_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CNNBENCH_ROOT", str(ROOT))


def _copy(target, source=EXAMPLE):
    shutil.copytree(
        source, target, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp", "*.inputs.json")
    )
    return target


def _user_run(source, target):
    """A copy of the shared smoke run that combined reports merge (a user's run: not made from smoke.yaml)."""
    run = _copy(target, source)
    results.write_json(
        run / "params.json", {**results.read_json(run / "params.json"), "params_file": "mine.yaml"}
    )
    return run


def _planted(i: int, column: str, row: int) -> str:
    """A hostile cell; a column that keys a table's rows (tuning's config) stays distinct per row."""
    return (SCRIPT if i % 2 else IMG) + (f" {row}" if column in ("config", "level") else "")


def _hostile(source, target):
    """A copy of ``source`` with every text field a browser could run: environment.json, params.json, CSV cells,
    the executed notebooks' markdown, and the folder's own name."""
    run = _copy(target, source)
    if not (
        run / "epochs.csv"
    ).exists():  # the smoke run measures no whole epochs: the example's rows stand in
        shutil.copy(EXAMPLE / "epochs.csv", run / "epochs.csv")
    env = results.read_json(run / "environment.json")
    results.write_json(
        run / "environment.json",
        {k: (SCRIPT if isinstance(v, str) and k != "host_id" else v) for k, v in env.items()},
    )
    prm = results.read_json(run / "params.json")
    prm.update(
        params_file=SCRIPT,
        data_path=IMG,
        transfer_data_path=SCRIPT,
        scratch_data_path=SCRIPT,
        overrides={"x": SCRIPT},
    )
    results.write_json(run / "params.json", prm)
    for csv in run.glob("*.csv"):
        rows = results.read_rows(csv)
        hit = [c for c in TEXT_COLUMNS if rows and c in rows[0]]
        if hit:
            results.write_rows(
                csv, [{**r, **{c: _planted(i, c, j) for i, c in enumerate(hit)}} for j, r in enumerate(rows)]
            )
    nb = run / "notebooks" / "02_scenario_a.ipynb"
    text = json.loads(nb.read_text())
    text["cells"].append(
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": f"planted {SCRIPT} {IMG} [click](javascript:alert(4))",
        }
    )
    text["cells"][-2].setdefault("outputs", []).append(
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {"text/html": f"<p>{SCRIPT}{IMG}</p>", "application/javascript": "alert(3)"},
        }
    )
    nb.write_text(json.dumps(text))
    return run


@pytest.mark.slow
def test_a_report_runs_no_script_from_any_run_folder_it_merged(smoke_run, tmp_path, capsys):
    """Issue 30: `device_name: <script>alert('x')</script>` in a copied run folder's environment.json reached
    report.html raw (`measured on <strong><script>...`), and so the browser of whoever opened it."""
    outputs = tmp_path / "outputs"
    _user_run(smoke_run[0], outputs / "mine")
    hostile = _hostile(smoke_run[0], outputs / "h<script>alert(1)")
    assert pipeline.main(["report", str(hostile)]) == 0, capsys.readouterr().err
    assert "2 runs compared" in (outputs / "report.html").read_text()
    for page in (hostile / "report.html", outputs / "report.html"):
        html = page.read_text()
        assert "<script>alert" not in html and "<img src=x" not in html and "alert(3)" not in html, page
        assert 'href="javascript:' not in html, page
        assert "&lt;script&gt;alert" in html, page  # shown, as text


@pytest.mark.parametrize("name", ["../elsewhere/victim", "/tmp/x", "a/b", ".."])
def test_report_and_compare_refuse_a_run_name_that_is_not_a_plain_folder_name(tmp_path, capsys, name):
    """Issue 30: `cnnbench report --run-name '../elsewhere/victim'` executed 08 into the folder the name reached and
    wrote report.html, params.json and notebooks there."""
    outputs, victim = tmp_path / "outputs", _copy(tmp_path / "elsewhere" / "victim")
    outputs.mkdir()
    before = sorted(p.name for p in victim.rglob("*"))
    assert pipeline.main(["report", "--run-name", name, "--outputs", str(outputs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a safe run name" in err and "Traceback" not in err, err
    assert sorted(p.name for p in victim.rglob("*")) == before
    assert cli.main([name, "seeds", "--outputs", str(outputs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("option", ["--out", "--outputs"])
def test_every_path_given_to_compare_fails_in_one_line(tmp_path, capsys, option):
    """Issue 30: `cnnbench compare --out` inside /proc ended in pathlib's traceback."""
    outputs = tmp_path / "outputs"
    _copy(outputs / "a")
    args = ["a", "seeds", "--outputs", str(outputs)] + (
        [option, "/proc/cnnbench/x"] if option == "--out" else []
    )
    if option == "--outputs":
        args = ["a", "seeds", "--outputs", "/proc/cnnbench/x"]
    rc = pipeline.main(["compare", *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and "/proc/cnnbench/x" in err, err


def test_report_outputs_that_cannot_be_a_folder_fails_in_one_line(tmp_path, capsys):
    assert pipeline.main(["report", "--outputs", "/proc/cnnbench/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "/proc/cnnbench/x" in err, err


def _break(run, how):
    if how == "half-written row":
        text = (run / "scenario_a.csv").read_text()
        (run / "scenario_a.csv").write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])
    elif how == "environment of wrong types":
        env = results.read_json(run / "environment.json")
        results.write_json(
            run / "environment.json", {**env, "device_name": ["x"], "cpu_physical_cores": "two"}
        )
    elif how == "FAILED.txt":
        (run / "FAILED.txt").write_text("This run did not finish: killed\n")
    elif how == "future schema":
        env = results.read_json(run / "environment.json")
        results.write_json(run / "environment.json", {**env, "schema_version": 99})


@pytest.mark.parametrize(
    "how", ["half-written row", "environment of wrong types", "FAILED.txt", "future schema"]
)
def test_report_and_compare_give_one_verdict_on_a_broken_run(tmp_path, capsys, monkeypatch, how):
    """Issue 30: a scenario_a.csv cut in half was refused by compare while report exited 0 and showed the half
    row's rate; compare compared a run with FAILED.txt as complete; a future schema made report exit 1, not 2."""
    outputs = tmp_path / "outputs"
    good, bad = _copy(outputs / "good"), _copy(outputs / "bad")
    _break(bad, how)
    monkeypatch.setattr(pipeline, "execute", lambda *a, **k: pytest.fail("08 executed for a broken run"))
    assert pipeline.main(["report", str(bad)]) == 2
    report_err = capsys.readouterr().err
    assert cli.main(["good", "bad", "--outputs", str(outputs)]) == 2
    compare_err = capsys.readouterr().err
    for err in (report_err, compare_err):
        assert err.count("\n") == 1 and "Traceback" not in err and "bad" in err, err
    reason = report_err.split("bad", 1)[1].strip(" :(")
    assert reason[:30] in compare_err, (report_err, compare_err)
    assert good.is_dir()


def test_cnnbench_report_never_truncates_the_runs_progress_log(tmp_path, monkeypatch, capsys):
    """Issue 30: `cnnbench report`, documented as measuring nothing, emptied the run's progress.log (the console
    record of the measuring run) whenever it executed 08 again."""
    import papermill

    run = _copy(tmp_path / "outputs" / "a")
    before = (run / "progress.log").read_bytes()
    executed = run / "notebooks" / "08_analysis.ipynb"
    kept = executed.read_bytes()
    assert before
    monkeypatch.setattr(
        papermill, "execute_notebook", lambda source, output, **kw: Path(output).write_bytes(kept)
    )
    monkeypatch.setattr(pipeline, "_analysis_current", lambda *a: False)
    assert pipeline.main(["report", str(run)]) == 0, capsys.readouterr().err
    assert "08_analysis over the results on disk" in capsys.readouterr().out
    assert (run / "progress.log").read_bytes() == before


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
