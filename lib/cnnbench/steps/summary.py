"""Tables and plots of where a training step's time goes (step_phases.csv, profile_ops.csv)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from cnnbench.plots import save


def phase_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per model: the phases' check against the unsplit step, the phases (ms per step), their sum, the step."""
    ok = df[df.status == "ok"]
    if ok.empty:
        return ok
    wide = ok.pivot_table(index="model", columns="step_phase", values="time_mean_s", sort=False) * 1e3
    wide.columns = [f"{c}_ms" for c in wide.columns]
    per = ok.groupby("model", sort=False).first()
    check = per[["sums_within_5pct", "sum_diff_pct", "sum_diff_ci95_pct", "n_steps"]]
    return check.join(wide).assign(
        phase_sum_ms=per.phase_sum_s * 1e3,
        step_time_ms=per.step_time_s * 1e3,
        step_time_ci95_ms=per.step_time_ci95_s * 1e3,
    )


def phase_plot(df: pd.DataFrame, path: str | Path | None = None):
    """Share of each phase in the step, one stacked bar per model."""
    ok = df[df.status == "ok"]
    if ok.empty:
        return None
    wide = ok.pivot_table(index="model", columns="step_phase", values="share_pct", sort=False)
    fig, ax = plt.subplots(figsize=(9, 4))
    wide.plot.barh(stacked=True, ax=ax)
    ax.set(
        xlabel="share of the training step (%)",
        ylabel="",
        title=f"where a training step's time goes ({ok.device_name.iloc[0]})",
    )
    ax.legend(fontsize=8, bbox_to_anchor=(1, 1))
    return save(fig, path, dpi=110)


def top_ops_table(df: pd.DataFrame, model: str | None = None) -> pd.DataFrame:
    """The top operators per pass (forward, backward, optimizer) with self times in ms and share of the pass."""
    ok = df[df.status == "ok"]
    if model is not None:
        ok = ok[ok.model == model]
    if ok.empty:
        return ok
    return ok.assign(self_cpu_ms=ok.self_cpu_s * 1e3, self_device_ms=ok.self_device_s * 1e3)[
        ["model", "pass", "rank", "op", "calls", "self_cpu_ms", "self_device_ms", "share_of_pass_pct"]
    ]
