"""Seed 002's experiments (06_transfer): fine-tuning from ImageNet weights over lr x batch size, where a
training step's time goes, a profiler trace with the top operators, telemetry timelines, and data-parallel
scaling on torch.distributed.

One small interface, each call measuring into a tidy CSV of the run and returning it as a DataFrame:

    finetune(run)      -> transfer.csv          (per epoch: loss, validation accuracy, epoch time, images/s)
    step_phases(run)   -> step_phases.csv       (every Scenario A model: data wait .. optimizer, sum checked)
    profile(run)       -> profile_ops.csv + trace_<model>.json
    scaling(run)       -> scaling.csv           (torchrun, 1..N processes, efficiency, loss check)
    telemetry(run)     <- transfer_telemetry.csv (series sampled during fine-tuning and scaling)
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from cnnbench import results
from cnnbench.transfer import distributed as _scaling
from cnnbench.transfer import finetuning as _finetune
from cnnbench.transfer import phases as _phases
from cnnbench.transfer import profiling as _profiling
from cnnbench.transfer import timelines as _timelines
from cnnbench.transfer.finetuning import TransferError, check_weights
from cnnbench.transfer.summary import (
    beside_seed,
    learning_curves,
    phase_plot,
    phase_table,
    scaling_plot,
    scaling_table,
    time_to_target,
    top_ops_table,
)

__all__ = ["TransferError", "check", "finetune", "step_phases", "profile", "scaling", "telemetry",
           "time_to_target", "learning_curves", "phase_table", "phase_plot", "top_ops_table", "scaling_table",
           "scaling_plot", "plot_timelines", "beside_seed"]


def _read(run, name: str) -> pd.DataFrame:
    return results.read(run.dir, name)


def check(run) -> str:
    """Before any work: the one line on where the weights come from, or a one-line TransferError."""
    p = run.params
    devices_here = [d.type for d in _finetune.present_devices(p.transfer_devices, run.device)]
    line = check_weights(p.transfer_model, p.pretrained)
    print(line)
    print(f"fine-tuning {p.transfer_model} ({p.optimizer}) on {p.transfer_dataset} at {p.transfer_image_size} px, "
          f"lr {p.transfer_lrs} x batch {p.transfer_batch_sizes}, {p.transfer_epochs} epochs on {', '.join(devices_here)}")
    return line


def finetune(run) -> pd.DataFrame:
    """The lr x batch-size grid on every present device of ``transfer_devices`` -> transfer.csv."""
    _finetune.run_grid(run, log=lambda *_: None)
    return _read(run, "transfer")


def step_phases(run) -> pd.DataFrame:
    """The per-phase breakdown of every Scenario A model's training step -> step_phases.csv."""
    _phases.run_all(run)
    return _read(run, "step_phases")


def profile(run) -> pd.DataFrame:
    """Trace ``profile_steps`` steps of each of ``profile_models`` -> trace_<model>.json, profile_ops.csv."""
    from cnnbench import scenarios
    from cnnbench.measure import engine

    p = run.params
    rows = []
    for model in p.profile_models:
        cfg = scenarios.scenario_a_configs(dataclasses.replace(p, models=[model], phases=["train"]))[0]
        if p.profile_batch_size or p.phase_batch_size:
            cfg = dataclasses.replace(cfg, batch_size=p.profile_batch_size or p.phase_batch_size)
        rows += _profiling.profile_model(cfg, run.device, engine.Protocol.from_params(p), run.dir,
                                         p.profile_steps, p.profile_top_k)
    table = results.table("profile_ops")
    table.plan(run.dir, [{"model": m, "device_kind": run.device.type} for m in p.profile_models], "profile")
    table.file(run.dir).extend(rows)
    return _read(run, "profile_ops")


def scaling(run) -> pd.DataFrame:
    """DistributedDataParallel over 1..N processes launched by torchrun -> scaling.csv."""
    _scaling.run_all(run)
    return _read(run, "scaling")


def telemetry(run) -> pd.DataFrame:
    """The telemetry series sampled during fine-tuning and scaling (empty if the sampler keeps none)."""
    return _read(run, "transfer_telemetry")


def plot_timelines(df: pd.DataFrame, experiment: str, path=None):
    """The series of one experiment (transfer | scaling) over time, one panel per metric."""
    sub = df[df.experiment == experiment] if len(df) else df
    return _timelines.plot(sub, path, title=f"telemetry during {experiment}")
