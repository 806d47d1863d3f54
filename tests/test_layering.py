"""The package's layers, read from its imports (module level and inside functions alike): results flow one way.

- foundations (params, knobs, heap, paths, devices, data, models, envinfo, the results layer) import no other module;
- the measurement core imports no experiment family and not the analysis;
- an experiment family (scratch, transfer, tuning) imports no other family and not the analysis;
- nothing but the report and the pipeline imports the analysis; only the pipeline imports papermill;
- no import cycle between modules.
"""

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PKG = ROOT / "lib" / "cnnbench"
FOUNDATIONS = (
    "cnnbench.params",
    "cnnbench.knobs",
    "cnnbench.heap",
    "cnnbench.paths",
    "cnnbench.devices",
    "cnnbench.data",
    "cnnbench.models",
    "cnnbench.envinfo",
    "cnnbench.results",
)
FAMILIES = ("cnnbench.scratch", "cnnbench.transfer", "cnnbench.steps", "cnnbench.scaling", "cnnbench.tuning")
TOP = (
    "cnnbench.analysis",
    "cnnbench.report",
    "cnnbench.pipeline",
    "cnnbench.interactive",
    "cnnbench.__main__",
    "cnnbench.cli",
)


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in PKG.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """cnnbench modules (and third-party roots) ``name`` imports anywhere in its file."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in known else base)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: {i for i in _imports(m, p, known) if i in known and i != m} for m, p in mods.items()}


def _in(module: str, layer) -> bool:
    return any(module == g or module.startswith(g + ".") for g in layer)


def _family(module: str) -> str | None:
    return next((f for f in FAMILIES if _in(module, [f])), None)


def test_foundations_import_only_foundations():
    bad = [
        f"{m} -> {i}"
        for m, deps in _graph().items()
        if _in(m, FOUNDATIONS)
        for i in deps
        if i != "cnnbench" and not _in(i, FOUNDATIONS)
    ]
    assert bad == []


def test_experiment_families_and_the_core_import_no_other_family_and_not_the_analysis():
    bad = []
    for m, deps in _graph().items():
        if _in(m, TOP) or m == "cnnbench":
            continue
        for i in deps:
            if _in(i, TOP) or (_family(i) and _family(i) != _family(m) and not _in(m, TOP)):
                bad.append(f"{m} -> {i}")
    assert bad == []


def test_only_the_pipeline_imports_papermill():
    known = set(_modules())
    users = sorted(
        m for m, p in _modules().items() if any(i.split(".")[0] == "papermill" for i in _imports(m, p, known))
    )
    assert users == ["cnnbench.pipeline"]


def test_no_import_cycle():
    graph = {
        m: deps for m, deps in _graph().items() if m != "cnnbench"
    }  # the root's lazy facade is not a layer
    graph = {m: {d for d in deps if d != "cnnbench"} for m, deps in graph.items()}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


@pytest.mark.parametrize("cycle", [("a", "b")])
def test_the_cycle_check_finds_a_cycle(tmp_path, monkeypatch, cycle):
    """The checks above would pass on a graph they cannot read: they must see a planted cycle."""
    monkeypatch.setattr(
        __import__(__name__), "_graph", lambda: {"cnnbench.a": {"cnnbench.b"}, "cnnbench.b": {"cnnbench.a"}}
    )
    with pytest.raises(AssertionError):
        test_no_import_cycle()


# Issue 28: the package does not grow past its size before the redesign; fewer lines is better. A change that
# needs more lines takes them from code that no longer earns its place.
LINE_BUDGET = 16_724


def test_the_package_stays_within_its_line_budget():
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in PKG.rglob("*.py"))
    assert lines <= LINE_BUDGET, f"lib/cnnbench has {lines:,} lines, over its budget of {LINE_BUDGET:,}"
