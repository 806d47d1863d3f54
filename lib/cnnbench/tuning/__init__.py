"""The fastest way to train a model on this device: a budgeted search over every knob the hardware supports,
raced by successive halving, guarded for correctness, confirmed with the full protocol, and explained on the
roofline. ``tune(run)`` writes ``tuning.csv`` and ``tuning_space.csv``; ``best``, ``beside_published``,
``race``, ``skipped``, ``notes``, ``findings`` and ``plot`` present them."""

from __future__ import annotations

import re
from importlib import resources

import matplotlib.pyplot as plt
import pandas as pd

from cnnbench.plots import save
from cnnbench.tuning.experiment import tune as tune

BEST_COLUMNS = {
    "model": "model",
    "phase": "phase",
    "config": "best configuration",
    "throughput_img_s": "best img/s",
    "throughput_ci95_img_s": "± 95%",
    "default_throughput_img_s": "default img/s",
    "default_throughput_ci95_img_s": "default ± 95%",
    "speedup_x": "speedup (x)",
    "speedup_ci95_x": "speedup ± 95%",
    "achieved_gflops": "achieved GFLOP/s",
    "roof_precision": "roof",
    "compute_roof_pct": "% of compute roof",
    "bound": "bound",
    "attainable_pct": "% of attainable",
    "energy_j_per_image": "J/image",
    "default_energy_j_per_image": "default J/image",
    "configs_tried": "tried",
    "pruned": "pruned",
    "failed": "failed",
    "batch_size_limit": "batch limit",
}


PUBLISHED_COLUMNS = "who device precision batch_size throughput_img_s stack same_gpu checked".split()


def beside_published(df: pd.DataFrame, model: str = "resnet50", image_size: int = 224) -> pd.DataFrame:
    """The best confirmed training rate of ``model`` at ``image_size`` beside the published GPU figures of
    data/published_gpu.csv, each "published by" its source with its software stack; ``same_gpu`` marks a figure
    of this GPU's family (H100, A100, ...). Empty where this run confirmed no such configuration."""
    import torch

    ours = df[(df.row_kind == "best") & (df.model == model) & (df.phase == "train") & (df.status == "ok")]
    ours = ours[pd.to_numeric(ours.image_size, errors="coerce") == image_size]
    if ours.empty:
        return pd.DataFrame(columns=PUBLISHED_COLUMNS)
    best_row = ours.iloc[-1]
    with resources.files("cnnbench").joinpath("data/published_gpu.csv").open() as f:
        theirs = pd.read_csv(f).query("model == @model and image_size == @image_size")
    family = re.search(r"\b[A-Z]\d{1,3}\b", str(best_row.device_name))
    theirs = theirs.assign(
        who="published by " + theirs.source,
        same_gpu=theirs.device.str.contains(rf"\b{family.group(0)}\b") if family else False,
    )
    mine = {
        "who": f"measured here: {best_row.config} (95% interval +-{best_row.throughput_ci95_img_s:.0f})",
        "device": best_row.device_name,
        "precision": best_row.precision,
        "batch_size": best_row.batch_size,
        "throughput_img_s": best_row.throughput_img_s,
        "stack": f"cnnbench, torch {torch.__version__}, eager or torch.compile, synthetic batch on the device",
        "same_gpu": True,
        "checked": "measured in this run",
    }
    return pd.concat([pd.DataFrame([mine]), theirs], ignore_index=True)[PUBLISHED_COLUMNS]


def best(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and phase: the best confirmed configuration against the seeds' default, on the roofline."""
    rows = df[df.row_kind == "best"]
    return (
        rows[[c for c in BEST_COLUMNS if c in rows]]
        .rename(columns=BEST_COLUMNS)
        .set_index(["model", "phase"])
    )


def race(df: pd.DataFrame) -> pd.DataFrame:
    """Every race window: stage, rung, configuration, throughput and what became of it."""
    cols = (
        "model phase stage rung config status throughput_img_s throughput_ci95_img_s window_time_s "
        "measured_steps fate reused"
    ).split()
    rows = df[df.row_kind.isin(["race", "confirm"])].copy()
    rows.loc[rows.row_kind == "confirm", "fate"] = rows.get("role")
    rows["rung"] = pd.to_numeric(rows.rung, errors="coerce").astype("Int64")
    return rows[[c for c in cols if c in rows]]


def skipped(space: pd.DataFrame) -> pd.DataFrame:
    """Every knob value the search left out, with the reason (one row per device, knob and value)."""
    s = space[~space.searched.astype(str).str.lower().eq("true")]
    return s[["device_name", "knob", "value", "reason"]].drop_duplicates().set_index(["knob", "value"])


def plot(df: pd.DataFrame, path=None):
    """Race windows (dots, by rung) and confirmed throughputs (bars with 95% intervals), per model and phase."""
    groups = list(df[df.row_kind == "best"].groupby(["model", "phase"]))
    if not groups:
        return None
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1.2 + 0.35 * df.config.nunique()), squeeze=False)
    for ax, ((model, phase), _) in zip(axes[:, 0], groups, strict=True):
        g = df[(df.model == model) & (df.phase == phase)]
        conf = g[(g.row_kind == "confirm") & (g.status == "ok")]
        ax.barh(
            conf.config,
            conf.throughput_img_s,
            xerr=conf.throughput_ci95_img_s,
            color="tab:blue",
            alpha=0.4,
            label="confirmed (full protocol, 95% interval)",
        )
        raced = g[(g.row_kind == "race") & (g.status == "ok")]
        for rung, r in raced.groupby("rung"):
            ax.plot(r.throughput_img_s, r.config, "o", ms=4, label=f"race window, rung {int(rung)}")
        ax.set(xlabel="throughput (images/s)", title=f"{model} {phase}: race and confirmation")
        # beside: over no bar
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.tight_layout()
    return save(fig, path)


def notes(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and phase, what qualifies the result: the roof used, energy source or why none, the guard's
    rejections, the batch-size limit and whether the budget ran out."""
    cols = {
        "roof_precision": "roof",
        "bound": "bound",
        "roof_note": "roof note",
        "energy_source": "energy source",
        "energy_note": "energy note",
        "guard_rejected": "rejected by the guard",
        "batch_size_limit_note": "batch-size limit",
        "budget_exhausted_in": "budget ran out in",
    }
    rows = df[df.row_kind == "best"].set_index(["model", "phase"])
    return rows[[c for c in cols if c in rows]].rename(columns=cols).fillna("")


def _pm(value, half, fmt: str) -> str:
    return f"{value:{fmt}} ± {half:{fmt}}" if pd.notna(half) else f"{value:{fmt}}"


def findings(df: pd.DataFrame) -> list[str]:
    """One computed sentence per model and phase: the best configuration, its speedup, roofline and energy."""
    out = []
    for r in df[df.row_kind == "best"].itertuples():
        if r.status != "ok":
            out.append(f"{r.model} {r.phase}: no configuration confirmed ({r.error})")
            continue
        apart = str(getattr(r, "distinguishable_from_default", "True")).lower() != "false"
        default = _pm(r.default_throughput_img_s, r.default_throughput_ci95_img_s, ".1f")
        verdict = (
            f"{_pm(r.speedup_x, r.speedup_ci95_x, '.2f')}x the seeds' default"
            if apart
            else f"not distinguishable from the seeds' default ({default} img/s: the difference is inside its "
            "95% interval)"
        )
        text = (
            f"{r.model} {r.phase}: best {r.config} at {_pm(r.throughput_img_s, r.throughput_ci95_img_s, '.1f')} "
            f"img/s, {verdict} ({r.configs_tried:.0f} configurations tried, {r.pruned:.0f} pruned)"
        )
        roof = getattr(r, "compute_roof_pct", float("nan"))
        if pd.notna(roof):
            text += (
                f"; {r.achieved_gflops:.1f} GFLOP/s = {roof:.0f}% of the measured {r.roof_precision} compute roof, "
                f"{r.bound}-bound, {r.attainable_pct:.0f}% of the attainable"
            )
        else:
            text += f"; not placed on the roofline ({r.roof_note})"
        energy = getattr(r, "energy_j_per_image", float("nan"))
        text += (
            f"; {energy:.3f} J/image ({r.energy_source})"
            if pd.notna(energy)
            else f"; no energy ({r.energy_note})"
        )
        if unguarded := str(getattr(r, "guard_rejected", "")).count("not guarded"):
            text += f"; {unguarded} numerics never raced: the guard's budget (tune_guard_budget_s) ran out"
        out.append(text)
    return out
