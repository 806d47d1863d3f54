"""Cross-device analysis: discover runs, check they are compatible, merge them, and compute every table and
sentence of findings from the data."""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field
from itertools import permutations
from pathlib import Path

import pandas as pd

from cnnbench import SCHEMA_VERSION, published, results, scenarios

TABLES = ("complexity", "scenario_a", "batch_sweep", "epochs", "roofline", "device_peaks")
CONFIG_KEYS = ("models", "image_size", "num_classes", "dataset", "data_mode", "batch_size", "batch_size_per_model",
               "warmup_steps", "measured_steps", "repeats", "variants", "lr", "momentum", "phases")


@dataclass
class Merged:
    runs: list[str]
    environments: dict[str, dict]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    config_differences: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.tables.get(name, pd.DataFrame())


def discover(outputs: Path, names: list[str] | None = None) -> list[Path]:
    """Run folders (with environment.json) under ``outputs``, or those named in ``names``."""
    if names:
        dirs = [Path(n) if Path(n).is_absolute() else outputs / n for n in names]
        missing = [str(d) for d in dirs if not (d / "environment.json").is_file()]
        if missing:
            raise FileNotFoundError(f"not runs (no environment.json): {', '.join(missing)}")
        return dirs
    return sorted(d for d in outputs.iterdir() if (d / "environment.json").is_file()) if outputs.is_dir() else []


def _numeric(df: pd.DataFrame) -> pd.DataFrame:
    for col in df.columns:
        converted = pd.to_numeric(df[col], errors="coerce")
        if converted.notna().sum() == df[col].replace("", pd.NA).notna().sum():
            df[col] = converted
    return df


def load(dirs: list[Path]) -> Merged:
    """Merge the tidy CSVs of ``dirs``; runs of another schema version are excluded, with the reason."""
    envs, keep, excluded = {}, [], {}
    for d in dirs:
        env = results.read_json(d / "environment.json")
        if env.get("schema_version") != SCHEMA_VERSION:
            excluded[d.name] = f"schema version {env.get('schema_version')} (this workbook reads {SCHEMA_VERSION})"
            continue
        envs[d.name] = env
        keep.append(d)
    merged = Merged([d.name for d in keep], envs, excluded=excluded)
    for name in TABLES:
        frames = [pd.DataFrame(results.read_rows(d / f"{name}.csv")).assign(run=d.name) for d in keep
                  if (d / f"{name}.csv").is_file()]
        if frames:
            merged.tables[name] = _numeric(pd.concat(frames, ignore_index=True))
    merged.config_differences = config_differences(keep)
    return merged


def config_differences(dirs: list[Path]) -> pd.DataFrame:
    """The configuration keys whose values differ between runs, one column per run."""
    prm = {d.name: results.read_json(d / "params.json") for d in dirs if (d / "params.json").is_file()}
    rows = []
    for key in CONFIG_KEYS:
        values = {run: str(p.get(key)) for run, p in prm.items()}
        if len(set(values.values())) > 1:
            rows.append({"key": key, **values})
    return pd.DataFrame(rows)


def device_table(m: Merged) -> pd.DataFrame:
    return pd.DataFrame([{"run": r, "device_kind": e.get("device_kind"), "device_name": e.get("device_name"),
                          "threads": e.get("torch_threads"), "torch": e.get("torch"), "captured_at": e.get("captured_at")}
                         for r, e in m.environments.items()])


def _label(df: pd.DataFrame) -> pd.Series:
    return df.run + " (" + df.device_name.astype(str) + ")"


def speedups(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Throughput A / throughput B for every ordered pair of runs, per model, phase and variant.

    The interval propagates each side's 95% half-width in relative terms (independent errors).
    """
    if scenario_a.empty:
        return pd.DataFrame()
    ok = scenario_a[scenario_a.status == "ok"].assign(device=lambda d: _label(d))
    keys = ["model", "phase", "precision", "memory_format"]
    rows = []
    for key, g in ok.groupby(keys):
        by_dev = g.set_index("device")
        for a, b in permutations(by_dev.index.unique(), 2):
            ta, tb = by_dev.loc[a], by_dev.loc[b]
            ra, rb = ta.throughput_img_s, tb.throughput_img_s
            rel = math.hypot(ta.throughput_ci95_img_s / ra, tb.throughput_ci95_img_s / rb)
            s = ra / rb
            rows.append({**dict(zip(keys, key, strict=True)), "device_a": a, "device_b": b, "speedup": s,
                         "speedup_lo": s * max(1 - rel, 0), "speedup_hi": s * (1 + rel)})
    return pd.DataFrame(rows)


def speedup_matrix(speedup: pd.DataFrame, phase: str = "train") -> pd.DataFrame:
    """Seed 000's Table 8 shape: one row per model, one column per ordered device pair (fp32 NCHW)."""
    if speedup.empty:
        return pd.DataFrame({"note": ["one run only: no pair of devices to compare"]})
    s = speedup[(speedup.phase == phase) & (speedup.precision == "fp32") & (speedup.memory_format == "nchw")]
    if s.empty:
        return pd.DataFrame()
    s = s.assign(pair=s.device_a + " / " + s.device_b,
                 value=s.speedup.map("{:.2f}x".format) + " [" + s.speedup_lo.map("{:.2f}".format) + ", "
                 + s.speedup_hi.map("{:.2f}".format) + "]")
    return s.pivot_table(index="model", columns="pair", values="value", aggfunc="first")


def summary(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 3 across every run: train/eval throughput (95% CI), TFLOP/s, peak memory."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = scenario_a[scenario_a.status == "ok"].assign(device=lambda d: _label(d))
    wide = ok.pivot_table(index=["model", "device", "precision", "memory_format"], columns="phase",
                          values=["throughput_img_s", "throughput_ci95_img_s", "achieved_tflops", "peak_device_mem_mib",
                                  "peak_rss_mib"], aggfunc="first")
    wide.columns = [f"{phase}_{v}" for v, phase in wide.columns]
    return wide.reset_index()


def findings(m: Merged) -> list[str]:
    """Sentences of findings, each computed from the merged data."""
    out = []
    sa = m["scenario_a"]
    ok = sa[sa.status == "ok"] if len(sa) else sa
    if len(ok):
        wide = ok.pivot_table(index=["run", "device_name", "model", "precision", "memory_format"], columns="phase",
                              values="throughput_img_s", aggfunc="first")
        if {"train", "eval"} <= set(wide.columns):
            ratio = (wide["eval"] / wide["train"]).dropna()
            lo, hi = ratio.idxmin(), ratio.idxmax()
            out.append(f"Eval/train throughput ratio ranges {ratio.min():.1f}-{ratio.max():.1f}x "
                       f"(lowest: {lo[2]} on {lo[1]}; highest: {hi[2]} on {hi[1]}).")
        best = ok.loc[ok.achieved_tflops.idxmax()]
        out.append(f"Highest achieved rate: {best.model} {best.phase} ({best.precision}, {best.memory_format}) on "
                   f"{best.device_name}, {best.achieved_tflops * 1e3:.1f} GFLOP/s at {best.throughput_img_s:.1f} images/s.")
        noisy = ok.noisy.astype(str).str.lower().eq("true")
        out.append(f"{int(noisy.sum())} of {len(ok)} measurements are flagged noisy (step-time IQR/median > 10%).")
        v = ok[(ok.precision != "fp32") | (ok.memory_format != "nchw")]
        base = ok[(ok.precision == "fp32") & (ok.memory_format == "nchw")]
        if len(v) and len(base):
            j = v.merge(base, on=["run", "model", "phase"], suffixes=("", "_base"))
            j["gain"] = j.throughput_img_s / j.throughput_img_s_base
            g = j.loc[j.gain.idxmax()]
            out.append(f"Largest gain from a variant: {g.precision} + {g.memory_format} makes {g.model} {g.phase} "
                       f"{g.gain:.2f}x faster than fp32 NCHW on {g.device_name}.")
    failed = sa[sa.status != "ok"] if len(sa) else sa
    for r in failed.itertuples() if len(failed) else []:
        out.append(f"{r.model} {r.phase} at batch {r.batch_size} on {r.device_name}: {r.status} ({r.error}).")
    sp = speedups(sa) if len(sa) else pd.DataFrame()
    if len(sp):
        top = sp.loc[sp.speedup.idxmax()]
        out.append(f"Largest speedup: {top.model} {top.phase} on {top.device_a} vs {top.device_b}, "
                   f"{top.speedup:.1f}x [{top.speedup_lo:.1f}, {top.speedup_hi:.1f}].")
    rf = m["roofline"]
    if len(rf):
        placed = rf[rf.source == "scenario_a"]
        if len(placed):
            mem = (placed.bound == "memory").mean()
            out.append(f"{mem:.0%} of the Scenario A points are memory-bound on their device's measured roofline; "
                       f"median efficiency (achieved / attainable) is {placed.efficiency.median():.0%}.")
        layers = rf[rf.source == "layer"]
        if len(layers):
            out.append(f"{(layers.bound == 'memory').mean():.0%} of the profiled layer-ops are memory-bound.")
    sw = m["batch_sweep"]
    if len(sw):
        for r in scenarios.diminishing_returns(sw.assign(model=sw.model + " on " + sw.device_name)).itertuples():
            out.append(f"{r.model} ({r.phase}): within 5% of its best throughput from batch {r.knee_batch_size} "
                       f"(best {r.best_throughput_img_s:.0f} images/s at batch {r.best_batch_size}).")
    return out


def published_beside_ours(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """The seeds' published throughputs beside ours for the same model and device class, fp32 NCHW."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = scenario_a[(scenario_a.status == "ok") & (scenario_a.precision == "fp32") & (scenario_a.memory_format == "nchw")]
    if ok.empty:
        return pd.DataFrame()
    ok = ok.assign(device_class=[published.device_class(k, n) for k, n in zip(ok.device_kind, ok.device_name, strict=True)])
    ours = ok.pivot_table(index=["model", "device_class", "device_name", "batch_size", "image_size", "data_mode"],
                          columns="phase",
                          values="throughput_img_s", aggfunc="first").reset_index()
    rows = []
    for r in ours.itertuples():
        for s in published.THROUGHPUT_000[(published.THROUGHPUT_000.model == r.model)
                                          & (published.THROUGHPUT_000.device_class == r.device_class)].itertuples():
            rows.append({"model": r.model, "device_class": r.device_class, "source": "published by 000",
                         "published_train_img_s": s.train_img_s, "published_eval_img_s": s.eval_img_s,
                         "ours_device": r.device_name, "ours_train_img_s": getattr(r, "train", None),
                         "ours_eval_img_s": getattr(r, "eval", None), "ours_batch_size": r.batch_size,
                         "differences": f"000: {s.configuration}; ours: {r.data_mode} data mode, synced windows, "
                                        f"{r.image_size}x{r.image_size}, batch {r.batch_size}"})
        for s in published.THROUGHPUT_003[(published.THROUGHPUT_003.model == r.model)
                                          & (published.THROUGHPUT_003.device_class == r.device_class)].itertuples():
            rows.append({"model": r.model, "device_class": r.device_class, "source": "published by 003",
                         "published_train_img_s": s.train_img_s, "published_eval_img_s": None,
                         "ours_device": r.device_name, "ours_train_img_s": getattr(r, "train", None),
                         "ours_eval_img_s": getattr(r, "eval", None), "ours_batch_size": r.batch_size,
                         "differences": f"003: {s.configuration}, batch {s.batch_size}; ours: batch {r.batch_size}, "
                                        f"{r.image_size}x{r.image_size}, {r.data_mode} data mode"})
    return pd.DataFrame(rows)


def zip_run(run_dir: Path) -> Path:
    """outputs/<run_name>.zip of a run folder, to carry results from Colab into a local outputs/."""
    archive = shutil.make_archive(str(run_dir), "zip", root_dir=run_dir.parent, base_dir=run_dir.name)
    return Path(archive)


def epoch_times(epochs: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 2 across runs: train and validation epoch times and throughputs."""
    cols = ["run", "device_name", "model", "batch_size", "dataset", "status", "train_epoch_s", "train_images",
            "train_throughput_img_s", "val_epoch_s", "val_images", "val_throughput_img_s"]
    return epochs[[c for c in cols if c in epochs.columns]] if len(epochs) else pd.DataFrame()


def placed_points(m: Merged, source: str = "scenario_a") -> pd.DataFrame:
    """Roofline points of one source (scenario_a, batch_sweep, layer) across every run."""
    rf = m["roofline"]
    return rf[rf.source == source] if len(rf) else rf


def findings_markdown(m: Merged):
    from IPython.display import Markdown

    lines = findings(m)
    return Markdown("\n".join(f"- {line}" for line in lines) if lines else "_No measurements to summarise yet._")
