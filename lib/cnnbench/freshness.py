"""Whether an executed 08_analysis is current (``cnnbench report`` then executes it not again): the SHA-256 of the
results files it read and of the code that ran, written beside the executed copy once 08 has finished; a copy whose
fingerprint is missing, unreadable or different is executed again."""

from __future__ import annotations

import hashlib
from pathlib import Path

import cnnbench
from cnnbench import results

SUFFIX = ".inputs.json"
NOT_READ = ("timings.csv",)  # written by the pipeline after each notebook: never an input of the analysis


def fingerprint(run_dirs: list[Path], notebook: Path) -> dict:
    """What an execution of ``notebook`` over ``run_dirs`` read, and the code that ran: the notebook and every
    file of the installed ``cnnbench`` package (sources and data), in one hash."""
    package = Path(cnnbench.__file__).resolve().parent
    code = hashlib.sha256(Path(notebook).read_bytes())
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            code.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    files = {
        f"{Path(d).name}/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
        for d in run_dirs
        for p in sorted(Path(d).iterdir())
        if p.is_file() and p.suffix in (".csv", ".json") and p.name not in NOT_READ
    }
    return {"code": code.hexdigest(), "files": files}


def record(executed: Path, run_dirs: list[Path] | None, notebook: Path) -> None:
    """After ``executed`` (the executed copy) was written: what it read and ran; ``run_dirs`` None, before it is
    executed again: no fingerprint says it is current until it finishes (a failed copy stays, for reading)."""
    if run_dirs is None:
        return Path(executed).with_suffix(SUFFIX).unlink(missing_ok=True)
    results.write_json(Path(executed).with_suffix(SUFFIX), fingerprint(run_dirs, notebook))


def current(executed: Path, run_dirs: list[Path], notebook: Path) -> bool:
    """Whether ``executed`` exists and was executed over the very files and code present now."""
    try:
        suffixed = Path(executed).with_suffix(SUFFIX)
        return Path(executed).is_file() and results.read_json(suffixed) == fingerprint(run_dirs, notebook)
    except (OSError, ValueError):
        return False
