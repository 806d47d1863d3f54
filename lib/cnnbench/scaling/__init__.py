"""Data-parallel scaling (06): ``run(run)`` -> scaling.csv, DistributedDataParallel over 1..N processes
(:mod:`.launch`, :mod:`.ddp`) with scaling efficiency and a loss check against one process, and its table and
plot (:mod:`.summary`)."""

from __future__ import annotations

import pandas as pd

from cnnbench import results

__all__ = ["run", "table", "plot", "telemetry"]


def __getattr__(name: str):
    """``table`` and ``plot`` (:mod:`.summary`), imported when first asked for: every torchrun rank imports this
    package for :mod:`.ddp`, and needs neither them nor the plotting stack they import."""
    if name in ("table", "plot"):
        from cnnbench.scaling import summary

        return {"table": summary.scaling_table, "plot": summary.scaling_plot}[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(run) -> pd.DataFrame:
    """DistributedDataParallel over 1..N processes launched by torchrun -> scaling.csv (current rows)."""
    from cnnbench.scaling import launch

    launch.run_all(run)
    return results.read(run.dir, "scaling")


def telemetry(run, path=None):
    """The series every rank sampled during scaling (transfer_telemetry.csv), over time, one panel per metric."""
    from cnnbench.measure import timelines

    return timelines.plot_experiment(timelines.read(run), "scaling", path)
