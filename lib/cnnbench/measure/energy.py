"""Energy of a measured window, from a hardware counter read before and after it, or empty with the reason.

- NVIDIA: ``nvmlDeviceGetTotalEnergyConsumption`` (millijoules since the driver loaded, Volta and newer). The
  counter updates every 20-100 ms, so windows shorter than :data:`NVML_MIN_WINDOW_S` are flagged in the note.
- Linux CPUs: RAPL through ``/sys/class/powercap/intel-rapl:N/energy_uj`` (the package zones; AMD Zen exposes
  the same files). The counter wraps at ``max_energy_range_uj``: a background thread reads it every ``poll_s``
  seconds so no wrap is missed, and each wrap is added back. Since Linux 5.10 the file is often readable by root
  only; then the reading is empty with that reason. RAPL counts the whole package, every process on it.
- Apple silicon: no counter an unprivileged process can read (``powermetrics`` needs sudo): empty, with the
  documented way to read it by hand.

Never a guess: when no counter is readable, ``energy_j`` is NaN and ``energy_note`` says why.
Columns: ``energy_j``, ``energy_j_per_image``, ``avg_power_w``, ``energy_source``, ``energy_note``.
"""

from __future__ import annotations

import math
import os
import platform
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from cnnbench import devices

POWERCAP = Path("/sys/class/powercap")
NVML_MIN_WINDOW_S = 1.0  # NVML's energy counter updates every 20-100 ms: shorter windows are too coarse
APPLE_NOTE = ("Apple silicon has no energy counter an unprivileged process can read; "
              "'sudo powermetrics --samplers cpu_power,gpu_power -i 1000' reports CPU and GPU power by hand")
COLUMNS = ("energy_j", "energy_j_per_image", "avg_power_w", "energy_source", "energy_note")


class Unavailable:
    """No readable counter on this device: every reading is empty, ``note`` says why."""

    source = ""

    def __init__(self, note: str):
        self.note = note
        self.needs_polling = False

    def read(self):
        return None

    def delta_j(self, before, after) -> float:
        return math.nan


class NvmlCounter:
    """NVML's total energy counter of one GPU, in mJ (64-bit: it does not wrap in practice)."""

    source = "nvml"
    needs_polling = False

    def __init__(self, handle, nvml):
        self.handle, self.nvml = handle, nvml
        self.note = ""

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
        names = ", ".join(_zone_name(z) for z in zones)
        self.note = f"RAPL {names}: the whole package, every process on it, not only this one"

    def read(self) -> tuple[int, ...]:
        return tuple(int((z / "energy_uj").read_text()) for z in self.zones)

    def delta_j(self, before: tuple[int, ...], after: tuple[int, ...]) -> float:
        return sum(wrap_delta(b, a, m) for b, a, m in zip(before, after, self.max_range, strict=True)) / 1e6


def _zone_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip()
    except OSError:
        return zone.name


def rapl_counter(root: Path = POWERCAP) -> RaplCounter | Unavailable:
    """The package zones' counter (``intel-rapl:N``, not their sub-zones nor ``psys``), or why not."""
    if not root.is_dir():
        return Unavailable(f"no {root}: this kernel or VM exposes no RAPL energy counter")
    zones = sorted(z for z in root.iterdir() if re.fullmatch(r"intel-rapl:\d+", z.name)
                   and (z / "energy_uj").exists() and _zone_name(z) != "psys")
    if not zones:
        return Unavailable(f"no RAPL package zone (intel-rapl:N/energy_uj) under {root}")
    if not all(os.access(z / "energy_uj", os.R_OK) for z in zones):
        return Unavailable(f"{zones[0] / 'energy_uj'} is readable by root only (Linux >= 5.10 restricts RAPL); "
                           "run as root or allow reading it to get CPU energy")
    try:
        counter = RaplCounter(zones)
        counter.read()
    except (OSError, ValueError) as err:
        return Unavailable(f"RAPL unreadable: {type(err).__name__}: {err}")
    return counter


def nvml_counter(index: int, nvml=None) -> NvmlCounter | Unavailable:
    """CUDA device ``index``'s NVML energy counter, or why not (no nvidia-ml-py, pre-Volta GPU, driver refusal).

    The handle is the GPU that CUDA device really is (PCI bus id, CUDA_VISIBLE_DEVICES), as for telemetry.
    """
    try:
        if nvml is None:
            import pynvml as nvml
        counter = NvmlCounter(devices.nvml_handle(torch.device("cuda", index), nvml), nvml)
        counter.read()
    except ImportError:
        return Unavailable("nvidia-ml-py is not installed: no NVML energy counter")
    except Exception as err:  # noqa: BLE001 - NVMLError_NotSupported and friends: the reason is the reading
        return Unavailable(f"NVML total energy counter unavailable ({type(err).__name__}: {err}); "
                           "it needs a Volta or newer GPU")
    return counter


def counter_for(device: torch.device):
    """The energy counter that covers ``device``'s work, or :class:`Unavailable` with the reason."""
    if device.type == "cuda":
        return nvml_counter(device.index if device.index is not None else torch.cuda.current_device())
    if device.type == "mps" or platform.system() == "Darwin":
        return Unavailable(APPLE_NOTE)
    if platform.system() != "Linux":
        return Unavailable(f"no energy counter reader for {platform.system()} CPUs")
    return rapl_counter()


class Meter:
    """``with Meter(device) as m: <window>`` then ``m.summary(images)``: energy over the window.

    ``counter`` and ``clock`` are injectable so tests drive the meter with fake counters and a fake clock.
    Counters that wrap (RAPL) are also read every ``poll_s`` seconds in a background thread.
    """

    def __init__(self, device: torch.device | None = None, counter=None, poll_s: float = 1.0,
                 clock: Callable[[], float] = time.perf_counter):
        self.counter = counter if counter is not None else counter_for(device or torch.device("cpu"))
        self.poll_s, self.clock = poll_s, clock
        self.joules, self.seconds = 0.0, 0.0
        self._last = None
        self._start = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """Read the counter and add the increase since the last read."""
        if isinstance(self.counter, Unavailable):
            return
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
            return {"energy_j": math.nan, "energy_j_per_image": math.nan, "avg_power_w": math.nan,
                    "energy_source": "", "energy_note": self.counter.note}
        note = self.counter.note
        if self.counter.source == "nvml" and self.seconds < NVML_MIN_WINDOW_S:
            note = (f"window {self.seconds:.2f} s is shorter than {NVML_MIN_WINDOW_S:g} s: NVML's counter "
                    "updates every 20-100 ms, so this reading is coarse")
        return {
            "energy_j": self.joules,
            "energy_j_per_image": self.joules / images if images else math.nan,
            "avg_power_w": self.joules / self.seconds if self.seconds > 0 else math.nan,
            "energy_source": self.counter.source,
            "energy_note": note,
        }
