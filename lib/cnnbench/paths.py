"""Where things are: the workbook's root, the params folder, the outputs of runs."""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path


def _is_root(path: Path) -> bool:
    return (path / "params").is_dir() and (path / "notebooks").is_dir()


def repo_root() -> Path:
    """The workbook checkout: $CNNBENCH_ROOT, else the first of cwd and its parents holding params/ and
    notebooks/ (notebooks run from notebooks/ or the root), else the checkout this package was installed from."""
    if os.environ.get("CNNBENCH_ROOT"):
        return Path(os.environ["CNNBENCH_ROOT"]).resolve()
    for path in (Path.cwd(), *Path.cwd().parents):
        if _is_root(path):
            return path
    installed = Path(__file__).resolve().parents[2]
    if _is_root(installed):
        return installed
    raise FileNotFoundError("cannot find the workbook folder (params/ and notebooks/); set CNNBENCH_ROOT")


def on_colab() -> bool:
    return "google.colab" in sys.modules


def default_params_file() -> Path:
    """params/colab_t4.yaml on Colab, params/local.yaml elsewhere."""
    return repo_root() / "params" / ("colab_t4.yaml" if on_colab() else "local.yaml")


def resolve(path: str | Path) -> Path:
    """A path as given if absolute or present from cwd, else relative to the workbook root."""
    path = Path(path).expanduser()
    if path.is_absolute() or path.exists():
        return path.resolve()
    return (repo_root() / path).resolve()


def default_run_name(device_kind: str) -> str:
    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", socket.gethostname().split(".")[0]) or "host"
    return f"{device_kind}-{host}"


def outputs_root() -> Path:
    return repo_root() / "outputs"
