"""Where a training step's time goes (06, seed 002's profiler question, asked of every Scenario A model):

    phases(run)   -> step_phases.csv   (data wait, host-to-device copy, forward, loss, backward, optimizer: each
                                        phase timed with the device synchronised at its edges, their sum checked
                                        against the unsplit step)
    profile(run)  -> profile_ops.csv + trace_<model>.json (torch.profiler: the top operators of each pass)

and their tables and plots (:mod:`.summary`).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from cnnbench import progress, results
from cnnbench.steps import profiler as _profiler
from cnnbench.steps import step_phases as _phases
from cnnbench.steps.summary import phase_plot, phase_table, top_ops_table

__all__ = ["phases", "profile", "phase_table", "phase_plot", "top_ops_table"]


def phases(run) -> pd.DataFrame:
    """The per-phase breakdown of every Scenario A model's training step -> step_phases.csv (current rows)."""
    _phases.run_all(run)
    return results.read(run.dir, "step_phases")


def profile(run) -> pd.DataFrame:
    """Trace ``profile_steps`` steps of each of ``profile_models`` -> trace_<model>.json, profile_ops.csv."""
    from cnnbench import scenarios
    from cnnbench.measure import engine

    p = run.params
    rows = []
    for model in p.profile_models:
        progress.note(f"profiler: {model}, {p.profile_steps} steps")
        cfg = scenarios.scenario_a_configs(dataclasses.replace(p, models=[model], phases=["train"]))[0]
        if p.profile_batch_size or p.phase_batch_size:
            cfg = dataclasses.replace(cfg, batch_size=p.profile_batch_size or p.phase_batch_size)
        rows += _profiler.profile_model(cfg, run.device, engine.Protocol.from_params(p), run.dir,
                                        p.profile_steps, p.profile_top_k)
    table = results.table("profile_ops")
    table.plan(run.dir, [{"model": m, "device_kind": run.device.type} for m in p.profile_models], "profile")
    table.file(run.dir).extend(rows)
    return results.read(run.dir, "profile_ops")
