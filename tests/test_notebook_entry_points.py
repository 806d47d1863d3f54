"""Issue 18: each notebook has one entry point into the package (as 07 has: ``from cnnbench import tuning``).

A notebook may import ``cnnbench`` itself (for ``cnnbench.open_run``), the standard library, pandas and its entry
point; nothing else of the package. 06 covers three experiment families that may not import each other (the
layering test), so it has one entry point per section: transfer, steps, scaling.
"""

import ast
import sys

import nbformat
import pytest

from conftest import ROOT

ENTRY = {
    "00_setup": {"cnnbench.machine"},
    "01_complexity": {"cnnbench.counts"},
    "02_scenario_a": {"cnnbench.scenarios"},
    "03_batch_sweep": {"cnnbench.scenarios"},
    "04_roofline": {"cnnbench.roofline"},
    "05_backends": {"cnnbench.scratch"},
    "06_transfer": {"cnnbench.transfer", "cnnbench.steps", "cnnbench.scaling"},
    "07_tuning": {"cnnbench.tuning"},
    "08_analysis": {"cnnbench.analysis"},
}
NOT_YET: dict[str, str] = {}  # notebooks still importing several modules: expected to fail (strict)
ALLOWED = {"cnnbench", "pandas", "google"} | set(sys.stdlib_module_names)  # google.colab: Colab's download


def imported_modules(nb) -> set[str]:
    """Every module a notebook's code cells import; ``from cnnbench.a import b`` is ``cnnbench.a.b`` (a module or
    a name inside ``a``: either reaches past the entry point ``cnnbench.a``)."""
    out = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                pkg = (node.module or "").startswith("cnnbench")
                out |= {f"{node.module}.{a.name}" if pkg else node.module for a in node.names}
    return out


def extra_imports(name: str) -> set[str]:
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    return {
        m
        for m in imported_modules(nb)
        if m.split(".")[0] not in ALLOWED or (m.startswith("cnnbench.") and m not in ENTRY[name])
    }


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=NOT_YET[n], strict=True)) if n in NOT_YET else n
        for n in sorted(ENTRY)
    ],
)
def test_each_notebook_imports_only_its_entry_point(name):
    assert extra_imports(name) == set()


def test_every_notebook_has_an_entry_point_named():
    assert set(ENTRY) == {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}


def test_the_check_sees_a_second_module():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import os\nimport pandas as pd\nimport cnnbench\nfrom cnnbench import tuning, plots\n"
                "from cnnbench.measure import timelines\nimport numpy as np"
            )
        ]
    )
    got = imported_modules(nb) - set(sys.stdlib_module_names)
    assert got == {
        "pandas",
        "cnnbench",
        "cnnbench.tuning",
        "cnnbench.plots",
        "cnnbench.measure.timelines",
        "numpy",
    }
