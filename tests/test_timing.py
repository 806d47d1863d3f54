import math
import statistics

import pytest
import torch

from cnnbench.measure import timing


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
    assert s["throughput_ci95_img_s"] == pytest.approx(
        12.706 * statistics.stdev(per_window) / math.sqrt(2), rel=1e-4
    )
    assert s["n_steps"] == 6 and s["repeats"] == 2
    assert s["noisy"] is False  # IQR 0.0025 / median 0.10


def test_noisy_flag_and_single_window_bootstrap():
    s = timing.summarize([0.1, 0.2, 0.1, 0.2], [0.6], [4], batch_size=8)
    assert s["noisy"] is True
    assert 0 < s["throughput_ci95_img_s"] < s["throughput_img_s"]
    with pytest.raises(ValueError):
        timing.summarize([], [], [], 8)


def test_a_device_with_events_times_each_step_by_its_events_on_the_measured_stream(fake_gpu):
    fake = FakeDevice([0.1, 0.2])
    fake_gpu.clock = lambda: fake.now + fake.queued  # an event completes after the work queued before it
    timer = timing.StepTimer(torch.device("cpu"), clock=fake.clock, sync=fake.sync)
    times, wall = timer.window(fake.step, 2)
    assert [e.stream for e in fake_gpu.events_recorded] == [fake_gpu.stream] * 3
    assert times == pytest.approx([0.1, 0.2]) and wall == pytest.approx(0.3)
    assert fake.log.count("sync") == 2 and timer.source == "cuda_events"


def test_mps_times_windows_only_even_where_torch_has_mps_events(monkeypatch):
    """MPS event times are host-clock readings taken in callbacks that can arrive out of order (sub-millisecond
    steps raise "End event ... was not recorded after start event"), and each record commits the command buffer,
    changing the work timed: on MPS the window is timed, synchronised at its edges, and no event is recorded."""
    fake = FakeDevice([0.1, 0.2, 0.3])
    fake.events = []
    monkeypatch.setattr(
        torch.mps, "Event", lambda enable_timing=False: pytest.fail("an MPS event was made"), raising=False
    )
    timer = timing.StepTimer(torch.device("mps"), clock=fake.clock, sync=fake.sync)
    times, wall = timer.window(fake.step, 3)
    assert fake.log.count("sync") == 2  # per-step synchronisation would remove the CPU/GPU overlap
    assert fake.events == [] and timer.source == "window_mean"
    assert times == pytest.approx([0.2, 0.2, 0.2]) and wall == pytest.approx(0.6)
    with pytest.raises(ValueError):
        timing.StepTimer(torch.device("mps"), use_events=True)


def test_mps_without_events_still_syncs_at_the_edges_only(monkeypatch):
    monkeypatch.delattr(torch.mps, "Event", raising=False)
    fake = FakeDevice([0.1, 0.3])
    timer = timing.StepTimer(torch.device("mps"), clock=fake.clock, sync=fake.sync)
    times, wall = timer.window(fake.step, 2)
    assert fake.log.count("sync") == 2 and wall == pytest.approx(0.4)
    assert times == pytest.approx([0.2, 0.2]) and timer.source == "window_mean"


def test_t_quantiles_past_the_table_are_not_the_normal_ones():
    # 1.96 beyond 30 degrees of freedom made intervals of 31-100 samples 1-3% too narrow (the step-phase check
    # stops on its interval around there). Published two-sided 95% quantiles:
    from cnnbench.measure.timing import t95

    for dof, t in ((30, 2.042), (31, 2.040), (40, 2.021), (60, 2.000), (120, 1.980), (1000, 1.962)):
        assert t95(dof) == pytest.approx(t, abs=1.5e-3)
    assert t95(10**9) == pytest.approx(1.960, abs=1e-3)


def test_ci95_half_width_is_the_student_t_interval_of_the_mean():
    from cnnbench.measure.timing import ci95_half_width

    assert ci95_half_width([10.0, 11.0, 12.0]) == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-4)
    assert ci95_half_width([5.0, 5.0]) == 0.0
    assert math.isnan(ci95_half_width([1.0])) and math.isnan(ci95_half_width([]))


# --- issue 41: a window lasts at least its target on every device (energy needs NVML's 1 s) ----------------------


@pytest.mark.parametrize("events", [False, True])
def test_a_window_shorter_than_its_floor_is_extended_until_it_lasts_it(fake_gpu, events):
    """The steps were planned at a slow warm-up's pace (4 steps for 1 s); the measured ones run 0.1 s each: the
    window goes on, synced, until it has lasted 1 s, and every step of it is timed."""
    fake = FakeDevice([0.1] * 40)
    fake_gpu.clock = lambda: fake.now + fake.queued
    timer = timing.StepTimer(torch.device("cpu"), clock=fake.clock, sync=fake.sync, use_events=events or None)
    times, wall = timer.window(fake.step, 4, min_s=1.0)
    assert wall >= 1.0 - 1e-9 and len(times) >= 10 and sum(times) == pytest.approx(wall)
    assert all(fake.log[i - 1] == "sync" for i, e in enumerate(fake.log) if e == "clock")


def test_a_host_timed_window_ends_at_the_first_step_past_its_floor():
    fake = FakeDevice([0.3] * 10)
    timer = timing.StepTimer(torch.device("cpu"), clock=fake.clock, sync=fake.sync, use_events=False)
    times, wall = timer.window(fake.step, 2, min_s=1.0)
    assert len(times) == 4 and wall == pytest.approx(1.2)


def test_importing_the_timer_does_not_import_scipy():
    """scipy.stats (1.5 s to import) came in with the exact t quantile at the top of timing, which every DDP rank and
    spawned worker imports; the quantile imports scipy.special on first use."""
    import subprocess
    import sys

    code = (
        "import sys, cnnbench.measure.timing as t; assert 'scipy' not in sys.modules; t.t95(3); print('ok')"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
