"""The host every device kind runs beside: its CPU (model, instruction sets, clock, cores), torch's threads, and
this process's memory. Read from the system, never assumed; parsers are separate so tests feed them text."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from functools import lru_cache

import psutil
import torch


def parse_version(text: str) -> tuple[int, int]:
    """(major, minor) of a version string such as torch's '2.5.1+cu124' or macOS's '14.6'."""
    nums = re.findall(r"\d+", text or "")
    return (int(nums[0]), int(nums[1]) if len(nums) > 1 else 0) if nums else (0, 0)


TORCH_VERSION = parse_version(torch.__version__)


def macos_version() -> tuple[int, int] | None:
    """(major, minor) of macOS, None on other systems."""
    return parse_version(release) if (release := platform.mac_ver()[0]) else None


def read(path: str | os.PathLike) -> str | None:
    """A small system file's text, None where it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def run(cmd: list[str]) -> str:
    """A system command's output, "" where it fails."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo, macOS sysctl, else platform)."""
    for line in (read("/proc/cpuinfo") or "").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    if platform.system() == "Darwin" and (brand := run(["sysctl", "-n", "machdep.cpu.brand_string"]).strip()):
        return brand
    return platform.processor() or platform.machine()


# Vector and matrix instruction sets that decide what a CPU computes natively (x86 flags, Arm features).
ISA_FLAGS = tuple(
    (
        "sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16 "
        "amx_int8 asimd bf16 sve"
    ).split()
)
NATIVE_BF16 = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX-512-BF16, Intel AMX, Arm FEAT_BF16


@lru_cache(maxsize=1)
def cpu_features() -> frozenset[str]:
    """The CPU's feature words: /proc/cpuinfo 'flags' (x86) or 'Features' (Arm), macOS sysctl FEAT_*."""
    words: set[str] = set()
    for line in (read("/proc/cpuinfo") or "").splitlines():
        if line.startswith(("flags", "Features")):
            words |= set(line.split(":", 1)[1].split())
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        words.add("asimd")
        if run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"]).strip() == "1":  # M2 and newer; the M1 has none
            words.add("bf16")
    return frozenset(words)


def cpu_isa(flags: frozenset[str] | set[str] | None = None) -> frozenset[str]:
    """The instruction sets of the CPU among :data:`ISA_FLAGS` (``flags``: for tests)."""
    return frozenset(set(cpu_features() if flags is None else flags) & set(ISA_FLAGS))


def native_bf16(isa: frozenset[str] | set[str] | None = None) -> bool:
    """True when the CPU computes bf16 natively (AVX-512-BF16, AMX or Arm BF16); AVX2-only CPUs emulate it."""
    return bool(set(cpu_isa() if isa is None else isa) & set(NATIVE_BF16))


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def set_threads(threads: int = 0) -> int:
    """Set torch's intra-op threads (0 = physical cores) and return the number in force."""
    torch.set_num_threads(threads or physical_cores())
    return torch.get_num_threads()


def rss_mib() -> float:
    """This process's resident memory now (MiB)."""
    return psutil.Process().memory_info().rss / 2**20


def reset_peak_rss() -> bool:
    """Reset this process's RSS high-water mark (Linux: ``5`` into /proc/self/clear_refs); False if impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    """This process's RSS high-water mark (MiB): VmHWM on Linux (since start or :func:`reset_peak_rss`), else
    ``ru_maxrss`` (bytes on macOS, KiB elsewhere)."""
    for line in (read("/proc/self/status") or "").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if platform.system() == "Darwin" else peak / 1024


def parse_cpu_mhz(cpuinfo: str) -> float | None:
    """The highest "cpu MHz" of /proc/cpuinfo text."""
    mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, flags=re.MULTILINE)]
    return max(mhz) if mhz else None


def clock_from(
    sysfs_max_khz: str | None = None,
    psutil_max_mhz: float | None = None,
    lscpu: str | None = None,
    cpuinfo: str | None = None,
) -> tuple[float | None, str, bool]:
    """The CPU's clock in GHz, where it was read, and whether it is the maximum (boost) clock: the first of
    the maxima given, else /proc/cpuinfo "cpu MHz" (not a maximum)."""
    if sysfs_max_khz and sysfs_max_khz.strip().isdigit() and int(sysfs_max_khz):
        return int(sysfs_max_khz) / 1e6, "maximum clock, sysfs cpuinfo_max_freq", True
    if psutil_max_mhz:
        return psutil_max_mhz / 1e3, "maximum clock, psutil cpu_freq().max", True
    if (mhz := re.findall(r"^CPU max MHz:\s*([\d.]+)", lscpu or "", flags=re.MULTILINE)) and float(mhz[0]):
        return float(mhz[0]) / 1e3, "maximum clock, lscpu CPU max MHz", True  # absent in many VMs
    if mhz := parse_cpu_mhz(cpuinfo or ""):
        return mhz / 1e3, "base/nominal clock, /proc/cpuinfo cpu MHz (no maximum clock readable)", False
    return None, "clock not readable", False


@lru_cache(maxsize=1)
def cpu_clock_ghz() -> tuple[float | None, str, bool]:
    """:func:`clock_from` this machine's sysfs, psutil (macOS: sysctl's maximum), lscpu and /proc/cpuinfo."""
    try:
        freq = psutil.cpu_freq()
    except (AttributeError, NotImplementedError, OSError):
        freq = None
    return clock_from(
        read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
        freq.max if freq else None,
        run(["lscpu"]),
        read("/proc/cpuinfo"),
    )
