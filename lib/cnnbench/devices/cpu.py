"""The host CPU as the measured device: no queue, host clocks, RAPL energy, sysfs caches, numba bandwidth
kernels (:mod:`cnnbench.devices.membench`) and a compute roof derived from cores, ISA and clock."""

from __future__ import annotations

import math
import platform
import re
from pathlib import Path

from cnnbench.devices import host
from cnnbench.devices.base import SPEC_COLUMNS, Backend, Hardware, sweep_sizes

SYSFS_CACHES = "/sys/devices/system/cpu/cpu0/cache"
# fp32 lanes per vector and FMA units per core by ISA (the widest the CPU's flags show), for derived CPU roofs
_ISA = (
    ("avx512f", 16, 2, "AVX-512"),
    ("avx2", 8, 2, "AVX2"),
    ("avx", 8, 1, "AVX (no FMA)"),
    ("sse2", 4, 1, "SSE2"),
)

# what a derived roof's source says when only a base clock was read
BASE_CLOCK = (
    "; a base clock, not an upper bound: under load the cores boost above it, so a measured rate can exceed "
    "this roof"
)
# a CPU without native bf16, by its widest ISA
NO_BF16 = {
    "avx512f": "AVX-512 CPU without AVX512-BF16 or AMX",
    "avx2": "AVX2-only CPU",
    "asimd": "Arm CPU without FEAT_BF16",
}


class CpuBackend(Backend):
    kind = torch_type = "cpu"

    @classmethod
    def lacks(cls, knob: str, value, hw: Hardware) -> str:
        if knob == "precision":
            if value == "tf32":
                return f"tf32 is an NVIDIA Ampere+ tensor-core mode; not available on {hw.kind}"
            if value == "bf16" and not host.native_bf16(hw.isa):
                what = next((d for flag, d in NO_BF16.items() if flag in hw.isa), "CPU without native bf16")
                return f"bf16: {what}: bf16 is emulated and slow here (needs avx512_bf16 or amx_bf16)"
            if value == "fp16":
                return "fp16 autocast + grad scaler runs on CUDA and MPS; CPUs have no fast fp16 training kernels"
        if knob == "compile" and value not in ("off", False):
            if value == "reduce-overhead":
                return "reduce-overhead uses CUDA graphs: CUDA only"
            if not hw.cxx:
                return "no C++ compiler (g++/clang++) for Inductor's CPU code"
        return super().lacks(knob, value, hw)

    def cache_levels(self, threads: int = 1, sysfs_root=None) -> list[dict]:
        """sysfs (Linux) or sysctl (macOS); a private cache counts once per thread using one."""
        caches, source = parse_sysfs_caches(sysfs_root or SYSFS_CACHES), "sysfs"
        if not caches and sysfs_root is None and platform.system() == "Darwin":
            caches, source = _sysctl_caches(), "sysctl"
        threads, out = max(threads, 1), []
        for c in caches:
            instances = max(1, math.ceil(threads / (c["shared_by"] or threads)))
            size, how = c["size_bytes"], f"{source}: {c['size_bytes'] // 1024} KiB x {instances} in use"
            out.append(
                dict(level=c["level"], size_bytes=size, capacity_bytes=size * instances, size_source=how)
            )
        return out

    def sweep_sizes(self, levels, dram_bytes, threads):
        # a few KiB per thread up, two sizes per octave: every level holds several
        return sweep_sizes(levels, dram_bytes, smallest=4 * 2**10 * threads, step=2**0.5)

    def bandwidth_sweep(self, sizes, repeats, threads):
        from cnnbench.devices import membench

        return membench.sweep(sizes, threads, repeats)  # calls of at least 10 ms

    def spec(self, threads: int) -> tuple[list[dict], str]:
        """A roof derived from this CPU's cores, ISA flags and clock (:func:`cpu_spec`)."""
        clock, source, is_max = host.cpu_clock_ghz()
        cores = threads or host.physical_cores()
        return cpu_spec(self.name(), cores, clock, source, host.cpu_features(), clock_is_max=is_max)


def _size_bytes(text: str) -> int | None:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text or "", flags=re.IGNORECASE)
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2).upper()]


def _cpu_count(cpu_list: str) -> int:
    """Number of CPUs in a sysfs list such as "0-3,8-11"."""
    ranges = [part.partition("-") for part in filter(None, (cpu_list or "").split(","))]
    return max(sum(int(hi or lo) - int(lo) + 1 for lo, _, hi in ranges), 1)


def parse_sysfs_caches(root: str | Path = SYSFS_CACHES) -> list[dict]:
    """Data/unified caches of one CPU from sysfs: level, size in bytes, and how many CPUs share one."""
    out = []
    for index in sorted(Path(root).glob("index*")):
        kind, level, size, shared = (
            host.read(index / n) or "" for n in ("type", "level", "size", "shared_cpu_list")
        )
        if kind in ("Data", "Unified") and level.isdigit() and (nbytes := _size_bytes(size)):
            out.append({"level": f"l{level}", "size_bytes": nbytes, "shared_by": _cpu_count(shared)})
    return sorted(out, key=lambda c: c["level"])


def _sysctl_caches() -> list[dict]:
    """macOS: hw.l1dcachesize, hw.l2cachesize (hw.l3cachesize where present), per performance core."""
    sizes = {
        lv: host.run(["sysctl", "-n", f"hw.l{lv}{'d' if lv == 1 else ''}cachesize"]).strip()
        for lv in (1, 2, 3)
    }
    return [
        {"level": f"l{lv}", "size_bytes": int(v), "shared_by": 1 if lv == 1 else 0}
        for lv, v in sizes.items()
        if v.isdigit() and int(v)
    ]


def vector_isa(flags: frozenset[str], machine: str = "") -> tuple[int, int, str] | None:
    """(fp32 lanes, FMA units per core, name) of the CPU's widest vector ISA; None when unknown."""
    if machine.lower() in ("arm64", "aarch64") and not flags & {"avx2", "avx512f"}:
        return (
            (4, 4, "NEON 128-bit, 4 FMA pipes") if platform.system() == "Darwin" else (4, 2, "NEON 128-bit")
        )
    for flag, lanes, units, name in _ISA:
        if flag in flags and (flag != "avx2" or "fma" in flags):
            return lanes, units, name
    return None


def cpu_spec(
    device_name: str,
    cores: int,
    clock_ghz: float | None,
    clock_source: str,
    flags: frozenset[str],
    machine: str = "",
    clock_is_max: bool = True,
) -> tuple[list[dict], str]:
    """A derived fp32 compute roof for a CPU: cores x FMA units x fp32 lanes x 2 FLOP x clock (ISA from its
    flags); with only a base clock (``clock_is_max`` false) the source says so. None, with a note, when the
    ISA or the clock cannot be read."""
    isa = vector_isa(flags, machine or platform.machine())
    if isa is None or not clock_ghz:
        return [], f"no derived CPU roof: its {'vector ISA' if isa is None else 'clock'} could not be read"
    lanes, units, name = isa
    row = dict.fromkeys(SPEC_COLUMNS, math.nan) | {
        "device_name": device_name,
        "kind": "spec",
        "precision": "fp32",
        "level": "dram",
        "peak_gflops": cores * units * lanes * 2 * clock_ghz,
        "source": f"derived: {cores} cores x {units} FMA units x {lanes} fp32 lanes ({name}) x 2 FLOP x "
        f"{clock_ghz:.2f} GHz ({clock_source}){'' if clock_is_max else BASE_CLOCK}; bandwidth not derived",
    }
    return [row], "CPU spec roof derived from the measured cores, ISA flags and clock"
