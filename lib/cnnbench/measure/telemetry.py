"""Telemetry sampled in a thread while a window runs (psutil, NVML, the MPS allocator), kept as series and
summarised per row; :func:`judge` turns a row's figures into quiet | busy."""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Callable

import numpy as np
import psutil
import torch

from cnnbench import paths, results
from cnnbench.measure.reproducibility import number
from cnnbench.measure.timing import STALL_FACTOR, backend_of

# NVML's clock throttle reasons, bit 0x1 upwards
_THROTTLES = "gpu_idle app_clocks sw_power_cap hw_slowdown sync_boost sw_thermal hw_thermal hw_power_brake"
_NVML_THROTTLE = {1 << i: name for i, name in enumerate([*_THROTTLES.split(), "display_clocks"])}
# Which reading gpu_power_w holds (the row's ``gpu_power_source``): NVML_FI_DEV_POWER_INSTANT where the driver
# has it, else nvmlDeviceGetPowerUsage, a one-second average on Ampere/Hopper (except A100) that lags 0.1 s samples.
POWER_INSTANT, POWER_AVERAGE = "nvml_instant", "nvml_power_usage_1s_avg"


def gpu_power_w(nvml, handle) -> tuple[float, str]:
    """(watts, source) of one GPU: the instantaneous field where the driver has it, else the average."""
    try:
        (value,) = nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_POWER_INSTANT])
        if value.nvmlReturn == nvml.NVML_SUCCESS and value.value.uiVal > 0:
            return value.value.uiVal / 1000, POWER_INSTANT
    except Exception:  # noqa: BLE001 - an old driver or pynvml (no such field or call): the averaged reading
        pass
    return nvml.nvmlDeviceGetPowerUsage(handle) / 1000, POWER_AVERAGE


# the series' metrics summarised in the row (named less _pct/_mib, then _<stat>, then the unit): those in MiB
# by their max, the CPU clock by mean, min and max, the rest by mean and max
_SUMMARY = {
    m: ("max",) if m.endswith("_mib") else ("mean", "min", "max") if m == "cpu_freq_mhz" else ("mean", "max")
    for m in (
        "util_cpu_pct util_process_cpu_pct util_device_pct util_device_mem_pct gpu_temp_c gpu_power_w "
        "gpu_sm_clock_mhz gpu_mem_used_mib cpu_steal_pct util_other_cpu_pct cpu_freq_mhz mps_mem_mib"
    ).split()
}


class Sampler:
    """``with Sampler(device) as s: ...`` then ``s.series()`` (every sample) and ``s.summary()`` (per row)."""

    def __init__(self, device, interval_s: float = 0.1, clock: Callable[[], float] = time.perf_counter):
        self._backend = backend_of(device)
        self.device, self.interval_s, self.clock = self._backend.device, interval_s, clock
        self.samples: list[tuple[float, str, float, int | None]] = []
        self.throttle: set[str] = set()
        self.power_source = ""  # which NVML reading gpu_power_w holds (POWER_INSTANT or POWER_AVERAGE)
        self._stop = threading.Event()
        self._proc = psutil.Process()
        self._cores = psutil.cpu_count() or 1
        self._last_cpu: tuple[float, float] | None = None  # (clock, this process tree's CPU seconds)
        self._t0 = clock()
        self._nvml, self._handles, self.measured_index = self._backend.gpus()

    def _add(self, t: float, metric: str, value: float, index: int | None = None) -> None:
        self.samples.append((t, metric, float(value), index))

    def sample(self) -> None:
        t = self.clock() - self._t0
        cores = psutil.cpu_percent(interval=None, percpu=True)
        for i, pct in enumerate(cores):
            self._add(t, "util_cpu_core_pct", pct, i)
        host = sum(cores) / max(len(cores), 1)
        self._add(t, "util_cpu_pct", host)
        if (process := self._process_cpu_pct()) is not None:
            self._add(t, "util_process_cpu_pct", process)
            self._add(t, "util_other_cpu_pct", max(host - process / self._cores, 0.0))
        self._add(t, "rss_mib", self._proc.memory_info().rss / 2**20)
        # CPU steal since the last sample (psutil has it on Linux only) and the CPU clock, where this OS tells it
        if (steal := getattr(psutil.cpu_times_percent(interval=None), "steal", None)) is not None:
            self._add(t, "cpu_steal_pct", steal)
        with contextlib.suppress(Exception):  # no readable clock (some VMs, macOS on Apple silicon)
            if (freq := psutil.cpu_freq()) is not None and freq.current > 0:
                self._add(t, "cpu_freq_mhz", freq.current)
        if (memory := self._backend.memory_sample_mib()) is not None:  # a device with no high-water mark
            self._add(t, "mps_mem_mib", memory)
        for index, handle in self._handles:
            self._sample_gpu(t, index, handle)

    def _process_cpu_seconds(self) -> float:
        """CPU seconds of this process and its children, live or ended and waited for."""
        own = self._proc.cpu_times()
        total = own.user + own.system + own.children_user + own.children_system
        for child in self._proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):  # a child that ended meanwhile: in children_* once reaped
                times = child.cpu_times()  # one read: user and system of the same instant
                total += times.user + times.system
        return total

    def _process_cpu_pct(self) -> float | None:
        """This process tree's CPU % since the last sample (100 = one core), bounded by the cores."""
        now, cpu = self.clock(), self._process_cpu_seconds()
        if self._last_cpu is not None and now - self._last_cpu[0] < MIN_CPU_SPAN_S:
            return None  # too short for 10 ms ticks
        last, self._last_cpu = self._last_cpu, (now, cpu)
        if last is None:  # the first reading (a clock that did not move returned above)
            return None
        return min(max(100.0 * (cpu - last[1]) / (now - last[0]), 0.0), 100.0 * self._cores)

    def _sample_gpu(self, t: float, index: int, handle) -> None:
        nvml = self._nvml
        try:
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            self._add(t, "util_device_pct", util.gpu, index)
            self._add(t, "util_device_mem_pct", util.memory, index)
            self._add(t, "gpu_mem_used_mib", nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20, index)
            temperature = nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            self._add(t, "gpu_temp_c", temperature, index)
            watts, source = gpu_power_w(nvml, handle)
            self._add(t, "gpu_power_w", watts, index)
            self._add(t, "gpu_sm_clock_mhz", nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM), index)
            reasons = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
            self._add(t, "gpu_throttle_reasons", reasons, index)
            if index == self.measured_index:
                self.power_source = source
                self.throttle |= {
                    name for bit, name in _NVML_THROTTLE.items() if reasons & bit and bit != 0x1
                }
        except Exception:  # noqa: BLE001 - a GPU that does not answer one query is skipped, not fatal
            pass

    @staticmethod
    def _prime() -> None:
        """psutil keeps its host CPU % reference points per thread: the first calls on a thread only set them."""
        psutil.cpu_percent(interval=None, percpu=True)
        psutil.cpu_times_percent(interval=None)

    def _loop(self) -> None:
        self._prime()
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> Sampler:
        self._prime()  # this thread's: __exit__'s last sample then spans the whole window
        self._t0 = self.clock()
        self._last_cpu = self._enter_cpu = (self.clock(), self._process_cpu_seconds())
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="cnnbench-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()  # at least one sample per window, however short
        mine = os.environ.get(paths.LOCK_ENV)  # other runs of this workbook here: once, off the clock
        self.other_runs = len({folder for _, folder, _ in paths.run_processes() if folder != mine})

    def elapsed(self) -> float:  # on the clock of the samples' t_s
        return self.clock() - self._t0

    def series(self) -> list[dict]:
        """Every sample: ``{"t_s", "metric", "value", "device_index"}`` (t_s from entering the sampler)."""
        return [{"t_s": t, "metric": m, "value": v, "device_index": i} for t, m, v, i in self.samples]

    def values(self, metric: str, index: int | None = None) -> list[float]:
        return [v for _, m, v, i in self.samples if m == metric and i == index]

    def summary(self) -> dict[str, float | str]:
        """Mean and max per quantity (GPU ones of the measured GPU), ``peak_rss_mib`` sampled, sample count."""
        out: dict[str, float | str] = {}
        for metric, stats in _SUMMARY.items():
            name, unit = re.fullmatch(r"(.*?)(_pct|_mib|)", metric).groups()
            index = self.measured_index if metric.startswith(("util_device", "gpu_")) else None
            arr = np.asarray(self.values(metric, index))
            for stat in stats if arr.size else ():
                out[f"{name}_{stat}{unit}"] = float(getattr(arr, stat)())
        if rss := self.values("rss_mib"):
            out["peak_rss_mib"] = max(rss)
        start, end = getattr(self, "_enter_cpu", None), self._last_cpu  # the mean over the whole span, exact
        if start and end and end[0] > start[0]:  # (the samples give the max)
            cpu = 100.0 * (end[1] - start[1]) / (end[0] - start[0])
            out["util_process_cpu_mean_pct"] = min(cpu, 100.0 * self._cores)
        out.setdefault("util_device_mean_pct", float("nan"))
        out["telemetry_samples"] = len(self.values("util_cpu_pct"))
        out["other_runs_max"] = getattr(self, "other_runs", 0)
        out["gpu_throttle_reasons"] = ",".join(sorted(self.throttle))
        if self.power_source:
            out["gpu_power_source"] = self.power_source
        return out


def record(
    run_dir,
    samples: list[dict],
    experiment: str,
    configuration: str,
    device_kind: str,
    device_name="",
    rank=0,
):
    """Add ``samples`` (:meth:`Sampler.series`) to ``run_dir``'s timelines (the ``transfer_telemetry`` table) in one
    atomic write: one row per sample, with what was running (experiment, configuration, rank) and on which device."""
    where = dict(experiment=experiment, configuration=configuration, rank=rank, device_kind=device_kind)
    where["device_name"] = device_name
    rows = [
        {**where, "t_s": float(s["t_s"]), "metric": s["metric"], "value": float(s["value"])}
        | {"device_index": "" if s.get("device_index") is None else s["device_index"]}
        for s in samples
    ]
    if rows:
        results.file(run_dir, "transfer_telemetry").extend(rows)


def span_summary(series: list[dict], begin: float, end: float) -> dict[str, float]:
    """The host metrics' means over the samples in ``[begin, end]`` (sampler seconds; NaN where none)."""
    out = {}
    for metric in ("cpu_steal_pct", "util_other_cpu_pct", "cpu_freq_mhz", "util_cpu_pct"):
        name, unit = re.fullmatch(r"(.*?)(_pct|)", metric).groups()
        mine = [s for s in series if s["metric"] == metric and s.get("device_index") is None]
        vals = [s["value"] for s in mine if begin <= s["t_s"] <= end + 1e-9]
        out[f"{name}_mean{unit}"] = float(np.mean(vals)) if vals else float("nan")
    return out


MIN_CPU_SPAN_S = 0.05  # the shortest span a process CPU reading is taken over (the OS counts in 10 ms ticks)
# A measurement's machine is "busy" past these (pyperf's "the benchmark seems unstable" and TorchBench's machine
# checks judge the same things): (column, past what, the reason) in a note's order, then a CPU clock that moved
# more than BUSY_FREQ_DROP and a GPU that throttled for power or heat after the first two.
BUSY_FREQ_DROP = 0.05
_THROTTLE_THAT_COUNTS = ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
_BUSY = (
    ("cpu_steal_mean_pct", 2.0, "CPU steal {:.1f}%"),  # hypervisor steal
    ("util_other_cpu_mean_pct", 10.0, "other processes {:.0f}% of the CPUs"),  # their load, % of all cores
    ("probe_spread_pct", 15.0, "the CPU's own speed (probe) moved {:.0f}% between rounds"),
    ("stalled_windows", 0, f"{{:.0f}} window(s) over {STALL_FACTOR:g}x the median step (stopped or starved)"),
    ("other_runs_max", 0, "another run of this workbook measured here ({:.0f})"),
)


def judge(row) -> tuple[str, str]:
    """(``quiet`` | ``busy`` | ``unknown``, the figures behind it) for one measurement's telemetry summary."""
    n = {k: number(row.get(k)) for k in ("cpu_freq_mhz_min", "cpu_freq_mhz_max", *(c for c, *_ in _BUSY))}
    reasons = [text.format(n[c]) for c, past, text in _BUSY[:2] if n[c] > past]
    fmin, fmax = n["cpu_freq_mhz_min"], n["cpu_freq_mhz_max"]
    if fmax > 0 and fmin < (1 - BUSY_FREQ_DROP) * fmax:
        reasons.append(f"CPU clock {fmin:.0f}-{fmax:.0f} MHz")
    gpu = str(row.get("gpu_throttle_reasons", "") or "").split(",")
    if throttle := [r for r in gpu if r in _THROTTLE_THAT_COUNTS]:
        reasons.append("GPU throttled (" + ", ".join(throttle) + ")")
    reasons += [text.format(n[c]) for c, past, text in _BUSY[2:] if n[c] > past]
    if reasons:
        return "busy", "; ".join(reasons)
    steal, other = n["cpu_steal_mean_pct"], n["util_other_cpu_mean_pct"]
    if all(math.isnan(v) for v in (steal, other)):
        return "unknown", "no host telemetry"
    return "quiet", (
        f"steal {'not measured' if math.isnan(steal) else f'{steal:.1f}%'}, other processes "
        f"{'not measured' if math.isnan(other) else f'{other:.0f}%'}"
    )


_PROBE: dict = {}


def speed_probe(seconds: float = 0.3, clock: Callable[[], float] = time.perf_counter) -> float:
    """The CPU's speed now: images/s of SqueezeNet 1.1 inference (batch 8, 64 px) run here for ``seconds``."""
    from torchvision.models import squeezenet1_1

    if "model" not in _PROBE:
        torch.manual_seed(0)
        _PROBE["model"] = squeezenet1_1(num_classes=10).eval()
        _PROBE["x"] = torch.randn(8, 3, 64, 64)
    model, x = _PROBE["model"], _PROBE["x"]
    with torch.inference_mode():
        model(x)  # warm
        start, n = clock(), 0
        while clock() - start < seconds or n < 3:
            model(x)
            n += 1
        return 8 * n / (clock() - start)
