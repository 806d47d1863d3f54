"""The correctness guard: a faster configuration only counts if it trains the same network.

From the same initialisation (the engine seeds the model) and the same fixed batch, ``steps`` training steps
are run in the candidate's precision, memory format and compile mode; the loss of the last step must stay
within ``tolerance`` (relative) of fp32 eager NCHW's. Eval steps compare the loss of one forward pass.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, replace

import torch

from cnnbench import devices, engine, models
from cnnbench.tuning.knobs import applied, autocast

REFERENCE = ("fp32", "nchw", "off")


@dataclass(frozen=True)
class Verdict:
    loss: float
    reference_loss: float
    diff_pct: float  # |loss - reference| / |reference|, percent
    ok: bool
    reason: str  # why it was rejected ('' when ok)

    def columns(self) -> dict:
        return {"guard_loss": self.loss, "guard_reference_loss": self.reference_loss,
                "guard_diff_pct": self.diff_pct, "guard_ok": self.ok, "guard_reason": self.reason}


def loss_after(cfg: engine.Config, device: torch.device, protocol: engine.Protocol, numerics: tuple[str, str, str],
               steps: int, threads: int) -> float:
    """The loss after ``steps`` training steps (or of one eval forward) of ``cfg`` in ``numerics``."""
    precision, memory_format, mode = numerics
    cfg = replace(cfg, precision=precision, memory_format=memory_format, compile=mode != "off", data_mode="device")
    work = None
    try:
        with applied(threads, mode):
            work = engine.Workload(cfg, device, protocol)
            if cfg.phase == "train":
                for _ in range(steps):
                    work.train_step()
                return work.check_loss()
            x, y = work.next_batch()
            with torch.inference_mode(), autocast(device, precision):
                return float(work.loss_fn(models.logits(work.forward(x)).float(), y))
    finally:
        del work
        gc.collect()
        devices.empty_cache(device)


def judge(loss: float, reference: float, tolerance: float) -> Verdict:
    """Accept ``loss`` when it is finite and within ``tolerance`` (relative) of ``reference``."""
    if not math.isfinite(loss):
        return Verdict(loss, reference, math.nan, False, f"loss is {loss}")
    rel = abs(loss - reference) / max(abs(reference), 1e-12)
    if rel > tolerance:
        return Verdict(loss, reference, 100 * rel, False,
                       f"loss {loss:.4f} vs fp32 eager {reference:.4f}: {rel:.1%} apart > tolerance {tolerance:.1%}")
    return Verdict(loss, reference, 100 * rel, True, "")


def check(numerics_list, measure_loss, tolerance: float) -> dict[tuple, Verdict]:
    """Verdicts for every numerics of ``numerics_list`` against :data:`REFERENCE`.

    ``measure_loss(numerics) -> float`` runs the steps (tests pass a fake); a failure to run is a rejection.
    """
    ref = measure_loss(REFERENCE)
    out = {REFERENCE: Verdict(ref, ref, 0.0, True, "")}
    for numerics in numerics_list:
        if numerics in out:
            continue
        try:
            out[numerics] = judge(measure_loss(numerics), ref, tolerance)
        except Exception as err:  # noqa: BLE001 - a configuration that cannot run cannot win
            out[numerics] = Verdict(math.nan, ref, math.nan, False, engine.failure(err)["error"][:200])
    return out
