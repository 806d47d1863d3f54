"""What a device kind must answer (:class:`Backend`, bound to one ``torch.device``), and the answers of a
device with no queue of its own (the host CPU). Each kind's module subclasses it, overriding what differs."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import platform
import re
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import torch
from torch.profiler import ProfilerActivity

from cnnbench.devices import energy, host

# Tensor dtype of each value of the precision knob, in its order (tf32 is fp32 storage with TF32 math; bf16/fp16
# are autocast dtypes).
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class DeviceError(ValueError):
    """A device that is unknown or not present on this machine."""


class Unavailable(RuntimeError):
    """A feature this machine's torch, OS or device lacks: a row with ``status=unavailable`` and the reason."""


@dataclass(frozen=True)
class Hardware:
    """The facts that decide which knob values a device can run (:meth:`Backend.hardware`)."""

    kind: str  # the backend's kind: cpu | cuda | mps | rocm
    name: str
    cores: int  # physical host cores
    isa: frozenset[str] = frozenset()  # host CPU instruction sets (host.cpu_isa)
    capability: tuple[int, int] | None = None  # CUDA compute capability
    cxx: bool = True  # a C++ compiler for Inductor's CPU code
    triton: bool = False  # Triton for Inductor's GPU code
    sms: int = 0  # streaming multiprocessors (0: not a GPU that has them)
    torch_version: tuple[int, int] = host.TORCH_VERSION
    macos: tuple[int, int] | None = None
    memory_bytes: int = 0  # the device's own memory (0: it shares the host's)


# The protocol a device kind measures with: params keys applied under the params file's own. The host CPU's is sized
# for minutes on a 2-core CPU: seed 000's models at 64 px, 3 steps in each of 3 fresh processes (more while an
# interval is wider than +-8%, 30 s a notebook at most), epochs of 3 batches, 05-07 a minute or so each.
CPU_PROTOCOL = {
    "warmup_steps": 2, "measured_steps": 3, "min_window_s": 0.25, "repeats": 1, "processes": 3,
    "max_processes": 6, "ci_target_pct": 8.0, "adapt_budget_s": 30, "epoch_mode": True, "max_batches": 3,
    "sweep": {"squeezenet1_1": [32, 64, 128, 512], "resnet50": [32, 128]},
    "scratch_train_images": 8192, "scratch_test_images": 1000, "scratch_epochs": 3, "scratch_mlp_steps": 200,
    "pretrained": False, "transfer_image_size": 64, "transfer_batch_sizes": [16, 32], "transfer_epochs": 2,
    "transfer_train_images": 64, "transfer_val_images": 32, "phase_steps": 6, "phase_batch_size": 16,
    "profile_batch_size": 8, "scaling_batch_size": 16, "scaling_steps": 4, "phase_max_s": 10.0,
    "tune_models": ["resnet18"], "tune_budget_s": 20, "tune_compile_modes": ["off"], "tune_min_batch_size": 32,
    "tune_max_batch_size": 128, "tune_confirm_top": 1, "tune_confirm_window_s": 2.0, "peak_repeats": 3,
    "profile_steps": 2,
}  # fmt: skip
# An accelerator's: what a GPU user compares (NVIDIA's and timm's ResNet-50 benchmarks): seed 000's models at 224 px,
# fp32 and TF32 beside autocast with channels_last (the first alternative the device runs), 10 warm-up steps,
# windows of at least 1 s (NVML's energy resolution), no epochs; 06 on the accelerator alone, 07 on ResNet-50.
ACCELERATOR_PROTOCOL = {
    **CPU_PROTOCOL, "image_size": 224, "warmup_steps": 10, "min_window_s": 1.0, "adapt_budget_s": 15,
    "models": ["resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1"], "epoch_mode": False,
    "sweep": {"squeezenet1_1": [64, 128, 256, 512], "resnet50": [64, 128, 256]}, "tune_guard_budget_s": 120,
    "variants": [
        {"precision": "fp32", "memory_format": "nchw", "compile": False},
        {"precision": "tf32", "memory_format": "nchw", "compile": False},
        [{"precision": p, "memory_format": "channels_last", "compile": False} for p in ("bf16", "fp16")],
    ],
    "synthetic_images": 512,
    "transfer_image_size": 224, "transfer_batch_sizes": [32, 64], "transfer_train_images": 256,
    "transfer_val_images": 128, "phase_batch_size": 32, "profile_batch_size": 16, "scaling_batch_size": 64,
    "tune_models": ["resnet50"], "tune_budget_s": 60, "tune_min_batch_size": 64, "tune_max_batch_size": 512,
}  # fmt: skip


class Backend:
    """One device kind's answers for a device of that kind; the defaults are the host CPU's (no queue)."""

    kind = "cpu"  # the name rows carry as device_kind
    torch_type = "cpu"  # the torch.device type this kind claims
    rank = 9  # kinds claim a device, and ``auto`` prefers their torch types, in ascending rank
    indexed = False  # its devices are numbered (cuda:1); else one device (the CPU)
    on_host = True  # the host CPU is the measured device (its threads and speed are the measurement's)
    own_memory = False  # it has memory of its own (else it shares the host's: the host's limits are its own)
    queued = False  # work is queued and runs later: synchronise before reading a clock
    # one fresh worker measures every configuration of a round (its peaks reset per configuration), else one worker
    # per configuration (the host's RSS peak is a process's own)
    round_worker = False
    pins = False  # pinned host memory speeds copies to this device
    ddp_backend = "gloo"  # torch.distributed backend of its data-parallel runs
    min_call_s = 0.005  # the shortest timed call of a roofline kernel (launch and clock costs vanish in it)
    main_memory = "dram"
    matmul_size = 2048  # 04's matmul size (n x n) where the params set none
    protocol = CPU_PROTOCOL
    # a first run's time estimate (cnnbench.eta), seconds on a 2-core CPU: a notebook's kernel start-up, a worker
    # process, a step, one repetition of 04's peaks, one model and phase profiled, one from-scratch step of 05
    budget = dict(kernel_s=5.0, process_s=1.5, step_s=0.5, peaks_s=12.0, layers_s=3.0, scratch_step_s=0.05)

    def __init__(self, device: torch.device):
        self.device = device

    @classmethod
    def protocol_for(cls, hw: Hardware | None) -> dict:
        """:attr:`protocol` on ``hw`` (None: a device of this kind not at hand): each variant, or the first of a
        list of alternatives, that ``hw`` runs; a variant it runs in no alternative is left out."""

        def runs(variant: dict) -> bool:
            return hw is None or not any(cls.lacks(k, v, hw) for k, v in variant.items())

        options = [v if isinstance(v, list) else [v] for v in cls.protocol.get("variants", [])]
        variants = [next(iter(filter(runs, alternatives)), None) for alternatives in options]
        return {**cls.protocol, **({"variants": [v for v in variants if v]} if options else {})}

    @classmethod
    def present(cls) -> bool:
        return True

    @classmethod
    def claims(cls, device: torch.device) -> bool:
        return device.type == cls.torch_type

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.device})"

    # --- identity and facts
    def name(self) -> str:
        return host.cpu_model()

    def hardware(self) -> Hardware:
        cxx = any(shutil.which(c) for c in (os.environ.get("CXX", ""), "g++", "c++", "clang++") if c)
        return self._hardware(cxx=cxx, macos=host.macos_version())

    def _hardware(self, **facts) -> Hardware:
        """This device's :class:`Hardware`: its kind and name, the host's cores and ISA, and ``facts``."""
        return Hardware(
            kind=self.kind, name=self.name(), cores=host.physical_cores(), isa=host.cpu_isa(), **facts
        )

    @classmethod
    def lacks(cls, knob: str, value, hw: Hardware) -> str:
        """Why ``hw`` cannot run ``knob`` at ``value`` as labelled ("" when it can); every kind: max-autotune's
        benchmarked compile on 2 host cores or fewer."""
        if knob == "compile" and value == "max-autotune" and hw.cores <= 2:
            return f"max-autotune: its benchmarked compile takes minutes per shape on {hw.cores} host core(s)"
        return ""

    def environment(self) -> dict:
        """What envinfo records of this device beyond the host."""
        return {}

    # --- clocks
    def synchronize(self) -> None:
        """Wait for all queued work; call before every clock read."""

    def events(self):
        """(make an event, record it) timing queued work on this device, or None where steps are timed by clocks."""
        return None

    def enter_worker(self) -> None:
        """Make this device the worker process's current one."""

    # --- memory
    def reset_peak_memory(self) -> None:
        pass

    def peak_memory_mib(self) -> dict[str, float]:
        """Peak device memory since the last reset (MiB); a host device has none (see the process RSS)."""
        return {"peak_device_mem_mib": math.nan, "peak_device_reserved_mib": math.nan}

    def memory_sample_mib(self) -> float | None:
        """Device memory now, for telemetry where no high-water mark exists (None: not sampled)."""
        return None

    def total_memory_bytes(self) -> int:
        """The device's own memory (0: it shares the host's)."""
        return 0

    def allocated_bytes(self) -> int | None:
        """Bytes torch's allocator holds in tensors on this device now (None: the host's, see the process RSS)."""
        return None

    def reserved_bytes(self) -> int | None:
        """Bytes the device allocator holds, in use or cached (None where it keeps no pool)."""
        return None

    @classmethod
    def count(cls) -> int:
        """Devices of this kind here."""
        return 1 if cls.present() else 0

    def empty_cache(self) -> None:
        pass

    def release(self) -> None:
        """Free what a finished measurement left: Python garbage first, then the allocator's cache."""
        gc.collect()
        self.empty_cache()

    def is_oom(self, err: BaseException) -> bool:
        """True for an out-of-memory error (the host allocator's here)."""
        text = str(err).lower()
        return isinstance(err, MemoryError) or (
            isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
        )

    def oom_note(self, err: BaseException) -> str:
        """A prefix that says why ``err`` counts as out of memory when its text does not."""
        return ""

    # --- data
    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` on this device; the copy waits unless this kind overlaps it safely."""
        return t.to(self.device)

    def pin(self, wanted: bool) -> bool:
        """Whether a DataLoader for this device pins its batches."""
        return bool(wanted) and self.pins

    # --- arithmetic
    autotunes = False  # its convolution library can time algorithms per shape (cudnn_benchmark)

    def math(self, precision: str):
        """The matmul and convolution math of ``precision`` for a block, restored after it."""
        return contextlib.nullcontext()

    def autotune(self, on: bool):
        """Convolution algorithms timed per shape (``on``) or chosen by heuristics, for a block."""
        return contextlib.nullcontext()

    def autocast(self, precision: str):
        """Autocast to bf16/fp16 for those precisions, nothing for fp32/tf32."""
        if precision in ("bf16", "fp16"):
            return torch.autocast(device_type=self.device.type, dtype=DTYPES[precision])
        return contextlib.nullcontext()

    def grad_scaler(self, precision: str):
        """The loss scaler fp16 training needs, None for other precisions; :class:`Unavailable` where this torch
        has none (an fp16 row never trains unscaled in silence)."""
        if precision != "fp16":
            return None
        if (scaler := getattr(torch.amp, "GradScaler", None)) is None:
            raise Unavailable(
                f"fp16 training needs torch.amp.GradScaler (torch 2.3+); this is torch {torch.__version__}"
            )
        return scaler(self.device.type)

    # --- telemetry and energy
    def gpus(self):
        """(NVML module, [(NVML index, handle) of every GPU], NVML index of this device), or (None, [], None)."""
        return None, [], None

    def energy_counter(self):
        """The energy counter that covers this device's work (cnnbench.devices.energy) or its Unavailable."""
        system = platform.system()
        if system == "Linux":
            return energy.rapl_counter()
        why = energy.APPLE if system == "Darwin" else f"no energy counter reader for {system} CPUs"
        return energy.Unavailable(why)

    # --- profiler
    def profiler_activities(self) -> list:
        """The host's activity, and the device's where the profiler times its kernels (``op_time`` "device")."""
        device = [getattr(ProfilerActivity, self.torch_type.upper())] if self.op_time == "device" else []
        return [ProfilerActivity.CPU, *device]

    # the profiler's per-op time here: "device" (kernel), "host" (the op's run time) or "queue" (enqueue)
    op_time = "host"

    def op_time_us(self, evt, self_only: bool = False) -> float:
        """A profiler event's time on this device (us): the host's time, which is the op's own on a CPU."""
        return float(evt.self_cpu_time_total if self_only else evt.cpu_time_total)

    bn_library = ""  # the library whose own batch norm ops the profiler names (cudnn, miopen)

    def op_names(self) -> dict[str, str]:
        """Profiled op names this kind's libraries use -> the name the FLOP counter gives the same op."""
        ops = (f"aten::{{}}_batch_norm{s}" for s in ("", "_backward")) if self.bn_library else ()
        return {op.format(self.bn_library): op.format("native") for op in ops}

    def busy_s(self, step: Callable, n: int) -> float | None:
        """Seconds the device ran work over ``n`` calls of ``step`` (its kernels' time, launch gaps apart), None
        where the host is the device or no profiler records the device's own time."""
        return None

    # --- distributed
    def ddp_device_ids(self) -> list[int] | None:
        return None

    # --- roofline
    def roof_precisions(self) -> list[str]:
        """Precisions with a meaningful compute roof here: each precision (:data:`DTYPES`) this device runs."""
        hw = self.hardware()
        return [p for p in DTYPES if not self.lacks("precision", p, hw)]

    def times(self, fn: Callable, repeats: int, warmup: int = 2) -> list[float]:
        """Synced wall times of ``repeats`` calls of ``fn`` after ``warmup`` calls."""
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(repeats):
            self.synchronize()
            t0 = time.perf_counter()
            fn()
            self.synchronize()
            out.append(time.perf_counter() - t0)
        return out

    def inner_calls(self, fn: Callable, min_call_s: float | None = None) -> int:
        """How many back-to-back calls of ``fn`` one timed call needs to last ``min_call_s`` (calibrated here)."""
        one = min(self.times(fn, repeats=2, warmup=1))
        return max(1, math.ceil((self.min_call_s if min_call_s is None else min_call_s) / max(one, 1e-9)))

    def batched(self, fn: Callable, inner: int, graph: bool = False) -> Callable:
        """``inner`` calls of ``fn`` as one callable; no call's output is kept past the next call."""

        def calls() -> None:
            for _ in range(inner):
                fn()

        return calls

    def rates(
        self, fn: Callable, work: float, repeats: int, min_call_s: float | None = None, graph: bool = False
    ) -> list[float]:
        """``work`` per call of ``fn`` over its time, per timed call; each timed call runs ``fn`` enough times."""
        inner = self.inner_calls(fn, min_call_s)
        return [work * inner / t for t in self.times(self.batched(fn, inner, graph), repeats)]

    def cache_levels(self, threads: int = 1, sysfs_root=None) -> list[dict]:
        """The device's cache levels, innermost first (level, size_bytes, capacity_bytes, size_source)."""
        return []

    def sweep_sizes(self, levels: list[dict], dram_bytes: int, threads: int) -> list[int]:
        """Working sets of the bandwidth sweep (:func:`sweep_sizes`)."""
        return sweep_sizes(levels, dram_bytes)

    def bandwidth_sweep(self, sizes: list[int], repeats: int, threads: int) -> list[dict]:
        """Best and median bandwidth of each kernel at each working set (rows of bandwidth_sweep.csv)."""
        rows = []
        for size in sizes:
            for kernel, (fn, nbytes) in stream_kernels(self.device, size).items():
                rates = self.rates(fn, nbytes, repeats, graph=True)
                rows.append(sweep_row(rates, nbytes, kernel, repeats, "torch, bytes read + written"))
            self.empty_cache()
        return rows

    def spec(self, threads: int) -> tuple[list[dict], str]:
        """Spec-sheet roofs of exactly this device (rows of device_peaks.csv) and how they matched."""
        return self.spec_for_name(self.name())

    @classmethod
    def spec_for_name(
        cls, name: str, gpu_cores: int | None = None, chip: str | None = None
    ) -> tuple[list[dict], str]:
        """device_specs.csv's rows of this kind whose device is named exactly ``name`` (:func:`normalise_name`: "L4"
        never takes an L40's row), or is ``chip`` with ``gpu_cores``, as device_peaks rows of ``name``; and how they
        matched."""
        how = f"exact name '{name}'" if chip is None else f"chip '{chip}' with {gpu_cores} GPU cores"
        t, device = specs(), normalise_name(name if chip is None else chip)
        t = t[(t.device_kind == cls.kind) & (t.device.map(normalise_name) == device)]
        if chip is not None:
            t = t[t.gpu_cores == gpu_cores]  # a number column: cells without a count are NaN
        if t.empty:
            return [], f"no spec roof: no row of device_specs.csv matches {how} exactly"
        rows = t.assign(
            device_name=name,
            kind="spec",
            level=t.memory_level,
            ridge_flop_per_byte=t.peak_gflops / t.bandwidth_gbs,
            source=t.device + ": " + t.source,
        )
        return rows[SPEC_COLUMNS].to_dict("records"), f"spec roofs matched by {how}"


def sweep_sizes(
    levels: list[dict], dram_bytes: int, smallest: int = 16 * 2**10, step: float = 4.0
) -> list[int]:
    """A geometric series (ratio ``step``) below ``dram_bytes / 2``, plus 1/2 and 3/4 of each cache level and of
    ``dram_bytes`` (main memory gets three sets of its own), and ``dram_bytes``."""
    sizes = {int(smallest * step**k) for k in range(200) if smallest * step**k < dram_bytes / 2}
    caps = [*(lv["capacity_bytes"] for lv in levels), dram_bytes]
    return sorted(sizes | {int(c * f) for c in caps for f in (0.5, 0.75) if c * f >= smallest} | {dram_bytes})


def stream_kernels(device: torch.device, working_set: int) -> dict:
    """Streaming kernels whose one call reads + writes ``working_set`` bytes: name -> (fn, bytes per call)."""
    n_copy, n_add = max(working_set // 8, 1024), max(working_set // 12, 1024)
    a, b = torch.rand(n_copy, device=device), torch.empty(n_copy, device=device)
    x, y, z = (torch.rand(n_add, device=device) for _ in range(3))
    return {
        "copy": (lambda: b.copy_(a), 8 * n_copy),
        "triad": (lambda: torch.add(x, y, alpha=3.0, out=z), 12 * n_add),
    }


def sweep_row(rates: list[float], nbytes: int, kernel: str, calls: int, method: str, **extra) -> dict:
    """One row of bandwidth_sweep.csv from a kernel's per-call rates (bytes/s)."""
    return {
        "working_set_bytes": nbytes,
        "working_set_mib": nbytes / 2**20,
        "kernel": kernel,
        "bandwidth_gbs": max(rates) / 1e9,
        "bandwidth_median_gbs": statistics.median(rates) / 1e9,
        **extra,
        "calls": calls,
        "method": method,
    }


def specs():
    """The spec-sheet table shipped with the package (dense figures only, each with its source)."""
    import pandas as pd

    return pd.read_csv(resources.files("cnnbench") / "data/device_specs.csv")


SPEC_COLUMNS = "device_name kind precision level peak_gflops bandwidth_gbs ridge_flop_per_byte source".split()


def normalise_name(name: str) -> str:
    """Case, spacing and the "NVIDIA " prefix do not matter; model and variant do."""
    return re.sub(r"\s+", " ", str(name)).strip().lower().removeprefix("nvidia ").strip()
