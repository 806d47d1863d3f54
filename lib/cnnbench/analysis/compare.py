"""Comparisons across runs: a speedup divides two measurements only when their whole configuration matches
(``MATCH_KEYS``); two runs on the same hardware and device are a run-to-run comparison, never a cross-device
speedup. Also the configurations a run measured twice, and how quiet its machine was."""

from __future__ import annotations

import math
from itertools import combinations

import pandas as pd

from cnnbench.measure import reproducibility
from cnnbench.results.runs import Merged

# A measurement's configuration: two rows are divided only when all of these are equal.
MATCH_KEYS = (
    "model",
    "phase",
    "batch_size",
    "image_size",
    "precision",
    "memory_format",
    "compile",
    "data_mode",
    "dataset",
    "num_classes",
)


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


def _configured(df: pd.DataFrame) -> pd.DataFrame:
    """ok rows with every MATCH_KEYS column (and threads) present and comparable (compile as a bool); one row per
    run and configuration, the newest (the last appended) where a configuration was measured twice."""
    ok = df[df.status == "ok"].copy() if len(df) else df.copy()
    for key in (*MATCH_KEYS, "threads"):
        if key not in ok.columns:
            ok[key] = ""
    ok["compile"] = ok["compile"].astype(str).str.lower().isin(["true", "1", "1.0"])
    ok[[*MATCH_KEYS, "threads"]] = ok[[*MATCH_KEYS, "threads"]].fillna("")
    return ok.drop_duplicates(["run_name", *MATCH_KEYS], keep="last")


def comparison_kind(a: pd.Series, b: pd.Series) -> str:
    """run-to-run (same host, same device), cross-host (same device model elsewhere) or cross-device."""
    if a.device_name == b.device_name:
        return "run-to-run" if a.host_id == b.host_id else "cross-host"
    return "cross-device"


def _same_machine(host_a, host_b, device_a, device_b) -> bool:
    return host_a == host_b and str(device_a) == str(device_b)


def _pair(ok: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Matched configurations of runs a and b; on the same host and device the threads must match too (else
    a thread count would pass for run-to-run noise), across devices they may differ (shown beside)."""
    j = ok[ok.run_name == a].merge(ok[ok.run_name == b], on=list(MATCH_KEYS), suffixes=("_a", "_b"))
    same = [
        _same_machine(*r)
        for r in zip(j.host_id_a, j.host_id_b, j.device_name_a, j.device_name_b, strict=True)
    ]
    return j[~pd.Series(same, index=j.index, dtype=bool) | (j.threads_a.map(norm) == j.threads_b.map(norm))]


def speedups(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Throughput A / throughput B for each pair of runs (once, the faster run as A), per fully matched
    configuration. The interval propagates each side's 95% half-width in relative terms (independent
    errors)."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = _configured(scenario_a)
    rows = []
    for a, b in combinations(sorted(ok.run_name.unique()), 2):
        j = _pair(ok, a, b)
        if j.empty:
            continue
        if (j.throughput_img_s_a / j.throughput_img_s_b).median() < 1:
            j = _pair(ok, b, a)
        for r in j.to_dict("records"):
            ra, rb = r["throughput_img_s_a"], r["throughput_img_s_b"]
            rel = math.hypot(
                float(r.get("throughput_ci95_img_s_a") or 0) / ra,
                float(r.get("throughput_ci95_img_s_b") or 0) / rb,
            )
            s = ra / rb
            kind = comparison_kind(
                pd.Series({"device_name": r["device_name_a"], "host_id": r["host_id_a"]}),
                pd.Series({"device_name": r["device_name_b"], "host_id": r["host_id_b"]}),
            )
            rows.append(
                {
                    "run_a": r["run_name_a"],
                    "run_b": r["run_name_b"],
                    "device_a": r["device_name_a"],
                    "device_b": r["device_name_b"],
                    "host_a": r["host_a"],
                    "host_b": r["host_b"],
                    "comparison": kind,
                    **{k: r[k] for k in MATCH_KEYS},
                    "threads_a": r["threads_a"],
                    "threads_b": r["threads_b"],
                    "throughput_a_img_s": ra,
                    "throughput_b_img_s": rb,
                    "speedup": s,
                    "speedup_low": s * max(1 - rel, 0),
                    "speedup_high": s * (1 + rel),
                }
            )
    return pd.DataFrame(rows)


def unmatched(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Same model and phase in two runs but no matching configuration: not divided, the differing keys
    named."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = _configured(scenario_a)
    keys = [k for k in MATCH_KEYS if k not in ("model", "phase")]
    rows = []
    for a, b in combinations(sorted(ok.run_name.unique()), 2):
        ga, gb = ok[ok.run_name == a], ok[ok.run_name == b]
        for (model, phase), sa in ga.groupby(["model", "phase"]):
            sb = gb[(gb.model == model) & (gb.phase == phase)]
            if sb.empty or len(_pair(pd.concat([sa, sb]), a, b)):
                continue
            ra, rb = sa.iloc[0], sb.iloc[0]
            diff = [f"{k} {ra[k]} vs {rb[k]}" for k in keys if ra[k] != rb[k]]
            if _same_machine(ra.host_id, rb.host_id, ra.device_name, rb.device_name) and norm(
                ra.threads
            ) != norm(rb.threads):
                diff.append(f"threads {ra.threads} vs {rb.threads}")
            rows.append(
                {"run_a": a, "run_b": b, "model": model, "phase": phase, "differs_in": "; ".join(diff)}
            )
    return pd.DataFrame(rows)


def speedup_matrix(speedup: pd.DataFrame, phase: str = "train") -> pd.DataFrame:
    """Seed 000's Table 8 shape: one row per model (and configuration, where it varies), one column per pair
    of runs with its kind of comparison; the header names the phase and the unit; empty pairs left out."""
    if speedup.empty:
        return pd.DataFrame({"note": ["no two runs share a configuration: nothing to divide"]})
    s = speedup[speedup.phase == phase]
    if s.empty:
        return pd.DataFrame({"note": [f"no matched {phase} configuration in two runs"]})
    varying = [k for k in MATCH_KEYS if k not in ("model", "phase") and s[k].astype(str).nunique() > 1]
    threads = [
        "" if norm(ta) == norm(tb) else f", threads {ta} vs {tb}"
        for ta, tb in zip(s.get("threads_a", [""] * len(s)), s.get("threads_b", [""] * len(s)), strict=True)
    ]
    s = s.assign(
        pair=s.run_a + " / " + s.run_b + " (" + s.comparison + pd.Series(threads, index=s.index) + ")",
        value=s.speedup.map("{:.2f}x".format)
        + " ["
        + s.speedup_low.map("{:.2f}".format)
        + ", "
        + s.speedup_high.map("{:.2f}".format)
        + "]",
    )
    matrix = s.pivot_table(index=["model", *varying], columns="pair", values="value", aggfunc="first")
    matrix = matrix.dropna(axis=1, how="all").dropna(axis=0, how="all")
    matrix.columns.name = f"{phase} speedup, x = (images/s of A) / (images/s of B) [95% interval]"
    return matrix


VALUES = (
    "throughput_img_s",
    "throughput_ci95_img_s",
    "achieved_gflops",
    "achieved_tflops",
    "peak_device_mem_mib",
    "peak_rss_mib",
    "baseline_rss_mib",
)


def summary(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 3 across every run: train/eval throughput (95% CI), achieved rate, peak memory, one
    row per run and configuration."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = _configured(scenario_a).assign(device_name=lambda d: d.device_name.astype(str))
    index = ["run_name", "device_name", *[k for k in MATCH_KEYS if k != "phase"]]
    values = [v for v in VALUES if v in ok.columns]
    wide = ok.pivot_table(index=index, columns="phase", values=values, aggfunc="first")
    wide.columns = [f"{phase}_{v}" for v, phase in wide.columns]
    order = [f"{phase}_{v}" for v in values for phase in ("train", "eval") if f"{phase}_{v}" in wide.columns]
    return wide[order].reset_index()


def repeated(m: Merged) -> pd.DataFrame:
    """Every configuration a run measured twice (02 and 03, 02 and 07's default, 06's unsplit step), side by side."""
    return reproducibility.repeated(m["scenario_a"], m["batch_sweep"], m["tuning"], m["step_phases"])


def machine(m: Merged) -> pd.DataFrame:
    """Per run: how quiet the machine was over its measurements (reproducibility.machine_summary)."""
    return reproducibility.machine_summary(m["scenario_a"], m["batch_sweep"])
