import contextlib
import fcntl
import functools
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
# Tests test the checkout they are in (a git worktree too), not whichever one the editable install points at;
# subprocesses and notebook kernels inherit the same path.
sys.path.insert(0, str(ROOT / "lib"))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "lib"), os.environ.get("PYTHONPATH")) if p)


def run_pipeline(*args, env=None, cwd=ROOT, timeout=1800) -> subprocess.CompletedProcess:
    """``python -m cnnbench.pipeline *args`` in a subprocess, its console captured."""
    return subprocess.run(
        [sys.executable, "-m", "cnnbench.pipeline", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


# The folder the processes of one test session share (pytest-xdist's workers and their controller): the smoke run.
SHARED_ENV = "CNNBENCH_TEST_SESSION_DIR"
SMOKE_RECORD = "smoke_run.json"  # [args, returncode, stdout, stderr] of the shared smoke run, once it ended
SMOKE_READERS = "smoke_readers.json"  # the node ids of the tests that read it


def pytest_configure(config):
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the session's first process: its workers inherit it
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="cnnbench-tests-")
        os.environ["CNNBENCH_CACHE"] = os.path.join(os.environ[SHARED_ENV], "cache")  # op counts (predict)
        # one thread per process unless a test or a run sets its threads: the -n workers each have a core, and a
        # worker's torch ops spread over every core fought the other worker and the smoke run for them; where a
        # test does measure on several threads, a thread waiting at a barrier sleeps instead of spinning on a core
        # that another process of the session needs (a 2-thread roof measurement took 3x its CPU time spinning)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(config, items):
    """The slow tests first and the readers of the shared smoke run last (it runs meanwhile), so that the
    workers (`-n`, one test at a time each: `--maxschedchunk 1`) finish together. The readers' names go to the
    session's folder, for the scheduler (:func:`pytest_xdist_make_scheduler`). A ``gpu`` test is skipped where torch
    has no CUDA device."""
    items.sort(key=lambda item: ("smoke_run" in item.fixturenames, not item.get_closest_marker("slow")))
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu:
        import torch

        if not torch.cuda.is_available():
            for item in gpu:
                item.add_marker(
                    pytest.mark.skip(reason="gpu: needs a CUDA GPU (torch.cuda is not available)")
                )
    if SHARED_ENV in os.environ:
        readers = Path(os.environ[SHARED_ENV]) / SMOKE_READERS
        mine = readers.with_name(f"{readers.name}.{os.getpid()}")
        mine.write_text(json.dumps([i.nodeid for i in items if "smoke_run" in i.fixturenames]))
        mine.replace(readers)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's load scheduling (in collection order), except that the readers of the shared smoke run are held
    back until it has ended and sent first once it has: a worker sent one earlier would wait for it with its core
    idle, and readers left to the end of the order kept one worker busy long after the other had finished."""
    from xdist.scheduler import LoadScheduling

    shared = Path(os.environ[SHARED_ENV])

    class SmokeReadersWhenReady(LoadScheduling):
        @functools.cached_property
        def readers(self) -> set[str]:
            return set(json.loads((shared / SMOKE_READERS).read_text()))

        def _send_tests(self, node, num):
            ready = (shared / SMOKE_RECORD).exists()
            first = [i for i in self.pending if (self.collection[i] in self.readers) == ready]
            self.pending[:] = first + [
                i for i in self.pending if (self.collection[i] in self.readers) != ready
            ]
            super()._send_tests(node, num)

    return SmokeReadersWhenReady(config, log)


def pytest_collection_finish(session):
    # what the test modules imported lives as long as the process: kept out of every later full collection (the
    # measurements' release() collects after each one, 0.2 s apiece over a test process's heap)
    gc.freeze()
    if not session.config.option.collectonly and any("smoke_run" in i.fixturenames for i in session.items):
        _start_smoke_run()


def pytest_unconfigure(config):
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the session's first process, ending last
        shared = Path(os.environ.pop(SHARED_ENV))
        pid = shared / "smoke_run.pid"
        if pid.exists() and not (shared / SMOKE_RECORD).exists():  # the session ended before the smoke run
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid.read_text()), signal.SIGTERM)
        shutil.rmtree(shared, ignore_errors=True)


# the pipeline run by a process of its own, which writes its record when it ends
_SMOKE_RUNNER = """import json, os, subprocess, sys
proc = subprocess.run(sys.argv[2:], capture_output=True, text=True)
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump([proc.args, proc.returncode, proc.stdout, proc.stderr], f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])"""


def _start_smoke_run() -> Path:
    """Start the shared smoke run unless a process of this session has; returns the session's folder."""
    shared = Path(os.environ[SHARED_ENV])
    with open(shared / "smoke_run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "smoke_run.pid").exists():
            pipeline = [
                "-m",
                "cnnbench.pipeline",
                "--params",
                "params/smoke.yaml",
                "--outputs",
                shared / "smoke_run",
            ]
            runner = subprocess.Popen(
                [sys.executable, "-c", _SMOKE_RUNNER, shared / SMOKE_RECORD, sys.executable, *pipeline],
                cwd=ROOT,
                start_new_session=True,  # its process group: what pytest_unconfigure ends
            )
            (shared / "smoke_run.pid").write_text(str(runner.pid))
    return shared


@pytest.fixture(scope="session")
def smoke_run():
    """The real pipeline run once per session with params/smoke.yaml (every notebook and the report), for the
    tests that only read it: (the run's folder, the pipeline's completed process). A test that writes into a run
    works on a copy (``shutil.copytree``). It starts once the tests are collected and runs beside the others."""
    shared = _start_smoke_run()
    record, runner = shared / SMOKE_RECORD, int((shared / "smoke_run.pid").read_text())
    while not record.is_file():
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(runner).status() != psutil.STATUS_ZOMBIE:
                time.sleep(1)
                continue
        assert record.is_file(), "the shared smoke run ended without a record"
    proc = subprocess.CompletedProcess(*json.loads(record.read_text()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return shared / "smoke_run" / "smoke", proc


def fewer_working_sets(monkeypatch, pick) -> None:
    """The CPU bandwidth sweep over ``pick(sizes)`` of the working sets it would measure, for tests of what a
    measurement of the roofs writes or keeps (this VM's 480 MiB L3 takes the sweep to 1.9 GB)."""
    from cnnbench.devices.cpu import CpuBackend

    sizes = CpuBackend.sweep_sizes
    monkeypatch.setattr(CpuBackend, "sweep_sizes", lambda *a: pick(sizes(*a)))


@pytest.fixture
def small_last_cache(monkeypatch):
    """The CPU's last cache reported at 8 MiB (or twice the level below it), so that the bandwidth sweep ends at
    4x that: each memory level, main memory too, keeps working sets of its own, and the sweep takes seconds."""
    from cnnbench.devices.cpu import CpuBackend

    levels = CpuBackend.cache_levels

    def capped(self, *args, **kwargs):
        *inner, last = levels(self, *args, **kwargs)
        cap = max([8 * 2**20, *(2 * lv["capacity_bytes"] for lv in inner)])
        return [*inner, {**last, "capacity_bytes": min(last["capacity_bytes"], cap)}]

    monkeypatch.setattr(CpuBackend, "cache_levels", capped)


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
    from fakes import FakeGPU, using

    with using(FakeGPU.fresh()) as gpu:
        yield gpu
