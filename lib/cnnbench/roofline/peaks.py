"""Device peaks: measured compute roofs (dense matmul per precision, two 3x3 convolutions), a measured memory
hierarchy (a working-set sweep through every cache level into main memory: each device's kernels,
:mod:`cnnbench.devices.membench` on the CPU) and spec-sheet roofs. Columns: docs/outputs.md."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import torch

from cnnbench import devices, progress, results
from cnnbench.devices.base import DTYPES, SPEC_COLUMNS, normalise_name, specs  # noqa: F401 - specs: 04's table


def matmul_rates(
    b: devices.Backend,
    precision: str = "fp32",
    n: int = 4096,
    repeats: int = 5,
    min_call_s: float | None = None,
) -> list[float]:
    """GFLOP/s of each of ``repeats`` timed calls of dense n x n matmuls (2 n^3 FLOPs each) on ``b``'s device,
    each call chaining as many as last ``min_call_s``."""
    x, y = (torch.randn(n, n, device=b.device, dtype=DTYPES[precision]) for _ in range(2))
    with b.math(precision):
        return [r / 1e9 for r in b.rates(lambda: torch.mm(x, y), 2 * n**3, repeats, min_call_s)]


def conv_rates(
    b: devices.Backend,
    precision: str = "fp32",
    batch: int = 32,
    channels: int = 128,
    size: int = 28,
    repeats: int = 5,
    min_call_s: float | None = None,
) -> list[float]:
    """GFLOP/s of each timed call of a 3x3 convolution's forward (ResNet stage 2 shape), graph-replayed if it can."""
    conv = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False).to(b.device, DTYPES[precision])
    x = torch.randn(batch, channels, size, size, device=b.device, dtype=DTYPES[precision])
    flops = 2 * batch * size * size * channels * channels * 9
    with torch.inference_mode(), b.math(precision):
        return [r / 1e9 for r in b.rates(lambda: conv(x), flops, repeats, min_call_s, graph=True)]


def rate_summary(rates: list[float]) -> dict:
    """Best, median and spread ((best - worst) / median) of repeated calls' rates, and how many calls."""
    median = statistics.median(rates)
    spread = (max(rates) - min(rates)) / median if median else 0.0
    return {"best": max(rates), "median": median, "spread": spread, "calls": len(rates)}


MAIN_MEMORY = ("dram", "hbm")  # levels that are the device's main memory (roof_for's DRAM roof)


def knees(sweep: pd.DataFrame, drop: float = 0.3) -> list[int]:
    """Working sets after which the best bandwidth falls by more than ``drop``: where a cache level ends."""
    best = sweep.groupby("working_set_bytes").bandwidth_gbs.max().sort_index()
    pairs = zip(best.index[:-1], best.index[1:], best.values[:-1], best.values[1:], strict=True)
    return [int(s) for s, nxt, b, bn in pairs if bn < (1 - drop) * b and nxt > s]


# a level's roof is the median of at least this many of its working sets: a level the sweep holds, not one point
MIN_POINTS = 3


def _level_row(inside: pd.DataFrame, lv: dict, need: int = MIN_POINTS) -> dict | None:
    """A level's roof: per kernel, the median over the level's working sets of each set's best call; the kernel
    with the highest median among those measured at ``need`` sets or more (None: none was), labelled."""
    per = inside.groupby("kernel").bandwidth_gbs.agg(["median", "count", "min", "max"])
    per = per[per["count"] >= need]
    if per.empty:
        return None
    kernel = per["median"].idxmax()
    top, rows = per.loc[kernel], inside[inside.kernel == kernel]
    first, (lo, hi) = rows.iloc[0], (rows.working_set_bytes.min(), rows.working_set_bytes.max())
    how = [
        f"median {kernel} of {int(top['count'])} working sets in the level ({_fmt_bytes(lo)} to {_fmt_bytes(hi)}: "
        f"{top['min']:,.1f} to {top['max']:,.1f} GB/s)"
    ]
    said = {"threads": "{:.0f} thread(s)", "calls": "each the best of {:.0f} calls", "method": "{}"}
    how += [text.format(first[k]) for k, text in said.items() if pd.notna(first.get(k))]
    return {
        **lv,
        "bandwidth_gbs": float(top["median"]),
        "kernel": kernel,
        "sweep_points": int(top["count"]),
        "bandwidth_source": ", ".join(how) + f" ({lv['size_source']})",
        "bandwidth_note": "",
    }


def _fmt_bytes(n: float) -> str:
    return f"{n / 2**20:,.4g} MiB" if n >= 2**20 else f"{n / 2**10:.3g} KiB"


# the main-memory roof comes from working sets of at least this many times the last cache
MAIN_MEMORY_FACTOR = 4


def level_roofs(sweep: pd.DataFrame, levels: list[dict], main: str = "dram") -> pd.DataFrame:
    """One bandwidth per memory level (:func:`_level_row`), each from its own working sets only (past the
    previous level's capacity); a level with fewer than MIN_POINTS gets no row, one slower than an outer level a
    ``bandwidth_note``. Levels from sysfs when given, else bounded by the sweep's knees (l1, l2, ...)."""
    if not levels:
        levels = [
            {"level": f"l{i + 1}", "size_bytes": k, "capacity_bytes": k, "size_source": "knee of the sweep"}
            for i, k in enumerate(knees(sweep))
        ]
    ws = sweep.working_set_bytes
    rows, lower = [], 0
    for lv in levels:  # a level's own working sets: past the one inside it (and its ``above_bytes``, if any)
        inside = (ws > max(lower, lv.get("above_bytes") or 0)) & (ws <= lv["capacity_bytes"])
        rows.append(_level_row(sweep[inside], lv))
        lower = lv["capacity_bytes"]
    # Main memory from working sets of at least MAIN_MEMORY_FACTOR x the last cache only: just past it, part of
    # the set is still cache-resident, as ERT and STREAM size their arrays.
    level = {"level": main, "size_bytes": None, "capacity_bytes": None, "size_source": "main memory"}
    row = _level_row(sweep[ws >= MAIN_MEMORY_FACTOR * lower] if lower else sweep.iloc[:0], level)
    # too few sets far enough past the caches: each kernel's largest past them stand in, said so
    if row is None:
        past = sweep[ws > lower] if (ws > lower).any() else sweep
        largest = past[past.groupby("kernel").working_set_bytes.rank(ascending=False) <= MIN_POINTS]
        row = _level_row(largest, level, need=1) | {
            "bandwidth_note": f"fewer than {MIN_POINTS} working sets of at least {MAIN_MEMORY_FACTOR}x the last "
            f"cache were measured: the largest {MIN_POINTS} past it stand in"
        }
    df = pd.DataFrame([r for r in rows if r] + [row])
    for i in range(len(df) - 1):  # flag, never overwrite, an inner level slower than an outer one
        faster = df.iloc[i + 1 :][df.bandwidth_gbs.iloc[i + 1 :] > df.bandwidth_gbs.iloc[i]]
        if len(faster):
            r = faster.iloc[0]
            df.loc[df.index[i], "bandwidth_note"] = (
                f"slower than the outer {r.level} ({r.bandwidth_gbs:.4g} GB/s): kept as measured (call overhead, "
                "too few sizes in the level, or a noisy machine)"
            )
    return df


def measured_or_kept(run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured rows of device_peaks.csv, bandwidth_sweep.csv) of ``run``: those in its folder measured with the
    same PEAK_SETTINGS (a rerun measures nothing again), else measured now with those settings as columns."""
    p, b = run.params, devices.backend(run.device)  # the one backend of this measurement, passed down
    values = (b.name(), run.threads, p.matmul_size, p.stream_mb, p.peak_repeats)
    settings = dict(zip(results.schema.PEAK_SETTINGS, (*values, results.files.host_id()), strict=True))
    old, sweep = results.read(run.dir, "device_peaks"), results.read(run.dir, "bandwidth_sweep")
    kept = old[old.kind == "measured"]

    def same(column, value) -> bool:  # as read back: numbers of a column with empty (spec) cells are floats
        if isinstance(value, str):
            return bool((column.astype(str) == value).all())
        return bool((pd.to_numeric(column, errors="coerce") == value).all())

    if len(kept) and len(sweep) and all(k in kept and same(kept[k], v) for k, v in settings.items()):
        progress.resumed(len(kept), len(kept), "device_peaks.csv", "measured roofs")
        return kept.reset_index(drop=True), sweep
    measured, sweep = measure(b, p.matmul_size, p.stream_mb, p.peak_repeats, run.threads)
    progress.resumed(0, len(measured), "device_peaks.csv", "measured roofs")
    return measured.assign(**settings), sweep


def measure(
    b: devices.Backend, matmul_size: int, stream_mb: int, repeats: int, threads: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Measured roofs for every precision of ``b``'s device (rows of device_peaks.csv, one per precision and memory
    level, main memory first) and the bandwidth sweep. CPU: on ``threads`` threads (0: the physical cores),
    torch's and numba's alike; the run's own thread setting applies again afterwards."""
    before = torch.get_num_threads()
    try:  # the host's threads (numba's too); a GPU's work ignores them
        return _measure(b, matmul_size, stream_mb, repeats, devices.set_threads(threads))
    finally:
        torch.set_num_threads(before)


def _measure(b: devices.Backend, matmul_size: int, stream_mb: int, repeats: int, threads: int):
    n = matmul_size or b.matmul_size
    levels = b.cache_levels(threads)
    dram_bytes, note = 2 * stream_mb * 2**20, ""
    # half and three quarters of dram_bytes are swept too: MIN_POINTS sets of main memory at least
    far = 2 * MAIN_MEMORY_FACTOR * max((lv["capacity_bytes"] for lv in levels), default=0)
    if dram_bytes < far:
        dram_bytes, note = far, f" (raised from 2 x {stream_mb} MiB to {far // 2**20} MiB, 8x the last cache)"
    sizes = b.sweep_sizes(levels, dram_bytes, threads)
    progress.note(f"roofline: memory bandwidth over {len(sizes)} working sets on {threads} threads")
    sweep = pd.DataFrame(b.bandwidth_sweep(sizes, repeats, threads))
    main = b.main_memory
    roofs = level_roofs(sweep, levels, main).astype({"capacity_bytes": float, "size_bytes": float})
    roofs["capacity_mib"] = roofs.capacity_bytes / 2**20
    roofs = pd.concat([roofs[roofs.level == main], roofs[roofs.level != main]])  # main memory first
    rows, spec = [], {r["precision"]: r["peak_gflops"] for r in b.spec(threads)[0] if r.get("peak_gflops")}
    for precision in b.roof_precisions():
        progress.note(f"roofline: {precision} compute roof (matmul {n}, two convolutions)")
        mm = rate_summary(matmul_rates(b, precision, n, repeats))
        convs = [
            rate_summary(conv_rates(b, precision, repeats=repeats)),  # ResNet stage 2 and 3 shapes
            rate_summary(conv_rates(b, precision, batch=64, channels=256, size=14, repeats=repeats)),
        ]
        conv = max(convs, key=lambda c: c["best"])
        # the roof is the best dense rate observed (a roof below a kernel is no roof), with its calls' spread; a
        # convolution above the spec sheet is none (cuDNN's Winograd and FFT engines do fewer FLOPs than the
        # direct count credits them), and every rate above it is flagged
        limit = spec.get(precision, math.inf)
        top, winner = (conv, "conv") if limit >= conv["best"] > mm["best"] else (mm, "matmul")
        above = [
            f"{k} {r['best']:.4g} GFLOP/s" for k, r in (("matmul", mm), ("conv", conv)) if r["best"] > limit
        ]
        peak_note = f"{' and '.join(above)} above the spec sheet's {limit:.4g}" if above else ""
        if conv["best"] > limit:
            peak_note += ": a convolution's rate counts direct-convolution FLOPs and is not the roof"
        for lv in roofs.itertuples():
            rows.append(
                {
                    "device_name": b.name(),
                    "device_kind": b.kind,
                    "kind": "measured",
                    "precision": precision,
                    "level": lv.level,
                    "peak_gflops": top["best"],
                    "peak_gflops_median": top["median"],
                    "peak_spread": top["spread"],
                    "peak_calls": top["calls"],
                    "bandwidth_gbs": lv.bandwidth_gbs,
                    "bandwidth_kernel": lv.kernel,
                    "ridge_flop_per_byte": top["best"] / lv.bandwidth_gbs,
                    "capacity_mib": lv.capacity_mib,
                    "cache_size_kib": lv.size_bytes / 1024,
                    "matmul_gflops": mm["best"],
                    "matmul_gflops_median": mm["median"],
                    "conv3x3_gflops": conv["best"],
                    "threads": threads,
                    "bandwidth_note": lv.bandwidth_note,
                    "peak_note": peak_note,
                    "source": f"measured: best of a {n}x{n} matmul and two 3x3 convs ({winner} won), best of "
                    f"{top['calls']} calls, spread {top['spread']:.1%}; {lv.level} bandwidth: "
                    f"{lv.bandwidth_source}"
                    + (note if lv.level == main else "")
                    + (f"; {lv.bandwidth_note}" if lv.bandwidth_note else ""),
                }
            )
    sweep.insert(0, "device_name", b.name())
    sweep.insert(1, "device_kind", b.kind)
    sweep["level"] = [level_of(w, roofs) for w in sweep.working_set_bytes]
    return pd.DataFrame(rows), sweep


def level_of(working_set_bytes: float, levels: pd.DataFrame) -> str:
    """The innermost of ``levels`` (``level``, ``capacity_mib``) holding ``working_set_bytes``, else main memory."""
    fits = levels[levels.capacity_mib * 2**20 >= working_set_bytes]
    if len(fits):
        return str(fits.level[fits.capacity_mib.idxmin()])
    main = levels[levels.level.isin(MAIN_MEMORY)]
    return str(main.level.iloc[0] if len(main) else levels.level.iloc[-1])


def spec_for_device(device: torch.device, threads: int | None = None) -> tuple[pd.DataFrame, str]:
    """Spec roofs of the run's device with a note: exact rows for GPUs, a derived roof for CPUs
    (:meth:`cnnbench.devices.Backend.spec`)."""
    b = devices.backend(device)
    rows, note = b.spec(threads or devices.physical_cores())
    return pd.DataFrame(rows, columns=SPEC_COLUMNS).assign(device_kind=b.kind), note


def spec(name: str, kind: str, gpu_cores: int | None = None) -> tuple[pd.DataFrame, str]:
    """Spec roofs of a device of ``kind`` named ``name`` (one this machine need not have), with how they matched."""
    rows, note = devices.backend_class(kind).spec_for_name(name, gpu_cores)
    return pd.DataFrame(rows, columns=SPEC_COLUMNS).assign(device_kind=kind), note


def compare(measured: pd.DataFrame, spec: pd.DataFrame) -> pd.DataFrame:
    """Measured roofs (main memory) over spec-sheet roofs, per precision both have."""
    m = measured[measured.level.isin(MAIN_MEMORY)][["precision", "peak_gflops", "bandwidth_gbs"]]
    s = spec[["precision", "peak_gflops", "bandwidth_gbs"]]
    both = m.merge(s, on="precision", suffixes=("_measured", "_spec"))
    both["peak_measured_over_spec"] = both.peak_gflops_measured / both.peak_gflops_spec
    both["bandwidth_measured_over_spec"] = both.bandwidth_gbs_measured / both.bandwidth_gbs_spec
    return both
