"""The numba bandwidth kernels: what they compute, the bytes they count, and the calibration of their trials
(driven by a fake clock: nothing here depends on how fast this machine is)."""

import numpy as np
import pytest

from cnnbench.devices import membench


def test_kernels_compute_what_they_count_on_a_tiny_buffer():
    n, threads = 100, 2
    (a,) = membench.buffers("read", n, threads)
    a[:, :n] = np.arange(n)
    sums = membench.call("read", (a,), n, 1)
    assert sums.tolist() == [n * (n - 1) / 2] * threads  # one pass per thread over its own row
    assert a.shape[1] % 512 == 0 and a.flags.c_contiguous  # rows padded to 4 KiB, contiguous
    a2, b, c = membench.buffers("triad", n, threads)
    b[:], c[:] = 2.0, 3.0
    membench.call("triad", (a2, b, c), n, 3)
    assert a2[:, :n] == pytest.approx(2.0 + (1.0 + 2e-12) * 3.0)  # the last trial's s
    assert (a2[:, n:] == 1.0).all()  # the padding is never touched
    assert membench.bytes_per_trial("read", n, threads) == 8 * n * threads  # bytes read
    assert (
        membench.bytes_per_trial("triad", n, threads) == 24 * n * threads
    )  # 2 reads + 1 write, no write-allocate
    assert "write-allocate not counted" in membench.CONVENTION["triad"]


def test_elements_per_thread_split_the_working_set_over_threads_and_arrays():
    assert membench.elements_per_thread("read", 64 * 2**10, 2) == 4096  # 32 KiB per thread, one array
    assert membench.elements_per_thread("triad", 96 * 2**10, 2) == 2048  # three arrays of 16 KiB per thread


class FakeKernel:
    """A call costs ``overhead`` seconds plus ``per_trial`` per trial on a fake clock."""

    def __init__(self, overhead, per_trial):
        self.t, self.overhead, self.per_trial, self.trials = 0.0, overhead, per_trial, []

    def clock(self):
        return self.t

    def call(self, kernel, arrays, n, trials):
        self.trials.append(trials)
        self.t += self.overhead + trials * self.per_trial


def test_calls_last_long_enough_that_the_traffic_not_the_call_overhead_is_timed(monkeypatch):
    """A call whose fixed cost (5 ms: a parallel region waking a descheduled thread) already exceeds min_call_s
    must not stop the calibration at one trial."""
    fake = FakeKernel(overhead=0.005, per_trial=1e-6)
    monkeypatch.setattr(membench, "call", fake.call)
    monkeypatch.setattr(membench.numba, "set_num_threads", lambda t: None)
    row = membench.run("triad", 3 * 8 * 1000 * 2, threads=2, calls=3, min_call_s=0.002, clock=fake.clock)
    assert row["trials"] >= 8192  # the traffic (>= 8 ms) outweighs the 5 ms overhead
    assert row["bytes_per_call"] == 24 * 1000 * 2 * row["trials"]
    assert row["bandwidth_gbs"] == pytest.approx(row["bytes_per_call"] / (0.005 + row["trials"] * 1e-6) / 1e9)
    assert row["working_set_bytes"] == 3 * 8 * 1000 * 2 and row["calls"] == 3 and row["threads"] == 2
    quick = FakeKernel(overhead=0.0, per_trial=1e-6)
    monkeypatch.setattr(membench, "call", quick.call)
    assert membench.calibrate("read", (), 1000, 0.01, quick.clock) == 16384  # the first power of 2 past 10 ms
