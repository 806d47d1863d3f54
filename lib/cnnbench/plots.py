"""Plots of tidy results, units on every axis; each function returns the figure and saves it when asked."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import textwrap
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, LogLocator, NullLocator

from cnnbench import knobs
from cnnbench.tables import variant_label

sns.set_theme(style="whitegrid", context="notebook", rc={"axes.formatter.useoffset": False})  # plain numbers


_DETACHED = contextvars.ContextVar("detached", default=False)


@contextlib.contextmanager
def detached():
    """Figures made inside are not pyplot's, so no backend hook draws them (the explorer's callbacks need this):
    render them yourself (``fig.savefig``)."""
    token = _DETACHED.set(True)
    try:
        yield
    finally:
        _DETACHED.reset(token)


def subplots(*args, figsize=None, **kwargs):
    """``plt.subplots``, or a figure pyplot does not hold inside ``detached()``."""
    if _DETACHED.get():
        fig = Figure(figsize=figsize)
        return fig, fig.subplots(*args, **kwargs)
    return plt.subplots(*args, figsize=figsize, **kwargs)


EMPTY_PANELS = "empty_panels.csv"
LOG_LOG = {"xscale": "log", "yscale": "log"}
ROOF_AXES = {**LOG_LOG, "xlabel": "arithmetic intensity (FLOP/byte, compulsory traffic)"} | {
    "ylabel": "performance (GFLOP/s)"
}
POINT = {"edgecolor": "black", "lw": 0.5, "zorder": 3}  # a roofline's point, over the roofs
# our points' colours on a roofline: none of the roofs' (C0-C9, black, grey), the reds last
OURS = tuple(plt.get_cmap("tab20b").colors[i] for i in (0, 4, 16, 8, 12, 2, 6, 18, 10, 14))
BESIDE = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}  # a legend beside the plot


def empty_axes(fig) -> list[str]:
    """The panels of ``fig`` switched on (not a legend-only one) that draw no finite data: their data limits are not
    finite in x and y (an axvline sets only x), each named by its title, else its y label, else its position."""
    named = [(ax.get_title() or ax.get_ylabel() or f"axes {i}", ax) for i, ax in enumerate(fig.axes)]
    return [name for name, ax in named if ax.axison and not np.isfinite(ax.dataLim.get_points()).all()]


class PlainLogFormatter(LogFormatter):
    """Log ticks as plain numbers to six significant digits: 0.6, 2.25, 20,000 (not 6e-01, 2, 2e+04)."""

    def _num_to_string(self, x, vmin, vmax):
        text = f"{x:,.{max(0, 5 - math.floor(math.log10(x)))}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text


def label_log_axes(fig) -> None:
    """Every log axis in plain numbers (hand-set ticks keep their labels); one spanning less than a decade is
    labelled at its minor ticks too."""
    for ax in fig.axes:
        for axis, (lo, hi) in ((ax.yaxis, ax.get_ylim()), (ax.xaxis, ax.get_xlim())):
            if axis.get_scale() != "log" or not isinstance(axis.get_major_formatter(), LogFormatter):
                continue
            short = lo > 0 and hi > 0 and abs(math.log10(hi / lo)) < 1
            if short:  # minorticks_off() may have removed them
                axis.set_minor_locator(LogLocator(base=10, subs="auto"))
            axis.set_major_formatter(PlainLogFormatter())
            axis.set_minor_formatter(
                PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2 if short else 1, 0.5))
            )


def save(fig, path: str | Path | None, dpi: int = 120):
    """Save ``fig`` to ``path`` (when given), each panel with no data drawn recorded (and warned about) as a row of
    ``empty_panels.csv`` beside it; saving it again replaces its rows."""
    label_log_axes(fig)
    if path is not None:
        path = Path(path)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        empty, log = empty_axes(fig), path.parent / EMPTY_PANELS
        if empty:
            warnings.warn(f"{path.name}: no data drawn in panel(s) {empty}", stacklevel=2)
        old = pd.read_csv(log) if log.is_file() else pd.DataFrame(columns=["figure", "panel"])
        rows = pd.concat([old[old.figure != path.name], pd.DataFrame({"figure": path.name, "panel": empty})])
        if len(rows):
            rows.to_csv(log, index=False)
        elif log.is_file():
            log.unlink()
    return fig


def legend_below(fig, *axes, title=None, ncol: int | None = 4, fontsize: int | None = 8, most=None) -> None:
    """One legend of the labelled artists of ``axes``, each label once, below the figure's panels, never over the
    data (none without labels, or with more than ``most``); ``ncol`` caps its columns (None: one per label)."""
    legend = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    if 0 < len(legend) <= (most or len(legend)):
        ncol = min(len(legend), ncol or len(legend))
        where = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0)}
        fig.legend(list(legend.values()), list(legend), title=title, ncol=ncol, fontsize=fontsize, **where)


def complexity(df: pd.DataFrame, path: str | Path | None = None):
    """Training GFLOPs per image and activation memory per image, per model, at each counted resolution."""
    several = df.groupby(["model", "image_size"]).num_classes.transform("nunique") > 1  # two heads, one size
    name = df.model.where(~several, df.model + " (" + df.num_classes.astype(str) + " classes)")
    data = df.assign(resolution=df.image_size.astype(str) + "x" + df.image_size.astype(str), model=name)
    fig, axes = subplots(1, 2, figsize=(12, 4))
    # points, not bars: the values span four decades, and a bar on a log axis has no length to read
    style = {"hue": "resolution", "dodge": True, "jitter": False, "size": 8}
    for ax, col in zip(axes, ("gflops_train", "activation_mib"), strict=True):
        sns.stripplot(data=data, x="model", y=col, ax=ax, legend=ax is axes[0], **style)
        lim = _decades(data[col].min() / 1.5, data[col].max() * 1.5)
        ax.set(yscale="log", ylabel=axis_label(col), xlabel="", ylim=lim)
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right", rotation_mode="anchor")
    axes[0].get_legend().remove()
    fig.tight_layout(w_pad=3)  # the right panel's axis label clear of the left panel
    legend_below(fig, axes[0], title="resolution", ncol=None, fontsize=None)
    return save(fig, path)


# Axis labels in words with units for the columns and telemetry metrics a figure plots (never the raw name).
LABELS = {
    "gflops_train": "training GFLOP per image (fwd+bwd)",
    "activation_mib": "saved activations per image (MiB)",
    "util_cpu_core_pct": "CPU per core (%)",
    "util_cpu_pct": "CPU, all cores (%)",
    "util_process_cpu_pct": "this process's CPU (%, 100 = a core)",
    "util_other_cpu_pct": "other processes' CPU (% of all cores)",
    "rss_mib": "resident memory (MiB)",
    "cpu_steal_pct": "CPU steal (%)",
    "cpu_freq_mhz": "CPU clock (MHz)",
    "mps_mem_mib": "MPS memory (MiB)",
    "util_device_pct": "GPU busy (%)",
    "util_device_mem_pct": "GPU memory busy (%)",
    "gpu_mem_used_mib": "GPU memory used (MiB)",
    "gpu_power_w": "GPU power (W)",
    "gpu_sm_clock_mhz": "GPU clock (MHz)",
    "gpu_temp_c": "GPU temperature (C)",
    "gpu_throttle_reasons": "GPU throttle reasons (bits)",
    "peak_rss_mib": "peak resident memory (MiB)",
    "peak_device_mem_mib": "peak device memory (MiB)",
}


def axis_label(name: str, wrap: bool = False) -> str:
    """The words and unit of a column or metric on an axis (the name itself only when none is known); ``wrap``:
    on lines of up to 24 characters, for a short panel."""
    label = LABELS.get(name, name)
    return textwrap.fill(label, 24) if wrap else label


def text(label) -> str:
    """A label shown literally: a '$' in a model, device or variant name is not mathtext."""
    return str(label).replace("$", r"\$")


def throughput(df: pd.DataFrame, path: str | Path | None = None, hue: str | None = None):
    """Throughput per model and phase with its 95% interval: a point per variant (or value of ``hue``) and batch
    size; a configuration measured twice shows its last measurement."""
    if df.empty:
        return None
    ok = df[df.status == "ok"]
    ok = ok.assign(variant=ok[hue].astype(str) + " " + variant_label(ok) if hue else variant_label(ok))
    names, several = ok.model.astype(str), ok.groupby("model").batch_size.transform("nunique") > 1
    ok = ok.assign(bar=names.where(~several, names + " bs=" + ok.batch_size.astype(str)))
    phases = list(dict.fromkeys(ok.phase))
    fig, axes = subplots(1, max(len(phases), 1), figsize=(6 * max(len(phases), 1), 4), squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=False):
        g = ok[ok.phase == phase]
        bars = list(dict.fromkeys(g.bar))
        variants = g.groupby("variant", sort=False)
        width = 0.8 / len(variants)
        # points with their interval: the rates span decades, and a bar on a log axis has no length to read
        for i, (v, gv) in enumerate(variants):
            gv = gv.drop_duplicates("bar", keep="last").set_index("bar").reindex(bars)
            xs = [j + i * width for j in range(len(bars))]
            ax.errorbar(
                xs, gv.throughput_img_s, yerr=gv.throughput_ci95_img_s, fmt="o", capsize=3, label=text(v)
            )
        ticks = [j + width * (len(variants) - 1) / 2 for j in range(len(bars))]
        ax.set_xticks(ticks, [text(b) for b in bars], rotation=30, ha="right", rotation_mode="anchor")
        n = g.device_name.nunique()
        where = g.device_name.iloc[0] if n == 1 else f"{n} devices"
        ax.set(yscale="log", ylabel="throughput (images/s)", title=text(f"{phase} ({where})"))
    fig.tight_layout()
    legend_below(fig, axes[0][0])
    return save(fig, path)


def batch_sweep(df: pd.DataFrame, knees: pd.DataFrame | None = None, path: str | Path | None = None):
    """Throughput, achieved GFLOP/s and peak memory against batch size; failures marked at the axis bottom."""
    if df.empty:
        return None
    fig, axes = subplots(1, 3, figsize=(16, 4))
    mem_col = "peak_device_mem_mib" if df.peak_device_mem_mib.notna().any() else "peak_rss_mib"
    for (model, phase), g in df.groupby(["model", "phase"]):
        g = g.sort_values("batch_size")
        ok = g[g.status == "ok"]
        label = f"{model} {phase}"
        line = axes[0].errorbar(
            ok.batch_size, ok.throughput_img_s, ok.throughput_ci95_img_s, marker="o", capsize=3, label=label
        )
        color = line[0].get_color()
        for ax, col in zip(axes[1:], ("achieved_gflops", mem_col), strict=True):
            ax.plot(ok.batch_size, ok[col], marker="o", color=color, label=label)
        for status, marker in (("oom", "x"), ("unstable", "^"), ("error", "s")):
            bad = g[g.status == status]
            if len(bad):
                floor = [ok.throughput_img_s.min() if len(ok) else 1] * len(bad)
                axes[0].scatter(
                    bad.batch_size, floor, marker=marker, s=80, color=color, label=f"{label}: {status}"
                )
        k = knees[(knees.model == model) & (knees.phase == phase)] if knees is not None else ()
        if len(k) and len(ok):
            kb = int(k.knee_batch_size.iloc[0])
            y = ok[ok.batch_size == kb].throughput_img_s
            axes[0].scatter([kb], y, s=200, facecolors="none", edgecolors=color, linewidths=2)
    circle = " (circle: smallest batch within 5% of best or not distinguishable)" if knees is not None else ""
    axes[0].set(yscale="log", ylabel="throughput (images/s)", title="throughput" + circle)
    axes[1].set(yscale="log", ylabel="achieved GFLOP/s", title="achieved rate (counted FLOPs)")
    axes[2].set(ylabel=axis_label(mem_col), title="peak memory")
    sizes = sorted(int(b) for b in df.batch_size.unique())
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.minorticks_off()
        ax.set_xlabel("batch size (images per step)")
    fig.tight_layout()
    legend_below(fig, axes[0])
    return save(fig, path)


def _roofs(ax, peaks: pd.DataFrame, x) -> None:
    """Each bandwidth slope once up to the highest compute roof it meets (main memory black: solid measured, dashed
    spec; caches dotted grey), each compute roof once from its leftmost ridge, its main-memory ridge marked."""
    peaks = peaks.assign(level=peaks.level.fillna("dram"))
    main = peaks.level.isin(["dram", "hbm"])
    slopes = peaks[peaks.bandwidth_gbs.notna()].groupby(["kind", "level", "bandwidth_gbs"], sort=False)
    slopes = slopes.peak_gflops.max().reset_index().sort_values("bandwidth_gbs", ascending=False)
    for i, (kind, level, bw, top) in enumerate(slopes.itertuples(index=False)):
        xs = np.append(x[x < top / bw], min(top / bw, x[-1]))
        style = {"color": str(0.2 + 0.5 * i / max(len(slopes) - 1, 1)), "ls": ":"}  # a cache level
        if level in ("dram", "hbm"):
            style = {"color": "black", "ls": "-" if kind == "measured" else "--"}
        ax.plot(xs, bw * xs, lw=1.2, label=f"{kind} {level}: {bw:,.0f} GB/s", **style)
    for i, ((kind, peak), g) in enumerate(peaks.groupby(["kind", "peak_gflops"], sort=False)):
        ridges, color = (peak / g.bandwidth_gbs).dropna(), f"C{i % 10}"
        label = f"{kind} {', '.join(dict.fromkeys(g.precision))}: {peak:,.0f} GFLOP/s"
        ls, lw = ("-", 1.8) if kind == "measured" else ("--", 1.2)
        ax.plot(
            [ridges.min() if len(ridges) else x[0], x[-1]], [peak] * 2, ls=ls, lw=lw, color=color, label=label
        )
        if len(ridge := ridges[main[g.index]]):
            ax.plot([ridge.iloc[0]], [peak], "o", color=color, mfc="w")


def _spread(ax) -> None:
    """A marker overlapping one placed before it moves right until clear, a grey line from a dot at its place, said
    in the title; call once the scale is final."""
    ax.set(xlim=ax.get_xlim(), ylim=ax.get_ylim())
    placed, moved = [], 0
    for coll in ax.collections:
        data = np.asarray(coll.get_offsets(), float).reshape(-1, 2)
        xy = ax.transData.transform(data)
        radii = np.sqrt(np.broadcast_to(coll.get_sizes(), len(xy))) * ax.figure.dpi / 144
        for p, r in zip(xy, radii, strict=True):
            while any(np.hypot(*(p - q)) < 1.2 * (r + rq) for q, rq in placed):  # 1.2: a square's corners
                p[0] += 2 * r
            placed.append((p, r))
        coll.set_offsets(new := ax.transData.inverted().transform(xy))
        shifted = ~np.isclose(data[:, 0], new[:, 0])
        for a, b in zip(data[shifted], new[shifted], strict=True):
            ax.plot([a[0], b[0]], [a[1], b[1]], ".-", color="grey", lw=0.6, ms=3, markevery=[0], zorder=2)
        moved += shifted.sum()
    if moved:
        ax.set_title(ax.get_title() + "\n(a grey dot: where a marker moved aside to stay in sight belongs)")


def bandwidth_sweep(sweep: pd.DataFrame, peaks: pd.DataFrame, title: str, path: str | Path | None = None):
    """Bandwidth against working set (all threads' buffers) per kernel; each level's roof over its plateau, its
    cache capacity (read from the system) a vertical line of its colour, named in the legend."""
    fig, ax = subplots(figsize=(10, 5))
    for kernel, g in sweep.groupby("kernel"):
        ax.plot(g.working_set_mib, g.bandwidth_gbs, "o-", label=f"{kernel} (best of the calls)", ms=4)
    levels = peaks[(peaks.kind == "measured") & peaks.precision.isin(peaks.precision.head(1))]
    levels = levels.sort_values("capacity_mib", na_position="last")
    lower = sweep.working_set_mib.min() if len(sweep) else 0.01
    for i, r in enumerate(levels.itertuples()):
        cap, size = getattr(r, "capacity_mib", np.nan), getattr(r, "cache_size_kib", np.nan)
        color, upper = f"C{(i + 2) % 10}", cap if pd.notna(cap) else sweep.working_set_mib.max()
        label = f"{r.level} roof {r.bandwidth_gbs:,.1f} GB/s (median of its sizes)"
        ax.hlines(r.bandwidth_gbs, lower, upper, colors=color, linestyles="--", lw=2, label=label)
        if pd.notna(cap):  # named in the legend, never over the data
            each = f"{size:,.0f} KiB each, " if pd.notna(size) else ""
            label = f"{r.level} capacity: {each}{cap * 1024:,.0f} KiB in use"
            ax.axvline(cap, color=color, lw=0.8, ls=":", label=label)
            lower = cap
    ax.set(
        **LOG_LOG, xlabel="working set (MiB, all threads' buffers)", ylabel="bandwidth (GB/s)", title=title
    )
    ax.legend(**BESIDE)
    fig.tight_layout()
    return save(fig, path)


# Markers that mean one thing in every roofline: a phase, or the memory level a layer's working set fits in.
HUE_MARKERS = {"eval": "o", "train": "s", "dram": "o", "hbm": "o", "l3": "s", "l2": "D", "l1": "^"}


def roofline(
    peaks: pd.DataFrame,
    points: pd.DataFrame,
    title: str,
    path: str | Path | None = None,
    label: str = "model",
    hue: str = "phase",
    size_by: str | None = None,
    zoom: bool = False,
    join: list[str] | None = None,
    view: tuple | None = None,
    name: str = "{key} {hue}",
    variants: bool = True,
):
    """A log-log roofline of ``points`` (intensity_flop_per_byte, achieved_gflops), each named ``name`` beside the
    plot (colour: its ``color`` column, if any), overlapping markers set apart (:func:`_spread`). ``size_by``: the
    column setting marker size (its own legend); ``zoom``: the view around the points up to every compute roof;
    ``view``: fixed ((xlo, xhi), (ylo, yhi)); ``join``: columns whose points a grey line joins in ``size_by`` order;
    ``variants``: ``label`` followed by each point's variant (:func:`cnnbench.tables.variant_label`) where points
    carry a variant's knobs."""
    lo, hi = 0.05, 1e3
    if variants and len(points) and points.columns.isin(knobs.variant_only()).any():  # variants apart
        named = points[label].astype(str) + " " + variant_label(points)
        points, label = points.assign(_named=named.str.strip()), "_named"
    if len(points):
        i, a = points.intensity_flop_per_byte, points.achieved_gflops
        lo, hi = min(lo, i.min() / 2), max(hi, i.max() * 2)
        if zoom:  # x around the points, y from them to every compute roof
            view = ((i.min() / 2, i.max() * 2), (a.min() / 2, max(a.max(), peaks.peak_gflops.max()) * 1.5))
    fig, ax = subplots(figsize=(9, 6))
    _roofs(ax, peaks, np.geomspace(*(view[0] if view and not zoom else (lo, hi)), 256))
    values = sorted(points[hue].unique()) if len(points) else []
    markers = {**dict(zip(values, "osD^vP*X", strict=False)), **HUE_MARKERS}  # a phase or level: fixed
    keys = sorted(points[size_by].dropna().unique()) if size_by and len(points) else []
    sizes = dict(
        zip(keys, np.linspace(18, 170, len(keys)) if len(keys) > 1 else [55] * len(keys), strict=True)
    )
    for n, (key, g) in enumerate(points.groupby(label, sort=False) if len(points) else []):
        for h, gh in g.groupby(hue):
            if sizes:  # largest first, so a smaller marker at the same place is drawn on top, not hidden
                gh = gh.sort_values(size_by, ascending=False)
            color = gh["color"].iloc[0] if "color" in gh else OURS[n % len(OURS)]
            style = {"marker": markers.get(h, "o"), "s": gh[size_by].map(sizes) if sizes else 55, **POINT}
            style["label"] = name.format(key=key, hue=h)
            ax.scatter(gh.intensity_flop_per_byte, gh.achieved_gflops, color=color, **style)
    for _, g in points.groupby(join) if join and len(points) else []:
        g = g.sort_values(size_by)
        ax.plot(g.intensity_flop_per_byte, g.achieved_gflops, "-", color="gray", lw=0.8, zorder=2)
    ax.set(**ROOF_AXES, title=title, **({"xlim": view[0], "ylim": view[1]} if view else {}))
    first = ax.legend(**BESIDE)
    fig.tight_layout()  # room for the first legend; the size legend below it is narrower
    if sizes:
        for handle in first.legend_handles:
            if hasattr(handle, "set_sizes"):
                handle.set_sizes([55])  # the series legend names colour and marker, not size
        ax.add_artist(first).set_clip_on(False)  # add_artist clips to the axes: the legend is outside them
        handles = [ax.scatter([], [], s=v, marker="o", color="lightgray", **POINT) for v in sizes.values()]
        where = {"loc": "lower left", "bbox_to_anchor": (1.01, 0.0), "labelspacing": 1.2, "borderpad": 0.8}
        ax.legend(
            handles, map(str, sizes), title=size_by.replace("_", " "), fontsize=7, title_fontsize=7, **where
        )
    _spread(ax)
    return save(fig, path)


# 04's batch sweep: its points joined in batch order per model and phase, each marker's size its batch size
trajectory = functools.partial(roofline, size_by="batch_size", zoom=True, join=["model", "phase"])


EXPLORER_BATCHES = (8, 16, 32, 64, 128, 256, 512)  # the explorer's batch choices: its fixed x ticks


def _decades(lo: float, hi: float) -> tuple[float, float]:
    """``lo``..``hi`` widened to whole decades, so the limits and ticks of a log axis stay put as points are added
    inside them."""
    lo, hi = max(lo, 1e-12), max(hi, lo * 10)
    return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))


def explorer_points(points: pd.DataFrame) -> pd.DataFrame:
    """Each explored configuration once (its latest measurement), in first-click order, labelled from its row alone
    and coloured by that order: a new click never relabels or recolours an earlier point."""
    label = points.model + " " + points.phase + " bs=" + points.batch_size.astype(int).astype(str)
    label += (" " + points.precision).where(points.precision != "fp32", "")
    label += (" " + points.data_mode + " data").where(points.data_mode != "device", "")
    order = list(dict.fromkeys(label))
    pts = points.assign(explored=label).drop_duplicates("explored", keep="last").set_index("explored")
    pts = pts.loc[order].reset_index()
    return pts.assign(color=[f"C{i % 10}" for i in range(len(pts))])


def explorer_throughput(pts: pd.DataFrame):
    """08's explorer (:func:`explorer_points`): throughput against batch size (log axes, the batch choices as fixed
    ticks, decade limits), each configuration a point with its interval and its own legend entry."""
    fig, ax = subplots(figsize=(9, 4.5))
    style = {"capsize": 3, "mec": "black", "mew": 0.5}
    for r in pts.itertuples():
        marker, y, ci = HUE_MARKERS.get(str(r.phase), "o"), [r.throughput_img_s], [r.throughput_ci95_img_s]
        ax.errorbar([r.batch_size], y, yerr=ci, fmt=marker, color=r.color, label=text(r.explored), **style)
    batches = sorted(set(EXPLORER_BATCHES) | set(int(b) for b in pts.batch_size))
    rate, ci = pts.throughput_img_s, pts.throughput_ci95_img_s.fillna(0.0)
    ylim = _decades(float((rate - ci).clip(lower=rate / 10).min()), float((rate + ci).max()))
    ax.set(
        **LOG_LOG,
        xlim=(batches[0] / 1.5, batches[-1] * 1.5),
        ylim=ylim,
        xlabel="batch size (images per step)",
        ylabel="throughput (images/s)",
        title="explored configurations: throughput",
    )
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.xaxis.set_minor_locator(NullLocator())  # the batch choices only, never 3x10^1-style minor labels
    ax.legend(**BESIDE)
    fig.tight_layout()
    return fig


def explorer_roofline(peaks: pd.DataFrame, pts: pd.DataFrame, title: str = "explored configurations"):
    """08's explorer (:func:`explorer_points`) on this device's roofs: log axes fixed by the roofs (whole decades
    around the ridge points and peaks, widened only for a point outside them), each configuration its own entry."""
    bw = peaks.bandwidth_gbs.dropna()
    ridge = (peaks.peak_gflops / peaks.bandwidth_gbs).dropna() if len(bw) else pd.Series([1.0])
    xlo, xhi = _decades(
        min(0.05, float(ridge.min()) / 10, *(pts.intensity_flop_per_byte / 2)),
        max(1e3, float(ridge.max()) * 10, *(pts.intensity_flop_per_byte * 2)),
    )
    top = float(peaks.peak_gflops.max())
    low = float(bw.min()) * xlo if len(bw) else top / 1e3
    ylo, yhi = _decades(min(low, *(pts.achieved_gflops / 2)), max(top * 2, *(pts.achieved_gflops * 2)))
    view = ((xlo, xhi), (ylo, yhi))  # its label names precision and data mode
    return roofline(peaks, pts, title, label="explored", view=view, name="{key}", variants=False)


def layer_figures(peaks: pd.DataFrame, layer_points: pd.DataFrame, top_k: int, folder: str | Path) -> dict:
    """04's per-layer rooflines, ``roofline_layers_<model>.png`` in ``folder``: each model's ``top_k`` layers by
    time, named by op and marked by the level their working set fits in; {model: figure}."""
    if layer_points.empty:
        return {}
    figs = {}
    Path(folder).mkdir(parents=True, exist_ok=True)
    for model, g in layer_points.groupby("model", sort=False):
        path = Path(folder) / f"roofline_layers_{model}.png"
        title = f"{model}: top {top_k} layers by time (marker: level)"
        figs[model] = roofline(peaks, g.head(top_k), title, path, label="op", hue="level")
    return figs


THEIRS = plt.get_cmap("Dark2").colors + plt.get_cmap("Set1").colors  # the seeds' points: none of ours


def per_model_rooflines(
    points: pd.DataFrame,
    roofs: pd.DataFrame,
    folder: str | Path,
    min_runs: int = 2,
    theirs: pd.DataFrame | None = None,
) -> dict:
    """One roofline per model: each run's points (grouped by device without ``run_name``), a colour per variant none
    of the roofs' (:data:`OURS`), and its measured DRAM roof per precision, when ``min_runs`` runs have it;
    ``theirs`` (published.corrections): the seeds' open markers."""
    figs = {}
    by = "run_name" if "run_name" in points else "device_name"
    if points.empty or points[by].nunique() < min_runs:
        return figs
    x = np.geomspace(0.05, 2e3, 256)
    if len(roofs):  # each run's measured DRAM/HBM roof, not a cache level's
        roofs = roofs[(roofs.kind == "measured") & roofs.level.fillna("dram").isin(["dram", "hbm"])]
    none = pd.DataFrame(columns=["model", "seed", "device", "phase", "intensity_flop_per_byte"])
    seeds = (none if theirs is None else theirs).dropna(subset=["intensity_flop_per_byte"])
    for model, g in points.groupby("model"):
        g = g.assign(_variant=variant_label(g))
        ours = dict(zip(dict.fromkeys(zip(g[by], g._variant, strict=True)), OURS * len(g), strict=False))
        fig, ax = subplots(figsize=(10, 5))
        for i, (key, gd) in enumerate(g.groupby(by)):
            color = f"C{i % 10}"
            label = f"{key} ({gd.device_name.iloc[0]})" if by == "run_name" else key
            mine = roofs[roofs[by] == key] if by in roofs else pd.DataFrame(columns=["precision"])
            precisions = gd.precision.dropna().unique() if "precision" in gd else []
            for k, prec in enumerate(
                sorted(precisions, key=knobs.KNOBS["precision"].values.index) or ["fp32"]
            ):
                for r in mine[mine.precision == prec].head(1).itertuples():
                    style = {"color": color, "lw": 1, "ls": ("-", "--", ":", "-.")[k % 4]}
                    y = np.minimum(r.peak_gflops, r.bandwidth_gbs * x)
                    ax.plot(x, y, label=f"{label}: its measured {prec} {r.level} roof", **style)
            for (variant, phase), gp in gd.groupby(["_variant", "phase"], sort=False):  # a marker per phase
                style = {
                    "color": ours[key, variant],
                    "s": 50,
                    "marker": HUE_MARKERS.get(str(phase), "o"),
                    **POINT,
                }
                name = " ".join(t for t in (label, variant, phase) if t)
                ax.scatter(gp.intensity_flop_per_byte, gp.achieved_gflops, label=name, **style)
        mine = seeds[seeds.model == model]
        for j, ((seed, device, phase), gs) in enumerate(
            mine.groupby(["seed", "device", "phase"], sort=False)
        ):
            style = {"marker": HUE_MARKERS.get(phase, "o"), "s": 60, "fc": "none", "lw": 1.6, "zorder": 4}
            label, edge = f"seed {seed[:3]} on its {device}, {phase} (corrected)", THEIRS[j % len(THEIRS)]
            ax.scatter(gs.intensity_flop_per_byte, gs.corrected * 1e3, ec=edge, label=label, **style)
        ax.set(**ROOF_AXES, title=model + (" across runs" if g[by].nunique() > 1 else ""))
        said = "open markers: published by the seeds,\nmeasured on their own devices, not under these roofs"
        ax.legend(**BESIDE, title_fontsize=7, title=said if len(mine) else None)
        fig.tight_layout()
        _spread(ax)
        figs[model] = save(fig, Path(folder) / f"roofline_model_{model}.png")
    return figs


def end_to_end(df: pd.DataFrame, gap_s: float = 0.5) -> pd.DataFrame:
    """``t_run_s``: each configuration's ``t_s`` shifted by its ``start_s``, ``gap_s`` after the previous one ended."""
    ends = df.groupby("configuration", sort=False).t_s.max() + gap_s
    df = df.assign(start_s=df.configuration.map(ends.cumsum().shift(fill_value=0.0)))
    return df.assign(t_run_s=df.t_s + df.start_s)


LINE_STYLES = ("-", "--", ":", "-.")  # rank 0 (index 0, index 1+), a later rank (index 0, index 1+)


def experiment_timeline(df: pd.DataFrame, experiment: str, path: str | Path | None = None):
    """The series of one experiment (transfer | scaling) of transfer_telemetry.csv over time: one panel per
    metric, configurations end to end, a line per configuration, rank and device index."""
    df = df[df.experiment == experiment]
    if df.empty:
        print("no telemetry series recorded (the sampler keeps none in this version)")
        return None
    df = end_to_end(df)
    metrics = list(dict.fromkeys(df.metric))
    fig, axes = subplots(len(metrics), 1, figsize=(11, 2.2 * len(metrics)), sharex=True, squeeze=False)
    colours = {c: f"C{i % 10}" for i, c in enumerate(dict.fromkeys(df.configuration))}
    # rank 0 solid, its device index 1+ dashed; a later rank dotted (dash-dot): world=2's two ranks told apart
    later_rank = pd.to_numeric(df["rank"], errors="coerce").fillna(0) > 0
    later_index = pd.to_numeric(df.device_index, errors="coerce").fillna(0) > 0
    # one legend entry per colour and line style; a host-wide metric shares its first device's
    df = df.assign(
        style=(2 * later_rank + later_index).map(dict(enumerate(LINE_STYLES))),
        colour=df.configuration.map(colours),
        legend=[
            c + (f" rank {int(float(r))}" if lr else "") + (", core or GPU 1+" if li else "")
            for c, r, lr, li in zip(df.configuration, df["rank"], later_rank, later_index, strict=True)
        ],
    )
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        g = df[df.metric == metric]
        for _, line in g.groupby(["configuration", "rank", "device_index"], dropna=False, sort=False):
            first = line.iloc[0]
            ax.plot(line.t_run_s, line.value, lw=1, color=first.colour, label=first.legend, ls=first["style"])
        ax.set_ylabel(axis_label(metric, wrap=True), fontsize=8)
    axes[-1, 0].set_xlabel("time, configurations end to end (s)")
    fig.suptitle(f"telemetry during {experiment}")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))  # the title's 0.4 inch over no panel
    legend_below(fig, *axes[:, 0], fontsize=7, most=24)
    return save(fig, path, dpi=110)


def telemetry_timeline(df: pd.DataFrame, path: str | Path | None = None, max_metrics: int = 12):
    """Telemetry over time (telemetry.csv): one panel per metric, one line per device index (CPU core, GPU),
    the configurations laid end to end in the order they ran, thin grey lines marking where one ends."""
    if df.empty:
        return None
    keys = ("source", "model", "phase", "image_size", *knobs.keyed(), "process")
    configs = df.groupby([c for c in keys if c in df.columns], sort=False, dropna=False).ngroup()
    df = end_to_end(df.assign(configuration=configs), gap_s=0.0)  # each starts where the last one ended
    starts = df.drop_duplicates("configuration").start_s
    metrics = list(dict.fromkeys(df.metric))[:max_metrics]
    fig, axes = subplots(len(metrics), 1, figsize=(11, 2.1 * len(metrics)), sharex=True, squeeze=False)
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        g = df[df.metric == metric]
        # host-wide metrics (whole-CPU utilisation, the process's RSS) have no device index: keep those rows
        for index, gi in g.groupby(g.device_index.astype("Int64"), sort=True, dropna=False):
            label = "host" if pd.isna(index) else f"{'core' if 'core' in metric else 'GPU'} {index}"
            ax.plot(gi.t_run_s, gi.value, lw=0.9, label=label)
        ax.set_ylabel(axis_label(metric, wrap=True), fontsize=8)
        if g.device_index.notna().any() and g.device_index.nunique() <= 16:
            ax.legend(**BESIDE | {"fontsize": 6})
        if len(starts) <= 60:
            for x in starts.iloc[1:]:
                ax.axvline(x, color="grey", lw=0.4)
    axes[-1, 0].set_xlabel("time in the measured windows, configurations end to end (s)")
    fig.suptitle("telemetry sampled during the measured windows")
    fig.tight_layout()
    return save(fig, path)
