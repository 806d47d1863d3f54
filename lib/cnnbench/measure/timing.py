"""Synchronised clocks, per-step times and each window's statistics; throughput is images / synced wall time
of the whole window, never a mean of per-step rates."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable

import numpy as np
import torch

from cnnbench import devices

NOISY_IQR_OVER_MEDIAN = 0.10
MAX_WINDOW_STEPS = 10_000  # steps_for_window's bound too
STALL_FACTOR = 2.0  # a window over this many times its steps at their median stalled (stopped, starved)


@functools.cache
def _t(dof: int, q: float) -> float:
    """The Student t quantile ``q`` at ``dof`` degrees of freedom (the normal's below 1); scipy.special only, and
    on first use: a DDP rank or worker that computes no interval does not pay for importing scipy."""
    from scipy.special import stdtrit

    return float(stdtrit(dof if dof >= 1 else math.inf, q))


# the two-sided 95% and 99% Student t quantiles
t95 = functools.partial(_t, q=0.975)
t99 = functools.partial(_t, q=0.995)


def backend_of(device) -> devices.Backend:
    """``device``'s backend; a backend passed down (made once per measurement) is used as it is."""
    return device if isinstance(device, devices.Backend) else devices.backend(device)


def ci95_half_width(values) -> float:
    """Half-width of the Student t 95% interval of the mean of ``values`` (NaN below two values)."""
    values = np.asarray(values, dtype=float)
    if values.size < 2:
        return math.nan
    return t95(values.size - 1) * float(np.std(values, ddof=1)) / math.sqrt(values.size)


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
        """``step`` run ``n`` times, then more until the window lasts ``min_s`` (at most MAX_WINDOW_STEPS steps):
        (per-step times, the window's synced wall time)."""
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
    """Step-time statistics and images / summed wall time with its 95% interval: Student t over the windows, or
    (one window) a bootstrap over the steps."""
    steps = np.asarray(step_times, dtype=float)
    if steps.size == 0 or not window_times:
        raise ValueError("no measured steps")
    q1, median, q3 = np.percentile(steps, [25, 50, 75])
    images = batch_size * sum(window_steps)
    throughput = images / sum(window_times)
    per_window = [batch_size * n / t for n, t in zip(window_steps, window_times, strict=True)]
    half = ci95_half_width(per_window)
    if len(per_window) < 2:  # one window: a bootstrap over its steps
        resampled = np.random.default_rng(seed).choice(steps, size=(2000, steps.size), replace=True)
        lo, hi = np.percentile(batch_size * steps.size / resampled.sum(axis=1), [2.5, 97.5])
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
