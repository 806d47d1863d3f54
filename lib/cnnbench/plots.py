"""Plots of tidy results, units on every axis; each function returns the figure and saves it when asked."""

from __future__ import annotations

from pathlib import Path

import matplotlib

if matplotlib.get_backend().lower() in ("agg", "") or not matplotlib.get_backend():
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

sns.set_theme(style="whitegrid", context="notebook")


def save(fig, path: str | Path | None):
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def complexity(df: pd.DataFrame, path: str | Path | None = None):
    """Training GFLOPs per image and activation memory per image, per model, at each counted resolution."""
    data = df.assign(resolution=df.image_size.astype(str) + "x" + df.image_size.astype(str))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    sns.barplot(data=data, x="model", y="gflops_train", hue="resolution", ax=axes[0])
    axes[0].set(yscale="log", ylabel="training GFLOP per image (fwd+bwd)", xlabel="")
    sns.barplot(data=data, x="model", y="activation_mb", hue="resolution", ax=axes[1])
    axes[1].set(yscale="log", ylabel="saved activations per image (MiB)", xlabel="")
    for ax in axes:
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return save(fig, path)
