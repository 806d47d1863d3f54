"""CPU memory bandwidth measured as the Empirical Roofline Toolkit and likwid-bench measure it: one compiled call
(numba, ``parallel=True``) in which every thread loops many times over its own row of float64 arrays (``read``,
``triad``). ``working_set_bytes`` of a call is every thread's buffers together; ``bytes_per_call`` what the call
moves by :data:`CONVENTION` (x trials)."""

from __future__ import annotations

import math
import time

import numba
import numpy as np
from numba import prange

from cnnbench.devices.base import sweep_row

# float64 arrays per thread; a trial counts each once per element (read: 8 bytes read; triad: 2 reads + 1 write, the
# write-allocate read not counted), so the bytes a trial moves are the footprint
ARRAYS = {"read": 1, "triad": 3}
CONVENTION = {
    "read": "read: bytes read",
    "triad": "triad a = b + s*c: 2 reads + 1 write, write-allocate not counted",
}
_ALIGN = 4096 // 8  # row length rounded up to whole 4 KiB pages: no two threads share a cache line


@numba.njit(parallel=True, fastmath=True, cache=True)
def _read(a, n, trials):
    """Each thread sums the first ``n`` elements of its own row ``trials`` times; returns the per-row sums."""
    threads = a.shape[0]
    out = np.zeros(threads)
    for t in prange(threads):
        acc = 0.0
        row = a[t]
        for _ in range(trials):
            s = 0.0
            for i in range(n):
                s += row[i]
            acc += s
            # one store per trial: the next trial's sum depends on this one, never hoisted
            row[0] = acc * 1e-300
        out[t] = acc
    return out


@numba.njit(parallel=True, fastmath=True, cache=True)
def _triad(a, b, c, n, trials):
    """Each thread writes a = b + s * c over the first ``n`` elements of its own rows ``trials`` times."""
    threads = a.shape[0]
    for t in prange(threads):
        ra, rb, rc = a[t], b[t], c[t]
        for k in range(trials):
            s = 1.0 + k * 1e-12
            for i in range(n):
                ra[i] = rb[i] + s * rc[i]
    return a[0, 0]


def elements_per_thread(kernel: str, working_set_bytes: int, threads: int) -> int:
    """float64 elements in each thread's array so that all threads' arrays together fill ``working_set_bytes``."""
    return max(64, working_set_bytes // (8 * ARRAYS[kernel] * max(threads, 1)))


def bytes_per_trial(kernel: str, n: int, threads: int) -> int:
    """Bytes one trial moves over all threads, by the counting convention of :data:`ARRAYS`."""
    return 8 * ARRAYS[kernel] * n * threads


def buffers(kernel: str, n: int, threads: int) -> tuple[np.ndarray, ...]:
    """The kernel's arrays, ``threads`` rows each, C-contiguous (a row is a contiguous vector the compiler can
    vectorise) and padded to whole 4 KiB pages; a kernel uses the first ``n`` elements of each row."""
    padded = math.ceil(n / _ALIGN) * _ALIGN
    return tuple(np.full((threads, padded), 1.0 + i, dtype=np.float64) for i in range(ARRAYS[kernel]))


def call(kernel: str, arrays: tuple[np.ndarray, ...], n: int, trials: int):
    """One compiled call of ``kernel``: ``trials`` passes over the first ``n`` elements of each row of ``arrays``."""
    return _read(arrays[0], n, trials) if kernel == "read" else _triad(*arrays, n, trials)


def _timed(kernel: str, arrays: tuple[np.ndarray, ...], n: int, trials: int, clock) -> float:
    t0 = clock()
    call(kernel, arrays, n, trials)
    return clock() - t0


def calibrate(
    kernel: str, arrays: tuple[np.ndarray, ...], n: int, min_call_s: float, clock=time.perf_counter
) -> int:
    """Trials per call, doubled until a call lasts at least ``min_call_s`` *and* the last two doublings each took
    at least 1.6x longer: the traffic, not the fixed cost of a call (a parallel region waking its threads,
    milliseconds on a busy machine), then fills the call; two in a row, so one preempted call does not end it."""
    trials, before, grew = 1, _timed(kernel, arrays, n, 1, clock), 0
    while trials < 2**40:
        trials *= 2
        t = _timed(kernel, arrays, n, trials, clock)
        grew = grew + 1 if t >= 1.6 * before else 0
        if t >= min_call_s and grew >= 2:
            break
        before = t
    return trials


def run(
    kernel: str,
    working_set_bytes: int,
    threads: int,
    calls: int = 5,
    min_call_s: float = 0.01,
    clock=time.perf_counter,
) -> dict:
    """Best and median bandwidth of ``calls`` timed calls of ``kernel`` over ``working_set_bytes`` on ``threads``
    threads, each call with enough trials (:func:`calibrate`) to last ``min_call_s``."""
    numba.set_num_threads(threads)
    n = elements_per_thread(kernel, working_set_bytes, threads)
    arrays = buffers(kernel, n, threads)
    call(kernel, arrays, n, 1)  # compile (or load the cache) and first-touch the buffers from the threads
    trials = calibrate(kernel, arrays, n, min_call_s, clock)
    per_trial = bytes_per_trial(kernel, n, threads)
    rates = [per_trial * trials / _timed(kernel, arrays, n, trials, clock) for _ in range(calls)]
    extra = {"bytes_per_call": per_trial * trials, "trials": trials, "threads": threads}
    return sweep_row(rates, per_trial, kernel, calls, f"numba, {CONVENTION[kernel]}", **extra)


def sweep(sizes: list[int], threads: int, calls: int) -> list[dict]:
    """:func:`run` of the read and triad kernels over every working set in ``sizes``: one row each."""
    before = numba.get_num_threads()
    threads = max(1, min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        return [run(k, s, threads, calls) for s in sizes for k in ("read", "triad")]
    finally:
        numba.set_num_threads(before)
