"""Devices: one backend module per device kind (:mod:`.cpu`, :mod:`.cuda`, :mod:`.mps`, :mod:`.rocm`) owns all
that differs between kinds; the workbook asks ``backend(device)`` and never tests a device's kind itself.
:mod:`.host` has what every kind shares: the host CPU, threads and this process's memory.

    b = devices.backend(device)       # the first kind that claims it: rocm before cuda (ROCm's torch says "cuda")
    b.synchronize(); b.peak_memory_mib(); b.lacks("precision", "tf32", b.hardware())"""

from __future__ import annotations

import contextlib
import re

import torch

from cnnbench.devices.base import DTYPES, Backend, DeviceError, Hardware, Unavailable
from cnnbench.devices.cpu import CpuBackend
from cnnbench.devices.cuda import CudaBackend
from cnnbench.devices.host import (
    clock_from,
    cpu_clock_ghz,
    cpu_features,
    cpu_isa,
    cpu_model,
    native_bf16,
    parse_cpu_mhz,
    peak_rss_mib,
    physical_cores,
    reset_peak_rss,
    rss_mib,
    set_threads,
)
from cnnbench.devices.mps import MpsBackend
from cnnbench.devices.rocm import RocmBackend

BACKENDS: list[type[Backend]] = [RocmBackend, CudaBackend, MpsBackend, CpuBackend]  # in the order they claim
# the torch device types a params file names, in the order ``auto`` prefers them
KINDS = ("cuda", "mps", "cpu")

__all__ = [
    "BACKENDS",
    "DTYPES",
    "KINDS",
    "Backend",
    "DeviceError",
    "Hardware",
    "Unavailable",
    "available",
    "backend",
    "backend_class",
    "clock_from",
    "cpu_clock_ghz",
    "cpu_features",
    "cpu_isa",
    "cpu_model",
    "device_name",
    "native_bf16",
    "parse_cpu_mhz",
    "peak_rss_mib",
    "physical_cores",
    "reset_peak_rss",
    "resolve",
    "rss_mib",
    "set_threads",
    "synchronize",
    "using",
]


def backend(device: torch.device | str) -> Backend:
    """The backend of ``device``: the first of :data:`BACKENDS` that claims it."""
    device = torch.device(device)
    return next(cls for cls in BACKENDS if cls.claims(device))(device)


def backend_class(kind: str) -> type[Backend]:
    """The backend class of a device kind as rows name it (cpu, cuda, mps, rocm)."""
    try:
        return next(cls for cls in BACKENDS if cls.kind == kind)
    except StopIteration:
        raise DeviceError(
            f"unknown device kind {kind!r}; known: {', '.join(c.kind for c in BACKENDS)}"
        ) from None


@contextlib.contextmanager
def using(fake: type[Backend]):
    """Tests: ``fake`` claims devices first inside the block (one fake backend, no monkeypatched torch.cuda)."""
    BACKENDS.insert(0, fake)
    try:
        yield fake
    finally:
        BACKENDS.remove(fake)


def available() -> list[str]:
    """Device types usable here, in the order ``auto`` prefers them."""
    return [t for t in KINDS if any(cls.torch_type == t and cls.present() for cls in BACKENDS)]


def resolve(spec: str = "auto", expect: str = "") -> torch.device:
    """``auto`` -> cuda, then mps, then cpu. Raises :class:`DeviceError` for unknown or absent devices."""
    spec = spec.strip().lower()
    if spec == "auto":
        device = torch.device(available()[0])
    else:
        match = re.fullmatch(rf"({'|'.join(KINDS)})(?::(\d+))?", spec)
        if not match:
            raise DeviceError(f"unknown device '{spec}'; use auto, cpu, cuda, cuda:N or mps")
        kind, index = match.group(1), match.group(2)
        if kind not in available():
            raise DeviceError(f"device '{spec}' is not present here; available: {', '.join(available())}")
        # torch has one CPU device: cpu:3 would be recorded as a device
        if kind == "cpu" and index is not None:
            raise DeviceError(f"device '{spec}': the CPU is one device, name it 'cpu'")
        if kind == "cuda" and index is not None and int(index) >= torch.cuda.device_count():
            raise DeviceError(
                f"device '{spec}' is not present; this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
        device = torch.device(spec)
    if expect and expect.lower() not in device_name(device).lower():
        raise DeviceError(
            f"expected a device named like '{expect}', found '{device_name(device)}' ({device.type})"
        )
    return device


def device_name(device: torch.device) -> str:
    return backend(device).name()


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device``; call before every clock read."""
    backend(device).synchronize()
