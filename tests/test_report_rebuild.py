"""Issue 20: `cnnbench report` rebuilds a report "in seconds": 08 is executed again only when what it read (the
run's results files) or the code that ran it changed since its executed copy was written."""

import shutil

from cnnbench import paths, pipeline, results
from conftest import ROOT

EXAMPLE = ROOT / "examples" / "example-cpu-2core"
NOTEBOOK = ROOT / "notebooks" / "08_analysis.ipynb"


def test_a_fingerprint_covers_the_results_files_and_the_code_and_nothing_else(tmp_path):
    run = tmp_path / "run"
    (run / "notebooks").mkdir(parents=True)
    executed = run / "notebooks" / "08_analysis.ipynb"
    results.write_rows(run / "scenario_a.csv", [{"model": "resnet18", "throughput_img_s": 100.0}])
    results.write_json(run / "environment.json", {"device_name": "cpu"})
    assert not pipeline._analysis_current(run, [run])  # never executed
    executed.write_text("{}")
    assert not pipeline._analysis_current(run, [run])  # executed, but nothing recorded what it read
    with pipeline._fingerprinting(run, [run]):  # 08 executed
        pass
    assert pipeline._analysis_current(run, [run])
    results.write_rows(
        run / "timings.csv", [{"notebook": "08_analysis", "duration_s": 3.0}]
    )  # not read by 08
    (run / "kernel.log").write_text("chatter")
    assert pipeline._analysis_current(run, [run])
    other = tmp_path / "08_edited.ipynb"
    other.write_bytes(NOTEBOOK.read_bytes() + b" ")
    assert not pipeline._analysis_current(run, [run], other)  # the notebook changed
    results.write_rows(run / "scenario_a.csv", [{"model": "resnet18", "throughput_img_s": 101.0}])
    assert not pipeline._analysis_current(run, [run])  # a result changed
    with pipeline._fingerprinting(run, [run]):  # 08 executed
        pass
    (run / "ratios.csv").write_text("new\n")
    assert not pipeline._analysis_current(run, [run])  # a results file appeared
    (run / "ratios.csv").unlink()
    executed.with_suffix(pipeline.FINGERPRINT).write_text("{not json")
    assert not pipeline._analysis_current(run, [run])


def test_cnnbench_report_executes_08_again_only_when_its_inputs_changed(tmp_path, monkeypatch, capsys):
    """The walk: every `cnnbench report` executed 08 again (162 s on a loaded VM), though nothing had changed."""
    outputs = tmp_path / "outputs"
    run = outputs / "a"
    shutil.copytree(EXAMPLE, run, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp"))
    calls = []

    def execute(params_file, run_dir, notebooks, timeout_s, **kw):  # 08's executed copy as it is
        calls.append(notebooks)
        return [run_dir / "notebooks" / f"{n}.ipynb" for n in notebooks]

    monkeypatch.setattr(pipeline, "execute", execute)
    assert pipeline.main(["report", str(run)]) == 0
    assert calls == [["08_analysis"]] and "08_analysis over the results on disk" in capsys.readouterr().out
    (run / "report.html").unlink()

    def validate(*args, **kwargs):  # imports torch (seconds): not needed where 08 is current
        raise AssertionError("params validated although 08 is kept")

    monkeypatch.setattr(pipeline.params_mod, "validate", validate)
    (run / "report.partial.html").write_text("a killed run's page")  # report.html replaces it, as it promises
    assert pipeline.main(["report", str(run)]) == 0  # nothing changed: the HTML only
    assert not (run / "report.partial.html").exists()
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
    with pipeline._fingerprinting(run, [run]):  # finished once
        pass

    def failing(params_file, run_dir, notebooks, timeout_s, **kw):
        raise pipeline.NotebookFailed("08_analysis", 3, "ValueError: boom", executed)

    monkeypatch.setattr(pipeline, "execute", failing)
    monkeypatch.setattr(pipeline, "_analysis_current", lambda *a: False)  # as if something had changed
    assert pipeline.main(["report", str(run)]) != 0
    monkeypatch.undo()
    assert not pipeline._analysis_current(run, [run])


def test_the_combined_analysis_is_kept_too_until_a_run_changes(tmp_path, monkeypatch, capsys):
    outputs = tmp_path / "outputs"
    for name in ("a", "b"):
        shutil.copytree(
            EXAMPLE, outputs / name, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp")
        )
    calls = []

    def execute(params_file, run_dir, notebooks, timeout_s, **kw):
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


def test_a_run_stopped_with_only_the_analysis_left_is_finished_by_cnnbench_report(tmp_path, monkeypatch):
    """The H200 check (2026-11-28) was stopped at its budget as 08 started: every measurement was on disk, yet
    `cnnbench report` refused the run as failed. 08 measures nothing, so report finishes such a run; a run
    stopped while measuring stays refused (resuming it needs its device)."""
    run = tmp_path / "outputs" / "a"
    shutil.copytree(EXAMPLE, run, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp"))
    measured = [r for r in results.read_rows(run / "timings.csv") if r["notebook"] != "08_analysis"]
    results.write_rows(run / "timings.csv", measured)
    (run / paths.FAILED).write_text("This run did not finish: stopped by SIGTERM\n")
    calls = []

    def execute(params_file, run_dir, notebooks, timeout_s, **kw):
        calls.append(notebooks)
        return [run_dir / "notebooks" / f"{n}.ipynb" for n in notebooks]

    monkeypatch.setattr(pipeline, "execute", execute)
    results.write_rows(run / "timings.csv", measured[:-1])  # stopped in 07: refused, nothing done
    assert pipeline.main(["report", str(run)]) == 2 and calls == []
    assert (run / paths.FAILED).is_file()
    results.write_rows(run / "timings.csv", measured)
    assert pipeline.main(["report", str(run)]) == 0 and calls == [["08_analysis"]]
    assert not (run / paths.FAILED).exists() and (run / "report.html").is_file()


def test_a_run_copied_from_a_gpu_machine_is_reported_on_a_machine_without_one(tmp_path, monkeypatch):
    """The H200 run's folder, copied to the CPU VM, was refused by `cnnbench report`: its params.json was
    checked against this machine's device ("tf32 ... not available on cpu"), though 08 measures nothing; then 08 itself refused it."""
    run = tmp_path / "outputs" / "a"
    shutil.copytree(EXAMPLE, run, ignore=shutil.ignore_patterns("report.html", "trace_*", "ddp"))
    prm = results.read_json(run / "params.json")
    tf32 = {"precision": "tf32", "memory_format": "nchw", "compile": False}
    results.write_json(run / "params.json", {**prm, "device": "cuda", "variants": [*prm["variants"], tf32]})
    assert pipeline.main(["report", str(run)]) == 0  # 08 executed for real: it checks no device either
    assert "08 · Analysis" in (run / "report.html").read_text()


def test_cnnbench_report_of_a_run_that_is_not_there_lists_the_runs_that_are(tmp_path, capsys):
    """A mistyped run name: refused in one line before any work, naming the runs it could have meant."""
    for name in ("cpu-a", "cpu-b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "environment.json").write_text("{}")
    assert pipeline.main(["report", "--run-name", "cpu-c", "--outputs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cpu-c" in err and "runs there: cpu-a, cpu-b" in err, err


def test_a_mistyped_run_among_many_is_refused_with_the_list_cut_not_the_sentence(tmp_path, capsys):
    """ParamsError keeps a refusal within 1,000 characters: a list of 60 runs is cut to its first names and a
    count, so the refusal still ends as a sentence."""
    for i in range(60):
        (tmp_path / f"a-long-run-name-{i:02d}").mkdir()
        (tmp_path / f"a-long-run-name-{i:02d}" / "environment.json").write_text("{}")
    assert pipeline.main(["report", "--run-name", "typo", "--outputs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a-long-run-name-00, " in err and "... (60 in all))" in err, err
    assert not err.rstrip().endswith(" ...")
