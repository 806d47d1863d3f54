"""The GPU extras install beside the torch that is there: CuPy and numba-cuda for its CUDA major, torch untouched."""

import json
import re
import subprocess
import sys

import pytest
import tomllib

from conftest import ROOT

EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _cuda_major() -> str:
    import torch

    return (torch.version.cuda or "").split(".")[0]


def _would_install(extra: str, tmp_path) -> set[str]:
    report = tmp_path / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--quiet",
        "--report",
        str(report),
        f"{ROOT}[{extra}]",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode and re.search(
        r"(?i)connection|network|resolve host|no matching distribution", proc.stderr
    ):
        pytest.skip(f"no package index reachable: {proc.stderr.strip().splitlines()[-1][:200]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}


def test_the_gpu_extra_for_torchs_own_cuda_keeps_the_installed_torch(tmp_path):
    # `pip install -e .[gpu]` named CUDA 12's CuPy and numba-cuda[cu12] beside a CUDA 13 torch: pip swapped torch
    # for another build (here a CPU one) to satisfy them, and the first GPU run would have measured without a GPU
    if not (major := _cuda_major()):
        pytest.skip("this torch has no CUDA build")
    assert f"gpu-cu{major}" in EXTRAS, sorted(EXTRAS)
    installs = _would_install(f"gpu-cu{major}", tmp_path)
    assert not installs & {"torch", "torchvision"}, sorted(installs)


def test_each_gpu_extra_names_one_cuda_major_only():
    for extra, reqs in EXTRAS.items():
        if m := re.fullmatch(r"gpu-cu(\d+)", extra):
            majors = {a or b for a, b in re.findall(r"cuda(\d+)x|-cu(\d+)\b", " ".join(reqs))}
            assert majors <= {m[1]} and not any("[cu" in r for r in reqs), (extra, reqs)
