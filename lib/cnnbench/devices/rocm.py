"""AMD GPUs through ROCm, whose torch calls them ``cuda`` devices (recognised by ``torch.version.hip``): CUDA's
timing, memory and graph code (HIP has the same calls), but no TF32, no NVML (AMD SMI is not read), RCCL through
the "nccl" name, spec roofs and main memory from the spec table only. Nothing here has run on AMD hardware."""

from __future__ import annotations

import torch

from cnnbench.devices import energy
from cnnbench.devices.base import Backend, Hardware
from cnnbench.devices.cuda import CudaBackend, main_memory

NO_SMI = "ROCm: GPU telemetry and energy need AMD SMI, which this workbook does not read"


class RocmBackend(CudaBackend):
    kind = "rocm"
    rank = 0  # ROCm's torch says "cuda": claimed before CUDA
    bn_library = "miopen"

    @classmethod
    def present(cls) -> bool:
        return bool(getattr(torch.version, "hip", None)) and torch.cuda.is_available()

    @classmethod
    def claims(cls, device: torch.device) -> bool:
        return device.type == "cuda" and bool(getattr(torch.version, "hip", None))

    @classmethod
    def lacks(cls, knob: str, value, hw: Hardware) -> str:
        if knob == "precision" and value == "tf32":
            return "tf32 is an NVIDIA tensor-core mode; ROCm has none"
        if knob == "compile" and value == "max-autotune":
            return "max-autotune: not tried on ROCm by this workbook"
        return super().lacks(knob, value, hw) if knob != "precision" else ""

    gpus = Backend.gpus  # no NVML: no GPU telemetry

    def energy_counter(self):
        return energy.Unavailable(NO_SMI)

    @property
    def main_memory(self) -> str:
        return main_memory(self.name(), None)  # the spec table's, else dram: no guess from a capability
