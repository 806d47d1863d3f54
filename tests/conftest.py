import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Tests test the checkout they are in (a git worktree too), not whichever one the editable install points at;
# subprocesses and notebook kernels inherit the same path.
sys.path.insert(0, str(ROOT / "lib"))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "lib"), os.environ.get("PYTHONPATH")) if p)


@pytest.fixture
def write_yaml(tmp_path):
    """Write a params file into the test's temporary folder and return its path."""

    def write(text: str, name: str = "p.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def fake_gpu():
    """Every CPU device is a fake GPU inside the test (tests/fakes.py): the code under test asks it everything a
    device is asked, and it records the questions (``fake_gpu.log``)."""
    from fakes import FakeGPU

    from cnnbench import devices

    with devices.using(FakeGPU.fresh()) as gpu:
        yield gpu
