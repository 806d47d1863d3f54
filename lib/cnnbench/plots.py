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


def _label(df: pd.DataFrame) -> pd.Series:
    return df.precision + " " + df.memory_format


def throughput(df: pd.DataFrame, path: str | Path | None = None):
    """Throughput per model, train and eval, with the 95% interval as error bars."""
    ok = df[df.status == "ok"].assign(variant=_label(df))
    phases = list(dict.fromkeys(ok.phase))
    fig, axes = plt.subplots(1, max(len(phases), 1), figsize=(6 * max(len(phases), 1), 4), squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=False):
        g = ok[ok.phase == phase]
        variants = list(dict.fromkeys(g.variant))
        width = 0.8 / len(variants)
        models = list(dict.fromkeys(g.model))
        for i, v in enumerate(variants):
            gv = g[g.variant == v].set_index("model").reindex(models)
            xs = [j + i * width for j in range(len(models))]
            ax.bar(xs, gv.throughput_img_s, width, yerr=gv.throughput_ci95_img_s, capsize=3, label=v)
        ax.set_xticks([j + width * (len(variants) - 1) / 2 for j in range(len(models))], models, rotation=30)
        ax.set(yscale="log", ylabel="throughput (images/s)", title=f"{phase} ({g.device_name.iloc[0]})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)


def batch_sweep(df: pd.DataFrame, knees: pd.DataFrame | None = None, path: str | Path | None = None):
    """Throughput, achieved GFLOP/s and peak memory against batch size; failures marked at the axis bottom."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    mem_col = "peak_device_mem_mb" if df.get("peak_device_mem_mb", pd.Series(dtype=float)).notna().any() else "peak_rss_mb"
    for (model, phase), g in df.groupby(["model", "phase"]):
        g = g.sort_values("batch_size")
        ok = g[g.status == "ok"]
        label = f"{model} {phase}"
        line = axes[0].errorbar(ok.batch_size, ok.throughput_img_s, yerr=ok.throughput_ci95_img_s, marker="o",
                                capsize=3, label=label)
        color = line[0].get_color()
        axes[1].plot(ok.batch_size, ok.achieved_gflops, marker="o", color=color, label=label)
        if mem_col in ok:
            axes[2].plot(ok.batch_size, ok[mem_col], marker="o", color=color, label=label)
        for status, marker in (("oom", "x"), ("unstable", "^"), ("error", "s")):
            bad = g[g.status == status]
            if len(bad):
                axes[0].scatter(bad.batch_size, [ok.throughput_img_s.min() if len(ok) else 1] * len(bad), marker=marker,
                                s=80, color=color, label=f"{label}: {status}")
        if knees is not None:
            k = knees[(knees.model == model) & (knees.phase == phase)]
            if len(k) and len(ok):
                kb = int(k.knee_batch_size.iloc[0])
                y = ok[ok.batch_size == kb].throughput_img_s
                axes[0].scatter([kb], y, s=200, facecolors="none", edgecolors=color, linewidths=2)
    axes[0].set(xscale="log", yscale="log", xlabel="batch size", ylabel="throughput (images/s)",
                title="throughput (circle: smallest batch within 5% of best)")
    axes[1].set(xscale="log", yscale="log", xlabel="batch size", ylabel="achieved GFLOP/s")
    axes[2].set(xscale="log", xlabel="batch size", ylabel=f"{mem_col.replace('_mb', '')} (MiB)")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path)
