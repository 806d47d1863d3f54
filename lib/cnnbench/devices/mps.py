"""Apple GPUs through Metal (MPS): windows synchronised at their edges (no per-step device time), synchronous
copies, no memory high-water mark (samples instead), version floors for half precisions, spec roofs matched by
chip and GPU core count."""

from __future__ import annotations

import platform
import re
from functools import lru_cache

import torch

from cnnbench.devices import energy, host
from cnnbench.devices.base import ACCELERATOR_PROTOCOL, Backend, Hardware

# The M3 and M4 families: Apple publishes no GPU clock or TFLOPS, and the clocks published by third parties
# range 1.38-1.6 GHz, so a derived roof (cores x 128 ALUs x 2 FLOP x clock) would carry a 16% guess.
NO_APPLE_SPEC = (
    "no spec roof: Apple publishes no GPU clock or TFLOPS for the {chip}, and published estimates of "
    "its GPU clock range 1.38-1.6 GHz (a 16% spread in a derived roof); only the measured roofs are drawn"
)
# the torch and macOS versions each half precision needs on MPS: what needs it, whose version, the version
FLOORS = {
    "fp16": [("fp16 autocast", "torch", (2, 5)), ('fp16 training (GradScaler("mps"))', "torch", (2, 8))],
    "bf16": [("bf16 autocast", "torch", (2, 6)), ("bf16", "macOS", (14, 0))],
}


class MpsBackend(Backend):
    kind = torch_type = "mps"
    rank = 2
    on_host = False
    # timed by windows: MPS events are host-clock callbacks that can arrive out of order, and each
    # record commits the command buffer, changing the work timed
    queued = True
    min_call_s = 0.05
    matmul_size = 4096
    op_time = "queue"  # torch.profiler sees the host enqueueing each op, not the GPU running it
    # eager only in 07: Inductor's MPS backend is young
    protocol = {**ACCELERATOR_PROTOCOL, "transfer_devices": ["mps"], "tune_compile_modes": ["off"]}
    budget = {**Backend.budget, "step_s": 0.2}  # nothing measured on a Mac: the CPU's figures but the step

    @classmethod
    def present(cls) -> bool:
        return torch.backends.mps.is_available()

    def name(self) -> str:
        return f"Apple {host.cpu_model().replace('Apple ', '')} GPU (MPS)"

    @classmethod
    def lacks(cls, knob: str, value, hw: Hardware) -> str:
        have = {"torch": hw.torch_version, "macOS": hw.macos or (99, 0)}  # not on macOS: no macOS floor
        if knob == "precision" and value == "tf32":
            return "tf32 is an NVIDIA Ampere+ tensor-core mode; not available on mps"
        for what, system, floor in FLOORS.get(value, []) if knob == "precision" else []:
            if (v := have[system]) < floor:
                return f"{what} on MPS needs {system} {floor[0]}.{floor[1]}+ (this is {system} {v[0]}.{v[1]})"
        if knob == "compile" and value not in ("off", False, "default"):
            return f"{value}: Inductor's MPS backend has no autotuning or CUDA graphs"
        return ""

    def synchronize(self) -> None:
        torch.mps.synchronize()

    def peak_memory_mib(self) -> dict[str, float]:
        """No peak counter: the peak columns stay NaN (08 compares them as true peaks) and what MPS has goes to
        columns named for it: the allocation right after the window, and Metal's for the process."""
        return {
            **super().peak_memory_mib(),
            "mps_allocated_after_window_mib": torch.mps.current_allocated_memory() / 2**20,
            "mps_driver_allocated_mib": torch.mps.driver_allocated_memory() / 2**20,
        }

    def memory_sample_mib(self) -> float | None:
        return torch.mps.current_allocated_memory() / 2**20

    def allocated_bytes(self) -> int:
        return int(torch.mps.current_allocated_memory())

    def total_memory_bytes(self) -> int:
        return int(torch.mps.recommended_max_memory()) if hasattr(torch.mps, "recommended_max_memory") else 0

    def empty_cache(self) -> None:
        torch.mps.empty_cache()

    def energy_counter(self):
        return energy.Unavailable(energy.APPLE)

    def spec(self, threads: int) -> tuple[list[dict], str]:
        return self.spec_for_name(self.name(), gpu_cores())

    @classmethod
    def spec_for_name(cls, name: str, gpu_cores: int | None = None) -> tuple[list[dict], str]:
        """The rows of this chip with ``gpu_cores`` (as read from the system): both decide the row."""
        chip = re.sub(r"\s*GPU\s*(\(MPS\))?\s*$", "", name.strip(), flags=re.IGNORECASE)
        if re.match(r"Apple M[34]\b", chip, flags=re.IGNORECASE):
            return [], NO_APPLE_SPEC.format(chip=chip)
        if gpu_cores is None:
            return (
                [],
                f"no spec roof: the GPU core count of '{chip}' could not be read, and it decides the row",
            )
        return super().spec_for_name(name, gpu_cores, chip)


def parse_gpu_cores(text: str) -> int | None:
    """GPU core count from ``system_profiler SPDisplaysDataType`` or ``ioreg`` output."""
    match = re.search(r'Total Number of Cores:\s*(\d+)|"gpu-core-count"\s*=\s*(\d+)', text)
    return int(match[1] or match[2]) if match else None


@lru_cache(maxsize=1)
def gpu_cores() -> int | None:
    """The Apple GPU's core count read from the system (macOS only); None where it cannot be read."""
    if platform.system() != "Darwin":
        return None
    return parse_gpu_cores(host.run(["system_profiler", "SPDisplaysDataType"])) or parse_gpu_cores(
        host.run(["ioreg", "-rd1", "-c", "IOAccelerator"])
    )
