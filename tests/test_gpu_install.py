"""The GPU extras install beside the torch that is there: CuPy and numba-cuda for its CUDA major, torch untouched."""

import json
import re
import subprocess
import sys

import pytest
import tomllib

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import gpu_extra as cuda  # noqa: E402 - tools/gpu_extra.py: make gpu's rule

EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _would_install(extra: str, tmp_path) -> set[str]:
    """What ``pip install`` of the extra's requirements would install into this environment (a dry run: nothing is
    built or written outside ``tmp_path``)."""
    report = tmp_path / "report.json"
    pip = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--quiet",
        "--timeout",
        "20",
        "--retries",
        "1",
    ]
    try:
        proc = subprocess.run(
            [*pip, "--report", str(report), *EXTRAS[extra]], capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        pytest.skip("no package index answered within 300 s")
    if proc.returncode and re.search(
        r"(?i)connection|network is unreachable|resolve host|timed out", proc.stderr
    ):
        pytest.skip(f"no package index reachable: {proc.stderr.strip().splitlines()[-1][:200]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}


def test_the_gpu_extra_for_torchs_own_cuda_keeps_the_installed_torch(tmp_path):
    # `pip install -e .[gpu]` named CUDA 12's CuPy and numba-cuda[cu12] beside a CUDA 13 torch: pip swapped torch
    # for another build (here a CPU one) to satisfy them, and the first GPU run would have measured without a GPU
    if not (extra := cuda.gpu_extra()):
        pytest.skip("this torch has no CUDA build with a GPU extra")
    installs = _would_install(extra, tmp_path)
    assert not installs & {"torch", "torchvision"}, sorted(installs)


def test_each_gpu_extra_names_one_cuda_major_only():
    # numba-cuda alone takes the newest cuda-bindings, whose 13.x needs a CUDA 13 driver: each extra says its major
    extras = {int(m[1]): reqs for e, reqs in EXTRAS.items() if (m := re.fullmatch(r"gpu-cu(\d+)", e))}
    assert extras, sorted(EXTRAS)
    for major, reqs in extras.items():
        majors = {int(a or b) for a, b in re.findall(r"cuda(\d+)x|-cu(\d+)\b", " ".join(reqs))}
        assert majors <= {major} and not any("[cu" in r for r in reqs), (major, reqs)
        bindings = [r for r in reqs if r.startswith("cuda-bindings")]
        assert bindings and f"<{major + 1}" in bindings[0] and f">={major}" in bindings[0], (major, reqs)


@pytest.mark.parametrize(
    ("built_for", "extra"), [("13.0", "gpu-cu13"), ("12.8", "gpu-cu12"), ("11.8", ""), (None, "")]
)
def test_make_gpu_picks_the_extra_of_the_cuda_torch_was_built_for(monkeypatch, built_for, extra):
    # one rule, read by make gpu and the dry run above; the extras it may name are the ones pyproject declares
    monkeypatch.setattr("torch.version.cuda", built_for)
    assert cuda.gpu_extra() == extra
    assert not extra or extra in EXTRAS
