"""Devices: resolve a device spec, synchronise before clocks, read names and memory, set CPU threads."""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import re
import subprocess
from functools import lru_cache

import psutil
import torch

# Tensor dtype of each precision (tf32 is fp32 storage with TF32 math; bf16/fp16 are autocast dtypes).
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class DeviceError(ValueError):
    """A device that is unknown or not present on this machine."""


def mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()


def available() -> list[str]:
    """Device kinds usable here, in the order ``auto`` prefers them."""
    kinds = []
    if torch.cuda.is_available():
        kinds.append("cuda")
    if mps_available():
        kinds.append("mps")
    return kinds + ["cpu"]


def resolve(spec: str = "auto", expect: str = "") -> torch.device:
    """``auto`` -> cuda, then mps, then cpu. Raises :class:`DeviceError` for unknown or absent devices."""
    spec = spec.strip().lower()
    if spec == "auto":
        device = torch.device(available()[0])
    else:
        match = re.fullmatch(r"(cpu|mps|cuda)(?::(\d+))?", spec)
        if not match:
            raise DeviceError(f"unknown device '{spec}'; use auto, cpu, cuda, cuda:N or mps")
        kind, index = match.group(1), match.group(2)
        if kind not in available():
            raise DeviceError(f"device '{spec}' is not present here; available: {', '.join(available())}")
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


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device``; a no-op on CPU. Call before every clock read."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo, macOS sysctl, else platform)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            pass
    return platform.processor() or platform.machine()


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_bf16() -> bool:
    """True when the CPU has native bf16 arithmetic (AVX-512-BF16 or AMX) or is Apple silicon."""
    flags = cpu_flags()
    return bool({"avx512_bf16", "amx_bf16"} & flags) or (
        platform.system() == "Darwin" and platform.machine() == "arm64"
    )


def physical_cores() -> int:
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def set_threads(threads: int = 0) -> int:
    """Set torch's intra-op threads (0 = physical cores) and return the number in force."""
    torch.set_num_threads(threads or physical_cores())
    return torch.get_num_threads()


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return f"Apple {cpu_model().replace('Apple ', '')} GPU (MPS)"
    return cpu_model()


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


class math_precision:  # noqa: N801 - used as a context manager, like torch.autocast
    """The matmul and convolution math of ``precision`` on ``device`` for a block, restored after it: fp32 means
    fp32 (TF32 off on CUDA, where cuDNN's default is on), tf32 turns TF32 on; other devices are unaffected.
    Every step of every experiment runs under it, so an "fp32" row is never TF32 on an A100/H100.

    ``cudnn_benchmark`` (True/False) sets ``torch.backends.cudnn.benchmark`` on CUDA for the block: cuDNN times
    its convolution algorithms on the first call of each shape and keeps the fastest (timm and TorchBench set it
    for fixed-shape steps); None leaves it as it is."""

    def __init__(self, device: torch.device, precision: str, cudnn_benchmark: bool | None = None):
        self.device, self.precision, self.cudnn_benchmark, self.saved = device, precision, cudnn_benchmark, None

    def __enter__(self) -> math_precision:
        if self.device.type == "cuda":
            cudnn = torch.backends.cudnn
            self.saved = (torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark)
            torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = self.precision == "tf32"
            if self.cudnn_benchmark is not None:
                cudnn.benchmark = bool(self.cudnn_benchmark)
        return self

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            cudnn = torch.backends.cudnn
            torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32, cudnn.benchmark = self.saved
            self.saved = None


class Unavailable(RuntimeError):
    """A feature this machine's torch, OS or device lacks: a row with ``status=unavailable`` and the reason."""


def parse_version(text: str) -> tuple[int, int]:
    """(major, minor) of a version string such as torch's '2.5.1+cu124' or macOS's '14.6'."""
    nums = re.findall(r"\d+", text or "")
    return (int(nums[0]), int(nums[1]) if len(nums) > 1 else 0) if nums else (0, 0)


TORCH_VERSION = parse_version(torch.__version__)


def macos_version() -> tuple[int, int] | None:
    """(major, minor) of macOS, None on other systems."""
    release = platform.mac_ver()[0]
    return parse_version(release) if release else None


def mps_precision_reason(precision: str, torch_version: tuple[int, int], macos: tuple[int, int] | None) -> str:
    """'' when ``precision`` trains on MPS with this torch and macOS, else why not: fp16 autocast needs torch
    2.5 and its grad scaler (``GradScaler("mps")``) 2.8; bf16 autocast needs torch 2.6 and macOS 14."""
    have = f"this is torch {torch_version[0]}.{torch_version[1]}"
    if precision == "fp16":
        if torch_version < (2, 5):
            return f"fp16 autocast on MPS needs torch 2.5+ ({have})"
        if torch_version < (2, 8):
            return f'fp16 training on MPS needs GradScaler("mps"), torch 2.8+ ({have})'
    if precision == "bf16":
        if torch_version < (2, 6):
            return f"bf16 autocast on MPS needs torch 2.6+ ({have})"
        if macos is not None and macos < (14, 0):
            return f"bf16 on MPS needs macOS 14+ (this is macOS {macos[0]}.{macos[1]})"
    return ""


def precision_unavailable(device: torch.device, precision: str) -> str:
    """'' when ``precision`` can run on ``device`` with the installed torch and OS, else the reason."""
    if device.type == "mps":
        return mps_precision_reason(precision, TORCH_VERSION, macos_version())
    return ""


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` copied to ``device``: non-blocking only from pinned host memory to CUDA. Elsewhere the copy waits:
    an asynchronous copy to MPS from an unpinned tensor freed at once can let the GPU read released memory
    (garbage inputs reported as plausible throughput, or as a non-finite loss)."""
    return t.to(device, non_blocking=device.type == "cuda" and t.is_pinned())


def autocast(device: torch.device, precision: str):
    """Autocast to bf16/fp16 for those precisions (forward passes only), nothing for fp32/tf32."""
    if precision in ("bf16", "fp16"):
        return torch.autocast(device_type=device.type, dtype=DTYPES[precision])
    return contextlib.nullcontext()


def release(device: torch.device) -> None:
    """Free what a finished measurement left: Python garbage first, then the device allocator's cache."""
    gc.collect()
    empty_cache(device)


def empty_cache(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def peak_memory_mib(device: torch.device) -> dict[str, float]:
    """Peak device memory since the last reset, in MiB. CPU: NaN (see the process RSS instead).

    CUDA: ``max_memory_allocated`` (tensors) and ``max_memory_reserved`` (the caching allocator's pool).
    MPS has no peak counter: its peak columns stay NaN (08 compares them as true peaks) and what it has goes to
    columns named for it: ``mps_allocated_after_window_mib`` (current allocation, read right after the window)
    and ``mps_driver_allocated_mib`` (Metal's allocation for the process, caches included).
    """
    mib = 2**20
    if device.type == "cuda":
        return {
            "peak_device_mem_mib": torch.cuda.max_memory_allocated(device) / mib,
            "peak_device_reserved_mib": torch.cuda.max_memory_reserved(device) / mib,
        }
    if device.type == "mps":
        return {
            "peak_device_mem_mib": float("nan"),
            "peak_device_reserved_mib": float("nan"),
            "mps_allocated_after_window_mib": torch.mps.current_allocated_memory() / mib,
            "mps_driver_allocated_mib": torch.mps.driver_allocated_memory() / mib,
        }
    return {"peak_device_mem_mib": float("nan"), "peak_device_reserved_mib": float("nan")}


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
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if platform.system() == "Darwin" else peak / 1024


def nvml_bus_id(index: int) -> str | None:
    """The PCI bus id of CUDA device ``index`` as NVML writes it ("00000000:3B:00.0"), None if torch hides it."""
    try:
        props = torch.cuda.get_device_properties(index)
    except (AssertionError, RuntimeError):  # no CUDA here (a test's fake NVML, a CPU-only build)
        return None
    if not hasattr(props, "pci_bus_id"):
        return None
    return f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"


def nvml_handle(device: torch.device, nvml=None):
    """The NVML handle of the GPU a CUDA ``device`` really is, whatever CUDA_VISIBLE_DEVICES or CUDA's device
    order says: matched by PCI bus id, else mapped through CUDA_VISIBLE_DEVICES (indices or UUIDs).

    NVML numbers all GPUs of the machine; CUDA numbers the visible ones (fastest first by default), so
    ``nvmlDeviceGetHandleByIndex(cuda index)`` can name another GPU. Raises when NVML cannot be used.
    """
    if nvml is None:
        import pynvml as nvml
    nvml.nvmlInit()
    index = device.index if device.index is not None else torch.cuda.current_device()
    bus = nvml_bus_id(index)
    if bus is not None:
        try:
            return nvml.nvmlDeviceGetHandleByPciBusId(bus)
        except Exception:  # noqa: BLE001 - fall back to the visible-devices mapping
            pass
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if index < len(visible):
        entry = visible[index]
        if entry.isdigit():
            return nvml.nvmlDeviceGetHandleByIndex(int(entry))
        return nvml.nvmlDeviceGetHandleByUUID(entry)
    return nvml.nvmlDeviceGetHandleByIndex(index)


def is_oom(err: BaseException) -> bool:
    """True for an out-of-memory error from any backend (CUDA, MPS or the host allocator)."""
    if isinstance(err, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text
                                              or is_capture_failure(err))


# What torch raises when an allocation fails inside a CUDA-graph capture (torch.compile's reduce-overhead): the
# failed cudaMalloc invalidates the capture, and the error that surfaces is the capture's
# (cudaErrorStreamCaptureInvalidated), not OutOfMemoryError (pytorch/pytorch#159594, #187795).
CAPTURE_FAILURE = ("operation failed due to a previous error during capture", "cudaerrorstreamcaptureinvalidated",
                   "capture invalidated")


def is_capture_failure(err: BaseException) -> bool:
    """True for a CUDA-graph capture invalidated by an earlier failure: taken as out of memory (its usual
    cause in a training step), so the batch-size back-off tries a smaller batch."""
    text = str(err).lower()
    return isinstance(err, RuntimeError) and any(m in text for m in CAPTURE_FAILURE)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def parse_apple_gpu_cores(text: str) -> int | None:
    """GPU core count from ``system_profiler SPDisplaysDataType`` ("Total Number of Cores: 18") or ``ioreg``
    ("gpu-core-count" = 18) output."""
    match = re.search(r"Total Number of Cores:\s*(\d+)", text) or re.search(r'"gpu-core-count"\s*=\s*(\d+)', text)
    return int(match.group(1)) if match else None


@lru_cache(maxsize=1)
def apple_gpu_cores() -> int | None:
    """The Apple GPU's core count read from the system (macOS only); None where it cannot be read."""
    if platform.system() != "Darwin":
        return None
    return parse_apple_gpu_cores(_run(["system_profiler", "SPDisplaysDataType"])) or parse_apple_gpu_cores(
        _run(["ioreg", "-rd1", "-c", "IOAccelerator"]))


def parse_cpu_mhz(cpuinfo: str) -> float | None:
    """The highest "cpu MHz" of /proc/cpuinfo text."""
    mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, flags=re.MULTILINE)]
    return max(mhz) if mhz else None


def parse_lscpu_max_mhz(text: str) -> float | None:
    """"CPU max MHz" of ``lscpu`` output (absent in many VMs)."""
    match = re.search(r"^CPU max MHz:\s*([\d.]+)", text or "", flags=re.MULTILINE)
    return float(match.group(1)) if match and float(match.group(1)) > 0 else None


def clock_from(sysfs_max_khz: str | None = None, psutil_max_mhz: float | None = None, lscpu: str | None = None,
               sysctl_max_hz: str | None = None, cpuinfo: str | None = None) -> tuple[float | None, str, bool]:
    """The CPU's clock in GHz, where it was read, and whether it is the maximum (boost) clock: sysfs
    cpuinfo_max_freq, psutil's maximum, lscpu "CPU max MHz", macOS hw.cpufrequency_max (maxima, in that order),
    else /proc/cpuinfo "cpu MHz" (the base/nominal clock in a VM, the current one elsewhere: not a maximum)."""
    if sysfs_max_khz and sysfs_max_khz.strip().isdigit() and int(sysfs_max_khz):
        return int(sysfs_max_khz) / 1e6, "maximum clock, sysfs cpuinfo_max_freq", True
    if psutil_max_mhz:
        return psutil_max_mhz / 1e3, "maximum clock, psutil cpu_freq().max", True
    if mhz := parse_lscpu_max_mhz(lscpu or ""):
        return mhz / 1e3, "maximum clock, lscpu CPU max MHz", True
    if sysctl_max_hz and sysctl_max_hz.strip().isdigit():
        return int(sysctl_max_hz) / 1e9, "maximum clock, sysctl hw.cpufrequency_max", True
    if mhz := parse_cpu_mhz(cpuinfo or ""):
        return mhz / 1e3, "base/nominal clock, /proc/cpuinfo cpu MHz (no maximum clock readable)", False
    return None, "clock not readable", False


@lru_cache(maxsize=1)
def cpu_clock_ghz() -> tuple[float | None, str, bool]:
    """:func:`clock_from` this machine's sysfs, psutil, lscpu, sysctl (macOS) and /proc/cpuinfo."""
    try:
        freq = psutil.cpu_freq()
    except (AttributeError, NotImplementedError, OSError):
        freq = None
    darwin = platform.system() == "Darwin"
    return clock_from(_read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), freq.max if freq else None,
                      "" if darwin else _run(["lscpu"]), _run(["sysctl", "-n", "hw.cpufrequency_max"]) if darwin else "",
                      _read("/proc/cpuinfo"))


# --- instruction sets and compute capability (for the configuration search, cnnbench.tuning)
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
             "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "bf16", "sve")  # x86 flags, Arm features
NATIVE_BF16 = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX-512-BF16, Intel AMX, Arm FEAT_BF16


@lru_cache(maxsize=1)
def _cpu_features() -> frozenset[str]:
    """The CPU's feature words: /proc/cpuinfo 'flags' (x86) or 'Features' (Arm), macOS sysctl FEAT_*."""
    words: set[str] = set(cpu_flags())
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("Features"):
                    words |= set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        words.add("asimd")
        try:
            out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True)
            if out.stdout.strip() == "1":  # M2 and newer; the M1 has no bf16 arithmetic
                words.add("bf16")
        except OSError:
            pass
    return frozenset(words)


def cpu_isa(flags: frozenset[str] | set[str] | None = None) -> frozenset[str]:
    """The vector and matrix instruction sets of the CPU among :data:`ISA_FLAGS` (``flags``: for tests)."""
    return frozenset(set(_cpu_features() if flags is None else flags) & set(ISA_FLAGS))


def native_bf16(isa: frozenset[str] | set[str] | None = None) -> bool:
    """True when the CPU computes bf16 natively (AVX-512-BF16, AMX or Arm BF16); AVX2-only CPUs emulate it."""
    return bool(set(cpu_isa() if isa is None else isa) & set(NATIVE_BF16))


def cuda_capability(device: torch.device | None = None) -> tuple[int, int] | None:
    """(major, minor) compute capability of a CUDA device (8.0 = Ampere), None without CUDA."""
    if not torch.cuda.is_available() or (device is not None and device.type != "cuda"):
        return None
    return tuple(torch.cuda.get_device_capability(device))
