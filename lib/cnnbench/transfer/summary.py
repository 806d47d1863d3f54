"""Tables and plots of 06's tidy CSVs (transfer.csv, step_phases.csv, profile_ops.csv, scaling.csv)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from cnnbench import published
from cnnbench.plots import save

GRID = ["device_kind", "device_name", "model", "image_size", "optimizer", "pretrained", "lr", "batch_size"]


def _save(fig, path):
    return save(fig, path, dpi=110)


def time_to_target(df: pd.DataFrame, target: float | None = None) -> pd.DataFrame:
    """Per device and grid point: epochs run, final and best validation accuracy, mean images/s (all images
    over all synced epoch time), and the training time (validation excluded) until validation accuracy first
    reached ``target`` (NaN: not reached)."""
    ok = df[df.status == "ok"] if len(df) else df
    rows = []
    for key, g in ok.groupby(GRID, sort=False):
        g = g.sort_values("epoch")
        t = target if target is not None else float(g.target_accuracy.iloc[0])
        hit = g[g.val_accuracy >= t]
        rows.append({**dict(zip(GRID, key, strict=True)), "epochs": int(g.epoch.max()),
                     "final_val_accuracy": g.val_accuracy.iloc[-1], "best_val_accuracy": g.val_accuracy.max(),
                     "throughput_img_s": g.train_images.sum() / g.epoch_time_s.sum(),
                     "epoch_time_mean_s": g.epoch_time_s.mean(), "target_accuracy": t,
                     "epoch_reached": int(hit.epoch.iloc[0]) if len(hit) else math.nan,
                     "time_to_target_s": hit.elapsed_train_s.iloc[0] if len(hit) else math.nan})
    return pd.DataFrame(rows)


def learning_curves(df: pd.DataFrame, path: str | Path | None = None):
    """Training loss per epoch and validation accuracy against elapsed training time, per grid point."""
    ok = df[df.status == "ok"] if len(df) else df
    if ok.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for key, g in ok.groupby(["device_kind", "lr", "batch_size"], sort=False):
        label = f"{key[0]} lr={key[1]:g} bs={key[2]}"
        axes[0].plot(g.epoch, g.train_loss, marker="o", label=label)
        axes[1].plot(g.elapsed_train_s, 100 * g.val_accuracy, marker="o", label=label)
    axes[0].set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    axes[1].set(xlabel="elapsed training time (s)", ylabel="validation accuracy (%)")
    target = ok.target_accuracy.iloc[0]
    axes[1].axhline(100 * target, ls="--", color="grey", lw=1, label=f"target {100 * target:g}%")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def phase_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per model: whether the phases agree with the unsplit step (within 5% or not, the difference, its 95%
    interval, steps of each kind) first, where a wide table cannot scroll it out of sight; then the phases
    (mean ms per step), their sum and the unsplit step time with its 95% interval."""
    ok = df[df.status == "ok"] if len(df) else df
    if ok.empty:
        return ok
    wide = ok.pivot_table(index="model", columns="step_phase", values="time_mean_s", sort=False) * 1e3
    wide.columns = [f"{c}_ms" for c in wide.columns]
    per = ok.groupby("model", sort=False).first()
    check = pd.DataFrame({"sums_within_5pct": per.sums_within_5pct, "sum_diff_pct": per.sum_diff_pct,
                          **_optional(per, "sum_diff_ci95_pct"), "n_steps": per.n_steps}, index=per.index)
    return check.join(wide).assign(phase_sum_ms=per.phase_sum_s * 1e3, step_time_ms=per.step_time_s * 1e3,
                                   step_time_ci95_ms=per.step_time_ci95_s * 1e3)


def _optional(per: pd.DataFrame, column: str) -> dict:
    """``column`` if the rows have it (rows written before it was measured do not)."""
    return {column: per[column]} if column in per else {}


def phase_plot(df: pd.DataFrame, path: str | Path | None = None):
    """Share of each phase in the step, one stacked bar per model."""
    ok = df[df.status == "ok"] if len(df) else df
    if ok.empty:
        return None
    wide = ok.pivot_table(index="model", columns="step_phase", values="share_pct", sort=False)
    fig, ax = plt.subplots(figsize=(9, 4))
    wide.plot.barh(stacked=True, ax=ax)
    ax.set(xlabel="share of the training step (%)", ylabel="",
           title=f"where a training step's time goes ({ok.device_name.iloc[0]})")
    ax.legend(fontsize=8, bbox_to_anchor=(1, 1))
    return _save(fig, path)


def top_ops_table(df: pd.DataFrame, model: str | None = None) -> pd.DataFrame:
    """The top operators per pass (forward, backward, optimizer) with self times in ms and share of the pass."""
    ok = df[df.status == "ok"] if len(df) else df
    if model is not None and len(ok):
        ok = ok[ok.model == model]
    if ok.empty:
        return ok
    return ok.assign(self_cpu_ms=ok.self_cpu_s * 1e3, self_device_ms=ok.self_device_s * 1e3)[
        ["model", "pass", "rank", "op", "calls", "self_cpu_ms", "self_device_ms", "share_of_pass_pct"]]


def scaling_table(df: pd.DataFrame) -> pd.DataFrame:
    cols = ["world_size", "backend", "per_device_batch", "global_batch", "throughput_img_s", "throughput_ci95_img_s",
            "speedup", "scaling_efficiency_pct", "loss_first", "loss_vs_one_process_max_abs_diff",
            "loss_matches_one_process", "status", "error"]
    return df[[c for c in cols if c in df]] if len(df) else df


def scaling_plot(df: pd.DataFrame, path: str | Path | None = None):
    """Throughput (95% interval) and scaling efficiency against the number of processes/devices."""
    ok = df[df.status == "ok"] if len(df) else df
    if ok.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
    axes[0].errorbar(ok.world_size, ok.throughput_img_s, yerr=ok.throughput_ci95_img_s, marker="o", capsize=3)
    axes[0].set(xlabel="devices (processes)", ylabel="throughput (images/s)", ylim=(0, None))
    axes[0].set_xticks(sorted(int(w) for w in ok.world_size.unique()))  # whole devices, never 1.2 of one
    axes[1].bar(ok.world_size.astype(str), ok.scaling_efficiency_pct)
    axes[1].axhline(100, ls="--", color="grey", lw=1)
    axes[1].set(xlabel="devices (processes)", ylabel="scaling efficiency (%)")
    fig.tight_layout()
    return _save(fig, path)


def beside_seed(ttt: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's training times (``published.TIMES_002``; as images/s over its epochs x training images) beside
    our measured fine-tuning throughput on the same kind of device and batch size (NaN where we have none; its CPU
    run states no batch size). Seed 002 trained DenseNet-121 at 224 px: compare like with like only when our model
    and size match."""
    seed, epochs = published.SEED_002, published.setup("002")["epochs"]
    images = epochs * published.setup("002")["train_images"]
    rows = []
    for r in published.TIMES_002.itertuples():
        kind, bs, seconds = r.device_class, None if pd.isna(r.batch_size) else int(r.batch_size), r.train_20_epochs_h * 3600
        ours = ttt[(ttt.device_kind == kind) & ((ttt.batch_size == bs) if bs else True)] if len(ttt) else ttt
        rows.append({"device_kind": kind, "batch_size": bs if bs else "not stated",
                     f"published by {seed}: {epochs}-epoch training (h)": seconds / 3600,
                     f"published by {seed}: implied img/s": images / seconds,
                     "ours: throughput_img_s (best lr)": ours.throughput_img_s.max() if len(ours) else math.nan,
                     **{f"ours: {c}": ours[c].iloc[0] if len(ours) else "" for c in ("device_name", "model", "image_size")}})
    return pd.DataFrame(rows)
