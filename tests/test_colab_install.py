"""The Colab cell's install, run in a virtual environment pinned like Colab's kernel (issue 19).

The venv gets Colab's kernel packages from pip's index at Colab's versions; torch and torchvision are
"preinstalled" without a download: a .pth puts a folder of links to this interpreter's torch, torchvision and
their requirements on the venv's path (outside the venv, so pip could shadow them but never uninstall them).
Then the command of every notebook's colab-setup cell runs there, and no installed package may change."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLAB_PINS = {
    "ipykernel": "6.17.1",
    "ipython": "7.34.0",
    "notebook": "6.5.7",
    "jupyter-client": "7.4.9",
    "ipywidgets": "7.7.1",
}
SNAPSHOT = (
    "import importlib.metadata as m, json, re\nseen = {}\nfor d in m.distributions():\n"
    "    n = d.metadata['Name']\n    if n: seen.setdefault(re.sub(r'[-_.]+', '-', n).lower(), d.version)\n"
    "print(json.dumps(seen))"
)


def _run(*cmd, **kwargs) -> subprocess.CompletedProcess:
    """``cmd`` run as in a fresh shell: without conftest's PYTHONPATH (the worktree's lib) or the headless flag."""
    env = {k: v for k, v in os.environ.items() if k not in ("CNNBENCH_HEADLESS", "PYTHONPATH")}
    return subprocess.run([str(c) for c in cmd], check=True, env={**env, **kwargs.pop("env", {})}, **kwargs)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(names: list[str]) -> tuple[list[importlib.metadata.Distribution], list[str]]:
    """These distributions of this interpreter and everything they require (with the extras they require), and
    every requirement string met on the way."""
    from packaging.requirements import Requirement

    todo, seen, dists, reqs = [(n, frozenset()) for n in names], set(), {}, []
    while todo:
        name, extras = todo.pop()
        if (_norm(name), extras) in seen:
            continue
        seen.add((_norm(name), extras))
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        dists[_norm(name)] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras}):
                todo.append((req.name, frozenset(req.extras)))
                reqs.append(f"{req.name}{req.specifier}")
    return list(dists.values()), reqs


def _preinstall(python: Path, venv_site: Path, links: Path) -> None:
    """torch and torchvision, with what they require and the venv lacks, linked into ``links`` on the venv's
    path; what they require and the venv has at too old a version (setuptools) brought up to it, so the
    preinstalled torch is consistent, as Colab's is."""
    from packaging.requirements import Requirement

    have = _snapshot(python)
    dists, reqs = _closure(["torch", "torchvision"])
    stale = [
        r
        for r in reqs
        if _norm(Requirement(r).name) in have
        and not Requirement(r).specifier.contains(have[_norm(Requirement(r).name)], prereleases=True)
    ]
    if stale:
        _run(python, "-m", "pip", "install", "-q", *stale)
    links.mkdir()
    for dist in dists:
        if _norm(dist.metadata["Name"]) in have:
            continue
        base = Path(dist.locate_file(""))
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if (base / top).exists() and not (links / top).exists():
                (links / top).symlink_to(base / top)
    (venv_site / "colab_preinstalled.pth").write_text(f"{links}\n")


def _snapshot(python: Path) -> dict[str, str]:
    return json.loads(_run(python, "-c", SNAPSHOT, capture_output=True, text=True).stdout)


def _colab_cell() -> str:
    cells = set()
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb_path.read_text())["cells"]:
            if "colab-setup" in cell.get("metadata", {}).get("tags", []):
                cells.add("".join(cell["source"]))
    assert len(cells) == 1, "every notebook's colab-setup cell must be the same"
    return cells.pop()


def test_every_colab_cell_installs_through_the_kernel_safe_script():
    cell = _colab_cell()
    assert '[sys.executable, "/content/cnnbench/tools/colab_install.py"]' in cell
    assert "pip" not in cell.replace("tools/colab_install.py", "")


def _tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import colab_install
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return colab_install


def test_constraints_pin_every_installed_distribution():
    lines = _tool().constraints().splitlines()
    assert f"torch=={importlib.metadata.version('torch')}" in lines
    assert f"pytest=={importlib.metadata.version('pytest')}" in lines
    assert all(re.fullmatch(r"[a-z0-9-]+==\S+", line) for line in lines)


def test_the_install_leaves_no_constraints_file_behind(tmp_path, monkeypatch):
    """The constraints file pip read stayed in /tmp (cnnbench-kernel-*.txt) after every install."""
    colab_install, given = _tool(), []

    def pip(cmd, check):
        given.append(Path(cmd[cmd.index("-c") + 1]).read_text())
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(colab_install.subprocess, "run", pip)
    assert colab_install.main([str(ROOT)]) == 0
    assert len(given) == 1 and f"torch=={importlib.metadata.version('torch')}" in given[0].splitlines()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.colab
@pytest.mark.slow
def test_colab_cell_install_changes_no_kernel_package_and_imports(tmp_path):
    venv = tmp_path / "colab"
    _run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    pins = [f"{name}=={version}" for name, version in COLAB_PINS.items()]
    _run(python, "-m", "pip", "install", "-q", *pins)
    site = Path(
        _run(
            python,
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    _preinstall(python, site, tmp_path / "preinstalled")
    before = _snapshot(python)
    assert {k: before[k] for k in COLAB_PINS} == COLAB_PINS and "torch" in before and "cnnbench" not in before

    # the cell's command, with the clone's path where Colab has /content/cnnbench
    _run(python, ROOT / "tools" / "colab_install.py", ROOT)

    after = _snapshot(python)
    changed = {k: (v, after.get(k)) for k, v in before.items() if after.get(k) != v}
    assert not changed, f"the install changed the kernel's packages: {changed}"
    assert "cnnbench" in after and "papermill" not in after and "jupyterlab" not in after
    probe = (
        "import ipywidgets, cnnbench\nfrom cnnbench import interactive\n"  # 08's explorer on ipywidgets 7.x
        f"run = cnnbench.open_run({str(ROOT / 'params' / 'smoke.yaml')!r}, {{}}, {str(tmp_path / 'run')!r})\n"
        "c = interactive.explorer(run)\nc['model'].value = 'mnist_cnn'\nc['batch_size'].value = 8\n"
        "c['measure'].click()\nprint('CLICKED', ipywidgets.__version__, len(c['history']), c['status'].value)"
    )
    out = _run(
        python,
        "-c",
        probe,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"CNNBENCH_ROOT": str(ROOT), "MPLBACKEND": "Agg"},
    )
    # one click measured one row on ipywidgets 7.7.1; its status is the measurement's (a loaded CI machine can make
    # the short smoke window "noisy", and the explorer says when the machine was busy), not the widget's
    last = out.stdout.splitlines()[-1]
    assert last.startswith(
        ("CLICKED 7.7.1 1 done (ok)", "CLICKED 7.7.1 1 noisy: the interval stayed wide")
    ), last
