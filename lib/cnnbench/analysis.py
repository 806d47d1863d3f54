"""Cross-run analysis: discover runs, check they are compatible, merge them with their identity (run name and
host fingerprint on every row), and compute every table and sentence of findings from the data.

A speedup divides two measurements only when their whole configuration matches (``MATCH_KEYS``); two runs on
the same hardware and device are a run-to-run comparison, never a cross-device speedup.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import pandas as pd

from cnnbench import SCHEMA_VERSION, engine, envinfo, published, reproducibility, results, scenarios

TABLES = (
    "complexity",
    "scenario_a",
    "batch_sweep",
    "epochs",
    "roofline",
    "device_peaks",
    "backends",
    "backend_ops",
    "backend_memory",
    "gradcheck",  # 05_backends
    "transfer",
    "step_phases",
    "telemetry",
    "scaling",  # 06_transfer
    "tuning",
)  # 07_tuning
CONFIG_KEYS = (
    "models",
    "image_size",
    "num_classes",
    "dataset",
    "data_mode",
    "batch_size",
    "batch_size_per_model",
    "warmup_steps",
    "measured_steps",
    "repeats",
    "processes",
    "variants",
    "lr",
    "momentum",
    "phases",
    "threads",
    "epoch_images",
    "epoch_images_per_model",
)
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
# Tables the engine writes, keyed by its protocol (engine.PROTOCOL_KEYS and threads): a rerun with changed
# protocol parameters appends new rows beside the old ones; only the rows of the run's current params are read.
ENGINE_TABLES = ("scenario_a", "batch_sweep", "telemetry", "step_phases")
# Columns besides the engine's protocol that a table's rows carry and must match the run's params to be current.
PASS_KEYS = ("phase_steps", "phase_window_s", "phase_max_s", "phase_batch_size")
IDENTITY = ("run_name", "host_id", "host")  # added to every merged row
ALL_RUNS = "*"  # analysis_runs: ["*"] merges every user run of outputs/
_SMOKE = re.compile(r"^smoke", re.IGNORECASE)


@dataclass
class Merged:
    runs: list[str]
    environments: dict[str, dict]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    config_differences: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.tables.get(name, pd.DataFrame())


def test_run_reason(run_dir: Path) -> str | None:
    """Why a run folder is a smoke/test run kept out of combined reports (None: a user run)."""
    if _SMOKE.match(run_dir.name):
        return "smoke/test run (run name starts with 'smoke')"
    prm = results.read_json(run_dir / "params.json") if (run_dir / "params.json").is_file() else {}
    if Path(str(prm.get("params_file", ""))).name == "smoke.yaml":
        return "smoke/test run (made from params/smoke.yaml)"
    return None


def failed_run_reason(run_dir: Path) -> str | None:
    """Why a run folder is left out as failed: the pipeline's FAILED.txt, its first line (None: no failure)."""
    failed = run_dir / "FAILED.txt"  # pipeline.FAILED, written when a run does not finish
    if not failed.is_file():
        return None
    first = next(iter(failed.read_text(errors="replace").splitlines()), "").strip()
    return f"failed run (FAILED.txt: {first or 'no reason given'})"


def discover(outputs: Path, names: list[str] | None = None, excluded: dict | None = None) -> list[Path]:
    """Run folders (with environment.json) under ``outputs``: those named in ``names``, or with ``names`` None
    or ``["*"]`` every user run (folders starting with '_' or '.', smoke/test runs and runs that left a
    FAILED.txt are left out, each with its reason in ``excluded``)."""
    excluded = {} if excluded is None else excluded
    if names and names != [ALL_RUNS]:
        dirs = [Path(n) if Path(n).is_absolute() else outputs / n for n in names]
        missing = [str(d) for d in dirs if not (d / "environment.json").is_file()]
        if missing:
            raise FileNotFoundError(f"not runs (no environment.json): {', '.join(missing)}")
        return dirs
    found = (
        sorted(d for d in outputs.iterdir() if (d / "environment.json").is_file()) if outputs.is_dir() else []
    )
    keep = []
    for d in found:
        reason = (
            "not a run (name starts with '_' or '.')"
            if d.name[0] in "_."
            else test_run_reason(d) or failed_run_reason(d)
        )
        if reason:
            excluded[d.name] = reason
        else:
            keep.append(d)
    return keep


def runs_for(run_dir: Path, analysis_runs: list[str], excluded: dict | None = None) -> list[Path]:
    """The runs an analysis of ``run_dir`` merges: [] = that run only; ["*"] = every user run beside it."""
    if not analysis_runs:
        return [run_dir] if (run_dir / "environment.json").is_file() else []
    return discover(run_dir.parent, analysis_runs, excluded)


def _numeric(df: pd.DataFrame) -> pd.DataFrame:
    for col in df.columns:
        converted = pd.to_numeric(df[col], errors="coerce")
        if converted.notna().sum() == df[col].replace("", pd.NA).notna().sum():
            df[col] = converted
    return df


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


def current_rows(df: pd.DataFrame, prm: dict, threads: int | None = None) -> pd.DataFrame:
    """The rows of an engine table measured under the run's current parameters: every protocol column it carries
    (engine.PROTOCOL_KEYS) equal to ``prm``'s value, and ``threads`` (when given, non-zero) equal to the
    threads in force. Rows of an earlier invocation with other protocol parameters stay in the CSV (their key
    differs) but are not this run's answer."""
    if df.empty:
        return df
    want = {k: prm[k] for k in (*engine.PROTOCOL_KEYS, *PASS_KEYS) if k in prm and k in df.columns}
    if threads and "threads" in df.columns:
        want["threads"] = threads
    keep = pd.Series(True, index=df.index)
    for key, value in want.items():
        keep &= df[key].map(norm) == norm(value)
    return df[keep]


def for_run(run, df: pd.DataFrame) -> pd.DataFrame:
    """The rows of an engine table (scenario_a, batch_sweep, telemetry) that the open ``run``'s current params
    and threads measured: what a notebook of that run shows."""
    return current_rows(df, run.params.to_dict(), run.threads)


def _run_params(run_dir: Path) -> tuple[dict, int | None]:
    """A run's params.json and the threads it sets (None: 0, the machine's cores, not recorded here)."""
    prm = results.read_json(run_dir / "params.json") if (run_dir / "params.json").is_file() else {}
    return prm, int(prm.get("threads") or 0) or None


def identity(run_dir: Path, env: dict) -> dict:
    """run_name, host_id and host label of a run (the fingerprint is computed for older environments)."""
    fp = (
        {"host_id": env["host_id"], "host": env["host"]}
        if "host_id" in env
        else envinfo.host_fingerprint(env)
    )
    return {"run_name": run_dir.name, **fp}


def load(dirs: list[Path], excluded: dict | None = None) -> Merged:
    """Merge the tidy CSVs of ``dirs``, each row stamped with its run's identity; runs of another schema
    version are excluded, with the reason (as are those already in ``excluded``)."""
    envs, keep, excluded = {}, [], dict(excluded or {})
    for d in dirs:
        env = results.read_json(d / "environment.json")
        if env.get("schema_version") != SCHEMA_VERSION:
            excluded[d.name] = (
                f"schema version {env.get('schema_version')} (this workbook reads {SCHEMA_VERSION})"
            )
            continue
        envs[d.name] = {**env, **identity(d, env)}
        keep.append(d)
    merged = Merged([d.name for d in keep], envs, excluded=excluded)
    for name in TABLES:
        frames = [
            _read_table(d, name).assign(**identity(d, envs[d.name])) for d in keep if (d / f"{name}.csv").is_file()
        ]
        if frames:
            merged.tables[name] = _numeric(pd.concat(frames, ignore_index=True))
    merged.config_differences = config_differences(keep)
    return merged


def _read_table(run_dir: Path, name: str) -> pd.DataFrame:
    """One CSV of a run; an engine table only with the rows of the run's current parameters."""
    df = pd.DataFrame(results.read_rows(run_dir / f"{name}.csv"))
    if name == "tuning":
        return current_search(df, _run_params(run_dir)[0])
    return current_rows(df, *_run_params(run_dir)) if name in ENGINE_TABLES else df


def current_search(tuned: pd.DataFrame, prm: dict) -> pd.DataFrame:
    """The rows of tuning.csv searched under the run's current tune_* and protocol params (lists as 07 writes
    them, joined by commas): a rerun with other search params keeps the old search in the file, not in 08."""
    from cnnbench.tuning.experiment import PARAM_KEYS

    keep = pd.Series(True, index=tuned.index)
    for key in PARAM_KEYS:
        if key in prm and key in tuned.columns:
            value = ",".join(map(str, prm[key])) if isinstance(prm[key], list) else prm[key]
            keep &= tuned[key].map(norm) == norm(value)
    return tuned[keep]


def config_differences(dirs: list[Path]) -> pd.DataFrame:
    """The configuration keys whose values differ between runs, one column per run."""
    prm = {d.name: results.read_json(d / "params.json") for d in dirs if (d / "params.json").is_file()}
    rows = []
    for key in CONFIG_KEYS:
        values = {run: str(p.get(key)) for run, p in prm.items()}
        if len(set(values.values())) > 1:
            rows.append({"key": key, **values})
    return pd.DataFrame(rows)


def runs_table(m: Merged) -> pd.DataFrame:
    """Which runs, from which hosts, this analysis merges (and which it left out, with the reason)."""
    rows = [
        {
            "run_name": r,
            "merged": "yes",
            "device_kind": e.get("device_kind"),
            "device_name": e.get("device_name"),
            "host": e.get("host"),
            "host_id": e.get("host_id"),
            "threads": e.get("torch_threads"),
            "torch": e.get("torch"),
            "captured_at": e.get("captured_at"),
        }
        for r, e in m.environments.items()
    ]
    rows += [{"run_name": r, "merged": f"no: {why}"} for r, why in m.excluded.items()]
    return pd.DataFrame(rows)


device_table = runs_table  # the name 08 used before runs carried their host


def merged_statement(m: Merged) -> str:
    """One sentence: how many runs, which, from how many hosts."""
    if not m.runs:
        return "This analysis merges no run."
    hosts = {e.get("host_id") for e in m.environments.values()}
    names = ", ".join(f"{r} ({e.get('device_name')} on {e.get('host')})" for r, e in m.environments.items())
    return f"This analysis merges {len(m.runs)} run(s) from {len(hosts)} host(s): {names}."


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
    same = [_same_machine(*r) for r in zip(j.host_id_a, j.host_id_b, j.device_name_a, j.device_name_b, strict=True)]
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
            if _same_machine(ra.host_id, rb.host_id, ra.device_name, rb.device_name) and norm(ra.threads) != norm(
                rb.threads
            ):
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


def _finding(topic: str, run: str, sentence: str, **numbers) -> dict:
    basis = "; ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in numbers.items())
    return {"topic": topic, "run_name": run, "finding": sentence, "numbers": basis}


def _run_findings(run: str, ok: pd.DataFrame) -> list[dict]:
    out = []
    keys = [k for k in MATCH_KEYS if k != "phase"]
    wide = ok.pivot_table(index=keys, columns="phase", values="throughput_img_s", aggfunc="first")
    if {"train", "eval"} <= set(wide.columns):
        ratio = (wide["eval"] / wide["train"]).dropna()
        if len(ratio):
            names = dict(zip(keys, range(len(keys)), strict=True))

            def label(k: tuple) -> str:
                return f"{k[0]} {k[names['precision']]} {k[names['memory_format']]}" + (
                    " compiled" if k[names["compile"]] else ""
                )

            lo, hi = label(ratio.idxmin()), label(ratio.idxmax())
            out.append(
                _finding(
                    "eval_train_ratio",
                    run,
                    f"{run}: eval/train throughput ratio ranges "
                    f"{ratio.min():.1f}-{ratio.max():.1f}x (lowest {lo}, highest {hi}).",
                    ratio_min=ratio.min(),
                    ratio_max=ratio.max(),
                )
            )
    rate = (
        "achieved_gflops"
        if "achieved_gflops" in ok
        else "achieved_tflops"
        if "achieved_tflops" in ok
        else None
    )
    if rate and ok[rate].notna().any():
        half = ok.get("throughput_ci95_img_s", pd.Series(float("nan"), index=ok.index)).astype(float)
        sure = ok[[reproducibility.precise(r, h) for r, h in zip(ok.throughput_img_s, half, strict=True)]]
        if sure.empty or sure[rate].isna().all():
            out.append(_finding("highest_rate", run, f"{run}: no achieved rate is precise enough to headline (no "
                                f"95% interval within +-{reproducibility.PRECISE_PCT:g}%); measure longer.",
                                measurements=len(ok)))
        else:
            best = sure.loc[sure[rate].idxmax()]
            gflops = best[rate] * (1e3 if rate == "achieved_tflops" else 1)
            pct = 100 * float(best.throughput_ci95_img_s) / float(best.throughput_img_s)
            out.append(
                _finding(
                    "highest_rate",
                    run,
                    f"{run}: highest achieved rate among the {len(sure)} of {len(ok)} measurements precise to "
                    f"+-{reproducibility.PRECISE_PCT:g}%: {best.model} {best.phase} "
                    f"({best.precision}, {best.memory_format}), {gflops:.1f} GFLOP/s at "
                    f"{best.throughput_img_s:.1f} +- {pct:.1f}% images/s.",
                    achieved_gflops=gflops,
                    throughput_img_s=float(best.throughput_img_s),
                    ci95_pct=pct,
                )
            )
    if "noisy" in ok:
        noisy = int(ok.noisy.astype(str).str.lower().eq("true").sum())
        out.append(
            _finding(
                "noisy",
                run,
                f"{run}: {noisy} of {len(ok)} measurements are flagged noisy (step-time IQR/median > 10%).",
                noisy=noisy,
                measurements=len(ok),
            )
        )
    base = ok[(ok.precision == "fp32") & (ok.memory_format == "nchw") & ~ok["compile"]]
    variants = ok[(ok.precision != "fp32") | (ok.memory_format != "nchw") | ok["compile"]]
    same = [k for k in MATCH_KEYS if k not in ("precision", "memory_format", "compile")]
    j = (
        variants.merge(base, on=same, suffixes=("", "_base"))
        if len(base) and len(variants)
        else pd.DataFrame()
    )
    if len(j) and "throughput_ci95_img_s" in j:
        j = j[[reproducibility.distinguishable(a, ca, b, cb) for a, ca, b, cb in zip(
            j.throughput_img_s, j.throughput_ci95_img_s, j.throughput_img_s_base, j.throughput_ci95_img_s_base,
            strict=True)]]
        if j.empty:
            out.append(_finding("variant_gain", run, f"{run}: no variant is distinguishable from fp32 NCHW eager "
                                "(every difference is inside the 95% interval of the difference)."))
    if len(j):
        j["gain"] = j.throughput_img_s / j.throughput_img_s_base
        g = j.loc[j.gain.idxmax()]
        label = f"{g.precision} + {g.memory_format}{' + compile' if g['compile'] else ''}"
        out.append(
            _finding(
                "variant_gain",
                run,
                f"{run}: largest gain from a variant, {label} makes {g.model} "
                f"{g.phase} {g.gain:.2f}x as fast as fp32 NCHW eager at batch {g.batch_size}.",
                gain=g.gain,
                throughput_img_s=g.throughput_img_s,
                baseline_img_s=g.throughput_img_s_base,
            )
        )
    return out


def findings_table(m: Merged) -> pd.DataFrame:
    """Findings, one computed sentence per row, per run, with the numbers each rests on."""
    out = []
    sa = m["scenario_a"]
    ok = _configured(sa) if len(sa) else sa
    for run, g in ok.groupby("run_name") if len(ok) else []:
        out += _run_findings(run, g)
    for r in (sa[sa.status != "ok"] if len(sa) else sa).itertuples():
        out.append(
            _finding(
                "failure",
                r.run_name,
                f"{r.run_name}: {r.model} {r.phase} at batch {r.batch_size} on "
                f"{r.device_name}: {r.status} ({getattr(r, 'error', '')}).",
                status=r.status,
            )
        )
    sp = speedups(sa) if len(sa) else pd.DataFrame()
    for kind, g in sp.groupby("comparison") if len(sp) else []:
        top = g.loc[g.speedup.idxmax()]
        what = "run-to-run difference" if kind == "run-to-run" else f"{kind} speedup"
        out.append(
            _finding(
                kind,
                f"{top.run_a} / {top.run_b}",
                f"Largest {what}: {top.model} {top.phase} at "
                f"batch {top.batch_size} ({top.precision}, {top.memory_format}), {top.run_a} "
                f"({top.device_a}) vs {top.run_b} ({top.device_b}): {top.speedup:.2f}x "
                f"[{top.speedup_low:.2f}, {top.speedup_high:.2f}].",
                speedup=top.speedup,
                throughput_a_img_s=top.throughput_a_img_s,
                throughput_b_img_s=top.throughput_b_img_s,
            )
        )
    um = unmatched(sa) if len(sa) else pd.DataFrame()
    if len(um):
        keys = sorted({d.split(" ")[0] for cell in um.differs_in for d in cell.split("; ") if d})
        out.append(
            _finding(
                "unmatched",
                "",
                f"{len(um)} model/phase pairs of runs were not divided because their "
                f"configurations differ (in {', '.join(keys)}).",
                pairs=len(um),
            )
        )
    out += _roofline_findings(m["roofline"]) + _sweep_findings(m["batch_sweep"]) + _reproducibility_findings(m)
    return pd.DataFrame(out, columns=["topic", "run_name", "finding", "numbers"])


def repeated(m: Merged) -> pd.DataFrame:
    """Every configuration a run measured twice (02 and 03, 02 and 07's default), side by side."""
    return reproducibility.repeated(m["scenario_a"], m["batch_sweep"], m["tuning"])


def machine(m: Merged) -> pd.DataFrame:
    """Per run: how quiet the machine was over its measurements (reproducibility.machine_summary)."""
    return reproducibility.machine_summary(m["scenario_a"], m["batch_sweep"])


def _reproducibility_findings(m: Merged) -> list[dict]:
    out = []
    pairs = repeated(m)
    for run, g in pairs.groupby("run_name") if len(pairs) else []:
        out.append(_finding("repeats", run, f"{run}: {reproducibility.agreement_sentence(g)}",
                            pairs=len(g), agree=int(g.agree.sum())))
    for r in machine(m).itertuples():
        out.append(_finding("machine", r.run_name, f"{r.run_name}: {r.verdict}", busy=r.busy,
                            configurations=r.configurations))
    return out


def _roofline_findings(rf: pd.DataFrame) -> list[dict]:
    out = []
    for run, g in rf.groupby("run_name") if len(rf) else []:
        placed = g[g.source == "scenario_a"]
        if len(placed):
            mem, eff = (placed.bound == "memory").mean(), placed.efficiency.median()
            out.append(
                _finding(
                    "roofline",
                    run,
                    f"{run}: {mem:.0%} of the Scenario A points are memory-bound on "
                    f"the measured roofline; median efficiency (achieved / attainable) {eff:.0%}.",
                    memory_bound_fraction=mem,
                    median_efficiency=eff,
                )
            )
        layers = g[g.source == "layer"]
        if len(layers):
            out.append(
                _finding(
                    "roofline_layers",
                    run,
                    f"{run}: {(layers.bound == 'memory').mean():.0%} of the "
                    "profiled layer-ops are memory-bound.",
                    layers=len(layers),
                )
            )
    return out


def _sweep_findings(sw: pd.DataFrame) -> list[dict]:
    out = []
    for run, g in sw.groupby("run_name") if len(sw) else []:
        for r in scenarios.diminishing_returns(g).itertuples():
            out.append(
                _finding(
                    "batch_sweep",
                    run,
                    f"{run}: {r.model} ({r.phase}) is within 5% of its best "
                    f"throughput from batch {r.knee_batch_size} (best {r.best_throughput_img_s:.0f} "
                    f"images/s at batch {r.best_batch_size}).",
                    knee_batch_size=r.knee_batch_size,
                    best_batch_size=r.best_batch_size,
                    best_img_s=r.best_throughput_img_s,
                )
            )
    return out


def findings(m: Merged) -> list[str]:
    """The findings' sentences."""
    return findings_table(m).finding.tolist()


def write_tables(m: Merged, run_dir: Path) -> dict[str, Path]:
    """speedups.csv and findings.csv of this analysis into ``run_dir`` (tidy, one row per pair / finding)."""
    out = {}
    for name, df in (("speedups", speedups(m["scenario_a"])), ("findings", findings_table(m))):
        path = run_dir / f"{name}.csv"
        results.atomic_write_text(path, df.to_csv(index=False))  # recomputed whole, never resumed
        out[name] = path
    return out


def _differences(seed: str, s, r) -> str:
    ours = (
        f"ours: {r.dataset} {r.image_size}x{r.image_size}, batch {r.batch_size}, {r.data_mode} data mode, "
        "synchronised windows"
    )
    if seed == "000":
        return f"000: {s.configuration}; {ours}"
    return f"003: {s.configuration}, batch {s.batch_size}, resolution not stated; {ours}"


def published_beside_ours(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """The seeds' published throughputs beside ours, every run and configuration (fp32 NCHW eager) shown."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = _configured(scenario_a)
    ok = ok[(ok.precision == "fp32") & (ok.memory_format == "nchw") & ~ok["compile"]]
    if ok.empty:
        return pd.DataFrame()
    ok = ok.assign(
        device_class=[
            published.device_class(k, n) for k, n in zip(ok.device_kind, ok.device_name, strict=True)
        ]
    )
    index = ["run_name", "device_class", "device_name", *[k for k in MATCH_KEYS if k != "phase"]]
    ours = ok.pivot_table(
        index=index, columns="phase", values="throughput_img_s", aggfunc="first"
    ).reset_index()
    rows = []
    for r in ours.itertuples():
        for seed, table in (("000", published.THROUGHPUT_000), ("003", published.THROUGHPUT_003)):
            for s in table[(table.model == r.model) & (table.device_class == r.device_class)].itertuples():
                rows.append(
                    {
                        "model": r.model,
                        "device_class": r.device_class,
                        "source": f"published by {seed}",
                        "published_batch_size": getattr(
                            s, "batch_size", 64 if r.model == "squeezenet1_1" else 128
                        ),
                        "published_train_img_s": s.train_img_s,
                        "published_eval_img_s": getattr(s, "eval_img_s", None),
                        "ours_run": r.run_name,
                        "ours_device": r.device_name,
                        "ours_batch_size": r.batch_size,
                        "ours_train_img_s": getattr(r, "train", None),
                        "ours_eval_img_s": getattr(r, "eval", None),
                        "differences": _differences(seed, s, r),
                    }
                )
    return pd.DataFrame(rows)


def zip_run(run_dir: Path) -> Path:
    """outputs/<run_name>.zip of a run folder, to carry results from Colab into a local outputs/. Links that
    lead out of the run folder are left out (never followed); the archive holds only the run's own files."""
    import os
    import zipfile

    run_dir = Path(run_dir)
    root, archive = run_dir.resolve(), run_dir.parent / f"{run_dir.name}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for folder, _dirs, files in os.walk(run_dir):  # does not descend into linked folders
            for name in sorted(files):
                path = Path(folder) / name
                target = path.resolve()
                if target.is_file() and target.is_relative_to(root):
                    zf.write(target, Path(run_dir.name) / path.relative_to(run_dir))
    return archive


def epoch_times(epochs: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 2 across runs: train and validation epoch times and throughputs."""
    cols = [
        "run_name",
        "device_name",
        "host",
        "model",
        "batch_size",
        "dataset",
        "status",
        "epoch_images",
        "train_epoch_s",
        "train_images",
        "train_throughput_img_s",
        "val_epoch_s",
        "val_images",
        "val_throughput_img_s",
    ]
    return epochs[[c for c in cols if c in epochs.columns]] if len(epochs) else pd.DataFrame()


def epochs_beside_published(epochs: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's epoch times (6,400-image 'epochs') beside ours, per model, with each epoch's images."""
    pub = published.EPOCHS_000.assign(
        source=f"published by {published.SEED_000}", images=published.EPOCH_IMAGES_000
    )
    pub.loc[(pub.model == "squeezenet1_1") & (pub.device_class == "t4"), "images"] = (
        published.EPOCH_IMAGES_000 // 2
    )
    pub = pub.rename(columns={"device_class": "device"})[
        ["source", "model", "device", "images", "train_epoch_s", "val_epoch_s"]
    ]
    if epochs.empty or "train_epoch_s" not in epochs:
        return pub
    ok = epochs[epochs.status == "ok"]
    ours = pd.DataFrame(
        {
            "source": "ours: " + ok.run_name,
            "model": ok.model,
            "device": ok.device_name,
            "images": ok.train_images,
            "train_epoch_s": ok.train_epoch_s,
            "val_epoch_s": ok.val_epoch_s,
        }
    )
    return pd.concat([pub, ours], ignore_index=True).sort_values(["model", "source"], kind="stable")


def beside(published_table: pd.DataFrame, ours: pd.DataFrame, key: str, label: str) -> pd.DataFrame:
    """A seed's table and ours stacked with a ``source`` column (ours per run); the seed's alone, labelled,
    when no run produced ``label``'s CSV."""
    pub = published_table.assign(source=f"published by {published_table.source.iloc[0]}")
    if ours.empty:
        return pub.assign(note=f"no run of this analysis wrote {label}.csv: the published table alone")
    ok = ours[ours.status == "ok"] if "status" in ours else ours
    mine = ok.assign(source="ours: " + ok.run_name.astype(str))
    cols = ["source", *[c for c in [key, *pub.columns] if c in mine.columns and c != "source"]]
    cols = list(dict.fromkeys(cols))
    extra = [c for c in mine.columns if c not in cols and c.endswith(("_s", "_img_s", "_pct", "_mib", "_mb"))]
    return pd.concat([pub, mine[cols + extra]], ignore_index=True)


def backends_beside_001(backends: pd.DataFrame) -> pd.DataFrame:
    """Seed 001's Table I (the MNIST CNN per backend) beside our CNN, like with like: one row per run and
    backend from ``backends.csv``'s ``mnist_cnn`` rows only (the MLP's rows are seed 004's experiment), summarised
    as 05 does (:func:`cnnbench.scratch.report.summary`: every epoch but the first), a ``model`` column on both
    sides; the seed's table alone, labelled, when no run wrote the CNN's rows."""
    from cnnbench.scratch import report as scratch_report

    pub = published.BACKENDS_001.assign(model="mnist_cnn")
    cnn = backends[backends.model == "mnist_cnn"] if {"model", "status"} <= set(backends.columns) else backends.iloc[:0]
    summ = scratch_report.summary(cnn) if len(cnn) else pd.DataFrame()
    if summ.empty:
        return beside(pub, pd.DataFrame(), "backend", "backends")
    ours = pd.DataFrame({
        "source": "ours: " + summ.run_name.astype(str) if "run_name" in summ else "ours", "model": summ.model,
        "backend": summ.backend, "device_name": summ.device_name, "epoch_s": summ.epoch_s_mean,
        "throughput_img_s": summ.throughput_img_s, "throughput_ci95_img_s": summ.throughput_ci95_img_s,
        "final_test_accuracy_pct": summ.final_test_accuracy * 100,
        "max_test_accuracy_pct": summ.max_test_accuracy * 100,
    })
    pub = pub.assign(source=f"published by {published.SEED_001}")
    cols = ["source", "model", "backend", *[c for c in pub.columns if c not in ("source", "model", "backend")]]
    return pd.concat([pub[cols], ours], ignore_index=True)


MB_TO_MIB = 1e6 / 2**20  # seed 004 prints MB; read as 10^6 bytes (as inconsistencies() does), shown in MiB


def memory_beside_004(mem: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 5 (the MLP's memory, CPU = NumPy and GPU = CuPy, in MB) beside our
    ``backend_memory.csv``, every value in MiB (the seed's MB read as 10^6 bytes and converted: x 0.9537), each
    block labelled by source, backend and model: the seed's two blocks first, then ours per run, MLP first."""
    pub = pd.concat([
        pd.DataFrame({"source": f"published by {published.SEED_004}", "backend": backend, "model": "mlp",
                      "component": published.MEMORY_004.component,
                      "published_mib": published.MEMORY_004[col] * MB_TO_MIB,
                      "note": f"seed 004's {col[:3].upper()} column: MB x 10^6 / 2^20"})
        for backend, col in (("numpy", "cpu_mb"), ("cupy", "gpu_mb"))], ignore_index=True)
    if mem.empty or "component" not in mem:
        return pub.assign(note="no run of this analysis wrote backend_memory.csv: the published table alone")
    ok = mem[(mem.status == "ok") & (mem.component.astype(str) != "")] if "status" in mem else mem
    run = ok.run_name.astype(str) if "run_name" in ok else pd.Series("", index=ok.index)
    ours = ok.assign(source="ours: " + run, order=(ok.model != "mlp").astype(int))
    ours = ours.sort_values(["source", "order"], kind="stable")
    cols = [c for c in ("source", "backend", "model", "component", "computed_mib", "measured_mib", "measured_status",
                        "method") if c in ours.columns]
    return pd.concat([pub, ours[cols]], ignore_index=True)


def ops_beside_published(ops: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 4 beside ours: the MLP's ms per step by op kind (sums of per-op medians), one column
    per backend, one block of rows per run, the seed's NumPy and CuPy figures beside each; the seed's table
    alone, labelled, when no run wrote backend_ops.csv with the MLP."""
    from cnnbench.scratch import report as scratch_report

    blocks = {}
    for run, g in ops.groupby("run_name") if len(ops) and {"op_kind", "median_ms"} <= set(ops.columns) else []:
        block = scratch_report.beside_seed_004(g)
        if len(block):
            blocks[run] = block
    if not blocks:
        return beside(published.OPS_004, pd.DataFrame(), "operation", "backend_ops")
    return pd.concat(blocks, names=["run_name", "op_kind"]).reset_index()


_TELEMETRY_CONFIG = ("source", "model", "phase", "batch_size", "image_size", "precision", "memory_format", "compile",
                     "data_mode")
_GPU_SUMMARY = {("mean", "util_device_pct"): "gpu_util_mean_pct", ("max", "util_device_pct"): "gpu_util_max_pct",
                ("mean", "gpu_power_w"): "gpu_power_w_mean", ("max", "gpu_power_w"): "gpu_power_w_max",
                ("mean", "gpu_temp_c"): "gpu_temp_c_mean", ("max", "gpu_temp_c"): "gpu_temp_c_max",
                ("max", "gpu_mem_used_mib"): "gpu_mem_used_max_mib"}


def telemetry_summary(tele: pd.DataFrame) -> pd.DataFrame:
    """Our sampled GPU telemetry, one row per run, configuration and GPU (``gpu``: its index): utilisation,
    power and temperature (mean and max over the measured windows) and memory used (max), with the sample count."""
    metrics = {m for _, m in _GPU_SUMMARY}
    g = tele[tele.metric.isin(metrics)] if len(tele) and "metric" in tele else pd.DataFrame()
    if g.empty:
        return pd.DataFrame()
    keys = ["run_name", "device_name", *[c for c in _TELEMETRY_CONFIG if c in g], "device_index"]
    wide = g.groupby([*keys, "metric"], dropna=False, sort=False).value.agg(["mean", "max", "size"]).unstack("metric")
    samples = wide["size"].max(axis=1).rename("samples")
    wide = wide[[c for c in _GPU_SUMMARY if c in wide.columns]]
    wide.columns = [_GPU_SUMMARY[c] for c in wide.columns]
    return wide.join(samples).reset_index().rename(columns={"device_index": "gpu"})


def telemetry_beside_published(tele: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's single nvidia-smi snapshots beside our GPU telemetry summarised per run, configuration and GPU
    (:func:`telemetry_summary`); the seed's table alone, labelled, when no run sampled a GPU."""
    ours = telemetry_summary(tele)
    pub = published.TELEMETRY_002.assign(source=f"published by {published.SEED_002}")
    if ours.empty:
        return pub.assign(note="no run of this analysis sampled a GPU (telemetry.csv): the published table alone")
    ours = ours.rename(columns={"source": "measured_in"}).assign(source="ours: " + ours.run_name.astype(str))
    return pd.concat([pub, ours], ignore_index=True)


def placed_points(m: Merged, source: str = "scenario_a") -> pd.DataFrame:
    """Roofline points of one source (scenario_a, batch_sweep, layer) across every run."""
    rf = m["roofline"]
    return rf[rf.source == source] if len(rf) else rf


def findings_markdown(m: Merged):
    from IPython.display import Markdown

    lines = findings(m)
    return Markdown(
        "\n".join(f"- {line}" for line in lines) if lines else "_No measurements to summarise yet._"
    )


def best_configurations(tuned: pd.DataFrame) -> pd.DataFrame:
    """07's best confirmed configuration per run, model and phase, against the seeds' default (empty: no search)."""
    if tuned.empty or "row_kind" not in tuned:
        return pd.DataFrame()
    from cnnbench import tuning

    best = {run: tuning.best(g) for run, g in tuned.groupby("run_name")}
    return pd.concat(best, names=["run_name"]).reset_index()


def tuning_findings_markdown(tuned: pd.DataFrame):
    """07's computed sentences (best configuration, speedup with interval, roofline, energy), per run."""
    from IPython.display import Markdown

    from cnnbench import tuning

    if tuned.empty or "row_kind" not in tuned:
        return Markdown("_No run searched configurations (07_tuning)._")
    return Markdown("\n".join(f"- {run}: {line}" for run, g in tuned.groupby("run_name") for line in tuning.findings(g)))
