"""Issue 43 item 5: a device kind is its module in devices/, a knob its entry in ``knobs.KNOBS``, a notebook its name
in ``params.NOTEBOOKS``; a fake one of each, added in that one place, is picked up by everything else."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

from cnnbench import eta, params, pipeline
from conftest import ROOT

XPU = """
from cnnbench.devices.base import ACCELERATOR_PROTOCOL, Backend


class XpuBackend(Backend):
    kind = torch_type = "xpu"
    rank = 3
    indexed = on_host = False
    protocol = {**ACCELERATOR_PROTOCOL, "transfer_devices": ["xpu"]}
    budget = {**Backend.budget, "step_s": 0.25}

    @classmethod
    def present(cls) -> bool:
        return False
"""

CHECK = """
from cnnbench import devices, eta, params

assert devices.KINDS == ("cuda", "mps", "xpu", "cpu"), devices.KINDS
assert devices.backend_class("xpu").__name__ == "XpuBackend"
assert devices.SPEC.fullmatch("xpu") and devices.ONE_DEVICE.fullmatch("xpu:1")
assert devices.SPEC_NAMES == "cpu, cuda, cuda:N, mps or xpu", devices.SPEC_NAMES
assert params.protocol("xpu")["transfer_devices"] == ["xpu"]  # its protocol, as a device not at hand
try:
    devices.resolve("xpu")
    raise AssertionError("resolved an absent kind")
except devices.DeviceError as err:
    assert "not present here" in str(err), err
p = params.load("params/smoke.yaml", check_device=False)
xpu, cpu = (eta.budget_model(p, "02_scenario_a", kind) for kind in ("xpu", "cpu"))
assert xpu[0] == cpu[0] and xpu[1] != cpu[1], (xpu, cpu)  # its own step estimate
print("picked up")
"""


def test_a_device_kind_added_as_one_module_is_picked_up_everywhere(tmp_path):
    shutil.copytree(
        ROOT / "lib" / "cnnbench", tmp_path / "cnnbench", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "cnnbench" / "devices" / "xpu.py").write_text(textwrap.dedent(XPU))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "CNNBENCH_ROOT": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and "picked up" in out.stdout, out.stderr[-3000:]


def test_a_notebook_added_to_notebooks_is_validated_estimated_and_run(tmp_path, monkeypatch, capsys):
    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").symlink_to(ROOT / "params")
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        (root / "notebooks" / nb.name).symlink_to(nb)
    shutil.copy(ROOT / "notebooks" / "00_setup.ipynb", root / "notebooks" / "07b_fake.ipynb")
    monkeypatch.setenv("CNNBENCH_ROOT", str(root))
    monkeypatch.setattr(params, "NOTEBOOKS", (*params.NOTEBOOKS[:-1], "07b_fake", params.NOTEBOOKS[-1]))
    p = params.load(ROOT / "params" / "smoke.yaml", check_device=False)
    assert (
        "07b_fake" in p.notebooks and p.notebooks[-1] == pipeline.ANALYSIS
    )  # the default list, analysis last
    assert eta.planned(p, "07b_fake") == (0, 0.0) and eta.Budgets(p)["07b_fake"] > 0
    rc = pipeline.main(
        ["--params", str(ROOT / "params" / "smoke.yaml"), "--estimate", "--outputs", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert rc == 0 and re.search(r"^07b_fake\s+\d+s\s+the budgets", out, re.M), out
    (root / "notebooks" / "07b_fake.ipynb").unlink()  # the pipeline refuses a listed notebook that is missing
    assert pipeline.main(["--params", str(ROOT / "params" / "smoke.yaml"), "--outputs", str(tmp_path)]) == 2
    assert "notebooks missing" in capsys.readouterr().err


RENAMED = {
    "00_setup": "00_start",
    "02_scenario_a": "02_scenario",
    "03_batch_sweep": "03_sweep",
    "07_tuning": "07_tune",
}
RENAMED_CHECK = """
from cnnbench import eta, params, report, scenarios
from cnnbench.results import schema

p = params.load("params/smoke.yaml", check_device=False)
try:
    params.load("params/smoke.yaml", {"sweep": {}}, check_device=False)
    raise AssertionError("took no sweep with 03 listed")
except params.ParamsError as err:
    assert "key 'sweep'" in str(err) and "03_sweep" in str(err), err
assert eta.planned(p, "02_scenario")[0] > 0 and eta.budget_model(p, "07_tune")[0] > 0
assert len(scenarios.sweep_to_measure(p)) < len(scenarios.sweep_configs(p))  # 03 takes 02's rows
assert all(t.notebook in params.NOTEBOOKS for t in schema.TABLES.values() if t.notebook[:2].isdigit())
assert params.NUMBERED["03"] == "03_sweep" and report.SETUP == "00_start", params.NOTEBOOKS
print("still checked")
"""


def test_a_notebook_renamed_in_notebooks_keeps_every_check_that_names_it(tmp_path):
    """A rename in ``params.NOTEBOOKS`` is the one edit: the checks and estimates keyed on a notebook (03's sweep,
    02's rows reused by 03, 07's budget, the report's 00, the tables' notebooks) still find it."""
    shutil.copytree(
        ROOT / "lib" / "cnnbench", tmp_path / "cnnbench", ignore=shutil.ignore_patterns("__pycache__")
    )
    source = tmp_path / "cnnbench" / "params.py"
    text = source.read_text()
    for old, new in RENAMED.items():  # the first spelling of each is NOTEBOOKS'
        assert old in text
        text = text.replace(old, new, 1)
    source.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "CNNBENCH_ROOT": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", RENAMED_CHECK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and "still checked" in out.stdout, out.stderr[-3000:]


def test_a_notebook_is_spelled_in_notebooks_alone():
    """Code and messages name a notebook through ``params.NUMBERED`` (or a table's ``notebook``), never as text."""
    names, spelled = re.compile("|".join(params.NOTEBOOKS)), []
    for path in (ROOT / "lib" / "cnnbench").rglob("*.py"):
        tree = ast.parse(path.read_text())
        declared = {
            id(n)
            for node in tree.body
            if isinstance(node, ast.Assign) and "NOTEBOOKS" in {getattr(t, "id", "") for t in node.targets}
            for n in ast.walk(node)
        }
        spelled += [
            f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in declared
            if names.search(node.value)
        ]
    assert not spelled, spelled


def test_the_readme_table_and_the_entry_points_list_the_notebooks():
    readme = re.findall(r"^\|[^|]*\| `(\d\d_\w+)` \|", (ROOT / "README.md").read_text(), re.M)
    assert tuple(readme) == params.NOTEBOOKS
    from test_notebook_entry_points import ENTRY

    assert tuple(ENTRY) == params.NOTEBOOKS


KNOB = """
import contextlib

from cnnbench import knobs

seen = []
knobs.KNOBS["fake_knob"] = knobs.Knob(
    "fake_knob", int, 1, "a fake knob", low=1, high=8,
    apply=lambda value, backend, shape: contextlib.nullcontext(seen.append(value)),
)
from cnnbench import params
from cnnbench.results import schema

p = params.load("params/smoke.yaml", {"fake_knob": 4}, check_device=False)
assert p.fake_knob == 4 and "fake_knob" in params.describe()
try:
    params.load("params/smoke.yaml", {"fake_knob": 9}, check_device=False)
    raise AssertionError("took a value above the knob's bound")
except params.ParamsError as err:
    assert "fake_knob" in str(err) and "\\n" not in str(err), err
assert "fake_knob" in schema.config_keys() and "default_fake_knob" in schema.search_keys()
setting = knobs.for_params(p)
assert setting.fake_knob == 4 and "4" in setting.label
with knobs.applied({"fake_knob": setting.fake_knob}, backend=None):  # the engine's one entry
    pass
assert seen == [4], seen
print("picked up")
"""


def test_a_knob_added_to_knobs_is_validated_keyed_labelled_and_applied():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib"), "CNNBENCH_ROOT": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", KNOB], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and "picked up" in out.stdout, out.stderr[-3000:]


def test_importing_devices_loads_no_module_that_declares_no_kind():
    """devices/ finds its kinds by importing its modules; membench (and numba with it) stays lazy, as workers and
    DDP ranks import devices on start."""
    code = "import sys, cnnbench.devices; print('cnnbench.devices.membench' in sys.modules, 'numba' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["False", "False"], out.stderr[-2000:]


def test_the_tables_of_measured_rates_are_declared_once():
    """02's and 03's tables (a configuration's measured rate) are named together in the schema only: the report,
    the analysis, 04 and the predictor read them from ``results.RATES``."""
    from cnnbench import results

    assert results.RATES == {"scenario_a": "02", "batch_sweep": "03"}
    restated = []
    for path in (ROOT / "lib" / "cnnbench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            inside = list(ast.walk(node))
            literal = all(
                isinstance(n, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Load))
                for n in inside
            )
            if literal and isinstance(
                node, (ast.Tuple, ast.List, ast.Set, ast.Dict)
            ):  # a list of names, not labels
                named = {n.value for n in inside if isinstance(n, ast.Constant)}
                if {"scenario_a", "batch_sweep"} <= named and path.name != "schema.py":
                    restated.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not restated, restated


def _code() -> dict[str, str]:
    """The source of every module of lib/cnnbench and of every code cell of the notebooks, by where it is."""
    code = {
        str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "lib" / "cnnbench").rglob("*.py"))
    }
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] == "code":
                code[f"notebooks/{nb.name} cell {i}"] = "".join(cell["source"])
    return code


def _spelled(*labels: str) -> list[str]:
    """Where lib/cnnbench and the notebooks' code spell one of ``labels`` as a whole string."""
    return [
        f"{where}:{n.lineno}"
        for where, text in _code().items()
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in labels
    ]


def test_the_verdicts_the_roofs_cannot_explain_are_declared_once():
    """predict declares the verdicts of a rate its roofs cannot explain; the findings and 08 read them from
    ``predict.UNEXPLAINED``."""
    spelled = _spelled("above the ceiling", "bound by something else")
    assert len(spelled) == 2 and all(w.startswith("lib/cnnbench/predict.py:") for w in spelled), spelled
    from cnnbench import predict

    assert set(predict.UNEXPLAINED) == {"above the ceiling", "bound by something else"}


def test_the_passes_a_repeat_is_measured_by_are_named_once():
    """reproducibility names the passes it pairs, and the tables that hold them, once: the findings cite those
    tables from ``reproducibility.PASS_TABLE``."""
    spelled = _spelled("tuning (default)", "step phases (unsplit step)")
    assert len(spelled) == 2 and all("measure/reproducibility.py:" in w for w in spelled), spelled
    from cnnbench import results
    from cnnbench.measure import reproducibility

    assert set(reproducibility.PASS_TABLE.values()) <= set(results.TABLES)


def test_the_notebooks_read_a_table_through_the_results_layer():
    """A notebook reads a results table as ``run.read(name)`` (its current rows, every declared column), never its
    CSV by file name: a table's file name is spelled only in the call that writes it."""
    from cnnbench import results

    files, read = {t.filename for t in results.TABLES.values()}, []
    for where, text in _code().items():
        if where.startswith("notebooks/"):
            tree = ast.parse(text)
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and "write" in ast.unparse(n.func)]
            written = {id(n) for call in calls for n in ast.walk(call)}
            read += [
                f"{where}:{n.lineno}"
                for n in ast.walk(tree)
                if isinstance(n, ast.Attribute)
                and n.attr == "read_csv"
                or isinstance(n, ast.Constant)
                and n.value in files
                and id(n) not in written
            ]
    assert not read, read


# Each file of a run folder: the one constant naming it (under cnnbench) and its name, a contract with the user
RUN_FILES = {
    "paths.RESOLVED": "params.json",
    "paths.ENVIRONMENT": "environment.json",
    "paths.FAILED": "FAILED.txt",
    "paths.LOCK": ".lock",
    "report.REPORT": "report.html",
    "scaling.ddp.RESULT": "result.json",
    "scaling.ddp.RANK_TELEMETRY": "telemetry_rank{}.json",
}


def test_a_run_folders_files_are_named_once():
    """A run folder's file is named by one constant wherever it is read or written (a results table's by its
    table, ``results.table(name).filename``): no module spells ``"params.json"`` or ``run_dir / ".lock"``."""
    import importlib

    from cnnbench import results

    for constant, name in RUN_FILES.items():
        module, _, attr = constant.rpartition(".")
        assert getattr(importlib.import_module(f"cnnbench.{module}"), attr) == name, constant
    names = [*RUN_FILES.values(), results.table("timings").filename]
    spelled = []
    for path in (ROOT / "lib" / "cnnbench").rglob("*.py"):
        tree = ast.parse(path.read_text())
        module = ".".join(path.relative_to(ROOT / "lib" / "cnnbench").with_suffix("").parts)
        mine = {c.rpartition(".")[2] for c in RUN_FILES if c.rpartition(".")[0] == module}
        declared = {
            id(n)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and mine & {getattr(e, "id", "") for t in node.targets for e in ast.walk(t)}
            for n in ast.walk(node)
        }
        spelled += [
            f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in declared
            if node.value in names or any(node.value.startswith(n.split("{")[0]) for n in names if "{" in n)
        ]
    assert not spelled, spelled
