"""Transfer learning (06, seed 002): fine-tuning from ImageNet weights over lr x batch size on every present
device, as one small interface measuring into a tidy CSV of the run and returning it as a DataFrame:

    check(run)         one line on where the weights come from (or a TransferError), before any work
    finetune(run)      -> transfer.csv          (per epoch: loss, validation accuracy, epoch time, images/s)

with its tables and plots (:mod:`.summary`). Where a step's time goes is :mod:`cnnbench.steps`, scaling over
devices :mod:`cnnbench.scaling`; the series sampled during each are drawn by its ``telemetry(run, path)`` (from
:mod:`cnnbench.measure.timelines`)."""

from __future__ import annotations

import pandas as pd

from cnnbench import results
from cnnbench.transfer import finetuning as _finetune
from cnnbench.transfer.finetuning import TransferError, check_weights
from cnnbench.transfer.summary import beside_seed, learning_curves, time_to_target

__all__ = [
    "TransferError",
    "check",
    "finetune",
    "time_to_target",
    "learning_curves",
    "beside_seed",
    "telemetry",
]


def check(run) -> str:
    """Before any work: the one line on where the weights come from, or a one-line TransferError."""
    p = run.params
    devices_here = [d.type for d in _finetune.present_devices(p.transfer_devices, run.device)]
    line = check_weights(p.transfer_model, p.pretrained)
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
