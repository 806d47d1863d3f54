"""Presentation tables built from a run's tidy results (and, where labelled, the seeds' published numbers)."""

from __future__ import annotations

import html
import math
import re

import pandas as pd

from cnnbench import knobs, published

# Memory and rate columns of the shared naming contract (units in every name).
MEMORY = ("peak_device_mem_mib", "peak_device_reserved_mib", "baseline_rss_mib", "peak_rss_mib")
RATES = ("achieved_gflops", "achieved_tflops")


def readable_display() -> None:
    """pandas shows every table in full (nothing behind "..."); a notebook trims a wide one (:func:`trimmed_html`)."""
    for option in ("display.max_rows", "display.max_columns", "display.max_colwidth", "display.width"):
        pd.set_option(option, None)
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, trimmed_html)


# Columns that give a row's verdict: shown first in a trimmed table.
VERDICTS = "status verdict agree significant distinguishable_from_default bound bound_dram above_roof noisy "
VERDICTS = tuple((VERDICTS + "machine_state step_bound stop_reason fate matches_published passed ok").split())
WIDE_COLUMNS = 8  # more columns than this do not fit the page


def rounded(value, ci) -> str:
    """``value`` as text to two significant digits of its 95% half-width ``ci``, never fewer than two of its
    own; 4 significant digits where ``ci`` is missing; "" for NaN."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "" if value is None or value != value else str(value)
    if not isinstance(ci, (int, float)) or not math.isfinite(ci) or ci <= 0:
        return _cell(float(value))
    d = 1 - math.floor(math.log10(ci))
    if value:  # an interval wider than the value never rounds it away
        d = max(d, 1 - math.floor(math.log10(abs(value))))
    return f"{round(value, d):,.{max(d, 0)}f}"


def trimmed(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """A wide table made to fit: constant columns move into the returned caption (``name=value``), verdict columns
    (:data:`VERDICTS`) come first, and each ``x`` with an ``x``-with-``_ci95`` column beside it is shown as
    "value ± interval" (:func:`with_interval`; ``out.attrs["intervals"]`` says that some were)."""
    if len(df) < 2 or isinstance(df.columns, pd.MultiIndex):
        return df, ""
    constant = [c for c in df.columns if df[c].astype(str).nunique(dropna=False) == 1]
    caption = "; ".join(
        f"{c}={_cell(df[c].iloc[0])}" for c in constant if str(df[c].iloc[0]) not in ("", "nan")
    )
    out = df.drop(columns=constant)
    for ci in [c for c in out.columns if "_ci95" in str(c)]:
        base = str(ci).replace("_ci95", "", 1)
        if base in out.columns:
            cis = pd.to_numeric(out[ci], errors="coerce")
            out[base] = [with_interval(v, e) for v, e in zip(out[base], cis, strict=True)]
            out = out.drop(columns=ci)
            out.attrs["intervals"] = True
    first = [c for c in VERDICTS if c in out.columns]
    return out[first + [c for c in out.columns if c not in first]], caption


def with_interval(value, ci) -> str:
    """'935 ± 65' (no-break spaces: one line), rounded to the interval; the value alone where it has none."""
    text = rounded(value, ci)
    if text and isinstance(ci, (int, float)) and math.isfinite(ci) and ci > 0:
        text = f"{text}\u00a0±\u00a0{rounded(ci, ci)}"
    return text


def trimmed_html(df: pd.DataFrame) -> str:
    """A table's HTML in a notebook, its numbers to four figures: whole when it fits the page, else :func:`trimmed`
    with its constant columns in a caption above it, as :func:`show` writes them; under :func:`seed_files`."""
    if len(df.columns) <= WIDE_COLUMNS or not df.columns.is_unique:
        return seed_files(df.columns) + df.to_html(na_rep="", formatters=[_cell] * len(df.columns))
    try:
        return "".join(_page(df, trim=True)[1:3])
    except (TypeError, ValueError):  # a table of unusual cells is shown whole rather than not at all
        return seed_files(df.columns) + df.to_html(na_rep="")


_SEED_COLUMN = re.compile(r"published_by_(\d{3})_")


def seed_files(columns) -> str:
    """The HTML naming the file of each seed whose numbers a ``published_by_<seed>_...`` column holds ("" if none)."""
    seeds = sorted({m.group(1) for c in columns if (m := _SEED_COLUMN.match(str(c)))})
    named = "; ".join(f"published_by_{s}: published by {published.SEEDS[s]}" for s in seeds)
    return f"<p><i>{html.escape(named)}</i></p>" if named else ""


def _page(df: pd.DataFrame, trim: bool) -> tuple[pd.DataFrame, str, str, bool]:
    """``df`` (:func:`trimmed` where ``trim``), the HTML above it naming its constant columns and saying values carry
    intervals, its HTML with numbers to four figures, its index only where it means something (and whether)."""
    head = seed_files(df.columns)
    if trim:
        df, caption = trimmed(df)
        head += f"<p><i>the same in every row: {html.escape(caption)}</i></p>" if caption else ""
        head += "<p><i>value ± its 95% interval</i></p>" if df.attrs.get("intervals") else ""
    index = not isinstance(df.index, pd.RangeIndex)
    return df, head, df.to_html(na_rep="", index=index, formatters=[_cell] * len(df.columns)), index


def _cell(value) -> str:
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float):
        return "" if value != value else f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def show(df: pd.DataFrame, caption: str = ""):
    """A table as HTML, every row and column shown, numbers to 4 figures, under ``caption`` (what it compares and
    its unit); a table wider than the page :func:`trimmed`, its constant columns under the caption."""
    from IPython.display import HTML

    df, same, table, index = _page(df, trim=len(df.columns) > WIDE_COLUMNS and df.columns.is_unique)
    head = f"<p><b>{caption}</b></p>" if caption else ""
    return HTML(head + same + fitted(table, df, index))


LONG_TEXT = 60  # characters: a column holding longer text gets a share of the page and wraps inside it
TEXT_SHARE = "35%"  # of the table's width, for each such column (wrapped between its words)
_TH = re.compile(r"(<th[^>]*>)(.*?)(</th>)", re.S)


def fitted(table: str, df: pd.DataFrame, index: bool) -> str:
    """A table's HTML made to fit the page: its headers may break after an underscore, and each column of long
    text (:data:`LONG_TEXT`) takes :data:`TEXT_SHARE` of the width, so the short columns beside it keep theirs."""
    table = _TH.sub(lambda m: m.group(1) + m.group(2).replace("_", "_<wbr>") + m.group(3), table)
    if df.empty or not df.columns.is_unique:
        return table
    long = [
        not pd.api.types.is_numeric_dtype(df[c]) and df[c].astype(str).str.len().max() > LONG_TEXT for c in df
    ]
    if not any(long):
        return table
    cols = ["<col>"] * (df.index.nlevels if index else 0) + [
        f'<col class="text" style="width: {TEXT_SHARE}">' if is_long else "<col>" for is_long in long
    ]
    start = table.index(">", table.index("<table")) + 1
    return f"{table[:start]}\n  <colgroup>{''.join(cols)}</colgroup>{table[start:]}"


def complexity_vs_seed(complexity: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 1 beside our counts, with a computed note on each disagreement."""
    ref = complexity[complexity.role.str.startswith("reference")].set_index("model")
    train = complexity[complexity.role.str.contains("training")].set_index("model")
    rows = []
    for seed in published.COMPLEXITY_000[lambda s: s.model.isin(ref.index)].itertuples():
        ours, rel = ref.loc[seed.model], seed.flops_g / ref.loc[seed.model].gmacs_fwd - 1
        macs = f"000's 'FLOPs' are MACs (ours {ours.gmacs_fwd:.3f} G): true FLOPs are 2x, {ours.gflops_fwd:.3f} G"
        off = f"000's figure is {rel:+.1%} off our {ours.gmacs_fwd:.3f} GMACs (torchvision publishes "
        off += f"{ours.published_gmacs:.3f}); fvcore, which adds batch norm and pooling, gives {ours.fvcore_gmacs:.3f}"
        notes = [macs if abs(rel) < 0.01 else off]
        row = {
            "model": seed.model,
            f"params_m (published by {published.SEED_000})": seed.params_m,
            "params_m (ours, 1000 classes)": ours.params / 1e6,
            f"FLOPs/image G (published by {published.SEED_000})": seed.flops_g,
            "gmacs_fwd @224 (ours)": ours.gmacs_fwd,
            "gflops_fwd @224 (ours)": ours.gflops_fwd,
        }
        if seed.model in train.index:
            t = train.loc[seed.model]
            row[f"gflops_train @{t.image_size} (ours)"] = t.gflops_train
            fewer = f", {ours.gmacs_fwd / t.gmacs_fwd:.1f}x fewer than at {ours.image_size}"
            notes.append(
                f"trained at {t.image_size}x{t.image_size}: forward {t.gmacs_fwd:.3f} GMACs"
                f"{fewer if t.image_size != ours.image_size else ''}; a training step is {t.gflops_train:.3f} "
                f"GFLOPs per image ({t.train_fwd_ratio:.2f}x forward)"
            )
        row["note"] = "; ".join(notes)
        rows.append(row)
    return pd.DataFrame(rows)


def fvcore_difference(complexity: pd.DataFrame) -> pd.DataFrame:
    """Our MACs beside fvcore's, with the ops fvcore counts that we (and torchvision) do not."""
    df = complexity[["model", "image_size", "gmacs_fwd", "fvcore_gmacs", "fvcore_extra_ops"]].copy()
    df["fvcore_minus_ours_pct"] = 100 * (df.fvcore_gmacs / df.gmacs_fwd - 1)
    return df


def variant_label(df: pd.DataFrame) -> pd.Series:
    """Each row's variant in words (:func:`cnnbench.knobs.label`): its variant-only knobs and every other knob but
    the batch size whose value varies over ``df``, e.g. "bf16 channels_last" or "fp32 nchw threads1". Label ``df``
    before filtering it: assigned to an empty frame, the labels would become its rows."""
    df = knobs.columns(df)
    shown = [
        k
        for k in knobs.keyed()
        if k in knobs.variant_only() or (k != "batch_size" and df[k].astype(str).nunique() > 1)
    ]
    return pd.Series([knobs.label(r, shown) for r in df.to_dict("records")], index=df.index, dtype=str)


def measured(df: pd.DataFrame) -> pd.DataFrame:
    """The main columns of a scenario table, one row per configuration, failures included with their status."""
    cols = (
        "model phase variant batch_size image_size data_mode status steps_per_window throughput_img_s "
        "throughput_ci95_img_s processes_measured stop_reason measured_in throughput_process_min_img_s "
        "throughput_process_max_img_s machine_state step_bound device_busy_pct step_time_median_s "
        "step_time_std_s noisy"
    ).split() + [*RATES, *MEMORY, "cpu_fallback_ops", "error"]
    out = df.assign(variant=variant_label(df))
    sparse = ("cpu_fallback_ops", "measured_in")  # shown where any row has one
    return out[[c for c in cols if c in out.columns and (c not in sparse or out[c].notna().any())]]


def performance_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 3 for this device: train and eval throughput, TFLOP/s and peak memory per model."""
    ok = df.assign(variant=variant_label(df))[lambda d: d.status == "ok"]
    values = [c for c in ("throughput_img_s", "throughput_ci95_img_s", *RATES, *MEMORY) if c in ok.columns]
    index = ["model", "device_name", "variant", "batch_size"]
    wide = ok.pivot_table(index=index, columns="phase", values=values, aggfunc="first")
    wide.columns = [f"{phase}_{value}" for value, phase in wide.columns]
    order = [f"{p}_{v}" for p in ("train", "eval") for v in ("throughput_img_s", "throughput_ci95_img_s")]
    order += [f"{p}_{r}" for r in RATES for p in ("train", "eval")] + [f"train_{m}" for m in MEMORY]
    out = wide[[c for c in order if c in wide.columns]].reset_index()
    if {"train_throughput_img_s", "eval_throughput_img_s"} <= set(out.columns):
        out["eval_train_ratio"] = out.eval_throughput_img_s / out.train_throughput_img_s
    return out


def utilisation(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 5, sampled during the measured windows only (mean and max, in %), per run."""
    cols = (
        "run_name device_name model phase variant batch_size util_cpu_mean_pct util_cpu_max_pct "
        "util_process_cpu_mean_pct device_busy_pct step_bound util_device_mean_pct util_device_max_pct "
        "util_device_mem_mean_pct gpu_power_w_mean gpu_temp_c_max gpu_sm_clock_mhz_mean gpu_throttle_reasons "
        "cpu_steal_mean_pct cpu_steal_max_pct util_other_cpu_mean_pct util_other_cpu_max_pct cpu_freq_mhz_mean "
        "machine_state machine_note telemetry_samples"
    ).split()
    out = df.assign(variant=variant_label(df))[lambda d: d.status == "ok"]
    return out[[c for c in cols if c in out.columns]]


def variants_side_by_side(df: pd.DataFrame) -> pd.DataFrame:
    """Throughput of each variant per model and phase, and its speedup over the first variant measured."""
    ok = df.assign(variant=variant_label(df))[lambda d: d.status == "ok"]
    wide = ok.pivot_table(
        index=["model", "phase"], columns="variant", values="throughput_img_s", aggfunc="first"
    )
    first = variant_label(df).iloc[0]
    if first in wide.columns:
        wide = wide.join(wide.drop(columns=first).div(wide[first], axis=0).add_suffix(f" / {first}"))
    return wide.reset_index()
