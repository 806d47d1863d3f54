"""The one-screen summary atop a run's report, every number read from the run's results (``results.read``)."""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from cnnbench import knobs, results, tables
from cnnbench.measure import reproducibility
from cnnbench.measure.engine import HOST_BOUND


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def with_interval(value: float, ci: float) -> str:
    """``40.6 ± 1.8`` rounded to its interval; "about 2,100 (not precise: ±300%)" where it is as wide as itself."""
    if not _finite(value):
        return "?"
    if _finite(ci) and ci >= abs(value) > 0:
        return f"about {tables.rounded(value, abs(value))} (not precise: ±{100 * ci / abs(value):.0f}%)"
    return tables.with_interval(value, ci)


def marked(rate: float, ci: float, state: str = "", bound: str = "", busy_pct: float = math.nan) -> str:
    """:func:`with_interval` marked "busy" (``state``), "imprecise" (wider than +-PRECISE_PCT%, or none) and
    "host-bound" with the device's busy share (``bound``, the row's ``step_bound``)."""
    text, marks = with_interval(rate, ci), ["busy"] if str(state) == "busy" else []
    if "not precise" not in text and not reproducibility.precise(rate, ci):
        marks.append(f"imprecise: ±{100 * ci / rate:.0f}%" if _finite(ci) else "no interval")
    if bound == HOST_BOUND:
        marks.append(f"host-bound: the device busy {busy_pct:.0f}% of the step")
    return f"{text} ({'; '.join(marks)})" if marks else text


def speedup_text(speedup: float, ci: float) -> str:
    """``1.31 ± 0.05x``; "not known" where the interval is as wide as it, "not distinguishable" where it holds 1x."""
    if not _finite(speedup):
        return "?"
    if ci == math.inf or _finite(ci) and ci >= abs(speedup):
        wide = "unbounded" if ci == math.inf else f"±{100 * ci / abs(speedup):.0f}%"
        return f"not known (its 95% interval is {wide})"
    same = _finite(ci) and abs(speedup - 1) <= ci
    return f"{with_interval(speedup, ci)}x" + (": not distinguishable from the default" if same else "")


def _in(df: pd.DataFrame, variant: dict) -> pd.DataFrame:
    """The rows of ``df`` in ``variant``, read on the knobs ``df`` records (04's rows: precision and layout)."""
    names = [k for k in variant if k in df]
    df = knobs.columns(df)
    return df[(df[names] == [variant[k] for k in names]).all(axis=1)]


def headline_variant(a: pd.DataFrame) -> dict:
    """The variant the summary heads with: the seeds' (every variant knob at its default) where 02 measured it,
    else the variant 02 measured first (its first ok row's)."""
    names, a = list(knobs.variant_only()), knobs.columns(a[a.status == "ok"])
    seeds = {k: knobs.KNOBS[k].default for k in names}
    return seeds if a.empty or len(knobs.default_variant(a)) else a[names].iloc[0].to_dict()


def headline(run_dir: Path) -> pd.DataFrame:
    """Per model and phase of :func:`headline_variant`: its :func:`marked` rate, and 04's share of its roof and
    bound; a ``variant`` column (its label) where that is not the seeds' variant."""
    a, roof = results.read(run_dir, "scenario_a"), results.read(run_dir, "roofline")
    variant = headline_variant(a)
    a, roof = _in(a[a.status == "ok"], variant), _in(roof[roof.source == "scenario_a"], variant)
    roof = roof[roof.layer.fillna("").astype(str).eq("")]
    other = {} if len(knobs.default_variant(a)) else {"variant": knobs.label(variant, knobs.variant_only())}
    rows: dict[tuple, dict] = {}
    for r in a.itertuples():
        row = rows.setdefault((r.model, r.batch_size), {"model": r.model, "batch": r.batch_size, **other})
        rate = r.throughput_img_s, r.throughput_ci95_img_s, r.machine_state, r.step_bound, r.device_busy_pct
        row[f"{r.phase} images/s"] = marked(*rate)
        at = roof[(roof.model == r.model) & (roof.phase == r.phase) & (roof.batch_size == r.batch_size)]
        if len(at):
            share, bound, of = float(at.efficiency.iloc[0]), at.bound.iloc[0], at.roof.fillna("").iloc[0]
            row[f"{r.phase}: share of its roof"] = f"{100 * share:.0f}% of {of or 'the'} roof ({bound}-bound)"
    return pd.DataFrame(list(rows.values()))


def roof_sentence(run_dir: Path) -> str:
    """04's measured roof in the precision of :func:`headline_variant` (fp32 where 02 measured the seeds' variant)."""
    precision = headline_variant(results.read(run_dir, "scenario_a"))["precision"]
    peaks = results.read(run_dir, "device_peaks")
    measured = peaks[(peaks.kind == "measured") & (peaks.precision == precision)]
    if measured.empty:
        return f"No {precision} roof was measured (04 did not run, or measured none)."
    top = measured.iloc[0]  # the main-memory row first (peaks.measure)
    spread = f" (spread {100 * top.peak_spread:.1f}% over its calls)" if pd.notna(top.peak_spread) else ""
    level = top.level if pd.notna(top.level) else "main memory"  # a file without levels: NA
    return (
        f"**The roof** (measured, {precision}): {top.peak_gflops:,.1f} GFLOP/s compute{spread}, "
        f"{top.bandwidth_gbs:,.1f} GB/s from {html.escape(str(level))}, ridge at "
        f"{top.peak_gflops / top.bandwidth_gbs:.1f} FLOP/byte."
    )


FASTER = "measured faster in this run"


def _roof_share(r) -> str:
    """A best row's share of its compute roof, and where its bound is known, the bound and its share of the
    attainable (the yardstick of a memory-bound step)."""
    if not math.isfinite(r.compute_roof_pct):
        return "?"
    roof = f"{r.compute_roof_pct:.0f}% of the {r.roof_precision} roof"
    bound = r.bound if isinstance(r.bound, str) else ""
    return f"{bound}-bound: {r.attainable_pct:.0f}% of the attainable ({roof})" if bound else roof


def fastest(run_dir: Path) -> pd.DataFrame:
    """07's best configuration per model and phase, its speedup over the seeds' default and its roof share, and
    what 02 or 03 measured faster in the same run (:func:`.tuning.faster_measured`, the column only where one did)."""
    from cnnbench import tuning

    t = results.read(run_dir, "tuning")
    b = t[t.row_kind == "best"]
    faster = tuning.faster_measured(t, lambda name: results.read(run_dir, name))
    df = pd.DataFrame(
        {
            "model": b.model,
            "phase": b.phase,
            "configuration": [
                r.config if r.status == "ok" else f"none confirmed: {tuning.unconfirmed(t, r.model, r.phase)}"
                for r in b.itertuples()
            ],
            "images/s (95% interval)": list(map(marked, b.throughput_img_s, b.throughput_ci95_img_s)),
            "speedup over default": list(map(speedup_text, b.speedup_x, b.speedup_ci95_x)),
            "share of its compute roof": list(map(_roof_share, b.itertuples())),
        }
    )
    return df.assign(**{FASTER: faster}) if any(faster) else df


def _their_tflops(beside: pd.DataFrame) -> list[str]:
    """Each seed row's training TFLOP/s as printed and as corrected from its own throughput."""
    from cnnbench import published

    c = published.corrections()
    c = c[c.figure == "achieved TFLOP/s (train)"].assign(seed=lambda d: d.seed.str[:3])
    c = c.set_index(["seed", "model", "device", "batch_size"])
    keys = zip(
        beside.source.str[-3:], beside.model, beside.device_class, beside.published_batch_size, strict=True
    )
    shown = c.printed.map(lambda v: "not printed" if pd.isna(v) else f"{v:.3g}")
    return [f"{shown[k]} -> {c.corrected[k]:.3g}" if k in c.index else "" for k in keys]


def seeds(run_dir: Path) -> pd.DataFrame:
    """The seeds' rates for the same model and class of device beside ours, their TFLOP/s corrected."""
    from cnnbench.analysis.seeds import beside as seed_beside

    a = results.read(run_dir, "scenario_a")
    beside = seed_beside("throughputs", {"scenario_a": a.assign(run_name=Path(run_dir).name)})
    if beside.empty:
        return beside
    ours, theirs = beside.ours_train_img_s, beside.published_train_img_s
    return pd.DataFrame(
        {
            "model": beside.model,
            "published by": beside.source.str.replace("published by ", ""),
            "their train TFLOP/s: printed -> corrected": _their_tflops(beside),
            "their train images/s": theirs,
            "our train images/s (95% interval)": list(map(with_interval, ours, beside.ours_train_ci95_img_s)),
            "ours / theirs": (ours / theirs).round(1).astype(str) + "x",
            "differences": beside.differences,
        }
    )


def _html_table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, escape=True, border=0, na_rep="")


def _part(name: str, make, say) -> str:
    """One part of the summary; a part that cannot be built says so in one line instead of losing the report."""
    try:
        return say(make())
    except Exception as err:  # noqa: BLE001 - the report still builds
        return f"({name} not summarised: {type(err).__name__}: {html.escape(str(err))[:200]})\n\n"


def _rates(df: pd.DataFrame) -> str:
    if df.empty:
        return ""
    seeds_variant = knobs.default_label()
    what = f"(02: {seeds_variant}; interval over fresh processes)"
    if "variant" in df:  # a run that measured no row in the seeds' variant: the one 02 measured first
        df = df.assign(variant=df.variant.fillna(seeds_variant))
        first = "or where a run measured none, the variant 02 measured first, named in its column"
        what = f"(02: {seeds_variant}, {first}; interval over fresh processes)"
    marks = f"*busy*: the machine was busy; *imprecise*: 95% interval wider than ±{reproducibility.PRECISE_PCT:g}%"
    host = "; *host-bound*: the device was busy under half of each step, waiting on the host's launches"
    host = host if df.apply(lambda c: c.astype(str).str.contains("host-bound")).any().any() else ""
    return (
        f"**Headline rates** {what}:\n\n{_html_table(df)}\n\n{marks}: neither supports a headline{host}.\n\n"
    )


def combined_rates(run_dirs: list[Path]) -> str:
    """Every run's headline rates (:func:`headline`) in one table, the run first: the combined report's summary."""
    rows = lambda: pd.concat([headline(d).assign(run=d.name) for d in run_dirs], ignore_index=True)  # noqa: E731
    return _part("headline rates", rows, lambda df: _rates(df[["run", *df.columns.drop("run")]]))


def _best(df: pd.DataFrame) -> str:
    what = "07's search found** (faster in this run: last column)" if FASTER in df else "found** (07)"
    return "" if df.empty else f"**The fastest configuration {what}:\n\n{_html_table(df)}\n\n"


def _seeds(df: pd.DataFrame) -> str:
    if df.empty:
        return ""
    differ = "".join(f"<li>{html.escape(d)}</li>" for d in df.differences.unique())
    table = _html_table(df.drop(columns="differences"))
    return (
        "**Beside the seeds** (published on the same class of device; not matched: what differs is "
        f"listed below the table):\n\n{table}\n\n<ul>{differ}</ul>\n\n"
    )


def summary_html(run_dir: Path, machine: str, quiet: str) -> str:
    """The "Summary" section (markdown, HTML tables); ``machine`` and ``quiet``: markdown, already escaped."""
    return "".join(
        [
            f"## Summary\n\n**The machine:** {machine}\n\n{quiet}",
            _part("headline rates", lambda: headline(run_dir), _rates),
            _part("roof", lambda: roof_sentence(run_dir), lambda text: text + "\n\n"),
            _part("fastest configuration", lambda: fastest(run_dir), _best),
            _part("seeds", lambda: seeds(run_dir), _seeds),
        ]
    )
