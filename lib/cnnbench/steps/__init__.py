"""Where a training step's time goes (06): ``phases(run)`` -> step_phases.csv, ``profile(run)`` ->
profile_ops.csv and trace_<model>.json, with their tables and plot."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from cnnbench import devices, knobs, models, progress, results
from cnnbench.measure import engine
from cnnbench.plots import save
from cnnbench.steps import profiler as _profiler
from cnnbench.steps import step_phases as _phases

FINE_TUNING_CLASSES = 2  # seed 002's head: cats vs dogs (002:140)


def phases(run) -> pd.DataFrame:
    """The per-phase breakdown of every Scenario A model's training step -> step_phases.csv (current rows)."""
    _phases.run_all(run)
    return results.read(run.dir, "step_phases")


def profile(run) -> pd.DataFrame:
    """Seed 002's fine-tuning step (a two-class head) traced for each of ``profile_models`` (current rows)."""
    p = dataclasses.replace(run.params, lr=run.params.transfer_lrs[0])
    batch = p.profile_batch_size or p.transfer_batch_sizes[0]
    b = devices.backend(run.device)
    table = results.table("profile_ops")
    kept, rows, planned, traced_before = table.file(run.dir), [], [], 0
    for model in p.profile_models:
        sizes = (p.transfer_image_size, FINE_TUNING_CLASSES, models.spec(model).in_channels)
        setting = knobs.for_params(p, batch_size=batch, threads=run.threads)
        cfg = engine.Config(model, "train", *sizes, setting=setting)
        ident = _phases.identity(cfg, b, p, ("seed", "optimizer", "lr", "warmup_steps"))
        ident |= {"profiled_steps": p.profile_steps, "profile_top_k": p.profile_top_k}
        planned.append(ident)
        if kept.finished(ident, table.plan_columns):  # traced before with the same parameters: kept
            traced_before += 1
            continue
        progress.note(f"profiler: {model}, {p.profile_steps} steps")
        ops = _profiler.profile_model(
            cfg, run.device, p, run.dir, p.profile_steps, p.profile_top_k, optimizer=p.optimizer
        )
        rows += [{**r, **ident} for r in ops]
    table.plan(run.dir, planned, "profile")
    kept.extend(rows, group=table.plan_columns)
    progress.resumed(traced_before, len(planned), kept.path.name, "profiled models")
    return results.read(run.dir, "profile_ops")


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
