"""Energy readers with fake counters: fake sysfs trees for RAPL (wrap-around included), a fake NVML module."""

import math
import time

import pytest
import torch

from cnnbench import devices
from cnnbench.devices import energy


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def rapl_tree(root, zones):
    """zones: name -> (energy_uj, max_energy_range_uj); also a sub-zone and a psys zone, both to be ignored."""
    for i, (name, (uj, max_uj)) in enumerate(zones.items()):
        z = root / f"intel-rapl:{i}"
        z.mkdir(parents=True)
        (z / "name").write_text(name + "\n")
        (z / "energy_uj").write_text(f"{uj}\n")
        (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
        sub = root / f"intel-rapl:{i}:0"
        sub.mkdir()
        (sub / "name").write_text("core\n")
        (sub / "energy_uj").write_text("999999\n")
        (sub / "max_energy_range_uj").write_text("1000000\n")
    psys = root / f"intel-rapl:{len(zones)}"
    psys.mkdir()
    (psys / "name").write_text("psys\n")
    (psys / "energy_uj").write_text("5\n")
    (psys / "max_energy_range_uj").write_text("1000000\n")
    return root


def set_uj(root, i, value):
    (root / f"intel-rapl:{i}" / "energy_uj").write_text(f"{value}\n")


def test_wrap_delta():
    assert energy.wrap_delta(100, 250, 1000) == 150
    assert energy.wrap_delta(900, 100, 1000) == 200  # wrapped once: 900 -> 1000 = 0 -> 100


def test_rapl_sums_package_zones_and_ignores_subzones_and_psys(tmp_path):
    root = rapl_tree(
        tmp_path / "powercap", {"package-0": (1_000_000, 2**32), "package-1": (5_000_000, 2**32)}
    )
    counter = energy.rapl_counter(root)
    assert isinstance(counter, energy.RaplCounter) and len(counter.zones) == 2
    clock = FakeClock()
    with energy.Meter(counter=counter, poll_s=3600, clock=clock) as meter:
        set_uj(root, 0, 3_000_000)  # +2 J
        set_uj(root, 1, 8_000_000)  # +3 J
        clock.t = 2.0
    out = meter.summary(images=10)
    assert out["energy_j"] == pytest.approx(5.0)
    assert out["energy_j_per_image"] == pytest.approx(0.5)
    assert out["avg_power_w"] == pytest.approx(2.5)
    assert out["energy_source"] == "rapl" and "package-0" in out["energy_note"]


def test_rapl_wrap_around_between_polls(tmp_path):
    """The counter wraps twice within the window; polling in between catches both wraps."""
    max_uj = 10_000_000
    root = rapl_tree(tmp_path / "powercap", {"package-0": (8_000_000, max_uj)})
    meter = energy.Meter(counter=energy.rapl_counter(root), poll_s=3600, clock=FakeClock())
    with meter:
        set_uj(root, 0, 2_000_000)  # wrapped: +4 J
        meter.poll()
        set_uj(root, 0, 9_000_000)  # +7 J
        meter.poll()
        set_uj(root, 0, 1_000_000)  # wrapped again: +2 J
    assert meter.summary(1)["energy_j"] == pytest.approx(13.0)


def test_rapl_background_thread_polls(tmp_path):
    root = rapl_tree(tmp_path / "powercap", {"package-0": (0, 2**32)})
    meter = energy.Meter(counter=energy.rapl_counter(root), poll_s=0.01)
    polls = []
    real = meter.poll
    meter.poll = lambda: (polls.append(1), real())
    with meter:
        import time

        time.sleep(0.1)
    assert len(polls) >= 3


def test_rapl_root_only_is_empty_with_the_reason(tmp_path, monkeypatch):
    root = rapl_tree(tmp_path / "powercap", {"package-0": (1, 2**32)})
    monkeypatch.setattr(energy.os, "access", lambda path, mode: False)
    counter = energy.rapl_counter(root)
    assert isinstance(counter, energy.Unavailable) and "root only" in counter.note
    with energy.Meter(counter=counter) as meter:
        pass
    out = meter.summary(images=5)
    assert (
        math.isnan(out["energy_j"])
        and math.isnan(out["energy_j_per_image"])
        and math.isnan(out["avg_power_w"])
    )
    assert out["energy_source"] == "" and "root only" in out["energy_note"]


def test_no_powercap_or_no_package_zone(tmp_path):
    assert "no " in energy.rapl_counter(tmp_path / "absent").note
    (tmp_path / "empty").mkdir()
    assert "no RAPL package zone" in energy.rapl_counter(tmp_path / "empty").note


class FakeNvml:
    def __init__(self, mj=1_000_000, fail=None):
        self.mj, self.fail = mj, fail

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if self.fail:
            raise self.fail
        return self.mj


def test_nvml_counter_difference_in_joules():
    nvml = FakeNvml()
    clock = FakeClock()
    with energy.Meter(counter=devices.backend("cuda:0").energy_counter(nvml), clock=clock) as meter:
        nvml.mj += 700_000  # 700 J over 2 s
        clock.t = 2.0
    out = meter.summary(images=1400)
    assert out["energy_j"] == pytest.approx(700.0)
    assert out["energy_j_per_image"] == pytest.approx(0.5)
    assert out["avg_power_w"] == pytest.approx(350.0)
    assert out["energy_source"] == "nvml" and out["energy_note"] == ""


@pytest.mark.parametrize("joules", [0, 30])
def test_a_window_shorter_than_nvmls_updates_has_no_energy_but_the_reason(joules):
    """On an H100, 9 of 20 configurations with windows of 1.2 to 30 ms read 0 J (the GPU drew 131-247 W) and the
    others 48 to 640 W: a counter that updates every 20-100 ms cannot time such a window, so it gives no number."""
    nvml = FakeNvml()
    clock = FakeClock()
    with energy.Meter(counter=devices.backend("cuda:0").energy_counter(nvml), clock=clock) as meter:
        nvml.mj += joules * 1000
        clock.t = 0.1
    out = meter.summary(images=10)
    assert all(math.isnan(out[k]) for k in ("energy_j", "energy_j_per_image", "avg_power_w"))
    assert out["energy_source"] == "nvml" and "shorter than" in out["energy_note"]


def test_nvml_not_supported_is_empty_with_the_reason():
    class NVMLError_NotSupported(Exception):
        pass

    counter = devices.backend("cuda:0").energy_counter(FakeNvml(fail=NVMLError_NotSupported("Not Supported")))
    assert isinstance(counter, energy.Unavailable) and "Volta" in counter.note
    assert "NotSupported" in counter.note


def test_apple_and_cpu_device_paths(monkeypatch):
    import platform

    assert "powermetrics" in devices.backend(torch.device("mps")).energy_counter().note
    monkeypatch.setattr(energy, "rapl_counter", lambda root=energy.POWERCAP: energy.Unavailable("fake"))
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    assert devices.backend(torch.device("cpu")).energy_counter().note == "fake"
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    assert "powermetrics" in devices.backend(torch.device("cpu")).energy_counter().note


def test_every_engine_window_carries_energy(monkeypatch):
    from cnnbench.measure import engine

    class Ticking:
        """A fake counter that gains 1 J per read."""

        source, note, needs_polling = "rapl", "fake package", False

        def __init__(self):
            self.uj = 0

        def read(self):
            self.uj += 1_000_000
            return (self.uj,)

        def delta_j(self, before, after):
            return (after[0] - before[0]) / 1e6

    monkeypatch.setattr(devices.backend_class("cpu"), "energy_counter", lambda self: Ticking())
    from cnnbench.params import Params

    cfg = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=8)
    row = engine.measure(cfg, torch.device("cpu"), Params(warmup_steps=1, measured_steps=2, repeats=2))
    assert row["status"] == "ok" and row["energy_source"] == "rapl"
    assert row["energy_j"] == pytest.approx(1.0)  # two reads, one apart
    assert row["energy_j_per_image"] == pytest.approx(1.0 / 32)
    assert row["avg_power_w"] > 0


def test_nvml_counter_reads_the_gpu_cuda_means_under_cuda_visible_devices(monkeypatch):
    class Recording(FakeNvml):
        def nvmlDeviceGetHandleByIndex(self, index):
            self.asked = index
            return f"gpu{index}"

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    nvml = Recording()
    devices.backend("cuda:0").energy_counter(nvml)
    assert nvml.asked == 3  # CUDA device 0 is the machine's GPU 3, as telemetry and envinfo read it


def test_the_gpu_protocols_windows_reach_nvmls_resolution_so_every_row_has_energy(monkeypatch):
    """Issue 41: with min_window_s 0.25 every H100 row of 02 got no energy (NVML needs 1 s). The accelerator
    protocol's min_window_s (1 s) is a floor the window reaches, so a fast step's row carries NVML energy."""
    from cnnbench.devices.base import ACCELERATOR_PROTOCOL
    from cnnbench.measure import engine
    from cnnbench.params import Params

    class Nvml:
        """NVML's counter on a GPU drawing 300 W: mJ by the host clock."""

        source, note, needs_polling = "nvml", "", False

        def read(self):
            return int(300_000 * time.perf_counter())

        def delta_j(self, before, after):
            return (after - before) / 1e3

    monkeypatch.setattr(devices.backend_class("cpu"), "energy_counter", lambda self: Nvml())
    floor = ACCELERATOR_PROTOCOL["min_window_s"]
    cfg = engine.Config.of("mnist_cnn", "eval", 28, 10, 1, batch_size=8)  # milliseconds a step
    row = engine.measure(
        cfg, torch.device("cpu"), Params(warmup_steps=2, measured_steps=3, min_window_s=floor, repeats=1)
    )
    assert row["status"] == "ok" and row["window_time_s"] >= energy.NVML_MIN_WINDOW_S == floor
    assert row["energy_source"] == "nvml" and row["avg_power_w"] == pytest.approx(300, rel=0.05)
