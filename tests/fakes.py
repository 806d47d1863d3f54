"""One fake device backend for the tests: a GPU that answers every question the workbook asks a device
(:class:`cnnbench.devices.Backend`) while its tensors stay on the host, and that records what it was asked.

    with using(FakeGPU.fresh(cc=(7, 5))) as gpu:   # every CPU device is this GPU in the block
        ... code under test ...
    gpu.log   # ["sync", "reset_peak", ...]

Its rules for knob values are CUDA's (it subclasses the CUDA backend); the rest is set per test: compute capability,
SMs, memory, the peaks its allocator reports, an NVML module, a clock for its events.
"""

from __future__ import annotations

import contextlib
import math

import torch

from cnnbench import devices
from cnnbench.devices import Hardware
from cnnbench.devices.cuda import CudaBackend


@contextlib.contextmanager
def using(fake: type):
    """``fake`` claims devices first inside the block (one fake backend, no monkeypatched torch.cuda)."""
    devices.BACKENDS.insert(0, fake)
    try:
        yield fake
    finally:
        devices.BACKENDS.remove(fake)


class FakeEvent:
    """A device event: the stream it was recorded on and the fake device time at that point."""

    def __init__(self, gpu):
        self.gpu, self.stream, self.t = gpu, None, None

    def record(self, stream=None):
        self.stream = stream
        self.gpu.events_recorded.append(self)
        self.t = self.gpu.clock() if self.gpu.clock else 0.0

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3  # milliseconds, as torch's events


class FakeGPU(CudaBackend):
    kind = "cuda"
    torch_type = "cpu"  # claims the host device: the code under test runs for real, on the CPU
    cc = (8, 0)  # compute capability
    sms = 108
    memory_bytes = 16 * 2**30
    gpu_name = "Fake GPU"
    nvml = None  # a fake pynvml module for telemetry and energy, or None: no NVML
    nvml_index = 0  # which of NVML's GPUs this device is
    gpus_here = 1  # devices of its kind on this machine
    clock = None  # the events' time source (a fake clock), or None: every event at 0
    busy_share = None  # the seconds of device work of each profiled step, or None: no profiler record
    peaks: list = []  # peak_device_mem_mib values the allocator reports, one per read (the last one repeats)
    log: list = []
    events_recorded: list = []
    stream = "the measured device's stream"

    @classmethod
    def fresh(cls, **attributes) -> type[FakeGPU]:
        """A subclass with its own log and these attributes (a new fake for each test)."""
        return type("FakeGPU", (cls,), {"log": [], "events_recorded": [], "peaks": [], **attributes})

    @classmethod
    def present(cls) -> bool:
        return True

    @classmethod
    def count(cls) -> int:
        return cls.gpus_here

    def name(self) -> str:
        return self.gpu_name

    def hardware(self) -> Hardware:
        return Hardware(
            kind=self.kind,
            name=self.name(),
            cores=2,
            capability=self.cc,
            triton=True,
            sms=self.sms,
            memory_bytes=self.memory_bytes,
        )

    def capability(self) -> tuple[int, int]:
        return self.cc

    def synchronize(self) -> None:
        self.log.append("sync")

    def events(self):
        return (lambda: FakeEvent(type(self))), (lambda event: event.record(self.stream))

    def enter_worker(self) -> None:
        self.log.append("enter_worker")

    def reset_peak_memory(self) -> None:
        self.log.append("reset_peak")

    def peak_memory_mib(self) -> dict[str, float]:
        self.log.append("read_peak")
        peak = self.peaks.pop(0) if len(self.peaks) > 1 else (self.peaks[0] if self.peaks else math.nan)
        return {"peak_device_mem_mib": peak, "peak_device_reserved_mib": peak}

    def total_memory_bytes(self) -> int:
        return self.memory_bytes

    def empty_cache(self) -> None:
        self.log.append("empty_cache")

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        return t

    @contextlib.contextmanager
    def math(self, precision: str):
        self.log.append(f"math {precision}")
        yield
        self.log.append(f"math {precision} restored")

    @contextlib.contextmanager
    def autotune(self, on: bool):
        self.log.append(f"autotune {on}")
        yield
        self.log.append(f"autotune {on} restored")

    def gpus(self):
        if self.nvml is None:
            return None, [], None
        nvml = self.nvml()
        return (
            nvml,
            [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())],
            self.nvml_index,
        )

    def energy_counter(self, nvml=None):
        from cnnbench.devices import energy

        return energy.Unavailable("a fake GPU has no energy counter")

    def profiler_activities(self) -> list:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU]

    def batched(self, fn, inner: int, graph: bool = False):
        self.log.append(f"batched graph={graph}")
        return super(CudaBackend, self).batched(fn, inner)

    def busy_s(self, step, n: int) -> float | None:
        """``busy_share`` seconds of device work a step (None: no profiler record)."""
        return None if self.busy_share is None else n * self.busy_share

    def cache_levels(self, threads: int = 1, sysfs_root=None) -> list[dict]:
        return [
            {"level": "l2", "size_bytes": 40 * 2**20, "capacity_bytes": 40 * 2**20, "size_source": "fake"}
        ]

    def bandwidth_sweep(self, sizes, repeats, threads):
        return super(CudaBackend, self).bandwidth_sweep(sizes, repeats, threads)

    def ddp_device_ids(self):
        return None
