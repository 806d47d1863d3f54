"""Presentation of tuning.csv and tuning_space.csv for 07_tuning and the analysis."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

BEST_COLUMNS = {
    "model": "model", "phase": "phase", "config": "best configuration", "throughput_img_s": "best img/s",
    "throughput_ci95_img_s": "± 95%", "default_throughput_img_s": "default img/s",
    "default_throughput_ci95_img_s": "default ± 95%", "speedup_x": "speedup (x)", "speedup_ci95_x": "speedup ± 95%",
    "achieved_gflops": "achieved GFLOP/s", "roof_precision": "roof", "compute_roof_pct": "% of compute roof",
    "bound": "bound", "attainable_pct": "% of attainable", "energy_j_per_image": "J/image",
    "default_energy_j_per_image": "default J/image", "configs_tried": "tried", "pruned": "pruned",
    "failed": "failed", "batch_size_limit": "batch limit",
}


def best(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and phase: the best confirmed configuration against the seeds' default, on the roofline."""
    rows = df[df.row_kind == "best"]
    return rows[[c for c in BEST_COLUMNS if c in rows]].rename(columns=BEST_COLUMNS).set_index(["model", "phase"])


def race(df: pd.DataFrame) -> pd.DataFrame:
    """Every race window: stage, rung, configuration, throughput and what became of it."""
    cols = ["model", "phase", "stage", "rung", "config", "status", "throughput_img_s", "throughput_ci95_img_s",
            "window_time_s", "measured_steps", "fate", "reused"]
    rows = df[df.row_kind.isin(["race", "confirm"])].copy()
    rows.loc[rows.row_kind == "confirm", "fate"] = rows.get("role")
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
        ax.barh(conf.config, conf.throughput_img_s, xerr=conf.throughput_ci95_img_s, color="tab:blue", alpha=0.4,
                label="confirmed (full protocol, 95% interval)")
        raced = g[(g.row_kind == "race") & (g.status == "ok")]
        for rung, r in raced.groupby("rung"):
            ax.plot(r.throughput_img_s, r.config, "o", ms=4, label=f"race window, rung {rung}")
        ax.set(xlabel="throughput (images/s)", title=f"{model} {phase}: race and confirmation")
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
