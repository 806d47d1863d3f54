"""Data-parallel scaling (06): ``run(run)`` -> scaling.csv, DistributedDataParallel over 1..N processes
(:mod:`.launch`, :mod:`.ddp`) with scaling efficiency and a loss check against one process, its table and plot.
Every torchrun rank imports this package for :mod:`.ddp`: the plotting stack is imported only to plot."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cnnbench import results


def run(run) -> pd.DataFrame:
    """DistributedDataParallel over 1..N processes launched by torchrun -> scaling.csv (current rows)."""
    from cnnbench.scaling import launch

    launch.run_all(run)
    return results.read(run.dir, "scaling")


def table(df: pd.DataFrame) -> pd.DataFrame:
    cols = (
        "world_size backend per_device_batch global_batch throughput_img_s throughput_ci95_img_s speedup "
        "scaling_efficiency_pct loss_first loss_vs_one_process_max_abs_diff loss_matches_one_process status "
        "error"
    ).split()
    return df[[c for c in cols if c in df]] if len(df) else df


def plot(df: pd.DataFrame, path: str | Path | None = None):
    """Throughput (95% interval) and scaling efficiency against the number of processes/devices."""
    import matplotlib.pyplot as plt

    from cnnbench.plots import save

    ok = df[df.status == "ok"]
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
    return save(fig, path, dpi=110)


def telemetry(run, path=None):
    """The series every rank sampled during scaling (transfer_telemetry.csv), over time, one panel per metric."""
    from cnnbench.measure import timelines

    return timelines.plot_experiment(timelines.read(run), "scaling", path)
