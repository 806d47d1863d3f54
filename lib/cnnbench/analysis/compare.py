"""Comparisons across runs: a speedup divides two measurements only when their whole configuration matches
(:func:`match_keys`); the same host and device is run-to-run, never a cross-device speedup."""

from __future__ import annotations

import json
import math
from itertools import combinations

import pandas as pd

from cnnbench import knobs, results, tables
from cnnbench.measure import reproducibility
from cnnbench.results.runs import Merged, machine_label
from cnnbench.tables import rounded

WORKLOAD = ("image_size", "dataset", "num_classes")  # besides model and phase, never a knob


def match_keys() -> tuple[str, ...]:
    """The keys two rows must share to be divided (threads are matched on one machine only)."""
    return ("model", "phase", *WORKLOAD, *(k for k in knobs.keyed() if knobs.KNOBS[k].matched))


def knob_keys() -> tuple[str, ...]:
    """What may differ between two rows that compare divides, one at a time."""
    return (*WORKLOAD, *knobs.keyed(), "torch")


def norm(value) -> str:
    """A protocol value as comparable text: 0.01 == "0.01", True == "true", missing == ""."""
    if value is None or (not isinstance(value, str | bool | list | dict) and pd.isna(value)):
        return ""
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return text.lower()
    try:
        return repr(float(text))
    except ValueError:
        return text


def configured(df: pd.DataFrame) -> pd.DataFrame:
    """ok rows with every knob as the knob holds it, one per run and configuration (the newest)."""
    ok, keys = knobs.columns(df[df.status == "ok"]), list(match_keys())
    ok[keys] = ok[keys].fillna("")
    return ok.drop_duplicates(["run_name", *keys, "threads"], keep="last")


def _same_machine(host_a, host_b, device_a, device_b) -> bool:
    return host_a == host_b and str(device_a) == str(device_b)


def _pair(ok: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Matched configurations of runs a and b; on the same host and device the threads must match too."""
    j = ok[ok.run_name == a].merge(ok[ok.run_name == b], on=list(match_keys()), suffixes=("_a", "_b"))
    machines = zip(j.host_id_a, j.host_id_b, j.device_name_a, j.device_name_b, strict=True)
    same = pd.Series([_same_machine(*r) for r in machines], index=j.index, dtype=bool)
    return j[~same | (j.threads_a.map(norm) == j.threads_b.map(norm))]


def speedups(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Throughput A / B per pair of runs (the faster as A) and matched configuration, with its 95% interval."""
    ok, pairs = configured(scenario_a), []
    for a, b in combinations(sorted(ok.run_name.unique()), 2):
        j = _pair(ok, a, b)
        pairs.append(_pair(ok, b, a) if (j.throughput_img_s_a / j.throughput_img_s_b).median() < 1 else j)
    j = pd.concat(pairs, ignore_index=True) if pairs else _pair(ok, "", "")
    ra, rb, s = j.throughput_img_s_a, j.throughput_img_s_b, j.throughput_img_s_a / j.throughput_img_s_b
    rates = zip(rb, j.throughput_ci95_img_s_b, ra, j.throughput_ci95_img_s_a, strict=True)
    bounds = pd.DataFrame([reproducibility.ratio(*x)[1:] for x in rates], j.index, ["low", "high"], float)
    # run-to-run (same host, same device), cross-host (same device model elsewhere) or cross-device
    host = j.host_id_a.eq(j.host_id_b).map({True: "run-to-run", False: "cross-host"})
    return pd.DataFrame(
        {
            **{f"{k}_{x}": j[f"{k}_name_{x}"] for k in ("run", "device") for x in "ab"},
            **{f"host_{x}": j[f"host_{x}"] for x in "ab"},
            "comparison": host.where(j.device_name_a == j.device_name_b, "cross-device"),
            **{k: j[k] for k in (*match_keys(), "threads_a", "threads_b")},
            **{f"throughput_{x}_img_s": j[f"throughput_img_s_{x}"] for x in "ab"},
            "speedup": s,
            "speedup_low": bounds.low,
            "speedup_high": bounds.high,
        }
    )


def unmatched(scenario_a: pd.DataFrame, divided: pd.DataFrame | None = None) -> pd.DataFrame:
    """Same model and phase in two runs, no matched configuration and not in ``divided``: the differing keys."""
    ok = configured(scenario_a)
    keys = [k for k in match_keys() if k not in ("model", "phase")]
    said = [] if divided is None else divided[divided.verdict.astype(str) != "not divided"].itertuples()
    done = {(r.run_a, r.run_b, r.model, r.phase) for r in said}
    rows = []
    for a, b in combinations(sorted(ok.run_name.unique()), 2):
        ga, gb = ok[ok.run_name == a], ok[ok.run_name == b]
        for (model, phase), sa in ga.groupby(["model", "phase"]):
            sb = gb[(gb.model == model) & (gb.phase == phase)]
            if sb.empty or (a, b, model, phase) in done or len(_pair(pd.concat([sa, sb]), a, b)):
                continue
            ra, rb = sa.iloc[0], sb.iloc[0]
            diff = [f"{k} {ra[k]} vs {rb[k]}" for k in keys if ra[k] != rb[k]]
            same = _same_machine(ra.host_id, rb.host_id, ra.device_name, rb.device_name)
            if same and norm(ra.threads) != norm(rb.threads):
                diff.append(f"threads {ra.threads} vs {rb.threads}")
            rows.append(
                {"run_a": a, "run_b": b, "model": model, "phase": phase, "differs_in": "; ".join(diff)}
            )
    return pd.DataFrame(rows)


def speedup_matrix(speedup: pd.DataFrame, phase: str = "train") -> pd.DataFrame:
    """Seed 000's Table 8 shape: a row per model (and varying key), a column per pair of runs and comparison."""
    if speedup.empty:
        why = "nothing to divide here (runs that differ in one knob are divided in the ratio table)"
        return pd.DataFrame({"note": [f"no two runs share a configuration: {why}"]})
    s = speedup[speedup.phase == phase]
    if s.empty:
        return pd.DataFrame({"note": [f"no matched {phase} configuration in two runs"]})
    varying = [k for k in match_keys() if k not in ("model", "phase") and s[k].astype(str).nunique() > 1]
    pairs = zip(s.threads_a, s.threads_b, strict=True)
    threads = ["" if norm(ta) == norm(tb) else f", threads {ta} vs {tb}" for ta, tb in pairs]
    interval = list(map(ratio_text, s.speedup, s.speedup_low, s.speedup_high))
    s = s.assign(pair=s.run_a + " / " + s.run_b + " (" + s.comparison + threads + ")", value=interval)
    matrix = s.pivot_table(index=["model", *varying], columns="pair", values="value", aggfunc="first")
    matrix = matrix.dropna(axis=1, how="all").dropna(axis=0, how="all")
    matrix.columns.name = f"{phase} speedup, x = (images/s of A) / (images/s of B) [95% interval]"
    return matrix


VALUES = ("throughput_img_s", "throughput_ci95_img_s", *tables.RATES, *tables.MEMORY)  # 02's Table 3's


def summary(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 3 across every run: train/eval VALUES per run and configuration."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = configured(scenario_a).assign(device_name=lambda d: d.device_name.astype(str))
    index = ["run_name", "device_name", *[k for k in match_keys() if k != "phase"]]
    values = [v for v in VALUES if v in ok]  # a run from before a column lacks it
    wide = ok.pivot_table(index=index, columns="phase", values=values, aggfunc="first")
    wide.columns = [f"{phase}_{v}" for v, phase in wide.columns]
    order = [f"{phase}_{v}" for v in VALUES for phase in ("train", "eval") if f"{phase}_{v}" in wide.columns]
    return wide[order].reset_index()


repeated = reproducibility.repeated  # every configuration a run measured twice, side by side


def machine(m: Merged) -> pd.DataFrame:
    """Per run: how quiet the machine was over its measurements (reproducibility.machine_summary)."""
    return reproducibility.machine_summary(*(m[name] for name in results.RATES))


# one-knob ratios: two rows of one table, model and phase divided where they differ in at most one knob_keys()
_RATE_KEYS = ("table", "model", "phase")
PROBE_KNOBS = ("threads", "torch")  # the CPU speed probe runs in the measuring process: these change it too
MACHINE = {"host_id": "host_id", "host": "host", "device": "device_name"}  # a ratio row's column: the rate's


def ratio_columns() -> list[str]:
    """ratios.csv's columns: the verdict first, then what was changed, the rates, and whose runs they are."""
    said = "verdict ratio_b_over_a ratio_ci95_low ratio_ci95_high interval model phase knob value_a value_b "
    said += "rate_a_img_s rate_a_ci95_img_s rate_b_img_s rate_b_ci95_img_s comparison differs_in run_a run_b "
    said += "device_a device_b host_a host_b host_id_a host_id_b table"
    return [*said.split(), *knob_keys(), "probe_img_s_a", "probe_img_s_b", "probe_change_pct"]


def rates(m: Merged) -> pd.DataFrame:
    """The ok rows of every rate table, one per run, table and configuration (the newest), with the run's torch."""
    frames = []
    for name in results.RATES:
        df = m[name]
        if df.empty:
            continue
        df = reproducibility.measured_here(df)
        ok = knobs.columns(df[df.status.astype(str) == "ok"])
        ok["table"] = name
        ok["torch"] = ok.run_name.map(lambda r: m.environments.get(r, {}).get("torch", ""))
        frames.append(ok.drop_duplicates(["run_name", *_RATE_KEYS, *knob_keys()], keep="last"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_name", *_RATE_KEYS])


def _differences(ra: pd.Series, rb: pd.Series) -> list[str]:
    """The knobs two rows differ in; "machine" where their host or device differs."""
    keys = [k for k in knob_keys() if norm(ra[k]) != norm(rb[k])]
    if not _same_machine(ra.host_id, rb.host_id, ra.device_name, rb.device_name):
        keys.insert(0, "machine")
    return keys


def _value(r: pd.Series, key: str) -> str:
    return machine_label(r.device_name, r.host) if key == "machine" else str(r[key])


def _row(a: str, b: str, ra: pd.Series, rb: pd.Series, diff: list[str], divide: bool) -> dict:
    x, cx = float(ra.throughput_img_s), reproducibility.number(ra.throughput_ci95_img_s)
    y, cy = float(rb.throughput_img_s), reproducibility.number(rb.throughput_ci95_img_s)
    same = all(norm(ra[k]) == norm(rb[k]) for k in PROBE_KNOBS)  # else the probe changed with the knob
    pa, pb = (reproducibility.number(r.probe_img_s) if same else math.nan for r in (ra, rb))
    row = {
        "run_a": a,
        "run_b": b,
        **{f"{k}_{s}": r[c] for k, c in MACHINE.items() for s, r in (("a", ra), ("b", rb))},
        **{k: ra[k] for k in _RATE_KEYS},
        "knob": "; ".join(diff),
        **{f"value_{s}": "; ".join(_value(r, k) for k in diff) for s, r in (("a", ra), ("b", rb))},
        **{f"rate_{s}_img_s": v for s, v in (("a", x), ("b", y))},
        **{f"rate_{s}_ci95_img_s": v for s, v in (("a", cx), ("b", cy))},
        "probe_img_s_a": pa,
        "probe_img_s_b": pb,
        "probe_change_pct": 100 * (pb / pa - 1) if pa > 0 else math.nan,
        # the change
        **{k: f"{_value(ra, k)} -> {_value(rb, k)}" if k in diff else ra[k] for k in knob_keys()},
    }
    if not divide:
        return {
            **row,
            "verdict": "not divided",
            "comparison": "more than one key differs",
            "differs_in": "; ".join(f"{k} {_value(ra, k)} vs {_value(rb, k)}" for k in diff),
        }
    paired = reproducibility.paired_ratio(_rounds(ra), _rounds(rb)) if a == b else None
    if paired is not None:  # the same run's rounds: each round's ratio, the machine's drift cancelled
        r, low, high, n = paired
        verdict, interval = reproducibility.interval_verdict(low, high, x, y), f"paired over {n} rounds"
    else:
        r, low, high = reproducibility.ratio(x, cx, y, cy)
        verdict, interval = reproducibility.change_verdict(x, cx, y, cy), "Fieller's, of the two rates"
    return {
        **row,
        "ratio_b_over_a": r,
        "ratio_ci95_low": low,
        "ratio_ci95_high": high,
        "verdict": verdict,
        "interval": interval,
        "comparison": {0: "same configuration", 1: "one knob"}.get(len(diff), f"{len(diff)} keys differ"),
        "differs_in": "",
    }


def _rounds(r: pd.Series) -> dict:
    """A row's rate in each round it was measured in (``process_rates_img_s``: {round: images/s}), {} if none."""
    text = r.process_rates_img_s
    return {int(k): float(v) for k, v in json.loads(text).items()} if isinstance(text, str) else {}


def probe_change(ratio: pd.DataFrame) -> float:
    """The median probe change (%) over a comparison's rows, NaN where the runs carry no probe."""
    moved = pd.to_numeric(ratio.get("probe_change_pct", pd.Series(dtype=float)), errors="coerce").dropna()
    return float(moved.median()) if len(moved) else math.nan


def one_knob(ok: pd.DataFrame, a: str, b: str, keys: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Rate of b / rate of a (95% interval, verdict) of rows differing in at most one knob (or only in ``keys``),
    else undivided, the knobs named; with ``a == b``, one run's variants one knob apart, paired over rounds."""
    out = []
    ga, gb = ok[ok.run_name == a], ok[ok.run_name == b]
    for (table, model, phase), sa in ga.groupby(["table", "model", "phase"], sort=False):
        sb = gb[(gb.table == table) & (gb.model == model) & (gb.phase == phase)]
        for i, ra in sa.iterrows():
            cands = [(rb, _differences(ra, rb)) for j, rb in sb.iterrows() if a != b or j > i]
            fewest = min((len(d) for _, d in cands), default=0)
            if keys is not None:  # within a run (a == b): its variants one knob apart
                chosen = [(rb, d) for rb, d in cands if set(d) <= set(keys) and (a != b or len(d) == 1)]
            else:
                chosen = [(rb, d) for rb, d in cands if len(d) == fewest <= 1]
            out += [_row(a, b, ra, rb, d, True) for rb, d in chosen]
            if cands and not chosen and a != b:  # the nearest, undivided, the knobs named
                rb, d = min(cands, key=lambda c: len(c[1]))
                out.append(_row(a, b, ra, rb, d, False))
    return pd.DataFrame(out, columns=ratio_columns())


def ratios(m: Merged, keys: tuple[str, ...] | None = None) -> pd.DataFrame:
    """:func:`one_knob` within every merged run and for every pair of them (once each, in name order)."""
    ok = rates(m)
    names = sorted(ok.run_name.unique())
    pairs = [(a, a) for a in names] + list(combinations(names, 2))
    frames = [f for a, b in pairs if len(f := one_knob(ok, a, b, keys))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=ratio_columns())


def times(ratio: float) -> str:
    """A ratio as printed: two decimals (0.95, 1.80, 197.35), three significant figures below 0.1 (0.00316, never
    0.00), no exponent."""
    if not math.isfinite(ratio) or abs(ratio) >= 0.1 or ratio == 0:
        return f"{ratio:,.2f}"
    return f"{ratio:.{2 - math.floor(math.log10(abs(ratio)))}f}"


def ratio_text(ratio: float, low: float, high: float) -> str:
    """A ratio and its 95% interval as `cnnbench compare` and 08 print them: "1.80x [1.73, 1.87]"; an interval
    without an upper bound (Fieller's, a rate known no better than its own size) "[95% interval unbounded]"."""
    bounds = "95% interval unbounded" if high == math.inf else f"{times(low)}, {times(high)}"
    return f"{times(ratio)}x [{bounds}]"


def ratio_table(ratio: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """:func:`ratios` for reading: constant columns moved to the returned caption, ratios rounded to their interval."""

    numbers = ["ratio_b_over_a", "ratio_ci95_low", "ratio_ci95_high"]
    ratio = ratio.drop(columns=["probe_img_s_a", "probe_img_s_b"], errors="ignore")  # their change is enough
    same = [c for c in ratio if c not in numbers and len(ratio) > 1 and ratio[c].astype(str).nunique() == 1]
    text = "; ".join(f"{c} {ratio[c].iloc[0]}" for c in same if str(ratio[c].iloc[0]) not in ("", "nan"))
    view = ratio.drop(columns=same)
    low, high = (pd.to_numeric(view[c], errors="coerce") for c in numbers[1:])
    for c in numbers:
        view[c] = [rounded(v, h) for v, h in zip(view[c], (high - low) / 2, strict=True)]
    return view, (f"same in every row: {text}" if text else "")
