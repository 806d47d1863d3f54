"""Data-parallel scaling (06): DistributedDataParallel over 1..N processes launched by torchrun
(:mod:`.launch`, each running :mod:`.ddp`), with scaling efficiency and a check that the losses match one
process:

    run(run) -> scaling.csv   (+ the sampled series of every rank in transfer_telemetry.csv)

and its table and plot (:mod:`.summary`)."""

from __future__ import annotations

import pandas as pd

from cnnbench import results
from cnnbench.scaling import launch as _launch
from cnnbench.scaling.summary import scaling_plot as plot
from cnnbench.scaling.summary import scaling_table as table

__all__ = ["run", "table", "plot", "telemetry"]


def run(run) -> pd.DataFrame:
    """DistributedDataParallel over 1..N processes launched by torchrun -> scaling.csv (current rows)."""
    _launch.run_all(run)
    return results.read(run.dir, "scaling")


def telemetry(run, path=None):
    """The series every rank sampled during scaling (transfer_telemetry.csv), over time, one panel per metric."""
    from cnnbench.measure import timelines

    return timelines.plot_experiment(timelines.read(run), "scaling", path)
