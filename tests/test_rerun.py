"""Issue 20: an identical rerun measures nothing, a report is rebuilt from what is on disk (`cnnbench report`),
and 08 opened before any run says so in one line and writes nothing."""

import re

import papermill
import pytest

import cnnbench
from cnnbench import run as run_mod
from conftest import ROOT, fewer_working_sets, run_pipeline

SMOKE = ROOT / "params" / "smoke.yaml"


def test_opening_a_run_for_analysis_before_any_run_writes_nothing(tmp_path):
    outputs = tmp_path / "outputs"
    for analysis_runs in ([], ["*"]):
        with pytest.raises(run_mod.NoRuns, match="run the pipeline first") as err:
            cnnbench.open_run(SMOKE, {"analysis_runs": analysis_runs}, outputs / "smoke", needs_runs=True)
        assert "\n" not in str(err.value) and err.value._render_traceback_() == [str(err.value)]
        assert not outputs.exists()
    outputs.mkdir()
    with pytest.raises(run_mod.NoRuns):
        cnnbench.open_run(SMOKE, {}, outputs / "smoke", needs_runs=True)
    assert list(outputs.iterdir()) == []


def test_08_executed_before_any_run_says_so_in_one_line_and_writes_nothing(tmp_path):
    """Issue 20: opening 08 before any run created an empty run folder and a 0.0 MiB zip and showed empty
    sections."""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    with pytest.raises(papermill.PapermillExecutionError) as err:
        papermill.execute_notebook(
            str(ROOT / "notebooks" / "08_analysis.ipynb"),
            str(tmp_path / "08.ipynb"),
            parameters={"params_file": str(SMOKE), "run_dir": str(outputs / "smoke")},
            kernel_name="python3",
            cwd=str(ROOT),
            progress_bar=False,
        )
    assert err.value.ename == "NoRuns" and "run the pipeline first" in err.value.evalue
    assert list(outputs.iterdir()) == []


def _measured_files(run_dir):
    """Every results file but those 08 computes whole from the others (and timings.csv: 08's row is its new time)."""
    from cnnbench.results.schema import TABLES

    computed = {f"{t.name}.csv" for t in TABLES.values() if t.notebook == "08_analysis" and not t.key}
    keep = ("params.json", "environment.json", "current_rows.json")
    return {
        p.name: p.read_bytes()
        for p in run_dir.iterdir()
        if p.suffix == ".csv" and p.name not in {*computed, "timings.csv"} or p.name in keep
    }


@pytest.mark.slow
def test_cnnbench_report_rebuilds_a_copied_run_and_the_combined_report_without_measuring(
    smoke_run, tmp_path, capsys
):
    """Issue 20: copying another machine's run into outputs/ and rebuilding its report and the combined report
    measures nothing: 08 is executed again over what is on disk, the measured CSVs stay byte for byte."""
    import shutil

    from cnnbench import pipeline, results

    outputs = tmp_path / "outputs"
    for name in ("a", "b"):  # two user runs (not made from smoke.yaml: the combined report merges them)
        shutil.copytree(smoke_run[0], outputs / name)
        (outputs / name / "report.html").unlink()
        prm = results.read_json(outputs / name / "params.json")
        results.write_json(outputs / name / "params.json", {**prm, "params_file": "mine.yaml"})
    before = _measured_files(outputs / "a")
    assert pipeline.main(["report", str(outputs / "a")]) == 0
    assert (outputs / "a" / "report.html").is_file() and (outputs / "report.html").is_file()
    assert _measured_files(outputs / "a") == before
    assert not (outputs / "b" / "report.html").exists()
    out = capsys.readouterr().out
    assert "nothing is measured" in out and "combined report of 2 runs" in out
    # named instead of given as a path: its report is rebuilt, and 08 and the combined analysis, whose inputs are
    # unchanged, are kept
    (outputs / "a" / "report.html").unlink()
    assert pipeline.main(["report", "--run-name", "a", "--outputs", str(outputs)]) == 0
    assert (outputs / "a" / "report.html").is_file() and not (outputs / "b" / "report.html").exists()
    out = capsys.readouterr().out
    assert "a: 08_analysis kept" in out and "08_analysis done" not in out, out


@pytest.mark.parametrize("how", ["missing", "not_a_run", "failed"])
def test_cnnbench_report_of_an_unknown_or_broken_run_is_refused_in_one_line(tmp_path, capsys, how):
    from cnnbench import pipeline

    outputs = tmp_path / "outputs"
    (outputs / "x").mkdir(parents=True)
    if how == "missing":
        argv = ["report", "--run-name", "nope", "--outputs", str(outputs)]
    elif how == "not_a_run":
        argv = ["report", str(outputs / "x")]
    else:
        (outputs / "x" / "environment.json").write_text("{}")
        (outputs / "x" / "params.json").write_text("{}")
        (outputs / "x" / "FAILED.txt").write_text("This run did not finish: killed\n")
        argv = ["report", str(outputs / "x")]
    assert pipeline.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("cnnbench report: ") and err.count("\n") == 1
    assert sorted(p.name for p in outputs.rglob("*")) == sorted(
        ["x", *(["environment.json", "params.json", "FAILED.txt"] if how == "failed" else [])]
    )


def test_the_static_explorer_of_a_rerun_shows_its_earlier_measurement_instead_of_measuring(
    tmp_path, monkeypatch
):
    """08 under papermill measured one explorer configuration on every execution (so a rebuilt report of a run
    copied from another machine appended this machine's rate to its explore.csv)."""
    from cnnbench import interactive, results

    monkeypatch.setenv("CNNBENCH_HEADLESS", "1")
    run = cnnbench.open_run(SMOKE, {}, tmp_path / "run")
    p, calls = run.params, []
    real = interactive.quick_measure
    monkeypatch.setattr(interactive, "quick_measure", lambda *a, **k: calls.append(a) or real(*a, **k))
    interactive.explorer(run)
    interactive.explorer(run)
    assert len(calls) == 1 and len(results.read(run.dir, "explore")) == 1
    monkeypatch.setenv(interactive.NO_MEASURE_ENV, "1")
    (run.dir / "explore.csv").unlink()
    interactive.explorer(run)
    assert len(calls) == 1 and not (run.dir / "explore.csv").exists()
    assert p.models[0] == "mnist_cnn"


def _counting(monkeypatch, calls: dict, module, name: str, key=None):
    real = getattr(module, name)

    def counted(*args, **kwargs):
        what = key(*args) if key else name
        calls[what] = calls.get(what, 0) + 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


def _fake_launch(cmd, out, timeout_s=900):
    world = int(cmd[cmd.index("--nproc_per_node") + 1]) if "--nproc_per_node" in cmd else 1
    return {
        "device_kind": "cpu",
        "device_name": "cpu",
        "throughput_img_s": 100.0 * world,
        "throughput_ci95_img_s": 1.0,
        "step_time_mean_s": 0.01,
        "loss_last": 1.0,
        "check_losses": [2.0, 1.0],
        "reference_losses": {"16": [2.0, 1.0]},
        "ranks": [],
    }


def _producers(run_dir, monkeypatch, overrides=None) -> dict:
    """04-07's producers with smoke params into ``run_dir``; how often each measured (a measuring function
    called, by name)."""
    import pandas as pd

    from cnnbench import results, roofline, steps, transfer, tuning
    from cnnbench import scaling as launch
    from cnnbench.roofline import peaks
    from cnnbench.scratch import experiment

    calls: dict = {}
    _counting(monkeypatch, calls, peaks, "measure", key=lambda *_: "peaks")
    fewer_working_sets(monkeypatch, lambda s: s[:3])  # what is kept or measured again is the same
    _counting(monkeypatch, calls, roofline, "profile_layers")
    # by network and backend: the absent GPU backends are tried again (no work)
    _counting(
        monkeypatch, calls, experiment, "train", key=lambda backend, model, *_: f"train_{model}:{backend}"
    )
    _counting(monkeypatch, calls, steps, "measure", key=lambda *_: "step_phases")
    _counting(monkeypatch, calls, steps, "profile_model")
    _counting(monkeypatch, calls, transfer, "fit")
    _counting(monkeypatch, calls, tuning, "tune_one")
    launched = []
    # smaller than smoke.yaml (fewer images, the roofs measured once): what is kept or measured again is the same
    small = {"scratch_train_images": 256, "scratch_test_images": 128, "peak_repeats": 1}
    run = cnnbench.open_run(SMOKE, {**small, **(overrides or {})}, run_dir)
    roofline.layers_for_models(
        run,
        pd.DataFrame(
            [
                {
                    "model": "mnist_cnn",
                    "phase": "train",
                    "status": "ok",
                    "batch_size": 16,
                    "image_size": 28,
                    "num_classes": 10,
                    "in_channels": 1,
                    "precision": "fp32",
                    "memory_format": "nchw",
                }
            ]
        ),
        steps=1,
    )
    measured, sweep = peaks.measured_or_kept(run)  # as 04 writes them
    spec, _ = peaks.spec_for_device(run.device)
    results.write_rows(run.path("device_peaks.csv"), pd.concat([measured, spec]).to_dict("records"))
    results.write_rows(run.path("bandwidth_sweep.csv"), sweep.to_dict("records"))
    experiment.run_all(run, progress=lambda *_: None)
    transfer.finetune(run)
    steps.phases(run)
    steps.profile(run)
    launch.run_all(
        run, launcher=lambda cmd, out, **k: launched.append(cmd) or _fake_launch(cmd, out), log=print
    )
    tuning.tune(run)
    calls["scaling launches"] = len(launched)
    return {
        k: v for k, v in calls.items() if v and k.split(":")[-1] not in ("cupy", "numba_cuda", "torch_cuda")
    }


@pytest.mark.slow
def test_an_identical_rerun_of_04_to_07_measures_nothing_and_a_changed_key_only_what_it_changes(
    tmp_path, monkeypatch, capsys
):
    """Issue 20: a smoke run took 4m46s and its identical rerun 5m43s: 04, 05 and 06 measured everything
    again and overwrote their CSVs."""
    from cnnbench import results

    run_dir = tmp_path / "smoke"
    first = _producers(run_dir, monkeypatch)
    assert (
        first["peaks"] == 1
        and first["step_phases"] == 2
        and first["profile_layers"] == 1
        and first["train_mnist_cnn:numpy"] == 1
    )
    assert first["profile_model"] == 1 and first["scaling launches"] == 2 and first["tune_one"] == 1
    tables = (
        "device_peaks",
        "roofline_layers",
        "backends",
        "gradcheck",
        "backend_ops",
        "backend_memory",
        "transfer",
        "step_phases",
        "profile_ops",
        "scaling",
        "tuning",
    )

    def measured():  # the absent backends' rows ("unavailable") are written again: their check is no measurement
        return {t: [r for r in results.rows(run_dir, t) if r.get("status") != "unavailable"] for t in tables}

    rows = measured()
    assert all(rows.values()), [t for t, r in rows.items() if not r]

    capsys.readouterr()
    assert _producers(run_dir, monkeypatch) == {}
    assert measured() == rows
    # each says in one line what it kept (issue 20: on an identical rerun only 06's scaling did)
    said = capsys.readouterr().out
    for source, what in (
        ("device_peaks.csv", "measured roofs"),
        ("roofline_layers.csv", "layer profiles"),
        ("backends.csv", "backend/model pairs"),
        ("transfer.csv", "grid points"),
        ("step_phases.csv", "models' phase breakdowns"),
        ("profile_ops.csv", "profiled models"),
        ("scaling.csv", "world sizes"),
        ("tuning.csv", r"searches \(model and phase\)"),
    ):
        assert re.search(rf"^kept (\d+) of \1 {what} from {source}; measured 0\b", said, re.M), (source, said)
    assert (
        "kept 4 of 4 backend/model pairs from backends.csv; measured 0 (6 unavailable here, checked again)"
        in said
    )

    changed = _producers(run_dir, monkeypatch, {"scratch_epochs": 1})  # 05's CNN only
    assert changed == {"train_mnist_cnn:numpy": 1, "train_mnist_cnn:torch_cpu": 1}
    assert max(int(r["epoch"]) for r in results.rows(run_dir, "backends") if r["model"] == "mnist_cnn") == 1
    assert _producers(run_dir, monkeypatch, {"scratch_epochs": 1, "profile_top_k": 3}) == {"profile_model": 1}
    assert _producers(
        run_dir, monkeypatch, {"scratch_epochs": 1, "profile_top_k": 3, "transfer_train_images": 16}
    ) == {
        "fit": 4  # 06's 2 x 2 fine-tuning grid (a changed image count was not part of its key)
    }


def test_08_pointed_at_a_finished_run_reads_its_params_and_rewrites_nothing(tmp_path):
    """The browser walk of issue 20: 08 opened in JupyterLab with only `run_dir` set to a finished smoke run
    rewrote that run's params.json from params/local.yaml (64 px, 200 classes, six models, none measured), so the
    run then counted as a user run and the explorer measured at the wrong size. A notebook given only a run
    folder reads the run's own parameters, and 08 (a reader) never rewrites a run's record."""
    import shutil

    from cnnbench import params

    run_dir = tmp_path / "outputs" / "walk1"
    shutil.copytree(
        ROOT / "examples" / "example-cpu-2core",
        run_dir,
        ignore=shutil.ignore_patterns("notebooks", "figures", "report.html", "trace_*"),
    )
    p = params.load(SMOKE, {"run_name": "walk1"}, check_device=False)
    run_mod.write_resolved(run_dir, p, SMOKE, {"run_name": "walk1"})
    before = (run_dir / "params.json").read_bytes()
    run = cnnbench.open_run("", {}, run_dir, needs_runs=True)
    assert (run.params.image_size, run.params.models, run.params.num_classes) == (32, p.models, 10)
    assert (run_dir / "params.json").read_bytes() == before
    cnnbench.open_run(
        SMOKE, {"image_size": 48}, run_dir, needs_runs=True
    )  # an explicit file: still no rewrite
    assert (run_dir / "params.json").read_bytes() == before


def test_08_with_no_run_of_its_name_names_the_runs_beside_it(tmp_path):
    """The walk: with smoke runs walk1 and walk2 in outputs/, 08 said only "run the pipeline first" (20 minutes)."""
    outputs = tmp_path / "outputs"
    for name in ("walk1", "walk2"):
        (outputs / name).mkdir(parents=True)
        (outputs / name / "environment.json").write_text("{}")
    with pytest.raises(
        run_mod.NoRuns, match=r"open one of the runs beside it \(walk1, walk2\) by setting run_dir"
    ):
        cnnbench.open_run(SMOKE, {}, outputs / "cpu-vm", needs_runs=True)
    assert not (outputs / "cpu-vm").exists()


@pytest.mark.slow
def test_an_identical_rerun_says_in_each_notebook_what_it_kept(smoke_run, tmp_path):
    """Issue 20: on an identical rerun only 06 said what it kept. The shared smoke run is the first run; two of its
    notebooks run again through the pipeline, in a copy of it: the console of that second run says, per results
    file, that everything was kept and nothing measured."""
    import shutil

    import pandas as pd

    shutil.copytree(smoke_run[0], tmp_path / "smoke")
    before = pd.read_csv(tmp_path / "smoke" / "scenario_a.csv").timestamp.tolist()
    proc = run_pipeline(
        "--params",
        SMOKE,
        "--outputs",
        tmp_path,
        "--set",
        "notebooks=[00_setup, 02_scenario_a, 05_backends]",  # 00 first, as a whole rerun starts
        "--no-report",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        pd.read_csv(tmp_path / "smoke" / "scenario_a.csv").timestamp.tolist() == before
    )  # no row written again
    first, second = smoke_run[1].stdout, proc.stdout
    assert "kept 0 of 4 configurations from scenario_a.csv; measured 4" in first
    assert "kept 4 of 4 configurations from scenario_a.csv; measured 0" in second
    assert re.search(r"kept 0 of (\d+) backend/model pairs from backends.csv; measured \1\b", first), first
    assert re.search(r"kept (\d+) of \1 backend/model pairs from backends.csv; measured 0\b", second), second
