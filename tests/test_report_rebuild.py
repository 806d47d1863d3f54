"""Issue 20: `cnnbench report` rebuilds a report "in seconds": 08 is executed again only when what it read (the
run's results files) or the code that ran it changed since its executed copy was written."""

import shutil

from cnnbench import freshness, pipeline, results
from conftest import ROOT

EXAMPLE = ROOT / "examples" / "example-cpu-2core"
NOTEBOOK = ROOT / "notebooks" / "08_analysis.ipynb"


def test_a_fingerprint_covers_the_results_files_and_the_code_and_nothing_else(tmp_path):
    run = tmp_path / "run"
    (run / "notebooks").mkdir(parents=True)
    executed = run / "notebooks" / "08_analysis.ipynb"
    results.write_rows(run / "scenario_a.csv", [{"model": "resnet18", "throughput_img_s": 100.0}])
    results.write_json(run / "environment.json", {"device_name": "cpu"})
    assert not freshness.current(executed, [run], NOTEBOOK)  # never executed
    executed.write_text("{}")
    assert not freshness.current(executed, [run], NOTEBOOK)  # executed, but nothing recorded what it read
    freshness.record(executed, [run], NOTEBOOK)
    assert freshness.current(executed, [run], NOTEBOOK)
    results.write_rows(
        run / "timings.csv", [{"notebook": "08_analysis", "duration_s": 3.0}]
    )  # not read by 08
    (run / "kernel.log").write_text("chatter")
    assert freshness.current(executed, [run], NOTEBOOK)
    other = tmp_path / "08_edited.ipynb"
    other.write_bytes(NOTEBOOK.read_bytes() + b" ")
    assert not freshness.current(executed, [run], other)  # the notebook changed
    results.write_rows(run / "scenario_a.csv", [{"model": "resnet18", "throughput_img_s": 101.0}])
    assert not freshness.current(executed, [run], NOTEBOOK)  # a result changed
    freshness.record(executed, [run], NOTEBOOK)
    (run / "ratios.csv").write_text("new\n")
    assert not freshness.current(executed, [run], NOTEBOOK)  # a results file appeared
    (run / "ratios.csv").unlink()
    executed.with_suffix(freshness.SUFFIX).write_text("{not json")
    assert not freshness.current(executed, [run], NOTEBOOK)


def test_cnnbench_report_executes_08_again_only_when_its_inputs_changed(tmp_path, monkeypatch, capsys):
    """The walk: every `cnnbench report` executed 08 again (162 s on a loaded VM), though nothing had changed."""
    outputs = tmp_path / "outputs"
    run = outputs / "a"
    shutil.copytree(EXAMPLE, run, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp"))
    calls = []

    def execute(params_file, overrides, run_dir, notebooks, timeout_s, **kw):  # 08's executed copy as it is
        calls.append(notebooks)
        return [run_dir / "notebooks" / f"{n}.ipynb" for n in notebooks]

    monkeypatch.setattr(pipeline, "execute", execute)
    assert pipeline.main(["report", str(run)]) == 0
    assert calls == [["08_analysis"]] and "08_analysis over the results on disk" in capsys.readouterr().out
    (run / "report.html").unlink()

    def validate(*args, **kwargs):  # imports torch (seconds): not needed where 08 is current
        raise AssertionError("params validated although 08 is kept")

    monkeypatch.setattr(pipeline.params_mod, "validate", validate)
    assert pipeline.main(["report", str(run)]) == 0  # nothing changed: the HTML only
    out = capsys.readouterr().out
    assert calls == [["08_analysis"]], out
    assert "a: 08_analysis kept: its results files and the workbook's code are unchanged since it ran" in out
    assert "cnnbench report: a" in (run / "report.html").read_text()  # rebuilt from the executed copies
    monkeypatch.undo()
    monkeypatch.setattr(pipeline, "execute", execute)
    rows = results.read_rows(run / "scenario_a.csv")
    results.write_rows(run / "scenario_a.csv", [{**rows[0], "throughput_img_s": "1.0"}, *rows[1:]])
    assert pipeline.main(["report", str(run)]) == 0  # a result changed: 08 again
    assert calls == [["08_analysis"], ["08_analysis"]]


def test_an_analysis_that_fails_is_never_taken_for_current(tmp_path, monkeypatch, capsys):
    """A failed execution leaves its copy behind: the fingerprint of the earlier, finished one must not vouch
    for it."""
    outputs = tmp_path / "outputs"
    run = outputs / "a"
    shutil.copytree(EXAMPLE, run, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp"))
    executed = run / "notebooks" / "08_analysis.ipynb"
    freshness.record(executed, [run], NOTEBOOK)  # finished once

    def failing(params_file, overrides, run_dir, notebooks, timeout_s, **kw):
        raise pipeline.NotebookFailed("08_analysis", 3, "ValueError: boom", executed)

    monkeypatch.setattr(pipeline, "execute", failing)
    monkeypatch.setattr(pipeline, "_analysis_kept", lambda *a: [])  # as if something had changed
    assert pipeline.main(["report", str(run)]) != 0
    monkeypatch.undo()
    assert not freshness.current(executed, [run], NOTEBOOK)


def test_the_combined_analysis_is_kept_too_until_a_run_changes(tmp_path, monkeypatch, capsys):
    outputs = tmp_path / "outputs"
    for name in ("a", "b"):
        shutil.copytree(
            EXAMPLE, outputs / name, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp")
        )
    calls = []

    def execute(params_file, overrides, run_dir, notebooks, timeout_s, **kw):
        calls.append(run_dir.name)
        target = run_dir / "notebooks" / "08_analysis.ipynb"
        if not target.exists():  # the combined analysis: an executed 08 to build its report from
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(EXAMPLE / "notebooks" / "08_analysis.ipynb", target)
        return [target]

    monkeypatch.setattr(pipeline, "execute", execute)
    assert pipeline.main(["report", "--outputs", str(outputs)]) == 0
    assert calls == ["_combined"] and (outputs / "report.html").is_file()
    assert pipeline.main(["report", "--outputs", str(outputs)]) == 0
    assert calls == ["_combined"], capsys.readouterr().out
    assert "cnnbench: combined analysis: 08_analysis kept" in capsys.readouterr().out
    (outputs / "b" / "explore.csv").write_text("timestamp,model\n1,resnet18\n")  # b changed
    assert pipeline.main(["report", "--outputs", str(outputs)]) == 0
    assert calls == ["_combined", "_combined"]
