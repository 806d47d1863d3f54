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

from cnnbench import results
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
    table = results.table("profile_ops")
    kept, rows, planned = table.file(run.dir), [], []
    for model in p.profile_models:
        cfg = scenarios.scenario_a_configs(dataclasses.replace(p, models=[model], phases=["train"]))[0]
        if p.profile_batch_size or p.phase_batch_size:
            cfg = dataclasses.replace(cfg, batch_size=p.profile_batch_size or p.phase_batch_size)
        ident = {**{k: getattr(cfg, k) for k in ("model", "batch_size", "image_size", "num_classes", "precision",
                                                 "memory_format")},
                 "device_kind": run.device.type, "threads": run.threads, "seed": p.seed,
                 "warmup_steps": p.warmup_steps, "profiled_steps": p.profile_steps, "profile_top_k": p.profile_top_k}
        planned.append(ident)
        if kept.finished(ident, table.plan_columns):  # traced before with the same parameters: kept
            continue
        rows += [{**r, **ident} for r in _profiler.profile_model(cfg, run.device, engine.Protocol.from_params(p),
                                                                 run.dir, p.profile_steps, p.profile_top_k)]
    table.plan(run.dir, planned, "profile")
    kept.extend(rows, group=table.plan_columns)
    return results.read(run.dir, "profile_ops")
