"""Where a training step's time goes: data wait, host-to-device copy, forward, loss, backward, optimizer.

A dedicated pass, apart from the throughput windows of 02: each split step synchronises the device and reads
the clock at every phase boundary (CUDA events per phase on CUDA). Unsplit steps, interleaved with the split
ones on the same data pipeline, give the step time the phases must add up to; ``sums_within_5pct`` says
whether they do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict

import torch

from cnnbench import data, devices, engine, models, timing

STEP_PHASES = ("data_wait", "h2d_copy", "forward", "loss", "backward", "optimizer")
TOLERANCE_PCT = 5.0
KEYS = ("model", "device_kind", "batch_size", "image_size", "precision", "memory_format", "step_phase")


class PhaseTimer:
    """Times the phases of one step: at each boundary synchronise ``device``, then read ``clock``.

    On CUDA (``use_events``) a CUDA event is also recorded at each boundary, on the measured device's current
    stream, and the device phases take their time from the events; the data wait (host only) always comes from the host clock. ``clock`` and ``sync``
    are injectable so tests drive the timer with a fake clock.
    """

    def __init__(self, device: torch.device, clock: Callable[[], float] = time.perf_counter,
                 sync: Callable[[torch.device], None] = devices.synchronize, use_events: bool | None = None):
        self.device, self.clock, self.sync = device, clock, sync
        self.use_events = device.type == "cuda" if use_events is None else use_events
        self.times: dict[str, float] = {}

    def _event(self):
        if not self.use_events:
            return None
        make, record = timing._device_events(self.device)  # on the measured device's stream (cuda:1 -> GPU 1)
        event = make()
        record(event)
        return event

    def start(self) -> None:
        self.times = {}
        self._last_event = self._event()
        self.sync(self.device)
        self._last = self.clock()

    def mark(self, phase: str) -> None:
        """End ``phase`` now: its time is the time since the previous boundary."""
        event = self._event()
        self.sync(self.device)
        now = self.clock()
        host = now - self._last
        if event is not None and phase != "data_wait":
            self.times[phase] = self._last_event.elapsed_time(event) / 1e3
        else:
            self.times[phase] = host
        self._last, self._last_event = now, event


def _autocast(device: torch.device, precision: str):
    if precision in ("bf16", "fp16"):
        return torch.autocast(device_type=device.type, dtype=devices.DTYPES[precision])
    return contextlib.nullcontext()


def split_step(work: engine.Workload, batches, timer: PhaseTimer) -> dict[str, float]:
    """One training step of ``work`` with a boundary after each phase; returns the phase times.

    Gradients are cleared first, as ``train_step`` does: a step after an unsplit one must not accumulate into
    that step's gradients (extra work, and the wrong update)."""
    work.optimizer.zero_grad(set_to_none=True)
    timer.start()
    x, y = next(batches)
    timer.mark("data_wait")
    x, y = work.to_device(x, y)
    timer.mark("h2d_copy")
    with _autocast(work.device, work.cfg.precision):
        out = models.logits(work.forward(x))
        timer.mark("forward")
        loss = work.loss_fn(out, y)
        timer.mark("loss")
    (work.scaler.scale(loss) if work.scaler is not None else loss).backward()
    timer.mark("backward")
    if work.scaler is not None:
        work.scaler.step(work.optimizer)
        work.scaler.update()
    else:
        work.optimizer.step()
    timer.mark("optimizer")
    work.last_loss = loss.detach()
    return dict(timer.times)


def whole_step(work: engine.Workload, batches, clock=time.perf_counter, sync=devices.synchronize) -> float:
    """One unsplit training step on the same pipeline (data wait and copy included), synchronised at its ends."""
    sync(work.device)
    start = clock()
    work.train_step(work.to_device(*next(batches)))
    sync(work.device)
    return clock() - start


def _ci95(values: list[float]) -> float:
    if len(values) < 2:
        return float("nan")
    return timing.t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def summarize(split: list[dict[str, float]], whole: list[float]) -> list[dict]:
    """One row per phase: mean, median, 95% interval, share of the phase sum, and the check of the sum
    against the mean unsplit step time (``sum_diff_pct``, ``sums_within_5pct``)."""
    means = {ph: statistics.fmean(s[ph] for s in split) for ph in STEP_PHASES}
    phase_sum, step = sum(means.values()), statistics.fmean(whole)
    diff = 100 * (phase_sum - step) / step
    common = {"phase_sum_s": phase_sum, "step_time_s": step, "step_time_ci95_s": _ci95(whole),
              "sum_diff_pct": diff, "sums_within_5pct": abs(diff) <= TOLERANCE_PCT, "n_steps": len(split)}
    return [{"step_phase": ph, "time_mean_s": means[ph],
             "time_median_s": statistics.median(s[ph] for s in split),
             "time_ci95_s": _ci95([s[ph] for s in split]),
             "share_pct": 100 * means[ph] / phase_sum if phase_sum > 0 else float("nan"), **common}
            for ph in STEP_PHASES]


def measure(cfg: engine.Config, device: torch.device, protocol: engine.Protocol, steps: int, dataset=None,
            warmup: int = 1) -> list[dict]:
    """The phase rows of one configuration (a single ``status`` row when it fails)."""
    base = {**{k: v for k, v in asdict(cfg).items() if k not in ("phase", "data_mode", "compile")},
            "device_kind": device.type, "device_name": devices.device_name(device),
            "threads": torch.get_num_threads(), "workers": protocol.workers}
    work = None
    try:
        work = engine.Workload(engine.Config(**{**asdict(cfg), "phase": "train", "data_mode": "device"}),
                               device, protocol)
        ds = dataset or data.synthetic_for(cfg.in_channels, cfg.image_size, cfg.num_classes,
                                           max(protocol.synthetic_images, 2 * cfg.batch_size), protocol.seed)
        batches = data.cycle(data.loader(ds, cfg.batch_size, protocol.workers,
                                         protocol.pin_memory and device.type == "cuda", seed=protocol.seed))
        timer = PhaseTimer(device)
        for _ in range(warmup):
            whole_step(work, batches)
        split, whole = [], []
        for _ in range(steps):  # interleaved, so drifts in the machine's load hit both alike
            split.append(split_step(work, batches, timer))
            whole.append(whole_step(work, batches))
            work.check_loss()
        return [{**base, **row, "status": "ok", "error": ""} for row in summarize(split, whole)]
    except Exception as err:  # noqa: BLE001 - a failure is a row, the run goes on
        return [{**base, "step_phase": "", **engine.failure(err)}]
    finally:
        del work
        devices.empty_cache(device)


def run_all(run) -> None:
    """The breakdown for every Scenario A model (train, first variant) into step_phases.csv, resuming."""
    from cnnbench import scenarios
    from cnnbench.progress import bar
    from cnnbench.results import ResultsFile

    p = run.params
    results = ResultsFile(run.path("step_phases.csv"), KEYS)
    protocol = engine.Protocol.from_params(p)
    dataset_for = scenarios.dataset_loader(p)
    first = {}  # per model: its first training configuration (first variant)
    for c in scenarios.scenario_a_configs(dataclasses.replace(p, phases=["train"])):
        first.setdefault(c.model, c)
    configs = list(first.values())
    for cfg in bar(configs, desc="step phases", unit="model"):
        if p.phase_batch_size:
            cfg = engine.Config(**{**asdict(cfg), "batch_size": p.phase_batch_size})
        key = {**asdict(cfg), "device_kind": run.device.type, "step_phase": STEP_PHASES[-1]}
        if results.done(key):
            continue
        results.extend(measure(cfg, run.device, protocol, p.phase_steps, dataset_for(cfg)))
