"""Devices: one backend module per device kind (:mod:`.cpu`, :mod:`.cuda`, :mod:`.mps`, :mod:`.rocm`) owns all
that differs between kinds (the workbook asks ``backend(device)``, never a device's type); :mod:`.host` has what
every kind shares (``devices.cpu_model()``). :data:`BACKENDS`, :data:`KINDS` and the device names params accept
(:data:`SPEC`, :data:`ONE_DEVICE`, :data:`SPEC_NAMES`) are derived from the :class:`Backend` subclasses found here."""

from __future__ import annotations

import importlib
import pkgutil
import re

import torch

from cnnbench.devices import base, host
from cnnbench.devices.base import Backend, DeviceError

NOT_KINDS = ("base", "host", "energy", "membench")  # the modules of this package that declare no device kind


def _declared() -> list[type[Backend]]:
    """The Backend subclasses each module of this package declares, in the order they claim (``rank``)."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if m.name not in NOT_KINDS]  # membench: lazily
    modules = [importlib.import_module(f"{__name__}.{name}") for name in names]
    found = [
        cls
        for m in modules
        for cls in vars(m).values()
        if isinstance(cls, type) and issubclass(cls, Backend) and cls.__module__ == m.__name__
    ]
    return sorted(found, key=lambda cls: cls.rank)


BACKENDS: list[type[Backend]] = _declared()
KINDS = tuple(dict.fromkeys(cls.torch_type for cls in BACKENDS))  # torch types, in the order ``auto`` prefers
_FIRST = {kind: next(cls for cls in BACKENDS if cls.torch_type == kind) for kind in KINDS}
SPEC = re.compile(rf"({'|'.join(KINDS)})(?::(\d+))?")  # a device params may name, ``auto`` apart
ONE_DEVICE = re.compile(rf"({'|'.join(k for k in KINDS if not _FIRST[k].indexed)}):\d+")  # cpu:3 names none
_NAMES = [n for k in sorted(KINDS) for n in (k, f"{k}:N")[: 1 + _FIRST[k].indexed]]
SPEC_NAMES = f"{', '.join(_NAMES[:-1])} or {_NAMES[-1]}"  # "cpu, cuda, cuda:N or mps"


def __getattr__(name: str):
    """The host's facts and the base's names: ``devices.cpu_model()``, ``devices.Hardware``."""
    for module in (base, host):
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backend(device: torch.device | str) -> Backend:
    """The backend of ``device``: the first of :data:`BACKENDS` that claims it."""
    device = torch.device(device)
    return next(cls for cls in BACKENDS if cls.claims(device))(device)


def backend_class(kind: str) -> type[Backend]:
    """The backend class of a device kind as rows name it (cpu, cuda, mps, rocm)."""
    if (found := next((cls for cls in BACKENDS if cls.kind == kind), None)) is None:
        raise DeviceError(f"unknown device kind {kind!r}; known: {', '.join(c.kind for c in BACKENDS)}")
    return found


def available() -> list[str]:
    """Device types usable here, in the order ``auto`` prefers them."""
    return [t for t in KINDS if any(cls.torch_type == t and cls.present() for cls in BACKENDS)]


def resolve(spec: str = "auto", expect: str = "") -> torch.device:
    """``auto`` -> cuda, then mps, then cpu. Raises :class:`DeviceError` for unknown or absent devices."""
    spec = spec.strip().lower()
    if spec == "auto":
        device = torch.device(available()[0])
    else:
        if not SPEC.fullmatch(spec):
            raise DeviceError(f"unknown device '{spec}'; use auto, {SPEC_NAMES}")
        here = {}  # the names of the devices here (one CPU: cpu:3 would be recorded as it, so it names none)
        for c in filter(lambda c: c.present(), BACKENDS):
            here |= dict.fromkeys(
                [c.torch_type, *(f"{c.torch_type}:{i}" for i in range(c.indexed * c.count()))]
            )
        if spec not in here:
            raise DeviceError(f"device '{spec}' is not present here; available: {', '.join(here)}")
        device = torch.device(spec)
    if expect and expect.lower() not in (name := device_name(device)).lower():
        raise DeviceError(f"expected a device named like '{expect}', found '{name}' ({device.type})")
    return device


def device_name(device: torch.device) -> str:
    return backend(device).name()


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device``; call before every clock read."""
    backend(device).synchronize()
