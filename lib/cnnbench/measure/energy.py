"""Energy of a measured window from a hardware counter read before and after it (NVML's total energy, Linux
RAPL's package zones polled so no wrap is missed), or NaN with the reason in ``energy_note``: never a guess."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from cnnbench.devices.energy import Unavailable
from cnnbench.measure import timing

NVML_MIN_WINDOW_S = 1.0  # NVML's energy counter updates every 20-100 ms: shorter windows are too coarse
COLUMNS = ("energy_j", "energy_j_per_image", "avg_power_w", "energy_source", "energy_note")


def counter_for(device):
    """The energy counter that covers ``device``'s work (its backend's), or :class:`Unavailable` with the reason."""
    return timing.backend_of(device).energy_counter()


class Meter:
    """``with Meter(device) as m: <window>`` then ``m.summary(images)``; a counter that wraps is polled."""

    def __init__(
        self,
        device=None,
        counter=None,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.counter = counter if counter is not None else counter_for(device or "cpu")
        self.poll_s, self.clock = poll_s, clock
        self.joules, self.seconds = 0.0, 0.0
        self._last = None
        self._start = 0.0
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
