"""Energy counters, one per source a device backend names (:meth:`cnnbench.devices.Backend.energy_counter`): NVML's
on NVIDIA, RAPL's on Linux CPUs, or :class:`Unavailable` with the reason; and :class:`Meter`, which reads one before
and after a measured window (polling a counter that wraps so no wrap is missed): the window's energy, or NaN with
the reason in ``energy_note``, never a guess."""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cnnbench.devices import host

POWERCAP = Path("/sys/class/powercap")
APPLE = (
    "Apple silicon has no energy counter an unprivileged process can read; "
    "'sudo powermetrics --samplers cpu_power,gpu_power -i 1000' reports CPU and GPU power by hand"
)


class Unavailable:
    """No readable counter on this device: every reading is empty, ``note`` says why."""

    source, needs_polling = "", False

    def __init__(self, note: str):
        self.note = note

    def read(self):
        return None

    def delta_j(self, before, after) -> float:
        return math.nan


class NvmlCounter:
    """NVML's total energy counter of one GPU, in mJ (64-bit: it does not wrap in practice)."""

    source, needs_polling, note = "nvml", False, ""

    def __init__(self, handle, nvml):
        self.handle, self.nvml = handle, nvml

    def read(self) -> int:
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def delta_j(self, before: int, after: int) -> float:
        return (after - before) / 1e3


def wrap_delta(before: int, after: int, max_range: int) -> int:
    """Counter increase from ``before`` to ``after`` for a counter that wraps to 0 after ``max_range``."""
    return after - before if after >= before else after + max_range - before


class RaplCounter:
    """The RAPL package zones under ``root`` (summed over sockets), in uJ, wrap-around handled."""

    source = "rapl"
    needs_polling = True  # a wrap every max_range/power seconds (about 4,300 J: a minute at 70 W)

    def __init__(self, zones: list[Path]):
        self.zones = zones
        self.max_range = [int((z / "max_energy_range_uj").read_text()) for z in zones]
        names = ", ".join(host.read(z / "name") or z.name for z in zones)
        self.note = f"RAPL {names}: the whole package, every process on it, not only this one"

    def read(self) -> tuple[int, ...]:
        return tuple(int((z / "energy_uj").read_text()) for z in self.zones)

    def delta_j(self, before: tuple[int, ...], after: tuple[int, ...]) -> float:
        return sum(wrap_delta(b, a, m) for b, a, m in zip(before, after, self.max_range, strict=True)) / 1e6


def rapl_counter(root: Path = POWERCAP) -> RaplCounter | Unavailable:
    """The package zones' counter (``intel-rapl:N``, not their sub-zones nor ``psys``), or why not."""
    if not root.is_dir():
        return Unavailable(f"no {root}: this kernel or VM exposes no RAPL energy counter")
    zones = sorted(
        z
        for z in root.iterdir()
        if re.fullmatch(r"intel-rapl:\d+", z.name)
        and (z / "energy_uj").exists()
        and host.read(z / "name") != "psys"
    )
    if not zones:
        return Unavailable(f"no RAPL package zone (intel-rapl:N/energy_uj) under {root}")
    if not all(os.access(z / "energy_uj", os.R_OK) for z in zones):
        return Unavailable(
            f"{zones[0] / 'energy_uj'} is readable by root only (Linux >= 5.10 restricts RAPL); "
            "run as root or allow reading it to get CPU energy"
        )
    try:
        counter = RaplCounter(zones)
        counter.read()
    except (OSError, ValueError) as err:
        return Unavailable(f"RAPL unreadable: {type(err).__name__}: {err}")
    return counter


NVML_MIN_WINDOW_S = 1.0  # NVML's energy counter updates every 20-100 ms: shorter windows are too coarse
COLUMNS = ("energy_j", "energy_j_per_image", "avg_power_w", "energy_source", "energy_note")


class Meter:
    """``with Meter(backend.energy_counter()) as m: <window>`` then ``m.summary(images)``; a counter that wraps
    is polled."""

    def __init__(self, counter, poll_s: float = 1.0, clock: Callable[[], float] = time.perf_counter):
        self.counter, self.poll_s, self.clock = counter, poll_s, clock
        self.joules, self.seconds = 0.0, 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:  # an Unavailable counter reads None: nothing is added
        with self._lock:
            now = self.counter.read()
            if self._last is not None:
                self.joules += self.counter.delta_j(self._last, now)
            self._last = now

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()

    def __enter__(self) -> Meter:
        self.joules, self._last = 0.0, None
        self.poll()
        self._start = self.clock()
        if self.counter.needs_polling:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="cnnbench-energy", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = self.clock() - self._start
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.poll()

    def summary(self, images: int) -> dict[str, float | str]:
        """The columns of :data:`COLUMNS` for a window that processed ``images`` images."""
        if isinstance(self.counter, Unavailable):
            return none("", self.counter.note)
        if self.counter.source == "nvml" and self.seconds < NVML_MIN_WINDOW_S:
            return none(
                "nvml",
                f"window {self.seconds:.2f} s is shorter than {NVML_MIN_WINDOW_S:g} s: NVML's counter updates "
                "every 20-100 ms, too seldom to time it",
            )
        per_image = self.joules / images if images else math.nan
        watts = self.joules / self.seconds if self.seconds > 0 else math.nan
        counter = self.counter
        return dict(zip(COLUMNS, (self.joules, per_image, watts, counter.source, counter.note), strict=True))


def none(source: str, note: str) -> dict[str, float | str]:
    """The columns of :data:`COLUMNS` where no energy is given: empty numbers and the reason."""
    return {**dict.fromkeys(COLUMNS[:3], math.nan), "energy_source": source, "energy_note": note}
