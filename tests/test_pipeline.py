"""The real pipeline, end to end through papermill, with params/smoke.yaml, into a temporary folder (the run
shared by the suite: conftest's ``smoke_run``)."""

import json
import shutil

import nbformat
import pandas as pd
import pytest

from cnnbench import pipeline, plots
from conftest import ROOT, run_pipeline


@pytest.mark.slow
def test_pipeline_writes_every_notebook_csv_and_the_report(smoke_run):
    run_dir, proc = smoke_run
    from cnnbench import params

    for name in params.NOTEBOOKS:
        if (ROOT / "notebooks" / f"{name}.ipynb").exists():
            executed = nbformat.read(run_dir / "notebooks" / f"{name}.ipynb", as_version=4)
            assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code"), name
    env = json.loads((run_dir / "environment.json").read_text())
    assert env["device_kind"] == "cpu" and env["params"]["run_name"] == "smoke"
    assert not (run_dir.parent / "report.html").exists()  # smoke runs never make a combined report
    complexity = pd.read_csv(run_dir / "complexity.csv")
    for col in (
        "model",
        "image_size",
        "params",
        "param_mib",
        "gmacs_fwd",
        "gflops_fwd",
        "gflops_train",
        "train_fwd_ratio",
        "fvcore_gmacs",
        "activation_mib",
    ):
        assert col in complexity.columns, col
    assert set(complexity.model) == {"mnist_cnn", "squeezenet1_1"}
    assert set(complexity[complexity.model == "squeezenet1_1"].image_size) == {224, 32}
    assert (complexity.gflops_fwd == 2 * complexity.gmacs_fwd).all()
    assert (run_dir / "figures" / "complexity.png").stat().st_size > 1000

    scenario_a = pd.read_csv(run_dir / "scenario_a.csv")
    for col in (
        "model",
        "device_kind",
        "device_name",
        "phase",
        "data_mode",
        "batch_size",
        "image_size",
        "precision",
        "memory_format",
        "compile",
        "threads",
        "status",
        "n_steps",
        "throughput_img_s",
        "throughput_ci95_img_s",
        "step_time_median_s",
        "step_time_std_s",
        "achieved_tflops",
        "peak_device_mem_mib",
        "peak_rss_mib",
        "util_device_mean_pct",
        "util_cpu_mean_pct",
        "noisy",
    ):
        assert col in scenario_a.columns, col
    assert (scenario_a.status == "ok").all() and len(scenario_a) == 4  # 2 models x train/eval
    assert (scenario_a.n_steps == 3 * 2 * 2).all()  # measured_steps x repeats x processes (smoke.yaml)
    assert (scenario_a.processes_measured == 2).all() and scenario_a.throughput_ci95_img_s.notna().all()
    windows = pd.read_csv(run_dir / "scenario_a_windows.csv")
    assert len(windows) == 4 * 2 * 2 and {"cpu_steal_mean_pct", "util_other_cpu_mean_pct"} <= set(
        windows.columns
    )
    assert set(pd.read_csv(run_dir / "batch_sweep.csv").batch_size) == {8, 16}
    assert len(pd.read_csv(run_dir / "scenario_a_steps.csv")) == 4 * 6 * 2  # 2 processes each
    peaks = pd.read_csv(run_dir / "device_peaks.csv")
    for col in (
        "device_name",
        "kind",
        "precision",
        "level",
        "capacity_mib",
        "peak_gflops",
        "bandwidth_gbs",
        "ridge_flop_per_byte",
        "source",
    ):
        assert col in peaks.columns, col
    assert "dram" in set(peaks.level) and (run_dir / "bandwidth_sweep.csv").is_file()
    roof = pd.read_csv(run_dir / "roofline.csv")
    for col in (
        "model",
        "phase",
        "batch_size",
        "intensity_flop_per_byte",
        "achieved_gflops",
        "attainable_gflops",
        "efficiency",
        "bound",
        "level",
        "working_set_mib",
        "attainable_dram_gflops",
        "above_roof",
        "above_roof_reason",
    ):
        assert col in roof.columns, col
    assert set(roof.source) == {"scenario_a", "batch_sweep", "layer"} and set(roof.bound) <= {
        "memory",
        "compute",
    }
    assert (run_dir / "figures" / "roofline_device.png").is_file()
    assert (run_dir.parent / "smoke.zip").is_file()


@pytest.mark.slow
def test_no_figure_of_the_smoke_run_has_an_empty_panel(smoke_run):
    """plots.save lists every panel that draws no finite data in figures/empty_panels.csv (issue 17: the
    telemetry timeline's host-wide panels were empty): a smoke run writes none."""
    run_dir, _ = smoke_run
    assert len(list((run_dir / "figures").glob("*.png"))) >= 5
    log = run_dir / "figures" / plots.EMPTY_PANELS
    assert not log.exists(), log.read_text()


@pytest.mark.slow
def test_report_hides_code_and_leads_with_parameters_and_environment(smoke_run):
    run_dir, _ = smoke_run
    page = (run_dir / "report.html").read_text()
    assert (
        "cnnbench report: smoke" in page
        and "Contents" in page
        and "Environment" in page
        and "Parameters" in page
    )
    for title in (
        "00 · Setup",
        "01 · Complexity",
        "02 · Scenario A",
        "03 · Scenario B",
        "04 · Roofline",
        "08 · Analysis",
    ):
        assert title in page, title
    assert 'href="#s1-' in page and "Traceback" not in page
    assert "open_run(" not in page  # code hidden
    assert page.index("Environment") < page.index("01 · Complexity")


@pytest.mark.slow
def test_a_second_user_run_gives_a_combined_report_without_the_smoke_run(smoke_run, tmp_path):
    """A user run copied in (as from another folder; the shared smoke run made one) and a second user run beside it
    give one combined report of both; the smoke run beside them is left out."""
    outputs = tmp_path / "outputs"
    shutil.copytree(smoke_run[0], outputs / "smoke")
    shutil.copytree(smoke_run[0], outputs / "user-a")
    prm = json.loads((outputs / "user-a" / "params.json").read_text())
    (outputs / "user-a" / "params.json").write_text(json.dumps({**prm, "params_file": "params/mine.yaml"}))
    mine = tmp_path / "mine.yaml"
    shutil.copy(ROOT / "params" / "smoke.yaml", mine)
    proc = run_pipeline(
        "--params",
        str(mine),
        "--outputs",
        str(outputs),
        "--run-name",
        "user-b",
        "--set",
        "notebooks=[00_setup, 02_scenario_a, 08_analysis]",
        "--set",
        "models=[mnist_cnn]",  # its configurations only: what is asserted is the same
    )
    assert proc.returncode == 0, proc.stderr
    combined = (outputs / "report.html").read_text()
    assert "2 runs compared" in combined and "user-a" in combined and "user-b" in combined
    assert "Left out" in combined and "smoke/test run" in combined
    speedups = pd.read_csv(outputs / "_combined" / "speedups.csv")
    assert set(speedups.comparison) == {"run-to-run"}  # same host and device: never a cross-device speedup
    assert set(speedups.run_a) | set(speedups.run_b) == {"user-a", "user-b"}
    assert (outputs / "_combined" / "findings.csv").is_file() and "run-to-run difference" in combined
    own = (outputs / "user-b" / "report.html").read_text()
    assert "speaks of run <strong>user-b</strong> only" in own and "merges 1 run(s)" in own


def test_bad_params_stop_before_any_work(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [resnet9000]\n")
    proc = run_pipeline("--params", str(bad), "--outputs", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "unknown model 'resnet9000'" in proc.stderr
    assert not (tmp_path / "out").exists()


FAILING = {
    "00_setup": ["x = 1"],
    "01_complexity": ["y = 2", "raise ValueError('boom')"],
}


def _notebook(cells):
    params = nbformat.v4.new_code_cell('params_file = ""\noverrides = {}\nrun_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, *[nbformat.v4.new_code_cell(c) for c in cells]])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


@pytest.mark.slow
def test_failing_notebook_is_named_with_its_cell_and_earlier_work_is_kept(tmp_path, monkeypatch):
    root = tmp_path / "workbook"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    for name, cells in FAILING.items():
        nbformat.write(_notebook(cells), root / "notebooks" / f"{name}.ipynb")
    monkeypatch.setenv("CNNBENCH_ROOT", str(root))
    run_dir = tmp_path / "out" / "r"
    with pytest.raises(pipeline.NotebookFailed) as err:
        pipeline.execute(
            root / "params" / "p.yaml", run_dir, list(FAILING), timeout_s=120, log=lambda *a, **k: None
        )
    assert (
        err.value.notebook == "01_complexity" and err.value.cell == 4
    )  # execution count in the executed copy (papermill injects a cell)
    assert "ValueError: boom" in str(err.value) and "`raise ValueError('boom')`" in str(err.value)
    assert (run_dir / "notebooks" / "00_setup.ipynb").is_file()
    assert (run_dir / "notebooks" / "01_complexity.ipynb").is_file()  # the failed copy, for reading
