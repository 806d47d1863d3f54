"""Issue 20: an identical rerun measures nothing, a report is rebuilt from what is on disk (`cnnbench report`),
and 08 opened before any run says so in one line and writes nothing."""

import papermill
import pytest

import cnnbench
from cnnbench import run as run_mod
from conftest import ROOT

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
