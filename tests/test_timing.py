import math
import statistics

import pytest
import torch

from cnnbench import timing


class FakeDevice:
    """A clock and a device queue: each step queues work; time passes only when the host waits on it."""

    def __init__(self, step_costs):
        self.now, self.queued, self.log = 0.0, 0.0, []
        self.costs = iter(step_costs)

    def clock(self):
        self.log.append("clock")
        return self.now

    def sync(self, _device):
        self.log.append("sync")
        self.now += self.queued
        self.queued = 0.0

    def step(self):
        self.queued += next(self.costs)  # asynchronous: nothing waits until sync


def test_timer_syncs_before_every_clock_read_and_times_each_step():
    fake = FakeDevice([0.1, 0.2, 0.3])
    timer = timing.StepTimer(torch.device("cpu"), clock=fake.clock, sync=fake.sync, use_events=False)
    times, wall = timer.window(fake.step, 3)
    assert times == pytest.approx([0.1, 0.2, 0.3])
    assert wall == pytest.approx(0.6)
    assert all(fake.log[i - 1] == "sync" for i, e in enumerate(fake.log) if e == "clock")


def test_without_sync_an_async_device_would_look_free():
    fake = FakeDevice([0.5, 0.5])
    timer = timing.StepTimer(torch.device("cpu"), clock=fake.clock, sync=lambda d: None, use_events=False)
    times, wall = timer.window(fake.step, 2)
    assert wall == 0.0  # what the seeds risked: the clock read before the queued work ran


def test_summary_statistics():
    steps = [0.10, 0.11, 0.09, 0.10, 0.30, 0.10]
    s = timing.summarize(steps, window_times=[0.30, 0.50], window_steps=[3, 3], batch_size=32)
    assert s["throughput_img_s"] == pytest.approx(32 * 6 / 0.8)  # images / synced time, not a mean of rates
    assert s["step_time_median_s"] == pytest.approx(0.10)
    assert s["step_time_mean_s"] == pytest.approx(sum(steps) / 6)
    assert s["step_time_std_s"] == pytest.approx(statistics.stdev(steps))
    assert (s["step_time_min_s"], s["step_time_max_s"]) == (0.09, 0.30)
    per_window = [96 / 0.3, 96 / 0.5]
    assert s["throughput_ci95_img_s"] == pytest.approx(12.706 * statistics.stdev(per_window) / math.sqrt(2))
    assert s["n_steps"] == 6 and s["repeats"] == 2
    assert s["noisy"] is False  # IQR 0.0025 / median 0.10


def test_noisy_flag_and_single_window_bootstrap():
    s = timing.summarize([0.1, 0.2, 0.1, 0.2], [0.6], [4], batch_size=8)
    assert s["noisy"] is True
    assert 0 < s["throughput_ci95_img_s"] < s["throughput_img_s"]
    with pytest.raises(ValueError):
        timing.summarize([], [], [], 8)
