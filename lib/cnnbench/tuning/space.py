"""The search space: every knob of a training (or eval) step, restricted to what this hardware supports.

Each knob value left out is recorded with the reason (an AVX2-only CPU emulates bf16, tf32 needs NVIDIA Ampere,
CUDA graphs need CUDA, ...), so the report says why a configuration was never tried.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field, replace

import torch

from cnnbench import devices
from cnnbench.params import COMPILE_MODES

KNOBS = ("precision", "memory_format", "compile_mode", "cudnn_benchmark", "batch_size", "threads", "workers",
         "pin_memory")


@dataclass(frozen=True)
class Candidate:
    """One configuration of the knobs; ``label`` names it in every table."""

    precision: str = "fp32"
    memory_format: str = "nchw"
    compile_mode: str = "off"  # off | default | max-autotune | reduce-overhead
    batch_size: int = 128
    threads: int = 1  # CPU threads torch uses
    workers: int = 0  # DataLoader workers (loader mode)
    pin_memory: bool = False  # pinned host memory (loader mode on CUDA)
    cudnn_benchmark: bool = True  # torch.backends.cudnn.benchmark (CUDA): the default for fixed-shape steps

    @property
    def label(self) -> str:
        parts = [self.precision, self.memory_format, f"compile={self.compile_mode}", f"bs{self.batch_size}",
                 f"threads{self.threads}"]
        return " ".join(parts + ([] if self.cudnn_benchmark else ["cudnn.benchmark=off"]))

    @property
    def numerics(self) -> tuple[str, str, str]:
        """The knobs that change the arithmetic (checked by the correctness guard)."""
        return self.precision, self.memory_format, self.compile_mode

    def with_(self, **changes) -> Candidate:
        return replace(self, **changes)

    def columns(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Hardware:
    """What the search needs to know about the device; ``detect`` reads it, tests build it by hand."""

    kind: str  # cpu | cuda | mps
    name: str
    cores: int  # physical CPU cores
    isa: frozenset[str] = frozenset()  # CPU instruction sets (devices.cpu_isa)
    capability: tuple[int, int] | None = None  # CUDA compute capability
    cxx: bool = True  # a C++ compiler for Inductor's CPU code
    triton: bool = False  # Triton for Inductor's GPU code
    sms: int = 0  # CUDA streaming multiprocessors (0: not a CUDA device)
    torch_version: tuple[int, int] = devices.TORCH_VERSION  # (major, minor) of the installed torch
    macos: tuple[int, int] | None = None  # (major, minor) of macOS, None elsewhere

    @classmethod
    def detect(cls, device: torch.device) -> Hardware:
        cxx = any(shutil.which(c) for c in (os.environ.get("CXX", ""), "g++", "c++", "clang++") if c)
        return cls(kind=device.type, name=devices.device_name(device), cores=devices.physical_cores(),
                   isa=devices.cpu_isa(), capability=devices.cuda_capability(device), cxx=cxx,
                   triton=importlib.util.find_spec("triton") is not None, macos=devices.macos_version(),
                   sms=torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 0)

    def cpu_description(self) -> str:
        if "avx512f" in self.isa:
            return "AVX-512 CPU without AVX512-BF16 or AMX"
        if "avx2" in self.isa:
            return "AVX2-only CPU"
        if "asimd" in self.isa:
            return "Arm CPU without FEAT_BF16"
        return "CPU without native bf16"


@dataclass(frozen=True)
class Skip:
    knob: str
    value: str
    reason: str


@dataclass
class Space:
    """The values of each knob to search, the seeds' default, and every value left out with its reason."""

    values: dict[str, list]
    default: Candidate
    skipped: list[Skip] = field(default_factory=list)

    def size(self) -> int:
        n = 1
        for v in self.values.values():
            n *= len(v)
        return n

    def rows(self, hw: Hardware) -> list[dict]:
        """tuning_space.csv rows: one per knob value, searched or skipped with the reason."""
        base = {"device_kind": hw.kind, "device_name": hw.name}
        rows = [{**base, "knob": k, "value": str(v), "searched": True, "reason": ""}
                for k, vs in self.values.items() for v in vs]
        return rows + [{**base, "knob": s.knob, "value": s.value, "searched": False, "reason": s.reason}
                       for s in self.skipped]


def _precision_reason(hw: Hardware, precision: str) -> str:
    """'' when ``precision`` can be searched on ``hw``, else why not."""
    cap = hw.capability
    if precision == "fp32":
        return ""
    if hw.kind == "mps" and (floor := devices.mps_precision_reason(precision, hw.torch_version, hw.macos)):
        return floor
    if precision == "tf32":
        if hw.kind != "cuda":
            return f"tf32 is an NVIDIA Ampere+ tensor-core mode; not available on {hw.kind}"
        return "" if cap and cap[0] >= 8 else f"tf32 needs compute capability 8.0+ (Ampere), this GPU is {cap}"
    if precision == "bf16":
        if hw.kind == "cpu":
            return "" if devices.native_bf16(hw.isa) else (
                f"bf16: {hw.cpu_description()}: bf16 is emulated and slow here (needs avx512_bf16 or amx_bf16)")
        if hw.kind == "cuda":
            return "" if cap and cap[0] >= 8 else f"bf16 needs compute capability 8.0+ (Ampere), this GPU is {cap}"
        return ""
    if precision == "fp16":
        return "" if hw.kind in ("cuda", "mps") else (
            "fp16 autocast + grad scaler is searched on CUDA and MPS; CPUs have no fast fp16 training kernels")
    return f"unknown precision {precision}"


MAX_AUTOTUNE_MIN_SMS = 68  # torch._inductor.utils.is_big_gpu: fewer SMs and max-autotune's GEMM templates are off
MAX_AUTOTUNE_MIN_CORES = 2  # physical host cores at or below which max-autotune is out of the compile budget


def _compile_reason(hw: Hardware, mode: str) -> str:
    if mode == "off":
        return ""
    if sys.platform == "win32":
        return "torch.compile (Inductor) is not supported on Windows here"
    if mode == "reduce-overhead" and hw.kind != "cuda":
        return "reduce-overhead uses CUDA graphs: CUDA only"
    if hw.kind == "cpu" and not hw.cxx:
        return "no C++ compiler (g++/clang++) for Inductor's CPU code"
    if hw.kind == "cuda" and not hw.triton:
        return "Triton is not installed: Inductor cannot generate GPU kernels"
    if hw.kind == "mps" and mode != "default":
        return f"{mode}: Inductor's MPS backend has no autotuning or CUDA graphs"
    if mode == "max-autotune" and hw.kind == "cuda" and 0 < hw.sms < MAX_AUTOTUNE_MIN_SMS:
        return (f"max-autotune: Inductor autotunes GEMMs only on {MAX_AUTOTUNE_MIN_SMS}+ SMs; on this {hw.sms}-SM "
                "GPU it compiles far longer for the default kernels (compile budget)")
    if mode == "max-autotune" and hw.cores <= MAX_AUTOTUNE_MIN_CORES:
        return (f"max-autotune: its benchmarked compile takes minutes per shape on {hw.cores} host core(s) "
                "(compile budget)")
    return ""


def _powers_of_two(lo: int, hi: int) -> list[int]:
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return out


def build(hw: Hardware, default: Candidate, precisions: list[str], compile_modes: list[str],
          min_batch_size: int, max_batch_size: int, data_mode: str = "device") -> Space:
    """The space for ``hw``: the requested values it supports; the rest skipped with the reason.

    ``default`` is the seeds' configuration (fp32, NCHW, eager, the run's batch size and threads): always in.
    Batch sizes are powers of two from ``min_batch_size`` to ``max_batch_size`` plus the default's; the
    largest that fits is found during the search (out-of-memory back-off).
    """
    skipped: list[Skip] = []
    values: dict[str, list] = {}

    def pick(knob: str, candidates, reason_of) -> None:
        values[knob] = []
        for v in candidates:
            reason = reason_of(v)
            if reason:
                skipped.append(Skip(knob, str(v), reason))
            else:
                values[knob].append(v)

    pick("precision", list(dict.fromkeys(["fp32", *precisions])), lambda v: _precision_reason(hw, v))
    skipped += [Skip("precision", v, "not in tune_precisions") for v in ("tf32", "bf16", "fp16") if v not in precisions]
    values["memory_format"] = ["nchw", "channels_last"]
    pick("compile_mode", list(dict.fromkeys(["off", *compile_modes])), lambda v: _compile_reason(hw, v))
    skipped += [Skip("compile_mode", v, "not in tune_compile_modes") for v in COMPILE_MODES if v not in compile_modes
                and v != "off"]
    if hw.kind == "cuda":
        values["cudnn_benchmark"] = list(dict.fromkeys([default.cudnn_benchmark, not default.cudnn_benchmark]))
    else:
        values["cudnn_benchmark"] = [default.cudnn_benchmark]
        skipped.append(Skip("cudnn_benchmark", str(not default.cudnn_benchmark),
                            f"cudnn.benchmark picks cuDNN's convolution algorithms: NVIDIA only, not {hw.kind}"))
    sizes = sorted({*_powers_of_two(min_batch_size, max_batch_size), default.batch_size})
    values["batch_size"] = sizes
    if hw.kind == "cpu":
        values["threads"] = sorted({*_powers_of_two(1, hw.cores), hw.cores, default.threads})
    else:
        values["threads"] = [default.threads]
        skipped.append(Skip("threads", "1..cores", f"the step runs on {hw.kind}: host threads stay at "
                                                   f"{default.threads}"))
    if data_mode == "loader":
        values["workers"] = sorted({0, *_powers_of_two(1, hw.cores), hw.cores, default.workers})
        if hw.kind == "cuda":
            values["pin_memory"] = [False, True]
        else:
            values["pin_memory"] = [False]
            skipped.append(Skip("pin_memory", "True", f"pinned memory speeds host-to-CUDA copies; {hw.kind} has none"))
    else:
        values["workers"] = [default.workers]
        values["pin_memory"] = [default.pin_memory]
        skipped.append(Skip("workers, pin_memory", "all", "data_mode is device: no DataLoader in the step"))
    return Space(values, default, skipped)
