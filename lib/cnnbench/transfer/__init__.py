"""Transfer learning (06, seed 002): ``check(run)`` (where the weights come from, before any work) and
``finetune(run)`` (the lr x batch-size grid on every present device -> transfer.csv), its tables and plots, and
``telemetry(run, path)``."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import MaxNLocator

from cnnbench import published, results
from cnnbench.plots import save
from cnnbench.transfer import finetuning as _finetune
from cnnbench.transfer.finetuning import TransferError as TransferError


def check(run) -> str:
    """Before any work: the one line on where the weights come from, or a one-line TransferError."""
    p = run.params
    devices_here = [d.type for d in _finetune.present_devices(p.transfer_devices, run.device)]
    line = _finetune.check_weights(p.transfer_model, p.pretrained)
    print(line)
    print(
        f"fine-tuning {p.transfer_model} ({p.optimizer}) on {p.transfer_dataset} at {p.transfer_image_size} px, "
        f"lr {p.transfer_lrs} x batch {p.transfer_batch_sizes}, {p.transfer_epochs} epochs on {', '.join(devices_here)}"
    )
    return line


def finetune(run) -> pd.DataFrame:
    """The lr x batch-size grid on every present device of ``transfer_devices`` -> transfer.csv."""
    _finetune.run_grid(run, log=lambda *_: None)
    return results.read(run.dir, "transfer")


def telemetry(run, path=None):
    """The series sampled during fine-tuning (transfer_telemetry.csv), over time, one panel per metric."""
    from cnnbench.measure import timelines

    return timelines.plot_experiment(timelines.read(run), "transfer", path)


GRID = ["device_kind", "device_name", "model", "image_size", "optimizer", "pretrained", "lr", "batch_size"]


def time_to_target(df: pd.DataFrame, target: float | None = None) -> pd.DataFrame:
    """Per device and grid point: epochs run, final and best validation accuracy, mean images/s (all images
    over all synced epoch time), and the training time (validation excluded) until validation accuracy first
    reached ``target`` (NaN: not reached)."""
    ok = df[df.status == "ok"]
    rows = []
    for key, g in ok.groupby(GRID, sort=False):
        g = g.sort_values("epoch")
        t = target if target is not None else float(g.target_accuracy.iloc[0])
        hit = g[g.val_accuracy >= t]
        rows.append(
            {
                **dict(zip(GRID, key, strict=True)),
                "epochs": int(g.epoch.max()),
                "final_val_accuracy": g.val_accuracy.iloc[-1],
                "best_val_accuracy": g.val_accuracy.max(),
                "throughput_img_s": g.train_images.sum() / g.epoch_time_s.sum(),
                "epoch_time_mean_s": g.epoch_time_s.mean(),
                "target_accuracy": t,
                "epoch_reached": int(hit.epoch.iloc[0]) if len(hit) else math.nan,
                "time_to_target_s": hit.elapsed_train_s.iloc[0] if len(hit) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def learning_curves(df: pd.DataFrame, path: str | Path | None = None):
    """Training loss per epoch and validation accuracy against elapsed training time, per grid point."""
    ok = df[df.status == "ok"]
    if ok.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for key, g in ok.groupby(["device_kind", "lr", "batch_size"], sort=False):
        label = f"{key[0]} lr={key[1]:g} bs={key[2]}"
        axes[0].plot(g.epoch, g.train_loss, marker="o", label=label)
        axes[1].plot(g.elapsed_train_s, 100 * g.val_accuracy, marker="o", label=label)
    axes[0].set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    axes[0].set_xlim(ok.epoch.min() - 0.5, ok.epoch.max() + 0.5)  # a single epoch too at a whole epoch
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole epochs, never epoch 1.2
    axes[1].set(xlabel="elapsed training time (s)", ylabel="validation accuracy (%)", xlim=(0, None))
    target = ok.target_accuracy.iloc[0]
    axes[1].axhline(100 * target, ls="--", color="grey", lw=1, label=f"target {100 * target:g}%")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the panel, over no point
    fig.tight_layout()
    return save(fig, path, dpi=110)


def beside_seed(ttt: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's training times (``published.TIMES_002``; as images/s over its epochs x training images)
    beside our fine-tuning on the same kind of device and batch size (its CPU run states no batch size: any of
    ours): the grid point whose validation accuracy went highest, with its lr, that accuracy and its images/s
    (a rate of a learning rate that never learned would be no answer). Compare like with like only where our
    model and resolution are the ones the seed trained (it prints no resolution)."""
    seed, epochs = published.SEED_002, published.setup("002")["epochs"]
    images = epochs * published.setup("002")["train_images"]
    rows = []
    for r in published.TIMES_002.itertuples():
        kind, seconds = r.device_class, r.train_20_epochs_h * 3600
        bs = None if pd.isna(r.batch_size) else int(r.batch_size)
        ours = ttt[(ttt.device_kind == kind) & ((ttt.batch_size == bs) if bs else True)] if len(ttt) else ttt
        best = ours.loc[ours.best_val_accuracy.idxmax()] if len(ours) else pd.Series(dtype=object)
        rows.append(
            {
                "device_kind": kind,
                "batch_size": bs if bs else "not stated",
                f"published by {seed}: {epochs}-epoch training (h)": seconds / 3600,
                f"published by {seed}: implied img/s": images / seconds,
                **{
                    f"ours: {c}": best.get(c, math.nan)
                    for c in ("lr", "best_val_accuracy", "throughput_img_s")
                },
                **{f"ours: {c}": best.get(c, "") for c in ("device_name", "model", "image_size")},
            }
        )
    return pd.DataFrame(rows)
