"""Does a number reproduce? Every configuration a run measured twice side by side (:func:`repeated`), and how
quiet the machine was (:func:`machine_summary`)."""

from __future__ import annotations

import math
import statistics

import pandas as pd

from cnnbench import knobs, results
from cnnbench.measure import timing
from cnnbench.results.runs import Merged


def same_keys() -> tuple[str, ...]:
    """The columns that make two rows of one run the same configuration (the protocol is the run's own)."""
    return ("model", "phase", "image_size", "num_classes", "dataset", *knobs.keyed())


PRECISE_PCT = 10.0  # a rate whose 95% interval is within +-10% supports a headline on its own

COLUMNS = (
    "run_name model phase batch_size first rate_first_img_s ci95_first_img_s second rate_second_img_s "
    "ci95_second_img_s difference_pct difference_ci95_pct agree second_inside_first probe_change_pct"
).split()


def measured_here(df: pd.DataFrame) -> pd.DataFrame:
    """The rows a table measured itself: not those copied from another table of the run (``measured_in``)."""
    return df[df.measured_in.fillna("").astype(str) == ""] if "measured_in" in df else df


def _ok(df: pd.DataFrame, source: str) -> pd.DataFrame:
    df = measured_here(df)
    return knobs.columns(df[df.status.astype(str) == "ok"]).assign(source=source)


def _unsplit_step(step_phases: pd.DataFrame) -> pd.DataFrame:
    """06's unsplit training steps as rate rows like 02's: batch / mean step time, its interval scaled alike."""
    if step_phases.empty or "step_time_s" not in step_phases:
        return pd.DataFrame()
    ok = _ok(step_phases, UNSPLIT_PASS)
    keys = [k for k in ("run_name", *same_keys()) if k in ok and k != "phase"]
    ok = ok.drop_duplicates(keys).copy()
    step, ci = ok.step_time_s.astype(float), ok.step_time_ci95_s.astype(float)
    ok["throughput_img_s"] = ok.batch_size.astype(float) / step
    ok["throughput_ci95_img_s"] = ok.throughput_img_s * ci / step
    return ok.assign(phase="train", data_mode="loader")  # 06 draws its steps from a DataLoader


TUNING_PASS, UNSPLIT_PASS = "tuning (default)", "step phases (unsplit step)"  # passes of 07, 06
PASS_TABLE = {TUNING_PASS: "tuning", UNSPLIT_PASS: "step_phases"}  # the tables they are in
TABLES = (*results.RATES, *PASS_TABLE.values())  # what repeated() and machine_summary() read


def repeated(m: Merged) -> pd.DataFrame:
    """Every configuration of the runs ``m`` measured by two passes (:data:`TABLES`), one row per pair (see the
    module's docstring)."""
    tuning = m["tuning"]
    confirm = (
        tuning[(tuning.stage == "confirm") & (tuning.role == "default")] if "role" in tuning else tuning[:0]
    )
    rates = [_ok(m[name], name) for name in results.RATES]
    passes = [p for p in (*rates, _ok(confirm, TUNING_PASS), _unsplit_step(m["step_phases"])) if len(p)]
    out = []
    for i, a in enumerate(passes):
        for b in passes[i + 1 :]:
            on = [k for k in ("run_name", *same_keys()) if k in a and k in b]
            out += [_pair(r) for r in a.merge(b, on=on, suffixes=("_a", "_b")).to_dict("records")]
    return pd.DataFrame(out, columns=COLUMNS)


def _pair(r: dict) -> dict:
    """The row of :data:`COLUMNS` (in its order) of a configuration merged from two passes (``_a``, ``_b``)."""
    ra, rb = float(r["throughput_img_s_a"]), float(r["throughput_img_s_b"])
    ca, cb = float(r["throughput_ci95_img_s_a"]), float(r["throughput_ci95_img_s_b"])
    diff = rb - ra
    combined = math.hypot(ca, cb) if math.isfinite(ca) and math.isfinite(cb) else math.nan
    probe = 100 * (number(r.get("probe_img_s_b")) / number(r.get("probe_img_s_a")) - 1)
    row = {k: r[k] for k in ("run_name", "model", "phase")} | {"batch_size": int(r["batch_size"])}
    row |= {"first": r["source_a"], "rate_first_img_s": ra, "ci95_first_img_s": ca}
    row |= {"second": r["source_b"], "rate_second_img_s": rb, "ci95_second_img_s": cb}
    row |= {"difference_pct": 100 * diff / ra, "difference_ci95_pct": 100 * combined / ra}
    row |= {"agree": bool(abs(diff) <= combined), "second_inside_first": bool(abs(diff) <= ca)}
    return row | {"probe_change_pct": probe}


def number(value) -> float:
    """``value`` as a float; NaN where it is none (a blank cell, None, text)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def agreement_sentence(pairs: pd.DataFrame) -> str:
    """One sentence: how many repeated measurements agree within their intervals."""
    if pairs.empty:
        return "No configuration was measured twice in this run."
    agree, n = int(pairs.agree.sum()), len(pairs)
    text = (
        f"{agree} of {n} configurations measured twice agree within the 95% interval of their difference; "
        f"{int(pairs.second_inside_first.sum())} of {n} fall inside the first measurement's own interval."
    )
    if agree == n:
        return text
    w = pairs.loc[(pairs.difference_pct.abs() - pairs.difference_ci95_pct).idxmax()]
    probe = number(w.probe_change_pct)
    moved = (
        f"; the CPU's own speed (probe) moved {probe:+.1f}% between the two" if math.isfinite(probe) else ""
    )
    return (
        f"{text} The largest disagreement: {w.model} {w.phase} at batch {w.batch_size}, {w.first} "
        f"{w.rate_first_img_s:,.1f} vs {w.second} {w.rate_second_img_s:,.1f} img/s ({w.difference_pct:+.1f}% "
        f"against +-{w.difference_ci95_pct:.1f}%){moved}."
    )


def machine_summary(*tables: pd.DataFrame) -> pd.DataFrame:
    """Per run: how many measured configurations found the machine busy, and the worst figures seen."""
    read = [measured_here(t) for t in tables if len(t)]
    rows = pd.concat(read, ignore_index=True) if read else pd.DataFrame()
    if rows.empty:
        columns = "run_name configurations busy steal_max_pct other_cpu_max_pct process_cv_median_pct verdict"
        return pd.DataFrame(columns=columns.split())
    out = []
    for run, g in rows.groupby("run_name"):
        busy = int((g.machine_state.astype(str) == "busy").sum())
        steal = _col(g, "cpu_steal_mean_pct").max()  # the worst configuration's mean over its windows
        other = _col(g, "util_other_cpu_mean_pct").max()  # (one 0.1 s sample's maximum is a transient)
        cv = _col(g, "throughput_process_cv_pct").median()
        probe = _col(g, "probe_img_s").dropna()
        across = 100 * (probe.max() - probe.min()) / probe.median() if len(probe) else math.nan
        moved = max(across, _col(g, "probe_spread_pct").max()) if len(probe) else math.nan
        figures = {"steal_max_pct": steal, "other_cpu_max_pct": other, "process_cv_median_pct": cv}
        figures |= {"probe_moved_pct": moved, "verdict": verdict(len(g), busy, steal, other, cv, moved)}
        out.append({"run_name": run, "configurations": len(g), "busy": busy, **figures})
    return pd.DataFrame(out)


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    """A column as numbers (empty where the table lacks it: runs of another version)."""
    return pd.to_numeric(df[name], errors="coerce") if name in df else pd.Series(dtype=float)


def verdict(n: int, busy: int, steal: float, other: float, cv: float, moved: float = math.nan) -> str:
    """The sentence at the top of a report."""
    figures = (
        f"mean CPU steal up to {0 if pd.isna(steal) else steal:.1f}%, other processes' mean load up to "
        f"{0 if pd.isna(other) else other:.0f}% of the CPUs, process-to-process spread (median CV) "
        f"{'n/a' if pd.isna(cv) else f'{cv:.1f}%'}"
        + ("" if pd.isna(moved) else f", the CPU's own speed (probe) moved up to {moved:.0f}%")
    )
    if busy:
        return (
            f"The machine was busy during {busy} of {n} measured configurations ({figures}): their rates "
            "carry that load, and a repeat on a quieter (or busier) machine can fall outside their intervals."
        )
    if (not pd.isna(cv) and cv > 10) or (not pd.isna(moved) and moved > 15):
        return (
            f"The benchmark seems unstable: the machine was not busy by its own counters, yet its speed moved "
            f"({figures}); intervals span processes, and a repeat minutes later can still fall outside them."
        )
    return f"The machine was quiet during all {n} measured configurations ({figures})."


def precise(rate: float, half: float, pct: float = PRECISE_PCT) -> bool:
    """A rate whose 95% half-width is within +-``pct``% of it: precise enough to headline."""
    return bool(rate > 0 and math.isfinite(half) and half <= pct / 100 * rate)


def distinguishable(a: float, ca: float, b: float, cb: float) -> bool:
    """Whether two rates differ by more than the 95% interval of their difference."""
    combined = math.hypot(ca, cb)
    return bool(math.isfinite(combined) and abs(a - b) > combined)


def rate_text(rate: float, half: float, unit: str = "img/s") -> str:
    """'123.4 +- 5.6 img/s', or 'about 123 img/s (not precise: +-150%, ...)' where the interval is wider."""
    if not math.isfinite(half):
        return f"{rate:,.1f} {unit} (one process: no interval)"
    if half >= rate:
        return f"about {rate:,.0f} {unit} (not precise: +-{100 * half / rate:.0f}%, measure longer)"
    return f"{rate:,.1f} +- {half:,.1f} {unit}"


def ratio(a: float, ca: float, b: float, cb: float) -> tuple[float, float, float]:
    """``b / a`` and Fieller's 95% interval (low, high): every ratio rho with ``b - rho a`` within its 95% half-width
    (``ca``, ``cb``: the rates'), so it holds 1 exactly when the rates are not :func:`distinguishable`; up to
    infinity where ``a``'s interval holds 0 (from the larger root where the rates differ, else from 0)."""
    r, d = b / a, a * a - ca * ca
    s = math.sqrt(max(a * a * cb * cb + b * b * ca * ca - ca * ca * cb * cb, 0.0))  # < 0: every ratio
    low = max((b * b - cb * cb) / (a * b + s), 0.0)  # the root (ab - s) / d, without its cancellation
    if d <= 0:
        return r, low if distinguishable(a, ca, b, cb) else 0.0, math.inf
    return r, low, (a * b + s) / d


def paired_ratio(a: dict, b: dict) -> tuple[float, float, float, int] | None:
    """``b / a`` over the rounds both ran (``{round: rate}``): the geometric mean of the rounds' ratios, the
    Student t 95% interval of their logs and the number of rounds; None below two rounds."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    logs = [math.log(float(b[k]) / float(a[k])) for k in common]
    mean, half = statistics.fmean(logs), timing.ci95_half_width(logs)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(common)


def interval_verdict(low: float, high: float, a: float, b: float) -> str:
    """ "faster" or "slower" where the ratio's 95% interval excludes 1, else "not significant"."""
    if math.isnan(low) or math.isnan(high):
        return "no interval"
    if low <= 1 <= high:
        return "not significant"
    return "faster" if b > a else "slower"


def change_verdict(a: float, ca: float, b: float, cb: float) -> str:
    """Going from rate ``a`` to ``b``: :func:`interval_verdict` of their :func:`ratio`."""
    return interval_verdict(*ratio(a, ca, b, cb)[1:], a, b)
