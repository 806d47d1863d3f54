"""Device peaks: measured compute roofs (dense matmul per precision, representative 3x3 convolutions), a measured
memory hierarchy (a working-set sweep through every cache level into DRAM/HBM), and spec-sheet roofs matched by the
device's exact model and variant.

The CPU sweep is :mod:`cnnbench.roofline.membench`: as the Empirical Roofline Toolkit and likwid-bench do, one compiled call
(numba, on the run's threads) loops many times over each thread's own buffer, so no per-call cost hides the L1 and
L2 roofs; kernels ``read`` (bytes read) and ``triad`` (a = b + s*c: 2 reads + 1 write counted, the write-allocate
read not counted, the STREAM convention). GPUs: torch copy and triad (bytes read + written), CUDA-graph replayed;
the CUDA L2 also by one long kernel re-reading an L2-resident buffer (``l2_reread``, bytes read).

``device_peaks.csv`` (one row per precision and memory level; measured rows first, the main-memory row of each
precision before its cache rows):

- ``device_name``, ``device_kind``, ``kind`` (measured | spec), ``precision``, ``threads``;
- ``level``: l1, l2, l3 (CPU caches, innermost first; CUDA: l2) or the main memory, ``dram`` (CPU, MPS, GDDR GPUs)
  or ``hbm`` (data-centre NVIDIA GPUs); ``capacity_mib``: the working set that level holds for one op (a private
  cache counted once per thread using one; empty for main memory); ``cache_size_kib``: one cache's size;
- ``peak_gflops``: the precision's compute roof (the same on every level), the best of ``peak_calls`` timed calls
  of the winning FMA-bound kernel (matmul or conv); ``peak_gflops_median`` and ``peak_spread`` ((best - worst) /
  median) of those calls; ``matmul_gflops``, ``matmul_gflops_median``, ``conv3x3_gflops``;
- ``bandwidth_gbs``: that level's roof, the best rate among the sweep's working sets inside the level only (above
  the previous level's capacity, up to its own), never another level's; ``bandwidth_kernel`` that won;
  ``bandwidth_note``: non-empty when an inner level measured slower than an outer one (kept as measured);
  ``ridge_flop_per_byte``; ``{kernel}_gbs``: each kernel at the largest working set;
- ``source`` says how each was measured (kernel, sizes in the level, threads, best of N calls, byte-counting
  convention) or where the spec figure comes from (a CPU's is derived from cores, ISA flags and its clock: the
  maximum clock where the system tells it, else labelled a base clock that a measured rate can exceed).

``bandwidth_sweep.csv``: every working set measured (``working_set_bytes``/``working_set_mib`` = the footprint of
all threads' buffers, ``kernel``, ``bandwidth_gbs`` best and ``bandwidth_median_gbs`` of ``calls`` timed calls,
``trials`` passes per call, ``bytes_per_call``, ``threads``, ``method`` with its byte convention, ``level``).
"""

from __future__ import annotations

import math
import platform
import re
import statistics
import time
from importlib import resources
from pathlib import Path

import pandas as pd
import torch

from cnnbench import devices, progress


def precisions(device: torch.device) -> list[str]:
    """Precisions with a meaningful roof on ``device``."""
    if device.type == "cuda":
        major = torch.cuda.get_device_capability(device)[0]
        return ["fp32"] + (["tf32"] if major >= 8 else []) + ["fp16"] + (["bf16"] if major >= 8 else [])
    if device.type == "mps":
        return ["fp32", "fp16"]
    return ["fp32"] + (["bf16"] if devices.cpu_has_bf16() else [])


def _times(fn, device: torch.device, repeats: int, warmup: int = 2) -> list[float]:
    """Synced wall times of ``repeats`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        devices.synchronize(device)
        t0 = time.perf_counter()
        fn()
        devices.synchronize(device)
        times.append(time.perf_counter() - t0)
    return times


def _best_time(fn, device: torch.device, repeats: int, warmup: int = 2) -> float:
    return min(_times(fn, device, repeats, warmup))


# Each timed call must run at least this long, so launch, synchronisation and clock costs vanish in it.
MIN_CALL_S = {"cuda": 0.05, "mps": 0.05, "cpu": 0.005}


def inner_calls(fn, device: torch.device, min_call_s: float | None = None) -> int:
    """How many back-to-back calls of ``fn`` one timed call needs to last ``min_call_s`` (calibrated here)."""
    min_call_s = MIN_CALL_S.get(device.type, 0.01) if min_call_s is None else min_call_s
    one = _best_time(fn, device, repeats=2, warmup=1)
    return max(1, math.ceil(min_call_s / max(one, 1e-9)))


def _batched(fn, inner: int, device: torch.device, graph: bool = False):
    """``inner`` calls of ``fn`` as one callable; with ``graph`` on CUDA, replayed from a CUDA graph (no launch gaps
    between short kernels, as the profiler's kernel times of the layers have none) where capture works."""
    if graph and device.type == "cuda" and inner > 1:
        try:
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                fn()
            torch.cuda.current_stream(device).wait_stream(side)
            cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cuda_graph):
                for _ in range(inner):
                    fn()
            return cuda_graph.replay
        except RuntimeError:  # capture unsupported here: plain back-to-back launches
            pass
    return lambda: [fn() for _ in range(inner)]


def _rates(fn, work: float, device: torch.device, repeats: int, min_call_s: float | None = None,
           graph: bool = False) -> list[float]:
    """``work`` per call of ``fn`` divided by its time, per timed call; each timed call runs ``fn`` enough times."""
    inner = inner_calls(fn, device, min_call_s)
    times = _times(_batched(fn, inner, device, graph), device, repeats)
    return [work * inner / t for t in times]


def default_matmul_size(device: torch.device) -> int:
    """The matmul size for ``matmul_size: 0``: large enough to reach a fast GPU's peak, small enough for a CPU."""
    if device.type == "cuda":
        return 8192 if torch.cuda.get_device_properties(device).total_memory >= 8 * 2**30 else 4096
    return 4096 if device.type == "mps" else 2048


def matmul_rates(device: torch.device, precision: str = "fp32", n: int = 4096, repeats: int = 5,
                 min_call_s: float | None = None) -> list[float]:
    """GFLOP/s of each of ``repeats`` timed calls of a dense n x n matmul (2 n^3 FLOPs per product: FMA-bound).

    Each timed call chains as many products as last ``min_call_s`` (calibrated on the device), so a fast GPU's
    timed call carries enough work whatever ``n`` is.
    """
    a = torch.randn(n, n, device=device, dtype=devices.DTYPES[precision])
    b = torch.randn(n, n, device=device, dtype=devices.DTYPES[precision])
    with devices.math_precision(device, precision):
        return [r / 1e9 for r in _rates(lambda: torch.mm(a, b), 2 * n**3, device, repeats, min_call_s)]


def matmul_gflops(device: torch.device, precision: str = "fp32", n: int = 4096, repeats: int = 5,
                  spread: bool = False, min_call_s: float | None = None):
    """Best dense n x n matmul rate, GFLOP/s (:func:`matmul_rates`); with ``spread``, also the median."""
    rates = matmul_rates(device, precision, n, repeats, min_call_s)
    return (max(rates), statistics.median(rates)) if spread else max(rates)


def conv_rates(device: torch.device, precision: str = "fp32", batch: int = 32, channels: int = 128, size: int = 28,
               repeats: int = 5, min_call_s: float | None = None) -> list[float]:
    """GFLOP/s of each timed call of a representative 3x3 convolution (ResNet stage 2 shape), forward."""
    conv = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False).to(device, devices.DTYPES[precision])
    x = torch.randn(batch, channels, size, size, device=device, dtype=devices.DTYPES[precision])
    flops = 2 * batch * size * size * channels * channels * 9
    with torch.inference_mode(), devices.math_precision(device, precision):
        return [r / 1e9 for r in _rates(lambda: conv(x), flops, device, repeats, min_call_s)]


def conv_gflops(device: torch.device, precision: str = "fp32", batch: int = 32, channels: int = 128, size: int = 28,
                repeats: int = 5, min_call_s: float | None = None) -> float:
    """Best rate of a representative 3x3 convolution (:func:`conv_rates`), GFLOP/s."""
    return max(conv_rates(device, precision, batch, channels, size, repeats, min_call_s))


def rate_summary(rates: list[float]) -> dict:
    """Best, median and spread ((best - worst) / median) of repeated calls' rates, and how many calls."""
    median = statistics.median(rates)
    return {"best": max(rates), "median": median, "spread": (max(rates) - min(rates)) / median if median else 0.0,
            "calls": len(rates)}


# ---------------------------------------------------------------- memory hierarchy
MAIN_MEMORY = ("dram", "hbm")  # levels that are the device's main memory (roof_for's DRAM roof)


def _size_bytes(text: str) -> int | None:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text or "", flags=re.IGNORECASE)
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2).upper()]


def _cpu_count(cpu_list: str) -> int:
    """Number of CPUs in a sysfs list such as "0-3,8-11"."""
    count = 0
    for part in filter(None, (cpu_list or "").split(",")):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return max(count, 1)


def parse_sysfs_caches(root: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> list[dict]:
    """Data/unified caches of one CPU from sysfs: level, size in bytes, and how many CPUs share one."""
    def read(index: Path, name: str) -> str:
        return (index / name).read_text().strip() if (index / name).is_file() else ""

    out = []
    for index in sorted(Path(root).glob("index*")):
        read_ = lambda name, index=index: read(index, name)  # noqa: E731
        if read_("type") not in ("Data", "Unified") or not read_("level").isdigit():
            continue
        size = _size_bytes(read_("size"))
        if size:
            out.append({"level": f"l{read_('level')}", "size_bytes": size,
                        "shared_by": _cpu_count(read_("shared_cpu_list"))})
    return sorted(out, key=lambda c: c["level"])


def _sysctl_caches() -> list[dict]:
    """macOS: hw.l1dcachesize, hw.l2cachesize (hw.l3cachesize where present), per performance core."""
    import subprocess

    out = []
    for level in (1, 2, 3):
        key = f"hw.l{level}dcachesize" if level == 1 else f"hw.l{level}cachesize"
        try:
            value = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            value = ""
        if value.isdigit() and int(value):
            out.append({"level": f"l{level}", "size_bytes": int(value), "shared_by": 1 if level == 1 else 0})
    return out


def cache_levels(device: torch.device, threads: int = 1, sysfs_root: str | Path | None = None) -> list[dict]:
    """The device's cache levels, innermost first: level, size of one cache, capacity (bytes one op's working set
    can spread over: a private cache times the threads that use one each) and where the size was read.

    CPU: sysfs (Linux), sysctl (macOS); [] when neither answers (the sweep's knees then name the levels).
    CUDA: the L2 (``L2_cache_size``). MPS: Apple publishes no GPU cache sizes, [].
    """
    if device.type == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)  # torch 2.5+
        if not l2:
            return []
        return [{"level": "l2", "size_bytes": l2, "capacity_bytes": l2, "size_source": "cuda L2_cache_size"}]
    if device.type != "cpu":
        return []
    caches, source = parse_sysfs_caches(sysfs_root or "/sys/devices/system/cpu/cpu0/cache"), "sysfs"
    if not caches and sysfs_root is None and platform.system() == "Darwin":
        caches, source = _sysctl_caches(), "sysctl"
    out = []
    for c in caches:
        shared = c["shared_by"] or max(threads, 1)
        instances = max(1, math.ceil(max(threads, 1) / shared))
        out.append({"level": c["level"], "size_bytes": c["size_bytes"], "capacity_bytes": c["size_bytes"] * instances,
                    "size_source": f"{source}: {c['size_bytes'] // 1024} KiB x {instances} in use"})
    return out


def _bandwidth_kernels(device: torch.device, working_set: int) -> dict:
    """Streaming kernels whose one call reads + writes ``working_set`` bytes: name -> (fn, bytes per call)."""
    kernels = {}
    n_copy, n_add = max(working_set // 8, 1024), max(working_set // 12, 1024)
    a, b = torch.rand(n_copy, device=device), torch.empty(n_copy, device=device)
    kernels["copy"] = (lambda: b.copy_(a), 8 * n_copy)  # read a, write b
    x, y, z = (torch.rand(n_add, device=device) for _ in range(3))
    kernels["triad"] = (lambda: torch.add(x, y, alpha=3.0, out=z), 12 * n_add)  # read x, y, write z
    return kernels


# The L2 of a GPU: copies of a working set that fits it (<= 25 MiB on an H100) last microseconds, so launch gaps
# dominate even replayed from a CUDA graph. One long kernel re-reads the L2-resident buffer instead: a sum of the
# buffer expanded R times (stride 0, nothing copied), one output per re-read, R chosen so a call moves at least
# REREAD_TARGET_BYTES. Buffers under REREAD_MIN_BYTES are left out: one SM's L1 (256 KiB on Hopper) would serve them.
REREAD_TARGET_BYTES = 4 * 2**30
REREAD_MIN_BYTES = 2 * 2**20


def reread_repeats(buffer_bytes: int, target_bytes: int = REREAD_TARGET_BYTES) -> int:
    """Re-reads of a ``buffer_bytes`` buffer in one call so that the call reads at least ``target_bytes``."""
    return max(1, math.ceil(target_bytes / max(buffer_bytes, 1)))


def reread_sizes(sizes: list[int], l2_bytes: int) -> list[int]:
    """The working sets the re-read kernel measures: from REREAD_MIN_BYTES up to the L2's capacity."""
    return [s for s in sizes if REREAD_MIN_BYTES <= s <= l2_bytes]


def reread_kernel(device: torch.device, working_set: int, target_bytes: int = REREAD_TARGET_BYTES):
    """(fn, bytes read per call): one reduction kernel reading a ``working_set``-byte float32 buffer R times."""
    n = max(working_set // 4, 1024)
    a = torch.rand(n, device=device)
    repeats = reread_repeats(4 * n, target_bytes)
    view = a.expand(repeats, n)  # stride 0: every row is the same L2-resident buffer
    return (lambda: view.sum(dim=1)), 4 * n * repeats


def sweep_sizes(levels: list[dict], dram_bytes: int, smallest: int = 16 * 2**10, step: float = 4.0) -> list[int]:
    """Working sets to measure: a geometric series (ratio ``step``) from ``smallest`` to ``dram_bytes``, plus half
    and three quarters of each cache level (sizes that surely fit it), so every level holds sizes of its own."""
    sizes = {int(smallest * step**k) for k in range(200) if smallest * step**k < dram_bytes}
    sizes |= {int(lv["capacity_bytes"] * f) for lv in levels for f in (0.5, 0.75)
              if lv["capacity_bytes"] * f >= smallest}
    return sorted(sizes | {dram_bytes})


def bandwidth_sweep(device: torch.device, sizes: list[int], repeats: int = 3,
                    min_call_s: float | None = None, threads: int | None = None) -> pd.DataFrame:
    """Best and median bandwidth of each kernel at each working set, GB/s, one row each.

    CPU: :mod:`cnnbench.roofline.membench` (numba: one compiled call per timing, each of ``threads`` threads looping over
    its own buffer; read and triad kernels, write-allocate not counted). GPU: torch copy and triad, ``inner``
    calls per timing replayed from a CUDA graph where capture works (bytes read + written per call); on CUDA also
    ``l2_reread`` for the working sets that fit the L2 (:func:`reread_kernel`: one long kernel, bytes read).
    """
    if device.type == "cpu":
        from cnnbench.roofline import membench

        threads = threads or torch.get_num_threads()
        return membench.sweep(sizes, threads, repeats, max(MIN_CALL_S["cpu"], min_call_s or 0.01))
    rows = []
    for size in sizes:
        for kernel, (fn, nbytes) in _bandwidth_kernels(device, size).items():
            rates = _rates(fn, nbytes, device, repeats, min_call_s, graph=True)
            rows.append({"working_set_bytes": nbytes, "working_set_mib": nbytes / 2**20, "kernel": kernel,
                         "bandwidth_gbs": max(rates) / 1e9, "bandwidth_median_gbs": statistics.median(rates) / 1e9,
                         "calls": repeats, "method": "torch, bytes read + written"})
        devices.empty_cache(device)
    if device.type == "cuda":
        l2 = max((lv["capacity_bytes"] for lv in cache_levels(device) if lv["level"] == "l2"), default=0)
        for size in reread_sizes(sizes, l2):
            fn, nbytes = reread_kernel(device, size)
            rates = _rates(fn, nbytes, device, repeats, min_call_s, graph=True)
            rows.append({"working_set_bytes": size, "working_set_mib": size / 2**20, "kernel": "l2_reread",
                         "bandwidth_gbs": max(rates) / 1e9, "bandwidth_median_gbs": statistics.median(rates) / 1e9,
                         "calls": repeats, "bytes_per_call": nbytes,
                         "method": f"torch, one sum kernel re-reading the buffer {nbytes // size}x: bytes read"})
            devices.empty_cache(device)
    return pd.DataFrame(rows)


def knees(sweep: pd.DataFrame, drop: float = 0.3) -> list[int]:
    """Working sets after which the best bandwidth falls by more than ``drop``: where a cache level ends."""
    best = sweep.groupby("working_set_bytes").bandwidth_gbs.max().sort_index()
    return [int(s) for s, nxt, b, bn in zip(best.index[:-1], best.index[1:], best.values[:-1], best.values[1:],
                                           strict=True) if bn < (1 - drop) * b and nxt > s]


def _level_row(inside: pd.DataFrame, lv: dict) -> dict:
    """The best sweep row of one level's own working sets, labelled: kernel, sizes, threads, best of N calls."""
    top = inside.loc[inside.bandwidth_gbs.idxmax()]
    sizes = int((inside.kernel == top.kernel).sum())
    lo, hi = inside.working_set_bytes.min(), inside.working_set_bytes.max()
    how = [f"best {top.kernel} of {sizes} working set(s) in the level ({_fmt_bytes(lo)} to {_fmt_bytes(hi)})"]
    if pd.notna(top.get("threads")):
        how.append(f"{int(top.threads)} thread(s)")
    if pd.notna(top.get("calls")):
        how.append(f"best of {int(top.calls)} calls")
    if isinstance(top.get("method"), str):
        how.append(top.method)
    return {**lv, "bandwidth_gbs": float(top.bandwidth_gbs), "kernel": top.kernel, "sweep_points": sizes,
            "bandwidth_source": ", ".join(how) + f" ({lv['size_source']})", "bandwidth_note": ""}


def _fmt_bytes(n: float) -> str:
    return f"{n / 2**20:.3g} MiB" if n >= 2**20 else f"{n / 2**10:.3g} KiB"


MAIN_MEMORY_FACTOR = 4  # the main-memory roof comes from working sets of at least this many times the last cache


def level_roofs(sweep: pd.DataFrame, levels: list[dict], main: str = "dram") -> pd.DataFrame:
    """One bandwidth per memory level, each from that level's own working sets only (above the previous level's
    capacity, up to its own): the best rate among them, with the kernel, sizes, threads and calls it took.

    An inner level measured slower than an outer one keeps its measured value; ``bandwidth_note`` says so. A
    level with no working set of its own gets no row (no other level's value stands in). Levels from sysfs when
    given; otherwise the sweep's knees bound them (named l1, l2, ... in order).
    """
    if not levels:
        levels = [{"level": f"l{i + 1}", "size_bytes": k, "capacity_bytes": k, "size_source": "knee of the sweep"}
                  for i, k in enumerate(knees(sweep))]
    ws = sweep.working_set_bytes
    rows, lower = [], 0
    for lv in levels:
        inside = sweep[(ws > lower) & (ws <= lv["capacity_bytes"])]
        if len(inside):
            rows.append(_level_row(inside, lv))
        lower = lv["capacity_bytes"]
    # Main memory from working sets of at least MAIN_MEMORY_FACTOR x the last cache only: just past it, part of
    # the set is still cache-resident (the example's first point past a 32 MiB L3 read 50.8 GB/s, the sets at
    # 128 MiB and beyond 20-30 GB/s), as ERT and STREAM size their arrays.
    outer = sweep[ws >= MAIN_MEMORY_FACTOR * lower] if lower else sweep[ws == ws.max()]
    if outer.empty:  # no working set far enough beyond the caches: the largest one stands in, said so
        outer = sweep[ws == ws.max()]
        note = (f"no working set of at least {MAIN_MEMORY_FACTOR}x the last cache was measured: the largest one "
                "stands in")
    else:
        note = ""
    dram = _level_row(outer, {"level": main, "size_bytes": None, "capacity_bytes": None, "size_source": "main memory"})
    rows.append({**dram, "bandwidth_note": note})
    df = pd.DataFrame(rows)
    for i in range(len(df) - 1):  # flag, never overwrite, an inner level slower than an outer one
        faster = df.iloc[i + 1:][df.bandwidth_gbs.iloc[i + 1:] > df.bandwidth_gbs.iloc[i]]
        if len(faster):
            r = faster.iloc[0]
            df.loc[df.index[i], "bandwidth_note"] = (
                f"slower than the outer {r.level} ({r.bandwidth_gbs:.4g} GB/s): kept as measured (call overhead, "
                "too few sizes in the level, or a noisy machine)")
    return df


def main_memory_level(device: torch.device) -> str:
    """hbm for data-centre NVIDIA GPUs (compute capability x.0: V100, A100, H100/H200, B200), dram otherwise."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return "hbm" if minor == 0 and major >= 7 else "dram"
    return "dram"


def stream_gbs(device: torch.device, mb: int = 512, repeats: int = 5) -> dict[str, float]:
    """Best rate of each streaming kernel over a ``2 x mb`` MiB working set, GB/s: ``{kernel}_gbs``. CPU: read and
    triad (:mod:`cnnbench.roofline.membench`); GPU: copy (b = a: 2 x 4 bytes/element) and triad (3 x 4 bytes/element)."""
    sweep = bandwidth_sweep(device, [2 * mb * 2**20], repeats)
    return {f"{k}_gbs": float(g.bandwidth_gbs.max()) for k, g in sweep.groupby("kernel")}


def measured_or_kept(run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured rows of device_peaks.csv, bandwidth_sweep.csv) of ``run``: those already in its folder when they
    were measured on this device with the same threads, matmul_size, stream_mb and peak_repeats (a rerun measures
    nothing again), else measured now with those settings as columns."""
    from cnnbench import results
    from cnnbench.results.tables import PEAK_SETTINGS

    p = run.params
    settings = dict(zip(PEAK_SETTINGS, (devices.device_name(run.device), run.threads, p.matmul_size, p.stream_mb,
                                        p.peak_repeats), strict=True))
    old, sweep = results.read(run.dir, "device_peaks"), results.read(run.dir, "bandwidth_sweep")
    kept = old[old.kind == "measured"] if len(old) and "kind" in old else old
    def same(column, value) -> bool:  # as read back: numbers of a column with empty (spec) cells are floats
        if isinstance(value, str):
            return bool((column.astype(str) == value).all())
        return bool((pd.to_numeric(column, errors="coerce") == value).all())

    if len(kept) and len(sweep) and all(k in kept and same(kept[k], v) for k, v in settings.items()):
        progress.resumed(len(kept), len(kept), "device_peaks.csv", "measured roofs")
        return kept.reset_index(drop=True), sweep
    measured, sweep = measure(run.device, p.matmul_size, p.stream_mb, p.peak_repeats, with_sweep=True,
                              threads=run.threads)
    progress.resumed(0, len(measured), "device_peaks.csv", "measured roofs")
    return measured.assign(**settings), sweep


def measure(device: torch.device, matmul_size: int, stream_mb: int, repeats: int,
            with_sweep: bool = False, threads: int = 0):
    """Measured roofs for every precision of ``device``: rows of device_peaks.csv (one per precision and memory
    level, the main-memory row of each precision first); with ``with_sweep``, also the bandwidth sweep.

    CPU: on ``threads`` threads (0: the physical cores), torch's and numba's alike."""
    before = torch.get_num_threads()
    threads = devices.set_threads(threads) if device.type == "cpu" else before
    try:
        peaks, sweep = _measure(device, matmul_size, stream_mb, repeats, threads)
    finally:
        torch.set_num_threads(before)  # the run's own thread setting applies again afterwards
    return (peaks, sweep) if with_sweep else peaks


def _measure(device: torch.device, matmul_size: int, stream_mb: int, repeats: int, threads: int):
    n = matmul_size or default_matmul_size(device)
    levels = cache_levels(device, threads)
    dram_bytes, note = 2 * stream_mb * 2**20, ""
    outermost = max((lv["capacity_bytes"] for lv in levels), default=0)
    if dram_bytes < 4 * outermost:
        dram_bytes, note = 4 * outermost, f" (raised from 2 x {stream_mb} MiB to 4x the last cache)"
    if device.type == "cpu":  # a few KiB per thread up, two sizes per octave: every level holds several
        sizes = sweep_sizes(levels, dram_bytes, smallest=4 * 2**10 * threads, step=2**0.5)
    else:
        sizes = sweep_sizes(levels, dram_bytes)
    progress.note(f"roofline: memory bandwidth over {len(sizes)} working sets on {threads} threads")
    sweep = bandwidth_sweep(device, sizes, repeats, threads=threads)
    main = main_memory_level(device)
    roofs = level_roofs(sweep, levels, main)
    roofs = pd.concat([roofs[roofs.level == main], roofs[roofs.level != main]])  # main memory first
    dram = sweep.loc[sweep.groupby("kernel").working_set_bytes.idxmax()]  # each kernel's largest working set
    stream = {f"{k}_gbs": float(g.bandwidth_gbs.max()) for k, g in dram.groupby("kernel")}
    rows = []
    for precision in precisions(device):
        progress.note(f"roofline: {precision} compute roof (matmul {n}, two convolutions)")
        mm = rate_summary(matmul_rates(device, precision, n, repeats))
        convs = [rate_summary(conv_rates(device, precision, repeats=repeats)),  # ResNet stage 2 and 3 shapes
                 rate_summary(conv_rates(device, precision, batch=64, channels=256, size=14, repeats=repeats))]
        conv = max(convs, key=lambda c: c["best"])
        # the roof is the best dense rate observed (a roof below a kernel is no roof), with its calls' spread
        top, winner = (mm, "matmul") if mm["best"] >= conv["best"] else (conv, "conv")
        for lv in roofs.itertuples():
            rows.append({
                "device_name": devices.device_name(device), "device_kind": device.type, "kind": "measured",
                "precision": precision, "level": lv.level, "peak_gflops": top["best"],
                "peak_gflops_median": top["median"], "peak_spread": top["spread"], "peak_calls": top["calls"],
                "bandwidth_gbs": lv.bandwidth_gbs, "bandwidth_kernel": lv.kernel,
                "ridge_flop_per_byte": top["best"] / lv.bandwidth_gbs, "capacity_mib": _mib(lv.capacity_bytes),
                "cache_size_kib": lv.size_bytes / 1024 if pd.notna(lv.size_bytes) else float("nan"),
                "matmul_gflops": mm["best"], "matmul_gflops_median": mm["median"], "conv3x3_gflops": conv["best"],
                **stream, "threads": threads, "bandwidth_note": lv.bandwidth_note,
                "source": f"measured: best of a {n}x{n} matmul and two 3x3 convs ({winner} won), best of "
                          f"{top['calls']} calls, spread {top['spread']:.1%}; {lv.level} bandwidth: "
                          f"{lv.bandwidth_source}" + (note if lv.level == main else "")
                          + (f"; {lv.bandwidth_note}" if lv.bandwidth_note else ""),
            })
    sweep.insert(0, "device_name", devices.device_name(device))
    sweep.insert(1, "device_kind", device.type)
    sweep["level"] = [level_of(w, roofs) for w in sweep.working_set_bytes]
    return pd.DataFrame(rows), sweep


def _mib(nbytes) -> float:
    return float(nbytes) / 2**20 if nbytes is not None and pd.notna(nbytes) else float("nan")


def level_of(working_set_bytes: float, levels: pd.DataFrame) -> str:
    """The innermost level whose capacity holds ``working_set_bytes`` (main memory when none does).

    ``levels`` has a level and a capacity (``capacity_bytes`` or ``capacity_mib``; NaN for main memory).
    """
    cap = levels.capacity_bytes if "capacity_bytes" in levels else levels.capacity_mib * 2**20
    fits = levels[pd.to_numeric(cap, errors="coerce") >= working_set_bytes]
    if len(fits):
        return str(fits.loc[pd.to_numeric(cap, errors="coerce")[fits.index].idxmin(), "level"])
    main = levels[levels.level.isin(MAIN_MEMORY)]
    return str(main.level.iloc[0] if len(main) else levels.level.iloc[-1])


def specs() -> pd.DataFrame:
    """The spec-sheet table shipped with the package (dense figures only, each with its source)."""
    with resources.files("cnnbench").joinpath("data/device_specs.csv").open() as f:
        return pd.read_csv(f)


SPEC_COLUMNS = ["device_name", "kind", "precision", "level", "peak_gflops", "bandwidth_gbs", "ridge_flop_per_byte",
                "source"]


def normalise_name(name: str) -> str:
    """Case, spacing and the "NVIDIA " prefix do not matter; model and variant do."""
    text = re.sub(r"\s+", " ", str(name)).strip().lower()
    return text.removeprefix("nvidia ").strip()


def apple_chip(device_name: str) -> str:
    """"Apple M3 Pro GPU (MPS)" -> "Apple M3 Pro"."""
    return re.sub(r"\s*GPU\s*(\(MPS\))?\s*$", "", device_name.strip(), flags=re.IGNORECASE)


# The M3 and M4 families: Apple publishes no GPU clock or TFLOPS, and the clocks published by third parties
# range 1.38-1.6 GHz, so a derived roof (cores x 128 ALUs x 2 FLOP x clock) would carry a 16% guess.
NO_APPLE_SPEC = ("no spec roof: Apple publishes no GPU clock or TFLOPS for the {chip}, and published estimates of "
                 "its GPU clock range 1.38-1.6 GHz (a 16% spread in a derived roof); only the measured roofs are drawn")


def spec_rows(device_name: str, device_kind: str, gpu_cores: int | None = None) -> tuple[pd.DataFrame, str]:
    """The spec-sheet rows of exactly this device, as device_peaks rows, and a note saying how it matched.

    CUDA: the name torch reports must equal a row's name (case, spacing and an "NVIDIA " prefix aside), so "L4"
    never takes an L40's row. MPS: the chip name and the GPU core count read from the system must both match.
    A CPU never takes a GPU row: its spec roofs are derived (:func:`cpu_spec`). No exact row: empty, and the note
    says so.
    """
    table = specs()
    empty = pd.DataFrame(columns=SPEC_COLUMNS)
    if device_kind == "cuda":
        hits = table[(table.device_kind == "cuda")
                     & (table.device.map(normalise_name) == normalise_name(device_name))]
        how = f"exact name '{device_name}'"
    elif device_kind == "mps":
        chip = apple_chip(device_name)
        if re.match(r"Apple M[34]\b", chip, flags=re.IGNORECASE):
            return empty, NO_APPLE_SPEC.format(chip=chip)
        if gpu_cores is None:
            return empty, f"no spec roof: the GPU core count of '{chip}' could not be read, and it decides the row"
        hits = table[(table.device_kind == "mps") & (table.device.map(normalise_name) == normalise_name(chip))
                     & (pd.to_numeric(table.gpu_cores, errors="coerce") == gpu_cores)]
        how = f"chip '{chip}' with {gpu_cores} GPU cores"
    else:
        return empty, "CPU: spec roofs are derived from its cores, ISA and clock, never taken from a GPU row"
    if hits.empty:
        return empty, f"no spec roof: no row of device_specs.csv matches {how} exactly"
    rows = pd.DataFrame({
        "device_name": device_name, "kind": "spec", "precision": hits.precision, "level": hits.memory_level,
        "peak_gflops": hits.peak_gflops, "bandwidth_gbs": hits.bandwidth_gbs,
        "ridge_flop_per_byte": hits.peak_gflops / hits.bandwidth_gbs, "source": hits.device + ": " + hits.source,
    }).reset_index(drop=True)
    return rows, f"spec roofs matched by {how}"


def spec_for(device_name: str, device_kind: str | None = None, gpu_cores: int | None = None) -> pd.DataFrame:
    """:func:`spec_rows` without the note; the kind defaults to mps for "(MPS)" names and cuda otherwise."""
    if device_kind is None:
        device_kind = "mps" if "(mps)" in device_name.lower() else "cuda"
    return spec_rows(device_name, device_kind, gpu_cores)[0]


# fp32 lanes per vector and FMA units per core by ISA (the widest the CPU's flags show), for derived CPU roofs
_ISA = (("avx512f", 16, 2, "AVX-512"), ("avx2", 8, 2, "AVX2"), ("avx", 8, 1, "AVX (no FMA)"),
        ("sse2", 4, 1, "SSE2"))


def cpu_isa(flags: frozenset[str], machine: str = "") -> tuple[int, int, str] | None:
    """(fp32 lanes, FMA units per core, name) of the CPU's widest vector ISA; None when unknown."""
    if machine.lower() in ("arm64", "aarch64") and not flags & {"avx2", "avx512f"}:
        return (4, 4, "NEON 128-bit, 4 FMA pipes") if platform.system() == "Darwin" else (4, 2, "NEON 128-bit")
    for flag, lanes, units, name in _ISA:
        if flag in flags and (flag != "avx2" or "fma" in flags):
            return lanes, units, name
    return None


def cpu_spec(device_name: str, cores: int, clock_ghz: float | None, clock_source: str,
             flags: frozenset[str], machine: str = "", clock_is_max: bool = True) -> tuple[pd.DataFrame, str]:
    """A derived fp32 compute roof for a CPU: cores x FMA units x fp32 lanes x 2 FLOP x clock, labelled derived.

    The ISA comes from the CPU's flags (:func:`cpu_isa`), never assumed. With the maximum (boost) clock it is an
    upper bound; with only a base/nominal clock (``clock_is_max`` false) the source says so, and why a measured
    rate can exceed it. No bandwidth is derived (the memory roofs of a CPU are the measured ones). Empty, with a
    note, when the ISA or the clock cannot be read.
    """
    isa = cpu_isa(flags, machine or platform.machine())
    if isa is None or not clock_ghz:
        what = "vector ISA" if isa is None else "clock"
        return pd.DataFrame(columns=SPEC_COLUMNS), f"no derived CPU roof: its {what} could not be read"
    lanes, units, name = isa
    peak = cores * units * lanes * 2 * clock_ghz
    row = {"device_name": device_name, "kind": "spec", "precision": "fp32", "level": "dram", "peak_gflops": peak,
           "bandwidth_gbs": float("nan"), "ridge_flop_per_byte": float("nan"),
           "source": f"derived: {cores} cores x {units} FMA units x {lanes} fp32 lanes ({name}) x 2 FLOP x "
                     f"{clock_ghz:.2f} GHz ({clock_source})"
                     + ("" if clock_is_max else "; a base clock, not an upper bound: under load the cores boost above "
                        "it, so a measured rate can exceed this roof")
                     + "; bandwidth not derived"}
    return pd.DataFrame([row]), "CPU spec roof derived from the measured cores, ISA flags and clock"


def spec_for_device(device: torch.device, threads: int | None = None) -> tuple[pd.DataFrame, str]:
    """Spec roofs of the run's device with a note: exact rows for GPUs, a derived roof for CPUs."""
    name = devices.device_name(device)
    if device.type == "cpu":
        clock, source, is_max = devices.cpu_clock_ghz()
        rows, note = cpu_spec(name, threads or devices.physical_cores(), clock, source, devices.cpu_flags(),
                              clock_is_max=is_max)
        return rows.assign(device_kind="cpu"), note
    cores = devices.apple_gpu_cores() if device.type == "mps" else None
    rows, note = spec_rows(name, device.type, cores)
    return rows.assign(device_kind=device.type), note


def compare(measured: pd.DataFrame, spec: pd.DataFrame) -> pd.DataFrame:
    """Measured roofs (main memory) over spec-sheet roofs, per precision both have."""
    if "level" in measured:
        measured = measured[measured.level.isin(MAIN_MEMORY)]
    m = measured[["precision", "peak_gflops", "bandwidth_gbs"]]
    s = spec[["precision", "peak_gflops", "bandwidth_gbs"]]
    both = m.merge(s, on="precision", suffixes=("_measured", "_spec"))
    both["peak_measured_over_spec"] = both.peak_gflops_measured / both.peak_gflops_spec
    both["bandwidth_measured_over_spec"] = both.bandwidth_gbs_measured / both.bandwidth_gbs_spec
    return both
