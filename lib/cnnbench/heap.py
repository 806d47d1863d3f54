"""Whether freed host memory goes back to the OS between training steps: one process-wide setting.

- ``keep`` (the default): ``mallopt(M_MMAP_MAX, 0)`` and ``mallopt(M_TRIM_THRESHOLD, max)``: freed memory stays in
  the process and is reused, as with jemalloc or tcmalloc; a steady-state step faults (almost) no page.
- ``system``: the C library's own behaviour (glibc's faults every step's activations back in, page by page).

Only glibc has these switches; elsewhere the setting in force is ``system``, and :func:`apply` says so."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import math
import platform

HEAPS = ("keep", "system")
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's malloc.h
_state = {"applied": "system"}


@functools.lru_cache(maxsize=1)
def _libc():
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        with contextlib.suppress(OSError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            return libc if hasattr(libc, "mallopt") else None
    return None


_DEFAULTS = {_M_MMAP_MAX: 65536, _M_TRIM_THRESHOLD: 128 * 1024}  # glibc's own values (malloc/malloc.c)


def apply(policy: str) -> str:
    """Put ``policy`` (one of :data:`HEAPS`) in force for this process; returns the setting now in force
    (``keep`` where the C library has no such switch is ``system``). ``system`` after ``keep`` sets glibc's
    default thresholds again (memory already kept stays in the process until freed)."""
    if policy not in HEAPS:
        raise ValueError(f"host heap {policy!r}; allowed: {', '.join(HEAPS)}")
    libc = _libc()
    if policy != _state["applied"] and libc is not None:
        values = {_M_MMAP_MAX: 0, _M_TRIM_THRESHOLD: -1} if policy == "keep" else _DEFAULTS
        if all(libc.mallopt(option, value) for option, value in values.items()):
            _state["applied"] = policy
    return _state["applied"]


@contextlib.contextmanager
def applied(policy: str):
    """``policy`` in force for the block, the setting before it restored after."""
    before = _state["applied"]
    apply(policy)
    try:
        yield
    finally:
        apply(before)


def effective(policy: str) -> str:
    """The setting ``policy`` gives on this machine: ``keep`` only where the C library can keep (glibc)."""
    return "keep" if policy == "keep" and _libc() is not None else "system"


def minor_faults() -> float:
    """This process's minor page faults so far (every thread); NaN where there is no ``resource`` (Windows)."""
    try:
        import resource
    except ImportError:
        return math.nan
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def in_force() -> str:
    """The setting in force in this process: ``keep`` or ``system``."""
    return _state["applied"]
