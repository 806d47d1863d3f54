"""Where a training step's time goes (06): ``phases(run)`` -> step_phases.csv, ``profile(run)`` ->
profile_ops.csv and trace_<model>.json; tables in .summary."""

from __future__ import annotations

import dataclasses

import pandas as pd

from cnnbench import devices, knobs, models, progress, results
from cnnbench.measure import engine
from cnnbench.steps import profiler as _profiler
from cnnbench.steps import step_phases as _phases
from cnnbench.steps.summary import phase_plot, phase_table, top_ops_table

FINE_TUNING_CLASSES = 2  # seed 002's head: cats vs dogs (002:140)

__all__ = ["phases", "profile", "phase_table", "phase_plot", "top_ops_table"]


def phases(run) -> pd.DataFrame:
    """The per-phase breakdown of every Scenario A model's training step -> step_phases.csv (current rows)."""
    _phases.run_all(run)
    return results.read(run.dir, "step_phases")


def profile(run) -> pd.DataFrame:
    """Seed 002's fine-tuning step (a two-class head) traced for each of ``profile_models`` (current rows)."""
    p = dataclasses.replace(run.params, lr=run.params.transfer_lrs[0])
    batch = p.profile_batch_size or p.transfer_batch_sizes[0]
    b = devices.backend(run.device)
    table = results.table("profile_ops")
    kept, rows, planned, traced_before = table.file(run.dir), [], [], 0
    for model in p.profile_models:
        sizes = (p.transfer_image_size, FINE_TUNING_CLASSES, models.spec(model).in_channels)
        setting = knobs.for_params(p, batch_size=batch, threads=run.threads)
        cfg = engine.Config(model, "train", *sizes, setting=setting)
        ident = {
            **cfg.replace(**knobs.in_force(cfg.setting, b)).columns(),
            "device_kind": b.kind,
            **{k: getattr(p, k) for k in ("seed", "optimizer", "lr", "warmup_steps")},
            "profiled_steps": p.profile_steps,
            "profile_top_k": p.profile_top_k,
        }
        planned.append(ident)
        if kept.finished(ident, table.plan_columns):  # traced before with the same parameters: kept
            traced_before += 1
            continue
        progress.note(f"profiler: {model}, {p.profile_steps} steps")
        ops = _profiler.profile_model(
            cfg, run.device, p, run.dir, p.profile_steps, p.profile_top_k, optimizer=p.optimizer
        )
        rows += [{**r, **ident} for r in ops]
    table.plan(run.dir, planned, "profile")
    kept.extend(rows, group=table.plan_columns)
    progress.resumed(traced_before, len(planned), kept.path.name, "profiled models")
    return results.read(run.dir, "profile_ops")
