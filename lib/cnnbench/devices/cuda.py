"""NVIDIA GPUs through CUDA: events on the measured device's stream, the caching allocator's high-water marks, TF32
and cuDNN switches, NVML telemetry and energy (handles matched by PCI bus id), CUDA graphs and the L2 re-read
kernel for the roofline, spec roofs by exact device name."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os

import torch
from torch.profiler import ProfilerActivity, profile

from cnnbench.devices import energy
from cnnbench.devices.base import ACCELERATOR_PROTOCOL, Backend, Hardware, normalise_name, specs, sweep_row

# What torch raises when an allocation fails inside a CUDA-graph capture (reduce-overhead): the capture's error,
# not OutOfMemoryError (pytorch/pytorch#159594, #187795).
CAPTURE_FAILURE = (
    "operation failed due to a previous error during capture",
    "cudaerrorstreamcaptureinvalidated",
    "capture invalidated",
)
# torch._inductor.utils.is_big_gpu: fewer SMs and max-autotune's GEMM templates are off
MAX_AUTOTUNE_MIN_SMS = 68
# The L2: copies of a working set that fits it last microseconds (launch gaps dominate), so one long kernel re-reads
# the L2-resident buffer (a sum of it expanded R times, stride 0) moving at least REREAD_TARGET_BYTES a call. Its
# working sets start above the L1 of all SMs together.
REREAD_TARGET_BYTES = 4 * 2**30
# L1 (unified with shared memory) per SM, KiB, by compute capability: NVIDIA's tuning guides (Volta to Blackwell)
L1_PER_SM_KIB = {(7, 0): 128, (7, 5): 96, (8, 0): 192, (8, 6): 128, (8, 7): 192, (8, 9): 128, (9, 0): 256}
HBM_CAPABILITIES = ((7, 0), (8, 0), (9, 0), (10, 0))  # V100, A100, H100/H200, B100/B200: data-centre, HBM
# Batches that fill a GPU of at least FILL_BYTES, as NVIDIA's and timm's ResNet-50 benchmarks run; a smaller GPU
# keeps the seeds' 128 (tests/test_devices_env.py holds the threshold against the workbook's activation memory)
FILLING, FILL_BYTES = {"resnet50": 256}, 32 * 2**30


class CudaBackend(Backend):
    kind = torch_type = "cuda"
    rank = 1
    on_host = False
    queued = indexed = pins = autotunes = own_memory = round_worker = True
    ddp_backend = "nccl"
    bn_library = "cudnn"
    min_call_s = 0.05
    op_time = "device"
    protocol = {
        **ACCELERATOR_PROTOCOL,
        "batch_size_per_model": {"squeezenet1_1": 64, "mnist_cnn": 512, **FILLING},
        "transfer_devices": ["cuda"],
        "tune_compile_modes": ["off", "default", "reduce-overhead"],
    }

    # as measured on the H100 example (16 host cores)
    budget = dict(kernel_s=10.0, process_s=2.4, step_s=0.1, peaks_s=4.0, layers_s=0.5, scratch_step_s=0.005)

    @classmethod
    def protocol_for(cls, hw: Hardware | None) -> dict:
        """The accelerator protocol; the filling batches only on a GPU of at least FILL_BYTES."""
        out = super().protocol_for(hw)
        if hw is not None and hw.memory_bytes < FILL_BYTES:
            out["batch_size_per_model"] = {
                m: b for m, b in out["batch_size_per_model"].items() if m not in FILLING
            }
        return out

    @classmethod
    def present(cls) -> bool:
        return torch.cuda.is_available()

    def name(self) -> str:
        return torch.cuda.get_device_name(self.device)

    def capability(self) -> tuple[int, int]:
        return tuple(torch.cuda.get_device_capability(self.device))

    def hardware(self) -> Hardware:
        return self._hardware(
            capability=self.capability(),
            triton=importlib.util.find_spec("triton") is not None,
            sms=torch.cuda.get_device_properties(self.device).multi_processor_count,
            memory_bytes=self.total_memory_bytes(),
        )

    @classmethod
    def lacks(cls, knob: str, value, hw: Hardware) -> str:
        cap = hw.capability
        if knob == "precision" and value in ("tf32", "bf16") and not (cap and cap[0] >= 8):
            return f"{value} needs compute capability 8.0+ (Ampere), this GPU is {cap}"
        if knob == "compile" and value not in ("off", False):
            if not hw.triton:
                return "Triton is not installed: Inductor cannot generate GPU kernels"
            if value == "max-autotune" and 0 < hw.sms < MAX_AUTOTUNE_MIN_SMS:
                return (
                    f"max-autotune: Inductor autotunes GEMMs only on {MAX_AUTOTUNE_MIN_SMS}+ SMs; on this "
                    f"{hw.sms}-SM GPU it compiles far longer for the default kernels (compile budget)"
                )
        return super().lacks(knob, value, hw)

    def environment(self) -> dict:
        props = torch.cuda.get_device_properties(self.device)
        info = {
            "gpu_name": props.name,
            "gpu_memory_gb": round(props.total_memory / 2**30, 2),
            "gpu_compute_capability": f"{props.major}.{props.minor}",
            "gpu_multiprocessors": props.multi_processor_count,
            "gpu_driver": None,
        }
        try:
            import pynvml

            pynvml.nvmlInit()
            info["gpu_driver"] = pynvml.nvmlSystemGetDriverVersion()
            handle = nvml_handle(self.device, pynvml)
            info["gpu_power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000
            info["gpu_max_sm_clock_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        except Exception as err:  # noqa: BLE001 - telemetry is optional: record why it is missing
            info["gpu_driver_error"] = f"{type(err).__name__}: {err}"
        return info

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def events(self):
        """Events recorded on the measured device's CURRENT stream (``cuda:1`` is timed on GPU 1's stream)."""
        stream = torch.cuda.current_stream(self.device)
        return (lambda: torch.cuda.Event(enable_timing=True)), (lambda event: event.record(stream))

    def enter_worker(self) -> None:
        if self.device.index is not None:
            torch.cuda.set_device(self.device)

    def reset_peak_memory(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def peak_memory_mib(self) -> dict[str, float]:
        """``max_memory_allocated`` (tensors) and ``max_memory_reserved`` (the caching allocator's pool)."""
        return {
            "peak_device_mem_mib": torch.cuda.max_memory_allocated(self.device) / 2**20,
            "peak_device_reserved_mib": torch.cuda.max_memory_reserved(self.device) / 2**20,
        }

    def total_memory_bytes(self) -> int:
        return int(torch.cuda.get_device_properties(self.device).total_memory)

    def allocated_bytes(self) -> int:
        return int(torch.cuda.memory_allocated(self.device))

    def reserved_bytes(self) -> int:
        return int(torch.cuda.memory_reserved(self.device))

    @classmethod
    def count(cls) -> int:
        return torch.cuda.device_count() if cls.present() else 0

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def is_oom(self, err: BaseException) -> bool:
        return isinstance(err, torch.cuda.OutOfMemoryError) or super().is_oom(err) or capture_failure(err)

    def oom_note(self, err: BaseException) -> str:
        return "CUDA-graph capture failed, taken as out of memory: " if capture_failure(err) else ""

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        """Non-blocking only from pinned host memory (the copy then overlaps safely)."""
        return t.to(self.device, non_blocking=t.is_pinned())

    def math(self, precision: str):
        """fp32 means IEEE fp32 (TF32 off, where cuDNN's default is on), tf32 turns TF32 on, for cuBLAS and cuDNN:
        through ``fp32_precision`` where torch has it (torch raises once it is mixed with the legacy flags), else the
        legacy ``allow_tf32`` flags; restored after the block."""
        b, on = torch.backends, precision == "tf32"
        if hasattr(getattr(b.cudnn, "conv", None), "fp32_precision"):
            value = "tf32" if on else "ieee"
            return setting((b.cuda.matmul, "fp32_precision", value), (b.cudnn.conv, "fp32_precision", value))
        return setting((b.cuda.matmul, "allow_tf32", on), (b.cudnn, "allow_tf32", on))

    def autotune(self, on: bool):
        """``torch.backends.cudnn.benchmark`` set to ``on`` for the block."""
        return setting((torch.backends.cudnn, "benchmark", bool(on)))

    def gpus(self):
        """Every GPU of the machine through NVML, and which one this device is (matched by PCI bus id)."""
        try:
            import pynvml as nvml

            nvml.nvmlInit()
            handles = [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(nvml.nvmlDeviceGetCount())]
            return nvml, handles, nvml.nvmlDeviceGetIndex(nvml_handle(self.device, nvml))
        except Exception:  # noqa: BLE001 - no NVIDIA driver or NVML: no GPU telemetry
            return None, [], None

    def energy_counter(self, nvml=None):
        """NVML's total energy counter of the GPU this device really is, or why not."""
        try:
            if nvml is None:
                import pynvml as nvml
            counter = energy.NvmlCounter(nvml_handle(self.device, nvml), nvml)
            counter.read()
        except ImportError:
            return energy.Unavailable("nvidia-ml-py is not installed: no NVML energy counter")
        except Exception as err:  # noqa: BLE001 - NVMLError_NotSupported and friends: the reason is the reading
            why = f"NVML total energy counter unavailable ({type(err).__name__}: {err})"
            return energy.Unavailable(f"{why}; it needs a Volta or newer GPU")
        return counter

    def op_time_us(self, evt, self_only: bool = False) -> float:
        """The event's kernel time: ``device_time_total`` (torch 2.4+) or its old name ``cuda_time_total``."""
        names = ("device_time_total", "cuda_time_total")
        names = tuple(f"self_{n}" for n in names) if self_only else names
        return float(next((v for a in names if (v := getattr(evt, a, None)) is not None), 0.0))

    def busy_s(self, step, n: int) -> float | None:
        """The kernels' time over ``n`` calls of ``step``, from CUPTI's records through torch.profiler (one stream's
        kernels do not overlap: their sum is the time the GPU was busy)."""
        self.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step()
            self.synchronize()
        busy = sum(self.op_time_us(e, self_only=True) for e in prof.key_averages()) / 1e6
        return busy or None

    def ddp_device_ids(self) -> list[int] | None:
        return [self.device.index if self.device.index is not None else torch.cuda.current_device()]

    @property
    def matmul_size(self) -> int:
        return 8192 if self.total_memory_bytes() >= 8 * 2**30 else 4096

    def batched(self, fn, inner: int, graph: bool = False):
        """``inner`` calls, replayed from a CUDA graph with ``graph`` where capture works."""
        if graph and inner > 1:
            try:
                side = torch.cuda.Stream(self.device)
                side.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(side):
                    fn()
                torch.cuda.current_stream(self.device).wait_stream(side)
                cuda_graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(cuda_graph):
                    for _ in range(inner):
                        fn()
                return cuda_graph.replay
            except RuntimeError:  # capture unsupported here: plain back-to-back launches
                pass
        return super().batched(fn, inner)

    def cache_levels(self, threads: int = 1, sysfs_root=None) -> list[dict]:
        """The L2, its working sets above the L1 of all SMs (``above_bytes``; 256 KiB an SM where unknown)."""
        props = torch.cuda.get_device_properties(self.device)
        if not (l2 := getattr(props, "L2_cache_size", None)):  # torch 2.5+
            return []
        per_sm = L1_PER_SM_KIB.get((props.major, props.minor), 256)
        l1 = props.multi_processor_count * per_sm * 2**10
        how = f"cuda L2_cache_size, above {props.multi_processor_count} SMs x {per_sm} KiB of L1"
        return [
            {"level": "l2", "size_bytes": l2, "capacity_bytes": l2, "above_bytes": l1, "size_source": how}
        ]

    def sweep_sizes(self, levels: list[dict], dram_bytes: int, threads: int) -> list[int]:
        """The series, and three working sets between the SMs' L1 and each level's capacity (a roof is the median
        of at least three: peaks.MIN_POINTS)."""
        inside = [
            lv["above_bytes"] + (lv["capacity_bytes"] - lv["above_bytes"]) * f
            for lv in levels
            for f in (0.3, 0.6, 0.9)
        ]
        return sorted({*super().sweep_sizes(levels, dram_bytes, threads), *map(int, inside)})

    @property
    def main_memory(self) -> str:
        return main_memory(self.name(), self.capability())

    def bandwidth_sweep(self, sizes, repeats, threads):
        """torch copy and triad and, for the working sets that fit the L2, a kernel re-reading the buffer."""
        rows = super().bandwidth_sweep(sizes, repeats, threads)
        for size in [s for lv in self.cache_levels() for s in reread_sizes(sizes, lv)]:
            fn, nbytes = reread_kernel(self.device, size)
            rates = self.rates(fn, nbytes, repeats, graph=True)
            method = f"torch, one sum kernel re-reading the buffer {nbytes // size}x: bytes read"
            rows.append(sweep_row(rates, size, "l2_reread", repeats, method, bytes_per_call=nbytes))
            del fn
            self.empty_cache()
        return rows


def reread_sizes(sizes: list[int], level: dict) -> list[int]:
    """The working sets the re-read kernel measures in a cache ``level``: above its ``above_bytes`` (the SMs'
    L1), up to its capacity."""
    return [s for s in sizes if level.get("above_bytes", 0) < s <= level["capacity_bytes"]]


def reread_kernel(device: torch.device, working_set: int, target_bytes: int = REREAD_TARGET_BYTES):
    """(fn, bytes read per call): one reduction kernel reading a ``working_set``-byte buffer R times, R so that
    the call reads at least ``target_bytes``."""
    n = max(working_set // 4, 1024)
    repeats = math.ceil(target_bytes / (4 * n))
    view = torch.rand(n, device=device).expand(repeats, n)
    return (lambda: view.sum(dim=1)), 4 * n * repeats


def main_memory(name: str, capability: tuple[int, int] | None) -> str:
    """The main memory's level name: the spec table's for this exact device, else (``capability`` given) hbm for
    the data-centre capabilities (V100, A100, H100/H200, B200), else dram (consumer parts, GDDR: cc 12.x too)."""
    table = specs()
    row = table[table.device.map(normalise_name) == normalise_name(name)]
    if len(row):
        return str(row.memory_level.iloc[0])
    return "hbm" if capability and tuple(capability) in HBM_CAPABILITIES else "dram"


def capture_failure(err: BaseException) -> bool:
    """True for a CUDA-graph capture invalidated by an earlier failure (taken as out of memory)."""
    return isinstance(err, RuntimeError) and any(m in str(err).lower() for m in CAPTURE_FAILURE)


@contextlib.contextmanager
def setting(*changes: tuple):
    """Each ``(owner, attribute, value)`` of ``changes`` set for the block, restored after it."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in changes]
    for owner, name, value in changes:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def nvml_handle(device: torch.device, nvml):
    """The NVML handle of the GPU a CUDA ``device`` really is, whatever CUDA_VISIBLE_DEVICES or CUDA's device
    order says: matched by PCI bus id, else mapped through CUDA_VISIBLE_DEVICES (indices or UUIDs). NVML numbers
    all GPUs of the machine, CUDA the visible ones (``nvml``: pynvml). Raises when NVML cannot be used."""
    nvml.nvmlInit()
    index = device.index if device.index is not None else torch.cuda.current_device()
    # the PCI bus id as NVML writes it ("00000000:3B:00.0"); without CUDA (a fake NVML, a CPU-only build) or a bus
    # id, the CUDA_VISIBLE_DEVICES mapping
    with contextlib.suppress(Exception):
        props = torch.cuda.get_device_properties(index)
        bus = f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
        return nvml.nvmlDeviceGetHandleByPciBusId(bus)
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    entry = visible[index] if index < len(visible) else str(index)
    by_uuid = not entry.isdigit()
    return nvml.nvmlDeviceGetHandleByUUID(entry) if by_uuid else nvml.nvmlDeviceGetHandleByIndex(int(entry))
