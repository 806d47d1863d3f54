"""Every notebook is committed clean and thin, with exactly one parameters cell papermill can read."""

import json
import subprocess
import sys

import papermill
import pytest

from cnnbench import params
from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import check_notebooks  # noqa: E402


def test_the_numbered_notebooks_exist():
    names = [p.stem for p in NOTEBOOKS]
    assert names[:2] == ["00_setup", "01_complexity"]
    assert set(names) <= set(params.NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_hygiene(path):
    assert check_notebooks.problems(path) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_is_documented_and_papermill_readable(path):
    found = papermill.inspect_notebook(str(path))
    assert set(found) == {"params_file", "overrides", "run_dir"}
    assert all(p["help"] for p in found.values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_stay_thin(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    lengths = sorted(len("".join(c["source"]).splitlines()) for c in cells)
    assert lengths[len(lengths) // 2] <= 8, "median code cell over 8 lines: move logic into cnnbench"
    assert max(lengths) <= 30
    assert not any("sys.path" in "".join(c["source"]) or "%run" in "".join(c["source"]) for c in cells)


def test_checker_flags_outputs_and_missing_parameters(tmp_path):
    nb = json.loads(NOTEBOOKS[0].read_text())
    nb["cells"][3]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    for c in nb["cells"]:
        c["metadata"].pop("tags", None)
    bad = tmp_path / NOTEBOOKS[0].name
    bad.write_text(json.dumps(nb))
    found = " ".join(check_notebooks.problems(bad))
    assert "stores outputs" in found and "0 cells tagged 'parameters'" in found and "colab-setup" in found
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "check_notebooks.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
