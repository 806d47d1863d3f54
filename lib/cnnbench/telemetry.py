"""Telemetry sampled in a background thread only while a measured window runs, kept as time series.

Host: CPU % per core and over all cores, this process's CPU % (100 = one core) and resident memory (psutil).
NVIDIA, for EVERY GPU of the machine (an idle second GPU shows as idle): utilisation, memory-controller
utilisation, memory used, power, temperature, SM clock and throttle reasons (nvidia-ml-py). MPS: allocated
memory. Seed 000 read 0-3% GPU utilisation because it sampled outside the run; here sampling starts and stops
with the window.

    with telemetry.Sampler(device, 0.1) as s:
        ...                                   # the work
    s.series()    # [{"t_s", "metric", "value", "device_index"}, ...]: one dict per sample and quantity
    s.summary()   # mean/max per quantity of the measured device: util_cpu_mean_pct, gpu_power_w_mean, ...

``device_index`` is the CPU core for ``util_cpu_core_pct``, the NVML index of the GPU for GPU metrics, and
empty (None) for host-wide ones. The engine writes the series of every configuration to ``telemetry.csv``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import torch

from cnnbench import devices

_NVML_THROTTLE = {
    0x1: "gpu_idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal",
    0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks",
}
# metric of the series -> (summary name, statistics kept in the row); util_* summaries end in _pct
_SUMMARY = {
    "util_cpu_pct": ("util_cpu", ("mean", "max")),
    "util_process_cpu_pct": ("util_process_cpu", ("mean", "max")),
    "util_device_pct": ("util_device", ("mean", "max")),
    "util_device_mem_pct": ("util_device_mem", ("mean", "max")),
    "gpu_temp_c": ("gpu_temp_c", ("mean", "max")),
    "gpu_power_w": ("gpu_power_w", ("mean", "max")),
    "gpu_sm_clock_mhz": ("gpu_sm_clock_mhz", ("mean", "max")),
    "gpu_mem_used_mib": ("gpu_mem_used", ("max",)),
    "mps_mem_mib": ("mps_mem", ("max",)),
}


def _load_nvml():
    """pynvml, initialised, or None when there is no NVIDIA driver (tests replace this function)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no NVML: no GPU telemetry
        return None


def _gpus(device: torch.device) -> tuple[object, list[tuple[int, object]], int | None]:
    """(nvml, [(nvml index, handle) of every GPU], nvml index of the measured GPU) for a CUDA device."""
    if device.type != "cuda":
        return None, [], None
    nvml = _load_nvml()
    if nvml is None:
        return None, [], None
    try:
        handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]
        measured = nvml.nvmlDeviceGetIndex(devices.nvml_handle(device, nvml))
    except Exception:  # noqa: BLE001
        return None, [], None
    return nvml, handles, measured


class Sampler:
    """``with Sampler(device) as s: ...`` then ``s.series()`` (every sample) and ``s.summary()`` (per row)."""

    def __init__(self, device: torch.device, interval_s: float = 0.1,
                 clock: Callable[[], float] = time.perf_counter):
        self.device, self.interval_s, self.clock = device, interval_s, clock
        self.samples: list[tuple[float, str, float, int | None]] = []
        self.throttle: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc = psutil.Process()
        self._t0 = clock()
        self._nvml, self._handles, self.measured_index = _gpus(device)

    def _add(self, t: float, metric: str, value: float, index: int | None = None) -> None:
        self.samples.append((t, metric, float(value), index))

    def sample(self) -> None:
        t = self.clock() - self._t0
        cores = psutil.cpu_percent(interval=None, percpu=True)
        for i, pct in enumerate(cores):
            self._add(t, "util_cpu_core_pct", pct, i)
        self._add(t, "util_cpu_pct", sum(cores) / max(len(cores), 1))
        self._add(t, "util_process_cpu_pct", self._proc.cpu_percent(interval=None))
        self._add(t, "rss_mib", self._proc.memory_info().rss / 2**20)
        if self.device.type == "mps":
            self._add(t, "mps_mem_mib", torch.mps.current_allocated_memory() / 2**20)
        for index, handle in self._handles:
            self._sample_gpu(t, index, handle)

    def _sample_gpu(self, t: float, index: int, handle) -> None:
        nvml = self._nvml
        try:
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            self._add(t, "util_device_pct", util.gpu, index)
            self._add(t, "util_device_mem_pct", util.memory, index)
            self._add(t, "gpu_mem_used_mib", nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20, index)
            self._add(t, "gpu_temp_c", nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU), index)
            self._add(t, "gpu_power_w", nvml.nvmlDeviceGetPowerUsage(handle) / 1000, index)
            self._add(t, "gpu_sm_clock_mhz", nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM), index)
            reasons = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
            self._add(t, "gpu_throttle_reasons", reasons, index)
            if index == self.measured_index:
                self.throttle |= {name for bit, name in _NVML_THROTTLE.items() if reasons & bit and bit != 0x1}
        except Exception:  # noqa: BLE001 - a GPU that does not answer one query is skipped, not fatal
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> Sampler:
        psutil.cpu_percent(interval=None, percpu=True)  # the first call only sets the reference point
        self._proc.cpu_percent(interval=None)
        self._t0 = self.clock()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="cnnbench-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()  # at least one sample per window, however short

    def series(self) -> list[dict]:
        """Every sample: ``{"t_s", "metric", "value", "device_index"}`` (t_s from entering the sampler)."""
        return [{"t_s": t, "metric": m, "value": v, "device_index": i} for t, m, v, i in self.samples]

    def values(self, metric: str, index: int | None = None) -> list[float]:
        return [v for _, m, v, i in self.samples if m == metric and i == index]

    def summary(self) -> dict[str, float | str]:
        """Mean and max per quantity (GPU ones of the measured GPU), ``peak_rss_mib`` sampled, sample count."""
        out: dict[str, float | str] = {}
        for metric, (name, stats) in _SUMMARY.items():
            index = self.measured_index if metric.startswith(("util_device", "gpu_")) else None
            arr = np.asarray(self.values(metric, index))
            if arr.size == 0:
                continue
            unit = "_pct" if name.startswith("util_") else "_mib" if metric.endswith("_mib") else ""
            for stat in stats:
                out[f"{name}_{stat}{unit}"] = float(getattr(arr, stat)())
        rss = self.values("rss_mib")
        if rss:
            out["peak_rss_mib"] = max(rss)
        out.setdefault("util_device_mean_pct", float("nan"))
        out["telemetry_samples"] = len(self.values("util_cpu_pct"))
        out["gpu_throttle_reasons"] = ",".join(sorted(self.throttle))
        return out


def read(path: str | Path, source: str | None = None) -> pd.DataFrame:
    """A ``telemetry.csv`` as a frame (t_s, metric, value, device_index + context), only the rows of ``source``
    (e.g. "scenario_a") when given; empty if absent."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=["source", "t_s", "metric", "value", "device_index"])
    df = pd.read_csv(path)
    df["device_index"] = df["device_index"].astype("Int64")
    return df if source is None else df[df.source == source].reset_index(drop=True)
