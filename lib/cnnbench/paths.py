"""Where things are: the workbook's root, the params folder, the outputs of runs."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import pickle
import re
import socket
import sys
import time
from pathlib import Path

import psutil


def repo_root() -> Path:
    """The workbook checkout: $CNNBENCH_ROOT, else the first of cwd and its parents holding params/ and
    notebooks/ (notebooks run from notebooks/ or the root), else the checkout this package was installed from."""
    if os.environ.get("CNNBENCH_ROOT"):
        return Path(os.environ["CNNBENCH_ROOT"]).resolve()
    for path in (Path.cwd(), *Path.cwd().parents, Path(__file__).resolve().parents[2]):
        if (path / "params").is_dir() and (path / "notebooks").is_dir():
            return path
    raise FileNotFoundError("cannot find the workbook folder (params/ and notebooks/); set CNNBENCH_ROOT")


def on_colab() -> bool:
    return "google.colab" in sys.modules


def resolve(path: str | Path) -> Path:
    """A path as given if absolute or present from cwd, else relative to the workbook root."""
    path = Path(path).expanduser()
    return (path if path.is_absolute() or path.exists() else repo_root() / path).resolve()


def shown(path: str | Path) -> str:
    """``path`` as a run folder records it: relative to the workbook's root, else ``~/...``, else as given."""
    path = Path(path).expanduser().absolute()
    base = next((b for b in (repo_root(), Path.home()) if path.is_relative_to(b)), None)
    return str(path) if base is None else ("~/" if base != repo_root() else "") + str(path.relative_to(base))


def default_run_name(device_kind: str) -> str:
    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", socket.gethostname().split(".")[0]) or "host"
    return f"{device_kind}-{host}"


def outputs_root() -> Path:
    return repo_root() / "outputs"


def cached(kind: str, key, compute, code=()):
    """``compute()``, kept in the cache ($CNNBENCH_CACHE, else $XDG_CACHE_HOME/cnnbench or ~/.cache/cnnbench) under
    ``kind``, ``repr(key)`` and the ``code`` modules' source; an unreadable entry is computed again, an unwritable
    cache is none; processes asking for one entry at once compute it once."""
    key = [key, *(Path(m.__file__).read_text() for m in code)]
    env = os.environ.get
    folder = Path(env("CNNBENCH_CACHE") or Path(env("XDG_CACHE_HOME", "~/.cache")) / "cnnbench").expanduser()
    path = folder / f"{kind}-{hashlib.sha256(repr(key).encode()).hexdigest()[:20]}"
    if folder_problem(folder):
        return compute()
    with _serialized(path.with_name(f"{path.name}{LOCK}")):
        try:
            with path.open("rb") as f:
                return pickle.load(f)
        except Exception:  # noqa: BLE001 - computed again
            value = compute()
        with contextlib.suppress(OSError), replacing(path) as f:  # a full disk: kept in no cache
            pickle.dump(value, f)
    return value


def folder_problem(outputs: Path, option: str = "--outputs") -> str:
    """Why the folder ``option`` names cannot be written (a file, not creatable, not writable), or ""."""
    if outputs.exists() and not outputs.is_dir():
        return f"{option} {outputs} is a file, not a folder"
    try:
        outputs.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"{option} {outputs} cannot be created ({err.strerror or err})"
    return "" if os.access(outputs, os.W_OK | os.X_OK) else f"{option} {outputs} is not writable"


LOCK_ENV = "CNNBENCH_RUN_LOCK"  # set by the process holding a run's lock, so its own kernels pass through
RESOLVED_ENV = "CNNBENCH_RESOLVED"  # fingerprint of params.json when a pipeline run started (run.open_run)
# A run folder's files: the parameters in force, with the params file and overrides they came from (run.py); the
# environment 00 writes first (a folder holding one is a run); the pipeline's note of a run that has not finished
RESOLVED, ENVIRONMENT, FAILED = "params.json", "environment.json", "FAILED.txt"
LOCK = ".lock"  # a lock's file: <run_dir>/.lock (RunLock), <entry>.lock beside a cache entry


def fingerprint(path: str | Path) -> str:
    """``path`` (resolved) with the SHA-256 of its content: what :data:`RESOLVED_ENV` holds."""
    path = Path(path).resolve()
    return f"{path} {hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ''}"


LOCK_UNREADABLE_STALE_S = 10.0  # a lock without a readable PID counts as held until it is this old (seconds)


try:  # resolved here, so that a child calls it between fork and exec without taking any lock
    _PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _PRCTL = None


def die_with_parent(*_) -> None:
    """Linux: this process gets SIGKILL when the process that started it dies. Ignores its arguments, so it
    serves as a DataLoader's worker_init_fn and a subprocess's preexec_fn."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def run_processes() -> list[tuple[int, str, str]]:
    """(pid, run folder, command line) of each readable process whose environment holds :data:`LOCK_ENV`, this
    one and its ancestors left out."""
    me = psutil.Process()
    skip = {me.pid, *(p.pid for p in me.parents())}
    return [
        (p.pid, p.info["environ"][LOCK_ENV], " ".join(p.info["cmdline"] or [])[:100])
        for p in psutil.process_iter(["environ", "cmdline"])
        if p.pid not in skip and LOCK_ENV in (p.info["environ"] or {})
    ]


@contextlib.contextmanager
def replacing(path: str | Path, mode: str = "wb", **open_kw):
    """Write ``path`` whole or not at all: yields a temporary file beside it, renamed over ``path`` (a link
    there replaced, never written through) once written, else removed; permissions 0666 less the umask."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666)  # the umask applied by the system
    try:
        with os.fdopen(fd, mode, **open_kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        # write() and fsync() name no file
        if isinstance(err, OSError) and err.filename is None and err.errno:
            raise OSError(err.errno, err.strerror or os.strerror(err.errno), str(path)) from None
        raise


def open_own(path: str | Path, mode: str = "ab"):
    """``path`` opened for writing (``ab`` appends, ``wb`` truncates) as a file of its own: a link planted there
    is removed first and never followed (O_NOFOLLOW), so a log in a run folder cannot write outside it."""
    path = Path(path)
    if path.is_symlink():
        path.unlink()
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    flags |= os.O_APPEND if mode.startswith("a") else os.O_TRUNC
    return os.fdopen(os.open(path, flags, 0o666), mode)


class RunLocked(RuntimeError):
    """Another live process (``pid``, None: unknown) is writing the run folder ``folder``."""

    def __init__(self, folder: Path, pid: int | None):
        who = f"process {pid}" if pid else "another process"
        super().__init__(
            f"run '{Path(folder).name}' is being written by {who}: try again when it has finished, or choose "
            "another run (run_dir in a notebook, --set run_name=NAME for cnnbench)"
        )

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


@contextlib.contextmanager
def _serialized(target: Path):
    """Contenders for ``target`` one at a time: flock on it (a folder, or a lock file, created if missing), where
    there is flock."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = os.open(target, os.O_RDONLY if target.is_dir() else os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):  # a filesystem without flock (some FUSE mounts): not serialized
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


class RunLock:
    """``<run_dir>/.lock`` holding the writer's PID: a second writer refuses with one line; a lock left by a dead
    process is taken over, an unreadable one once ``LOCK_UNREADABLE_STALE_S`` old; released on exit. Raises
    :class:`RunLocked`, or OSError where the folder cannot be written."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK
        self.held = False

    def _pid(self) -> int | None:
        try:
            return int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def holder(self) -> int | None:
        """PID of a live process holding the lock (not this one), else None."""
        pid = self._pid()
        return pid if pid is not None and pid != os.getpid() and psutil.pid_exists(pid) else None

    def _stale(self) -> bool:
        """The lock exists and no live process holds it: its PID is dead, or unreadable for long."""
        pid = self._pid()
        if pid is not None:
            return pid == os.getpid() or not psutil.pid_exists(pid)
        try:
            return time.time() - self.path.stat().st_mtime > LOCK_UNREADABLE_STALE_S
        except FileNotFoundError:
            return False  # released meanwhile: the next try links

    def acquire(self) -> RunLock:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        with _serialized(folder):
            for _ in range(2):
                try:
                    fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
                except FileExistsError:
                    if not self._stale():
                        raise RunLocked(folder, self.holder()) from None
                    self.path.unlink(missing_ok=True)  # stale: its process is gone
                    continue
                try:
                    with os.fdopen(fd, "w") as f:
                        f.write(f"{os.getpid()}\n")
                except OSError:
                    self.path.unlink(missing_ok=True)
                    raise
                self.held = True
                os.environ[LOCK_ENV] = str(folder.resolve())
                return self
        raise RunLocked(folder, self.holder())

    def release(self) -> None:
        """Remove the lock if it is still this process's (best effort)."""
        if self.held:
            self.held = False
            os.environ.pop(LOCK_ENV, None)
            if self._pid() == os.getpid():
                with contextlib.suppress(OSError):
                    self.path.unlink()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
