"""Install the workbook into a running Colab kernel without changing any package the kernel already has.

    python tools/colab_install.py [REPO]      (REPO: the workbook's folder, by default this script's)

Colab's kernel runs on the packages it ships (ipykernel 6.17, jupyter-client 7.4, ipywidgets 7.7, its torch):
replacing them under a running session can crash the runtime. So every distribution already installed is
pinned at its installed version in a pip constraints file, and pip adds only what is missing (the workbook's
measurement requirements, never its ``[notebook]`` extra). Where the workbook could not be installed without
changing an installed package, pip stops with its conflict and nothing is replaced.

Constraints rather than ``pip install --no-deps`` plus a hand-computed list of what is missing: pip's own
resolver then finds the missing packages' requirements too (fvcore's iopath, portalocker, ...), and picks
their versions against what is installed (numba against the installed numpy)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def installed() -> dict[str, str]:
    """Every distribution this interpreter sees, by normalised name, at the version it imports (first on the path)."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), dist.version)
    return found


def constraints() -> str:
    """A pip constraints file pinning every installed distribution at its version (versions pip could not parse
    are left out: pip would refuse the whole file)."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # no packaging: keep every line
        return "".join(f"{n}=={v}\n" for n, v in sorted(installed().items()))
    lines = []
    for name, version in sorted(installed().items()):
        try:
            Version(version)
        except InvalidVersion:
            continue
        lines.append(f"{name}=={version}\n")
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    repo = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="cnnbench-kernel-") as folder:
        pins = Path(folder) / "constraints.txt"
        pins.write_text(constraints())
        cmd = [sys.executable, "-m", "pip", "install", "-q", "-c", str(pins), str(repo)]
        return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
