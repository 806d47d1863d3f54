"""Findings: one computed sentence per row, with the numbers it rests on; only rates precise enough and
variants distinguishable from their baseline are headlined."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from cnnbench import knobs, predict, published, results
from cnnbench.analysis import compare
from cnnbench.analysis.compare import configured, machine, match_keys, ratios, repeated, speedups, unmatched
from cnnbench.measure import reproducibility
from cnnbench.results.runs import Merged

COLUMNS = ["topic", "run_name", "finding", "numbers", "source"]


def _source(run: str, *tables: str) -> str:
    return ", ".join(f"{run}/{t}.csv" for t in tables)


def _finding(topic: str, run: str, source: str, sentence: str, **numbers) -> dict:
    basis = "; ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in numbers.items())
    return {"topic": topic, "run_name": run, "finding": sentence, "numbers": basis, "source": source}


def _variant(setting) -> str:
    return knobs.label(setting, knobs.variant_only()) or knobs.default_label()


def _run_findings(run: str, ok: pd.DataFrame) -> list[dict]:
    out, ok = [], knobs.columns(ok)

    def add(topic: str, sentence: str, **numbers) -> None:
        out.append(_finding(topic, run, _source(run, "scenario_a"), f"{run}: {sentence}", **numbers))

    keys = [k for k in match_keys() if k != "phase"]
    wide = ok.pivot_table(index=keys, columns="phase", values="throughput_img_s", aggfunc="first")
    if {"train", "eval"} <= set(wide.columns):
        ratio = (wide["eval"] / wide["train"]).dropna()
        if len(ratio):
            lo, hi = (dict(zip(keys, k, strict=True)) for k in (ratio.idxmin(), ratio.idxmax()))
            sentence = (
                f"eval/train throughput ratio ranges {ratio.min():.1f}-{ratio.max():.1f}x (lowest {lo['model']} "
                f"{_variant(lo)}, highest {hi['model']} {_variant(hi)})."
            )
            add("eval_train_ratio", sentence, ratio_min=ratio.min(), ratio_max=ratio.max())
    if ok.achieved_gflops.notna().any():
        half = ok.throughput_ci95_img_s.astype(float)
        sure = ok[[reproducibility.precise(r, h) for r, h in zip(ok.throughput_img_s, half, strict=True)]]
        if sure.empty or sure.achieved_gflops.isna().all():
            within = f"no 95% interval within +-{reproducibility.PRECISE_PCT:g}%"
            sentence = f"no achieved rate is precise enough to headline ({within}); measure longer."
            add("highest_rate", sentence, measurements=len(ok))
        else:
            best = sure.loc[sure.achieved_gflops.idxmax()]
            gflops, rate_img_s = best.achieved_gflops, float(best.throughput_img_s)
            pct = 100 * float(best.throughput_ci95_img_s) / rate_img_s
            sentence = (
                f"highest achieved rate among the {len(sure)} of {len(ok)} measurements precise to "
                f"+-{reproducibility.PRECISE_PCT:g}%: {best.model} {best.phase} "
                f"({_variant(best)}), {gflops:.1f} GFLOP/s at "
                f"{best.throughput_img_s:.1f} +- {pct:.1f}% images/s."
            )
            add("highest_rate", sentence, achieved_gflops=gflops, throughput_img_s=rate_img_s, ci95_pct=pct)
    noisy = int(ok.noisy.astype(str).str.lower().eq("true").sum())
    sentence = f"{noisy} of {len(ok)} measurements are flagged noisy (step-time IQR/median > 10%)."
    add("noisy", sentence, noisy=noisy, measurements=len(ok))
    base = knobs.default_variant(ok)
    same = [k for k in match_keys() if k not in knobs.variant_only()]
    j = ok.drop(index=base.index).merge(base, on=same, suffixes=("", "_base"))
    cols = ["throughput_img_s", "throughput_ci95_img_s"]
    cols += [f"{c}_base" for c in cols]
    told = j.loc[[reproducibility.distinguishable(*r) for r in j[cols].itertuples(index=False)]]
    if len(j) and told.empty:
        sentence = "no variant is distinguishable from fp32 NCHW eager (every difference is inside the 95% "
        add("variant_gain", sentence + "interval of the difference).")
    elif len(told):
        g = told.loc[(told.throughput_img_s / told.throughput_img_s_base).idxmax()]
        gain = g.throughput_img_s / g.throughput_img_s_base
        label = " + ".join(knobs.label(g, [k]) for k in knobs.variant_only() if knobs.label(g, [k]))
        sentence = (
            f"largest gain from a variant, {label} makes {g.model} {g.phase} {gain:.2f}x as fast as fp32 "
            f"NCHW eager at batch {g.batch_size}."
        )
        rates = {"throughput_img_s": g.throughput_img_s, "baseline_img_s": g.throughput_img_s_base}
        add("variant_gain", sentence, gain=gain, **rates)
    return out


def findings_table(m: Merged) -> pd.DataFrame:
    """Findings, one computed sentence per row with the numbers it rests on (once per analysis)."""
    return m.once("findings", _findings_table)


def _findings_table(m: Merged) -> pd.DataFrame:
    out, sa = [], m["scenario_a"]
    for run, g in configured(sa).groupby("run_name"):
        out += _run_findings(run, g)
    for r in sa[sa.status != "ok"].itertuples():
        what = f"{r.model} {r.phase} at batch {r.batch_size} on {r.device_name}"
        sentence = f"{r.run_name}: {what}: {r.status} ({r.error})."
        source = _source(r.run_name, "scenario_a")
        out.append(_finding("failure", r.run_name, source, sentence, status=r.status))
    for kind, g in speedups(sa).groupby("comparison"):
        top = g.loc[g.speedup.idxmax()]
        what = "run-to-run difference" if kind == "run-to-run" else f"{kind} speedup"
        sentence = (
            f"Largest {what}: {top.model} {top.phase} at batch {top.batch_size} ({_variant(top)}), "
            f"{top.run_a} ({top.device_a}) vs {top.run_b} ({top.device_b}): {top.speedup:.2f}x "
            f"[{top.speedup_low:.2f}, {top.speedup_high:.2f}]."
        )
        numbers = {k: top[k] for k in ("speedup", "throughput_a_img_s", "throughput_b_img_s")}
        out.append(_finding(kind, f"{top.run_a} / {top.run_b}", "speedups.csv", sentence, **numbers))
    divided = ratios(m)
    out += _one_knob_findings(divided)
    um = unmatched(sa, divided)
    if len(um):
        keys = sorted({d.split(" ")[0] for cell in um.differs_in for d in cell.split("; ") if d})
        source = ", ".join(sorted({_source(r, "scenario_a") for r in {*um.run_a, *um.run_b}}))
        sentence = (
            f"{len(um)} model/phase pairs of runs were not divided because their configurations differ (in "
            f"{', '.join(keys)})."
        )
        out.append(_finding("unmatched", "", source, sentence, pairs=len(um)))
    out += _roofline_findings(m["roofline"]) + _sweep_findings(m["batch_sweep"])
    out += _reproducibility_findings(m)
    if m.runs:  # the seeds' verdicts beside a run's own
        out += _prediction_findings(m.once("predictions", predict.table))
    return pd.DataFrame(out, columns=COLUMNS)


def _prediction_findings(t: pd.DataFrame) -> list[dict]:
    """Per source, device and verdict: the rates the device's roofs cannot explain, with the first's evidence."""
    odd = t[t.verdict.isin(predict.UNEXPLAINED)]
    return [
        _finding(
            "prediction",
            "",
            "predictions.csv",
            f"{source} on {device}: {len(g)} rate(s) {verdict}, at {share.min():.1%} to {share.max():.1%} of "
            f"what the device's roofs allow; e.g. {g.model.iloc[0]} {g.phase.iloc[0]}: {g.reason.iloc[0]}.",
            rows=len(g),
        )
        for (source, device, verdict), g in odd.groupby(["source", "device", "verdict"])
        for share in [g.rate_img_s / g.ceiling_img_s]
    ]


SHOWN = 4  # one-knob ratios named in a finding; the rest are counted, all are in ratios.csv


def _one_knob_findings(divided: pd.DataFrame) -> Iterator[dict]:
    """Per pair of runs and knob changed: the one-knob ratios (ratios.csv), each with its interval and verdict."""
    one = divided[divided.comparison == "one knob"]
    for (a, b, knob, va, vb), g in one.groupby(["run_a", "run_b", "knob", "value_a", "value_b"], sort=False):
        parts = [
            f"{r.model} {r.phase}{'' if r.table == 'scenario_a' else f' ({r.table}, batch {r.batch_size})'} "
            f"{compare.ratio_text(r.ratio_b_over_a, r.ratio_ci95_low, r.ratio_ci95_high)} {r.verdict}"
            for r in g.head(SHOWN).itertuples()
        ]
        more = f"; and {len(g) - SHOWN} more" if len(g) > SHOWN else ""
        where = (
            f"in {a}, rate at {vb} / rate at {va}" if a == b else f"({a} -> {b}), rate of {b} / rate of {a}"
        )
        sentence = f"{knob} {va} -> {vb} {where}: {'; '.join(parts)}{more}."
        verdicts = {v.replace(" ", "_"): int(n) for v, n in g.verdict.value_counts().items()}
        yield _finding("one_knob", f"{a} / {b}", "ratios.csv", sentence, ratios=len(g), **verdicts)


def _reproducibility_findings(m: Merged) -> Iterator[dict]:
    pairs = repeated(m)
    for run, g in pairs.groupby("run_name"):
        tables = {reproducibility.PASS_TABLE.get(p, p) for p in (*g["first"], *g["second"])}
        source = _source(run, *sorted(tables))
        sentence = f"{run}: {reproducibility.agreement_sentence(g)}"
        yield _finding("repeats", run, source, sentence, pairs=len(g), agree=int(g.agree.sum()))
    for r in machine(m).itertuples():
        cited = [t for t in results.RATES if (m[t].run_name == r.run_name).any()]  # has rows
        source = _source(r.run_name, *cited)
        numbers = {"busy": r.busy, "configurations": r.configurations}
        yield _finding("machine", r.run_name, source, f"{r.run_name}: {r.verdict}", **numbers)


def _roofline_findings(rf: pd.DataFrame) -> list[dict]:
    out = []
    for run, g in rf.groupby("run_name"):
        placed, layers, source = g[g.source == "scenario_a"], g[g.source == "layer"], _source(run, "roofline")
        if len(placed):
            mem, eff = (placed.bound == "memory").mean(), placed.efficiency.median()
            sentence = (
                f"{run}: {mem:.0%} of the Scenario A points are memory-bound on the measured roofline; median "
                f"efficiency (achieved / attainable) {eff:.0%}."
            )
            numbers = {"memory_bound_fraction": mem, "median_efficiency": eff}
            out.append(_finding("roofline", run, source, sentence, **numbers))
        if len(layers):
            share = (layers.bound == "memory").mean()
            sentence = f"{run}: {share:.0%} of the profiled layer-ops are memory-bound."
            out.append(_finding("roofline_layers", run, source, sentence, layers=len(layers)))
    return out


def _sweep_findings(sw: pd.DataFrame) -> list[dict]:
    from cnnbench import scenarios  # imports torch: not for a report built from what is on disk

    return [
        _finding(
            "batch_sweep",
            run,
            _source(run, "batch_sweep"),
            f"{run}: {r.model} ({r.phase}) is within 5% of its best throughput or not distinguishable from it, "
            f"from batch {r.knee_batch_size} "
            f"(best {r.best_throughput_img_s:.0f} images/s at batch {r.best_batch_size}).",
            knee_batch_size=r.knee_batch_size,
            best_batch_size=r.best_batch_size,
            best_img_s=r.best_throughput_img_s,
        )
        for run, g in sw.groupby("run_name")
        for r in scenarios.diminishing_returns(g).itertuples()
    ]


def write_tables(m: Merged, run_dir: Path) -> dict[str, Path]:
    """This analysis's speedups, ratios, findings, seed_corrections and predictions csv files into ``run_dir``."""
    tables = {
        "speedups": speedups(m["scenario_a"]),
        "ratios": ratios(m),
        "findings": findings_table(m),
        "seed_corrections": published.corrections(),
        "predictions": m.once("predictions", predict.table),
    }
    for name, df in tables.items():  # recomputed whole, never resumed
        results.atomic_write_text(run_dir / results.table(name).filename, df.to_csv(index=False))
    return {name: run_dir / results.table(name).filename for name in tables}


def placed_points(m: Merged, source: str = "scenario_a") -> pd.DataFrame:
    """Roofline points of one source (scenario_a, batch_sweep, layer) across every run."""
    return m["roofline"][m["roofline"].source == source]


def findings_markdown(m: Merged):
    from IPython.display import Markdown

    lines = [
        f"- {r.finding} (`{r.source}`)" if r.source else f"- {r.finding}"
        for r in findings_table(m).itertuples()
    ]
    return Markdown("\n".join(lines) if lines else "_No measurements to summarise yet._")
