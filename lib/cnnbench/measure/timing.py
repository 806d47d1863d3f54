"""Synchronised clocks, per-step times and each window's statistics; throughput is images / synced wall time
of the whole window, never a mean of per-step rates."""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from cnnbench import devices

NOISY_IQR_OVER_MEDIAN = 0.10
MAX_WINDOW_STEPS = 10_000  # steps_for_window's bound too
STALL_FACTOR = 2.0  # a window over this many times its steps at their median stalled (stopped, starved)

# Two-sided 95% and 99% Student t quantiles for 1..30 degrees of freedom (beyond: _t's expansion).
_T95 = [
    float(t)
    for t in """12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145
    2.131 2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042""".split()
]
_T99 = [
    float(t)
    for t in """63.657 9.925 5.841 4.604 4.032 3.707 3.499 3.355 3.250 3.169 3.106 3.055 3.012 2.977
    2.947 2.921 2.898 2.878 2.861 2.845 2.831 2.819 2.807 2.797 2.787 2.779 2.771 2.763 2.756 2.750""".split()
]


def _t(dof: int, table: list[float], z: float) -> float:
    """A two-sided Student t quantile: ``table``, then the Cornish-Fisher expansion about ``z``."""
    if dof < 1:
        return z
    if dof <= len(table):
        return table[dof - 1]
    v = float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


# the two-sided 95% and 99% Student t quantiles (1.96 and 2.576 below 1 degree of freedom)
t95 = functools.partial(_t, table=_T95, z=1.959964)
t99 = functools.partial(_t, table=_T99, z=2.575829)


def backend_of(device) -> devices.Backend:
    """``device``'s backend; a backend passed down (made once per measurement) is used as it is."""
    return device if isinstance(device, devices.Backend) else devices.backend(device)


def ci95_half_width(values) -> float:
    """Half-width of the Student t 95% interval of the mean of ``values`` (NaN below two values)."""
    values = [float(v) for v in values]
    if len(values) < 2:
        return float("nan")
    return t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


class StepTimer:
    """Times steps on ``device`` (or its backend): a queued device's steps by events (CUDA) or the window's
    mean (``source`` says which), synced at the window's edges; the host CPU's each by the host clock."""

    def __init__(
        self,
        device,
        clock: Callable[[], float] = time.perf_counter,
        sync: Callable[[torch.device], None] | None = None,
        use_events: bool | None = None,
    ):
        backend = backend_of(device)
        self.device, self.clock = backend.device, clock
        self.sync = sync or (lambda _: backend.synchronize())
        self.events = backend.events() if use_events is not False else None
        if use_events and self.events is None:
            raise ValueError(f"no timing events on {backend.kind}")
        self.per_step_sync = self.events is None and not backend.queued
        self.source = (
            f"{backend.kind}_events" if self.events else "host_clock" if self.per_step_sync else "window_mean"
        )

    def window(self, step: Callable[[], object], n: int, min_s: float = 0.0) -> tuple[list[float], float]:
        """Run ``step`` ``n`` times, then more, at the window's own pace, until it has lasted ``min_s`` (a queued
        device's length known at each sync), at most MAX_WINDOW_STEPS; return the per-step times and the window's
        synced wall time (seconds)."""
        make, record = self.events or (None, None)
        marks: list = []

        def mark() -> None:
            if record is not None:
                marks.append(make())
                record(marks[-1])

        self.sync(self.device)
        start = last = self.clock()
        times, done, todo = [], 0, n
        mark()
        while todo:
            for _ in range(todo):
                step()
                mark()
                if self.per_step_sync:
                    self.sync(self.device)
                    now = self.clock()
                    times.append(now - last)
                    last = now
            done += todo
            if not self.per_step_sync:
                self.sync(self.device)
                last = self.clock()
            wall = last - start
            more = math.ceil((min_s - wall) * done / max(wall, 1e-9)) if wall < min_s else 0
            todo = min(more, MAX_WINDOW_STEPS - done)
        if marks:
            times = [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:], strict=False)]
        elif not self.per_step_sync:
            times = [wall / done] * done
        return times, wall


def summarize(
    step_times: list[float],
    window_times: list[float],
    window_steps: list[int],
    batch_size: int,
    seed: int = 0,
) -> dict[str, float]:
    """Step-time statistics, all images over the summed wall time with its 95% interval (Student t over the
    windows; one window: a bootstrap over the steps), ``noisy`` and ``stalled_windows``."""
    steps = np.asarray(step_times, dtype=float)
    if steps.size == 0 or not window_times:
        raise ValueError("no measured steps")
    q1, median, q3 = np.percentile(steps, [25, 50, 75])
    images = batch_size * sum(window_steps)
    throughput = images / sum(window_times)
    per_window = [batch_size * n / t for n, t in zip(window_steps, window_times, strict=True)]
    if len(per_window) >= 2:
        half = ci95_half_width(per_window)
    else:
        rng = np.random.default_rng(seed)
        resampled = rng.choice(steps, size=(2000, steps.size), replace=True)
        boot = batch_size * steps.size / resampled.sum(axis=1)
        lo, hi = np.percentile(boot, [2.5, 97.5])
        half = (hi - lo) / 2
    iqr = q3 - q1
    return {
        "n_steps": int(steps.size),
        "repeats": len(window_times),
        "throughput_img_s": throughput,
        "throughput_ci95_img_s": half,
        "throughput_window_min_img_s": min(per_window),
        "throughput_window_max_img_s": max(per_window),
        "step_time_median_s": float(median),
        "step_time_mean_s": float(steps.mean()),
        "step_time_std_s": float(steps.std(ddof=1)) if steps.size > 1 else 0.0,
        "step_time_min_s": float(steps.min()),
        "step_time_max_s": float(steps.max()),
        "step_time_p95_s": float(np.percentile(steps, 95)),
        "step_time_iqr_s": float(iqr),
        "window_time_s": float(sum(window_times)),
        "noisy": bool(iqr / median > NOISY_IQR_OVER_MEDIAN) if median > 0 else True,
        "stalled_windows": sum(
            t > STALL_FACTOR * n * median for n, t in zip(window_steps, window_times, strict=True)
        ),
    }
