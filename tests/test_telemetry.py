"""Telemetry time series and NVML handles, with fake NVML and fake CUDA device properties."""

import types

import pandas as pd
import pytest
import torch

from cnnbench import plots, results
from cnnbench.devices.cuda import nvml_handle
from cnnbench.measure import telemetry


class FakeNVML:
    """Two GPUs: NVML index 0 idle, NVML index 1 busy. Handles are the NVML indices."""

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM = 0, 1
    BUS = {"00000000:3B:00.0": 0, "00000000:AF:00.0": 1}
    UUID = {"GPU-aaaa": 0, "GPU-bbbb": 1}

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return self.BUS[bus]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return self.UUID[uuid]

    def nvmlDeviceGetIndex(self, handle):
        return handle

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=90 * h, memory=40 * h)

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=(1 + 1000 * h) * 2**20)

    def nvmlDeviceGetTemperature(self, h, _):
        return 30 + 40 * h

    def nvmlDeviceGetPowerUsage(self, h):
        return (50 + 250 * h) * 1000

    def nvmlDeviceGetClockInfo(self, h, _):
        return 200 + 1600 * h

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 0x1 if h == 0 else 0x4


def props(bus=None):
    p = types.SimpleNamespace(name="Fake GPU")
    if bus is not None:
        p.pci_domain_id, p.pci_bus_id, p.pci_device_id = 0, bus, 0
    return p


@pytest.mark.parametrize("visible, expected", [("1", 1), ("GPU-bbbb", 1), ("", 0)])
def test_nvml_handle_follows_cuda_visible_devices(monkeypatch, visible, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props())
    assert nvml_handle(torch.device("cuda:0"), FakeNVML()) == expected


def test_nvml_handle_prefers_the_pci_bus_id(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # CUDA's fastest-first order may differ from NVML's
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props(bus=0xAF if i == 0 else 0x3B))
    assert nvml_handle(torch.device("cuda:0"), FakeNVML()) == 1
    assert nvml_handle(torch.device("cuda:1"), FakeNVML()) == 0


def test_every_gpu_is_sampled_and_the_row_describes_the_measured_one(fake_gpu):
    fake_gpu.nvml, fake_gpu.nvml_index = FakeNVML, 1
    with telemetry.Sampler(torch.device("cpu"), 0.01) as s:
        pass
    df = pd.DataFrame(s.series())
    gpu = df[df.metric == "util_device_pct"]
    assert set(gpu.device_index) == {0, 1}  # the idle GPU shows, as idle
    assert set(gpu[gpu.device_index == 0].value) == {0.0}
    assert {
        "gpu_power_w",
        "gpu_temp_c",
        "gpu_sm_clock_mhz",
        "gpu_mem_used_mib",
        "gpu_throttle_reasons",
        "util_device_mem_pct",
        "util_cpu_core_pct",
        "rss_mib",
    } <= set(df.metric)
    summary = s.summary()
    assert summary["util_device_mean_pct"] == 90 and summary["util_device_max_pct"] == 90
    assert summary["gpu_power_w_mean"] == 300 and summary["gpu_temp_c_max"] == 70
    assert summary["gpu_sm_clock_mhz_mean"] == 1800 and summary["util_device_mem_mean_pct"] == 40
    assert summary["gpu_throttle_reasons"] == "sw_power_cap"
    assert summary["util_cpu_mean_pct"] >= 0 and summary["peak_rss_mib"] > 0


def test_series_use_the_sampler_clock_and_plot_one_panel_per_metric(tmp_path):
    ticks = iter(range(100))
    with telemetry.Sampler(torch.device("cpu"), 10.0, clock=lambda: float(next(ticks))) as s:
        pass
    rows = s.series()
    assert rows and all(set(r) == {"t_s", "metric", "value", "device_index"} for r in rows)
    assert all(r["t_s"] >= 0 for r in rows)
    df = pd.DataFrame([{**r, "model": "m", "phase": "train", "source": "scenario_a"} for r in rows])
    df.to_csv(tmp_path / "telemetry.csv", index=False)
    back = results.read(tmp_path, "telemetry")
    fig = plots.telemetry_timeline(back, tmp_path / "t.png")
    assert len(fig.axes) == back.metric.nunique() and (tmp_path / "t.png").is_file()
    assert results.read(tmp_path / "absent", "telemetry").empty


def test_a_child_that_ends_between_samples_keeps_its_cpu_time():
    """Issue 20: transfer_telemetry.png read 0% for the process and 100% for other processes at the end of every
    fine-tuning configuration: its DataLoader workers ended, and their CPU seconds left the process tree's sum."""
    import types

    import torch

    from cnnbench.measure import telemetry

    clock = iter([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    s = telemetry.Sampler(torch.device("cpu"), 1.0, clock=lambda: next(clock))
    t = types.SimpleNamespace
    child = t(cpu_times=lambda: t(user=1.5, system=0.5))
    states = iter(
        [
            (t(user=1.0, system=0.0, children_user=0.0, children_system=0.0), [child]),  # worker alive
            (t(user=1.2, system=0.0, children_user=2.6, children_system=0.0), []),
        ]
    )  # worker reaped
    s._proc = t(cpu_times=None, children=None)

    def step():
        times, kids = next(states)
        s._proc.cpu_times, s._proc.children = (lambda: times), (lambda recursive: kids)

    step()
    s._process_cpu_pct()
    step()
    assert s._process_cpu_pct() == pytest.approx(100.0 * (3.8 - 3.0) / 1.0)  # 0.8 s of CPU in 1 s, never 0


class InstantPowerNVML(FakeNVML):
    """A driver with NVML_FI_DEV_POWER_INSTANT (milliwatts in uiVal, per-field return code 0)."""

    NVML_FI_DEV_POWER_INSTANT, NVML_SUCCESS = 186, 0

    def nvmlDeviceGetFieldValues(self, h, ids):
        assert ids == [self.NVML_FI_DEV_POWER_INSTANT]
        value = types.SimpleNamespace(uiVal=(40 + 280 * h) * 1000)
        return [types.SimpleNamespace(fieldId=ids[0], nvmlReturn=0, value=value)]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 0x1 if h == 0 else 0x10 | 0x4


class UnsupportedFieldNVML(InstantPowerNVML):
    def nvmlDeviceGetFieldValues(self, h, ids):
        return [types.SimpleNamespace(fieldId=ids[0], nvmlReturn=3, value=types.SimpleNamespace(uiVal=0))]


@pytest.mark.parametrize(
    "nvml, watts, source",
    [
        (InstantPowerNVML, 320, "nvml_instant"),  # the instantaneous field, where the driver has it
        (
            UnsupportedFieldNVML,
            300,
            "nvml_power_usage_1s_avg",
        ),  # per-field NOT_SUPPORTED: the averaged reading
        (FakeNVML, 300, "nvml_power_usage_1s_avg"),  # a pynvml without nvmlDeviceGetFieldValues
    ],
)
def test_gpu_power_is_the_instant_field_where_the_driver_has_it_and_the_row_says_which(
    fake_gpu, nvml, watts, source
):
    fake_gpu.nvml, fake_gpu.nvml_index = nvml, 1
    with telemetry.Sampler(torch.device("cpu"), 0.01) as s:
        pass
    summary = s.summary()
    assert summary["gpu_power_w_mean"] == watts and summary["gpu_power_source"] == source


def test_sync_boost_is_a_decoded_throttle_reason(fake_gpu):
    fake_gpu.nvml, fake_gpu.nvml_index = InstantPowerNVML, 1
    with telemetry.Sampler(torch.device("cpu"), 0.01) as s:
        pass
    assert s.summary()["gpu_throttle_reasons"] == "sw_power_cap,sync_boost"


# --- issue 30: a stopped window, an empty reading and a concurrent run are seen by the verdict -------------------


def test_an_empty_reading_is_not_measured_never_zero():
    """Issue 30: eval windows shorter than the telemetry period read nothing, and the verdict said 'steal 0.0%,
    other processes 0%'."""
    state, note = telemetry.judge({"cpu_steal_mean_pct": 0.5, "util_other_cpu_mean_pct": float("nan")})
    assert state == "quiet" and "other processes not measured" in note and "0%" not in note.split("steal")[1]
    assert telemetry.judge({})[0] == "unknown"


def test_a_window_stopped_inside_is_flagged_and_the_machine_called_busy():
    """Issue 30: a process stopped (SIGSTOP) for 60 s inside a measured window kept its 92 s window in the rate and
    the verdict named nothing. Here a real SIGSTOP of this process for 1.5 s inside a window of 10 steps."""
    import os
    import signal
    import subprocess
    import time

    from cnnbench.measure import timing

    def busy(seconds=0.03):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def step(state={"n": 0}):  # noqa: B006 - a counter across calls
        state["n"] += 1
        if state["n"] == 13:  # in the second window
            subprocess.Popen(["sh", "-c", f"sleep 1.5; kill -CONT {os.getpid()}"])
            os.kill(os.getpid(), signal.SIGSTOP)
        busy()

    timer = timing.StepTimer(torch.device("cpu"))
    times, walls = [], []
    for _ in range(3):
        t, wall = timer.window(step, 10)
        times += t
        walls.append(wall)
    row = timing.summarize(times, walls, [10, 10, 10], 8)
    assert row["stalled_windows"] == 1 and walls[1] > 1.5, walls
    state, note = telemetry.judge({**row, "cpu_steal_mean_pct": 0.0, "util_other_cpu_mean_pct": 1.0})
    assert state == "busy" and "stopped or starved" in note, note


def test_the_verdict_sees_another_run_of_this_workbook_measuring_at_the_same_time(tmp_path, monkeypatch):
    """Issue 30: two pipelines started together judged each other's rows 'quiet'."""
    import subprocess
    import sys

    from cnnbench import paths

    monkeypatch.setenv(paths.LOCK_ENV, str(tmp_path / "mine"))
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**__import__("os").environ, paths.LOCK_ENV: str(tmp_path / "other")},
    )
    try:
        with telemetry.Sampler(torch.device("cpu"), 0.05) as s:
            __import__("time").sleep(0.2)
        row = s.summary()
    finally:
        other.kill()
    assert row["other_runs_max"] >= 1  # ours; another test of the suite may be running a pipeline beside it
    state, note = telemetry.judge({**row, "cpu_steal_mean_pct": 0.0, "util_other_cpu_mean_pct": 0.0})
    assert state == "busy" and "another run of this workbook" in note, note


def test_the_sampler_threads_first_host_reading_is_not_psutils_meaningless_zero():
    """psutil (since 5.9.6) keeps cpu_percent's reference point per thread: primed only on the caller's thread, the
    sampler thread's first reading was a 0.0 in every process, so the example's host CPU read 56-72% mean while
    one core was busy throughout (its telemetry: 98-100% without the first sample)."""
    import time

    with telemetry.Sampler(torch.device("cpu"), 0.05) as s:
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:  # one core busy for the whole window
            pass
    first = min(t for t, m, _, _ in s.samples if m == "util_cpu_core_pct")
    cores = [v for t, m, v, _ in s.samples if m == "util_cpu_core_pct" and t == first]
    assert max(cores) > 0, f"the first sample read every core idle: {cores}"
