#!/usr/bin/env python3
"""make gpu-wheels: what a GPU machine with torch and no internet needs for `make gpu-check`, into .gpucheck/.

- ``wheels/``: a wheel (Python 3.12, manylinux x86_64) of every requirement of the workbook and of its
  ``notebook`` extra, and of their requirements, that a torch GPU image is unlikely to have. Never torch's stack
  (:data:`TORCH_STACK`: a wheel of another build would replace the machine's), nor what such an image has
  (:data:`IMAGE_HAS`), nor what a batch run does not use (:data:`NOT_FOR_A_RUN`). fvcore and iopath, published
  as sdists only, are built into pure-Python wheels here (:data:`SDIST_ONLY`).
- ``requirements.txt``: the workbook's requirements that `make gpu-check` checks are met there, once it has
  installed the wheels whose packages the machine lacks (pip ``--no-index --find-links --no-deps``: what the
  machine has stays untouched).
- ``timm_benchmark.py``: timm's benchmark.py for benchmarks/timm_peer.py, copied from ``TIMM_BENCHMARK``
  (timm's source repository; neither its PyPI package nor this repository carries it). The machine's own timm runs
  it: take the file from the tag of that timm version where you know it.

Prints the folder's size: it travels with the working tree to the GPU machine (a device call's ``carry``).

    make gpu-wheels TIMM_BENCHMARK=~/pytorch-image-models/benchmark.py
    python tools/gpu_wheels.py --timm-benchmark PATH [--dest .gpucheck] [--python-version 3.12]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# torch and what its wheels bring (CUDA's libraries as nvidia-* and cuda-*): the machine's own build, never replaced
TORCH_STACK = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-(?!ml-py$).*|cuda-.*)$")
# What a torch GPU image has (NGC's PyTorch containers, Colab, the workplace's GPU image): torch's own requirements
# and the scientific stack; carried they add 90 MB (llvmlite 56, numpy 16, pandas 11, matplotlib 8, ...), and
# gpu-check names a requirement of the workbook's that a machine lacks
IMAGE_HAS = frozenset(
    (
        "numpy pandas python-dateutil tzdata six matplotlib contourpy cycler fonttools kiwisolver pillow "
        "pyparsing packaging numba llvmlite pyyaml psutil jinja2 markupsafe filelock fsspec typing-extensions "
        "sympy mpmath networkx setuptools scipy"
    ).split()
)
# Not used by a batch run (the notebooks executed by papermill, nbconvert and ipykernel), so not carried: the notebook
# extra's front-end, and requirements of its requirements that are optional at run time (ipykernel's debugger,
# IPython's completion, the classic notebook's widget files: 11 MB of 19)
NOT_FOR_A_RUN = frozenset(["jupyterlab", "debugpy", "jedi", "parso", "widgetsnbextension"])
SDIST_ONLY = ("fvcore", "iopath")
CARRY_LIMIT_MIB = 64  # the working tree and the carried folders that a borrowed GPU machine receives  # no wheels on PyPI: built here (pure Python)
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 26, 27, 28, 31, 34, 35, 39)]
PLATFORMS += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return canonical(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip()).group(0))


def workbook_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The workbook's requirements and its notebook extra's that gpu-check installs: all but torch's stack and
    what a batch run does not use."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    project = tomllib.loads(pyproject.read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["notebook"]
    return [
        r
        for r in wanted
        if not TORCH_STACK.match(requirement_name(r)) and requirement_name(r) not in NOT_FOR_A_RUN
    ]


def carried(closure: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (name, version) pairs of a resolved closure that travel as wheels."""
    return [
        (name, version)
        for name, version in closure
        if not TORCH_STACK.match(canonical(name)) and canonical(name) not in IMAGE_HAS | NOT_FOR_A_RUN
    ]


def target_platforms() -> list[str]:
    return [f for p in PLATFORMS for f in ("--platform", p)]


def target(python_version: str) -> list[str]:
    """pip's options for binary wheels of the GPU machine's Python and platform."""
    abi = "cp" + python_version.replace(".", "")
    flags = [
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "--abi",
        abi,
    ]
    return flags + target_platforms()


def pip(*args: str) -> None:
    shown = " ".join(args).replace(" ".join(target_platforms()), "--platform <manylinux x86_64, each>")
    print(f"+ pip {shown}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def size_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def tree_mib() -> float:
    """The working tree a device call sends beside what it carries: tracked and untracked-not-ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True
    )
    files = [ROOT / f for f in listed.stdout.decode().split("\0") if f]
    return (
        sum(f.stat().st_size for f in files if f.is_file()) / 2**20
        if listed.returncode == 0
        else float("nan")
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timm-benchmark", default=os.environ.get("TIMM_BENCHMARK", ""))
    ap.add_argument("--dest", default=str(ROOT / ".gpucheck"))
    ap.add_argument("--python-version", default="3.12", help="the GPU machine's python3 (default 3.12)")
    args = ap.parse_args(argv)
    benchmark = Path(args.timm_benchmark).expanduser() if args.timm_benchmark else None
    if benchmark is None or not benchmark.is_file():
        ap.error(
            f"TIMM_BENCHMARK={args.timm_benchmark!r}: not a file; give timm's benchmark.py, from its source "
            "repository (github.com/huggingface/pytorch-image-models)"
        )
    dest = Path(args.dest)
    wheels = dest / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)  # one version of each, none left from an earlier preparation
    wheels.mkdir(parents=True)
    requirements = workbook_requirements()
    built = [r for r in requirements if requirement_name(r) in SDIST_ONLY]
    built += [n for n in SDIST_ONLY if n not in {requirement_name(r) for r in built}]
    pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), *built)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip(
            "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
            *target(args.python_version), "--find-links", str(wheels), *requirements,
        )  # fmt: skip
        closure = [
            (i["metadata"]["name"], i["metadata"]["version"])
            for i in json.loads(report.read_text())["install"]
        ]
    travel = carried(closure)
    todo = [f"{n}=={v}" for n, v in travel if canonical(n) not in SDIST_ONLY]
    pip("download", "--quiet", "--no-deps", *target(args.python_version), "--dest", str(wheels), *todo)
    (dest / "requirements.txt").write_text("\n".join(requirements) + "\n")
    shutil.copyfile(benchmark, dest / "timm_benchmark.py")
    left = sorted(n for n, v in closure if (n, v) not in travel)
    size, tree = size_mib(dest), tree_mib()
    print(
        f"{dest}: {size:.1f} MiB, {len(list(wheels.glob('*.whl')))} wheels for Python "
        f"{args.python_version} (left to the machine: {', '.join(left)}), requirements.txt, timm_benchmark.py; "
        f"with the working tree ({tree:.1f} MiB) {size + tree:.1f} MiB of the {CARRY_LIMIT_MIB} MiB a device call sends"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
