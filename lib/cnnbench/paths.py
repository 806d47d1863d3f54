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


LOCK_ENV = "CNNBENCH_RUN_LOCK"  # set by the process holding a run's lock, so its own kernels pass through


class RunLocked(RuntimeError):
    """Another live process is writing the same run folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """``<run_dir>/.lock`` holding the writer's PID: a second writer refuses with one line; a lock left by a dead
    process is taken over; released on exit (``with RunLock(run_dir):``)."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / ".lock"
        self.held = False

    def holder(self) -> int | None:
        """PID of a live process holding the lock (not this one), else None."""
        try:
            pid = int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid != os.getpid() and _alive(pid) else None

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                pid = self.holder()
                if pid is not None:
                    raise RunLocked(f"run '{self.path.parent.name}' is being written by process {pid}; wait for it "
                                    f"or choose another run_name ({self.path} is its lock)") from None
                self.path.unlink(missing_ok=True)  # stale: its process is gone
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{os.getpid()}\n")
            self.held = True
            os.environ[LOCK_ENV] = str(self.path.parent.resolve())
            return self
        raise RunLocked(f"run '{self.path.parent.name}': cannot take the lock {self.path}")

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            os.environ.pop(LOCK_ENV, None)
            self.held = False

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
