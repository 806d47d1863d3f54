"""Utilisation sampled in a background thread only while a measured window runs.

CPU: system-wide and this process's CPU % and resident memory (psutil). NVIDIA: GPU and memory-controller
utilisation, temperature, power, SM clock and throttle reasons (nvidia-ml-py). Seed 000 read 0-3% GPU
utilisation because it sampled outside the run; here sampling starts and stops with the window.
"""

from __future__ import annotations

import threading

import numpy as np
import psutil
import torch

_NVML_THROTTLE = {
    0x1: "gpu_idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal",
    0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks",
}


def _nvml_handle(device: torch.device):
    if device.type != "cuda":
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(device.index or torch.cuda.current_device())
    except Exception:
        return None


class Sampler:
    """``with Sampler(device) as s: ...`` then ``s.summary()``: mean and max of each sampled quantity."""

    def __init__(self, device: torch.device, interval_s: float = 0.1):
        self.device, self.interval_s = device, interval_s
        self.samples: dict[str, list[float]] = {}
        self.throttle: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc = psutil.Process()
        self._nvml = _nvml_handle(device)

    def _add(self, key: str, value: float) -> None:
        self.samples.setdefault(key, []).append(float(value))

    def sample(self) -> None:
        self._add("util_cpu", psutil.cpu_percent(interval=None))
        self._add("util_process_cpu", self._proc.cpu_percent(interval=None))
        self._add("rss_mb", self._proc.memory_info().rss / 2**20)
        if self.device.type == "mps":
            self._add("mps_mem_mb", torch.mps.current_allocated_memory() / 2**20)
        if self._nvml is not None:
            import pynvml

            try:
                util = pynvml.nvmlDeviceGetUtilizationRates(self._nvml)
                self._add("util_device", util.gpu)
                self._add("util_device_mem", util.memory)
                self._add("gpu_temp_c", pynvml.nvmlDeviceGetTemperature(self._nvml, pynvml.NVML_TEMPERATURE_GPU))
                self._add("gpu_power_w", pynvml.nvmlDeviceGetPowerUsage(self._nvml) / 1000)
                self._add("gpu_sm_clock_mhz", pynvml.nvmlDeviceGetClockInfo(self._nvml, pynvml.NVML_CLOCK_SM))
                reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(self._nvml)
                self.throttle |= {name for bit, name in _NVML_THROTTLE.items() if reasons & bit and bit != 0x1}
            except Exception:
                pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> Sampler:
        psutil.cpu_percent(interval=None)  # the first call only sets the reference point
        self._proc.cpu_percent(interval=None)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="cnnbench-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()  # at least one sample per window, however short

    def summary(self) -> dict[str, float | str]:
        out: dict[str, float | str] = {}
        for key, values in self.samples.items():
            arr = np.asarray(values)
            if key == "rss_mb":
                out["peak_rss_mb"] = float(arr.max())
                continue
            out[f"{key}_mean"] = float(arr.mean())
            out[f"{key}_max"] = float(arr.max())
        out.setdefault("util_device_mean", float("nan"))
        out["telemetry_samples"] = len(self.samples.get("util_cpu", []))
        out["gpu_throttle_reasons"] = ",".join(sorted(self.throttle))
        return out

