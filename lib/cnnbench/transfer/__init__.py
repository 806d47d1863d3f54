"""Transfer learning (06, seed 002): ``check(run)`` (where the weights come from, before any work) and
``finetune(run)`` (the lr x batch-size grid on every present device -> transfer.csv), with its tables and plots
(:mod:`.summary`) and ``telemetry(run, path)``."""

from __future__ import annotations

import pandas as pd

from cnnbench import results
from cnnbench.transfer import finetuning as _finetune
from cnnbench.transfer.finetuning import TransferError as TransferError
from cnnbench.transfer.finetuning import check_weights
from cnnbench.transfer.summary import beside_seed as beside_seed
from cnnbench.transfer.summary import learning_curves as learning_curves
from cnnbench.transfer.summary import time_to_target as time_to_target


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
