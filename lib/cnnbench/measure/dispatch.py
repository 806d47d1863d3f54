"""The host's cost of issuing a step: a model's step at a tiny input, whose device time an accelerator hides,
timed over TINY_STEPS steps synced once, per op the FLOP counter counts (used by :mod:`cnnbench.predict`)."""

from __future__ import annotations

from cnnbench import models
from cnnbench.measure import engine, timing, traffic

TINY_BATCH, TINY_PX, TINY_STEPS = 2, 32, 20


def host_step(p, device, model: str, phase: str, precision: str) -> dict:
    """One row of host_steps.csv: ``model``'s ``phase`` step at the tiny input on ``device`` in ``precision``, eager
    in the default memory format (the row's key names only the precision; ``ops`` is the eager count)."""
    device = timing.backend_of(device)  # one backend for the workload and a failure's row
    cfg = engine.config(p, model, phase, {"precision": precision}, batch_size=TINY_BATCH)
    cfg = cfg if models.spec(model).own_data else cfg.replace(image_size=TINY_PX)
    row = {"model": model, "phase": phase, "precision": cfg.precision, "image_size": cfg.image_size}
    try:
        with engine.Workload(cfg, device, p) as work:
            for _ in range(3):
                work.step()
            timer = timing.StepTimer(work.backend, use_events=False)  # no events: the host's issuing alone
            seconds = timer.window(work.step, TINY_STEPS)[1] / TINY_STEPS
    except Exception as err:  # noqa: BLE001 - a model that cannot run tiny is a row, the rest go on
        return {**row, **engine.failure(err, device)}
    ops = len(traffic.count_step(model, TINY_BATCH, cfg.image_size, cfg.num_classes, phase, cfg.precision))
    return {**row, "status": "ok", "ops": ops, "host_step_s": seconds, "host_us_per_op": 1e6 * seconds / ops}
