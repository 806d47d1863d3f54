"""The correctness guard: a faster configuration only counts if it trains the same network.

From the same initialisation and fixed batch, ``steps`` training steps run in the candidate's numerics; the
last loss must stay within ``tolerance`` of fp32 eager NCHW's, as a share of the progress fp32 eager made
(first loss - last loss). Eval steps compare the loss of one forward pass, relative to the loss itself."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from cnnbench import models
from cnnbench.measure import engine


@dataclass(frozen=True)
class Verdict:
    loss: float
    reference_loss: float
    diff_pct: float  # |loss - reference| / the reference's progress (or |reference| in eval), percent
    ok: bool
    reason: str  # why it was rejected ('' when ok)

    def columns(self) -> dict:
        return {f"guard_{k}": v for k, v in asdict(self).items()}


def loss_after(cfg: engine.Config, device: torch.device, p, steps: int) -> tuple[float, float]:
    """(first, last) loss of ``steps`` training steps of ``cfg`` on one batch made on the device; eval: one
    forward's, twice."""
    with engine.Workload(cfg.replace(data_mode="device"), device, p) as work:
        if cfg.phase == "train":
            losses = []
            for _ in range(steps):
                work.train_step()
                losses.append(work.check_loss())
            return losses[0], losses[-1]
        x, y = work.next_batch()
        with torch.inference_mode(), work.backend.autocast(cfg.precision):
            loss = float(work.loss_fn(models.logits(work.forward(x)).float(), y))
            return loss, loss


def judge(loss: float, reference: float, tolerance: float, reference_start: float | None = None) -> Verdict:
    """Accept ``loss`` when finite and within ``tolerance`` of ``reference``, as a share of the reference's
    progress ``reference_start - reference`` (or of ``|reference|`` when it made none, as in eval)."""
    if not math.isfinite(loss):
        return Verdict(loss, reference, math.nan, False, f"loss is {loss}")
    progress = abs(reference_start - reference) if reference_start is not None else 0.0
    scale = progress if progress > 1e-6 * max(abs(reference), 1.0) else abs(reference)
    rel = abs(loss - reference) / max(scale, 1e-12)
    what = "of fp32 eager's progress" if scale == progress else "of fp32 eager's loss"
    why = f"loss {loss:.4f} vs fp32 eager {reference:.4f}: {rel:.1%} {what} apart > tolerance {tolerance:.0%}"
    return Verdict(loss, reference, 100 * rel, not rel > tolerance, why if rel > tolerance else "")


def check(
    numerics_list, measure_loss, tolerance: float, reference: tuple, spent=lambda: False
) -> dict[tuple, Verdict]:
    """Verdicts for every numerics of ``numerics_list`` against ``reference``: ``measure_loss(numerics) ->
    (first, last)``; a failure to run is a rejection, and once ``spent()`` the rest are rejected as such."""
    start, ref = measure_loss(reference)
    out = {reference: Verdict(ref, ref, 0.0, True, "")}
    spent_why = "not guarded: tune_guard_budget_s was spent (the guard's steps and compiles count in it)"
    for numerics in numerics_list:
        if numerics in out:
            continue
        if spent():
            out[numerics] = Verdict(math.nan, ref, math.nan, False, spent_why)
            continue
        try:
            out[numerics] = judge(measure_loss(numerics)[1], ref, tolerance, start)
        except Exception as err:  # noqa: BLE001 - a configuration that cannot run cannot win
            out[numerics] = Verdict(math.nan, ref, math.nan, False, engine.failure(err)["error"][:200])
    return out
