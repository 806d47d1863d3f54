"""Where a training step's time goes (06): ``phases(run)`` -> step_phases.csv (each of :data:`STEP_PHASES` timed
in split steps paired with unsplit ones they must add up to); ``profile(run)`` -> profile_ops.csv and a
torch.profiler trace of seed 002's fine-tuning step with its top operators per pass; their tables and plot."""

from __future__ import annotations

import dataclasses
import gzip
import math
import random
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from cnnbench import data, devices, knobs, models, progress, results
from cnnbench.measure import engine, timing
from cnnbench.plots import save
from cnnbench.results.schema import PHASE_PASS_KEYS, PHASE_PROTOCOL

FINE_TUNING_CLASSES = 2  # seed 002's head: cats vs dogs (002:140)


def profile(run) -> pd.DataFrame:
    """Seed 002's fine-tuning step (a two-class head) traced for each of ``profile_models`` (current rows)."""
    p = dataclasses.replace(run.params, lr=run.params.transfer_lrs[0])
    batch = p.profile_batch_size or p.transfer_batch_sizes[0]
    b = timing.backend_of(run.device)
    table = results.table("profile_ops")
    kept, rows, planned, traced_before = table.file(run.dir), [], [], 0
    for model in p.profile_models:
        sizes = (p.transfer_image_size, FINE_TUNING_CLASSES, models.spec(model).in_channels)
        setting = knobs.for_params(p, batch_size=batch, threads=run.threads)
        cfg = engine.Config(model, "train", *sizes, setting=setting)
        ident = engine.config_key(cfg, b, p, ("seed", "optimizer", "lr", "warmup_steps"))
        ident |= {"profiled_steps": p.profile_steps, "profile_top_k": p.profile_top_k}
        planned.append(ident)
        if kept.finished(ident, table.plan_columns):  # traced before with the same parameters: kept
            traced_before += 1
            continue
        progress.note(f"profiler: {model}, {p.profile_steps} steps")
        ops = profile_model(cfg, b, p, run.dir)
        rows += [{**r, **ident} for r in ops]
    table.plan(run.dir, planned, "profile")
    kept.extend(rows, group=table.plan_columns)
    progress.resumed(traced_before, len(planned), kept.path.name, "profiled models")
    return results.read(run.dir, "profile_ops")


def phase_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per model: the phases' check against the unsplit step, the phases (ms per step), their sum, the step."""
    ok = df[df.status == "ok"]
    if ok.empty:
        return ok
    wide = ok.pivot_table(index="model", columns="step_phase", values="time_mean_s", sort=False) * 1e3
    wide.columns = [f"{c}_ms" for c in wide.columns]
    per = ok.groupby("model", sort=False).first()
    check = per[["sums_within_5pct", "sum_diff_pct", "sum_diff_ci95_pct", "n_steps"]]
    ms = per[["phase_sum_s", "step_time_s", "step_time_ci95_s"]].rename(columns=lambda c: f"{c[:-2]}_ms")
    return check.join(wide).join(ms * 1e3)


def phase_plot(df: pd.DataFrame, path: str | Path | None = None):
    """Share of each phase in the step, one stacked bar per model."""
    ok = df[df.status == "ok"]
    if ok.empty:
        return None
    wide = ok.pivot_table(index="model", columns="step_phase", values="share_pct", sort=False)
    fig, ax = plt.subplots(figsize=(9, 4))
    wide.plot.barh(stacked=True, ax=ax)
    ax.set(xlabel="share of the training step (%)", ylabel="")
    ax.set_title(f"where a training step's time goes ({ok.device_name.iloc[0]})")
    ax.legend(fontsize=8, bbox_to_anchor=(1, 1))
    return save(fig, path, dpi=110)


def top_ops_table(df: pd.DataFrame, model: str | None = None) -> pd.DataFrame:
    """The top operators per pass (forward, backward, optimizer) with self times in ms and share of the pass."""
    ok = df[df.status == "ok"]
    if model is not None:
        ok = ok[ok.model == model]
    if ok.empty:
        return ok
    return ok.assign(self_cpu_ms=ok.self_cpu_s * 1e3, self_device_ms=ok.self_device_s * 1e3)[
        ["model", "pass", "rank", "op", "calls", "self_cpu_ms", "self_device_ms", "share_of_pass_pct"]
    ]


STEP_PHASES = ("data_wait", "h2d_copy", "forward", "loss", "backward", "optimizer")
PHASE_KEYS = (*PHASE_PROTOCOL, *PHASE_PASS_KEYS)  # the params that identify a breakdown (its plan's columns)
TOLERANCE_PCT = 5.0
PRECISION_PCT = 2.0  # the 95% interval of the phase sum's difference that ends a model, decided or not
MAX_PAIRS = 2000  # a bound on the pairs one window measures, whatever the clock says


class PhaseTimer:
    """Times the phases of one step: at each boundary synchronise and read ``clock``, or the device's events."""

    def __init__(
        self,
        device,
        clock: Callable[[], float] = time.perf_counter,
        sync: Callable[[torch.device], None] | None = None,
        use_events: bool | None = None,
    ):
        b = timing.backend_of(device)
        self.device, self.clock, self.sync = b.device, clock, sync or (lambda _: b.synchronize())
        self.events = b.events() if use_events is not False else None
        self.times: dict[str, float] = {}

    def _event(self):
        if self.events is None:
            return None
        make, record = self.events  # on the measured device's stream (cuda:1 -> GPU 1)
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
        on_device = event is not None and phase != "data_wait"
        self.times[phase] = self._last_event.elapsed_time(event) / 1e3 if on_device else now - self._last
        self._last, self._last_event = now, event


def split_step(work: engine.Workload, batches, timer: PhaseTimer) -> dict[str, float]:
    """The phase times of one training step of ``work`` (clearing the gradients counted as optimizer)."""
    before = timer.clock()
    work.optimizer.zero_grad(set_to_none=True)
    cleared = timer.clock() - before
    timer.start()
    x, y = next(batches)
    timer.mark("data_wait")
    x, y = work.to_device(x, y)
    timer.mark("h2d_copy")
    with work.backend.autocast(work.cfg.precision):
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
    work.last_loss = loss.detach()
    del x, y, out, loss
    timer.mark("optimizer")
    return timer.times | {"optimizer": timer.times["optimizer"] + cleared}


def whole_step(work: engine.Workload, batches, clock=time.perf_counter, sync=None) -> float:
    """One unsplit training step on the same pipeline (data wait and copy included), synchronised at its ends."""
    sync = sync or (lambda _: work.backend.synchronize())
    sync(work.device)
    start = clock()
    work.train_step(work.to_device(*next(batches)))
    sync(work.device)
    return clock() - start


def paired(split: list[dict[str, float]], whole: list[float], t=timing.t95) -> tuple[float, float]:
    """The phase sums' mean difference from the unsplit steps, with its interval, in % of the step."""
    diffs, step = np.array([sum(s.values()) for s in split]) - whole, statistics.fmean(whole)
    half = t(len(diffs) - 1) * diffs.std(ddof=1) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
    return 100 * float(diffs.mean()) / step, 100 * half / step


def settled(split: list[dict[str, float]], whole: list[float]) -> bool:
    """The check's 99% interval wholly inside or outside +-TOLERANCE_PCT, or its 95% interval within PRECISION_PCT."""
    (diff, half), decide = paired(split, whole), paired(split, whole, timing.t99)[1]
    return half <= PRECISION_PCT or abs(diff) + decide <= TOLERANCE_PCT or abs(diff) - decide > TOLERANCE_PCT


def summarize(split: list[dict[str, float]], whole: list[float]) -> list[dict]:
    """One row per phase: mean, median, 95% interval, share, and the check of the sum against the unsplit step."""
    means = {ph: statistics.fmean(s[ph] for s in split) for ph in STEP_PHASES}
    phase_sum, step = sum(means.values()), statistics.fmean(whole)
    diff, diff_ci95 = paired(split, whole)
    common = dict(phase_sum_s=phase_sum, step_time_s=step, step_time_ci95_s=timing.ci95_half_width(whole))
    common |= dict(
        sum_diff_pct=diff, sum_diff_ci95_pct=diff_ci95, sums_within_5pct=abs(diff) <= TOLERANCE_PCT
    )
    common["n_steps"] = len(split)
    out = []
    for ph in STEP_PHASES:
        times = [s[ph] for s in split]
        share = 100 * means[ph] / phase_sum if phase_sum > 0 else float("nan")
        row = dict(step_phase=ph, time_mean_s=means[ph], time_median_s=statistics.median(times))
        out.append(row | dict(time_ci95_s=timing.ci95_half_width(times), share_pct=share) | common)
    return out


class HeldBatches:
    """Hands out ``batches``, holding each until the next is taken, as ``for x, y in loader`` does."""

    def __init__(self, batches):
        self.batches, self.held, self.taken = iter(batches), None, 0

    def __next__(self):
        self.held = None
        self.held = next(self.batches)
        self.taken += 1
        return self.held


def record(
    work: engine.Workload,
    batches,
    steps: int,
    warmup: int,
    window_s: float = 0.0,
    seed: int = 0,
    epoch_batches: int = 0,
    max_s: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[torch.device], None] | None = None,
) -> tuple[list[dict[str, float]], list[float]]:
    """Split and unsplit steps of ``work`` in seeded random order: ``warmup`` pairs, then at least ``steps`` pairs
    and ``window_s`` s, then on until settled or ``max_s`` s; pairs taking an epoch's first batch are dropped."""
    timer = PhaseTimer(work.backend, clock, sync)
    batches = HeldBatches(batches)
    order = random.Random(seed)

    def starts_epoch(first: int) -> bool:  # batches first .. taken-1 were this pair's (epochs of 1-2 batches:
        return epoch_batches > 2 and any(k % epoch_batches == 0 for k in range(first, batches.taken))  # all)

    def pair(first_split: bool) -> tuple[dict[str, float], float]:
        if first_split:
            split = split_step(work, batches, timer)
            return split, whole_step(work, batches, clock, sync)
        whole = whole_step(work, batches, clock, sync)
        return split_step(work, batches, timer), whole

    for _ in range(warmup):
        pair(order.random() < 0.5)
        work.check_loss()
    split, whole = [], []
    start = clock()

    def more() -> bool:
        elapsed = clock() - start
        if len(split) < steps or len(split) >= MAX_PAIRS:
            return len(split) < steps
        return elapsed < window_s or (elapsed < max_s and not settled(split, whole))

    while more():
        first = batches.taken
        s, w = pair(order.random() < 0.5)
        work.check_loss()
        if not starts_epoch(first):
            split.append(s)
            whole.append(w)
    return split, whole


def measure(
    cfg: engine.Config,
    device,
    p,
    dataset=None,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[torch.device], None] | None = None,
) -> list[dict]:
    """The phase rows of one configuration by :func:`record` (one failure row when it fails)."""
    b = timing.backend_of(device)
    base = engine.base_row(cfg, b, p, PHASE_KEYS)
    try:
        with engine.Workload(cfg.replace(phase="train", data_mode="device"), device, p) as work:
            images = max(p.synthetic_images, 2 * cfg.batch_size)
            ds = dataset or data.SyntheticImages(
                images, cfg.in_channels, cfg.image_size, cfg.num_classes, p.seed
            )
            dl = data.loader(ds, cfg.batch_size, cfg.workers, b.pin(cfg.pin_memory), seed=p.seed)
            window = (p.phase_window_s, p.seed, len(dl), p.phase_max_s)
            split, whole = record(
                work, data.cycle(dl), p.phase_steps, max(1, p.warmup_steps), *window, clock, sync
            )
        return [{**base, **row, "status": "ok", "error": ""} for row in summarize(split, whole)]
    except Exception as err:  # noqa: BLE001 - a failure is a row, the run goes on
        return [{**base, "step_phase": "", **engine.failure(err, b)}]


def phases(run) -> pd.DataFrame:
    """The phase breakdown of every Scenario A model's first training configuration -> step_phases.csv."""
    from cnnbench import scenarios

    p, b = run.params, timing.backend_of(run.device)
    table = results.table("step_phases")
    file = table.file(run.dir)
    dataset_for, first = data.for_configs(p), {}
    for c in scenarios.scenario_a_configs(dataclasses.replace(p, phases=["train"])):
        first.setdefault(c.model, c.replace(threads=run.threads, data_mode="loader"))
    planned = [c.replace(batch_size=p.phase_batch_size) if p.phase_batch_size else c for c in first.values()]
    keys = [{**engine.config_key(cfg, b, p, PHASE_KEYS), "step_phase": STEP_PHASES[-1]} for cfg in planned]
    table.plan(run.dir, keys, "step_phases")
    kept = sum(file.done(key) for key in keys)
    for cfg, key in progress.bar(list(zip(planned, keys, strict=True)), desc="step phases", unit="model"):
        if file.done(key):
            continue
        progress.note(f"step phases: {cfg.model} bs={cfg.batch_size}")
        file.extend(measure(cfg, run.device, p, dataset_for(cfg)))
    progress.resumed(kept, len(keys), file.path.name, "models' phase breakdowns")
    return results.read(run.dir, "step_phases")


PASSES = ("forward", "backward", "optimizer")
LABEL = "cnnbench."
GZIP_ABOVE_MIB = 20


def op_table(events, backend: devices.Backend) -> pd.DataFrame:
    """Per pass and operator: calls, self CPU and self device time (s; NaN where the profiler has none)."""
    device_timed = backend.op_time == "device"
    # host-side events only: a kernel's device time is counted in its launching operator's self device time,
    # and the device-side copies of the pass labels run on the GPU's timeline
    events = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    labels = [
        (e.name[len(LABEL) :], e.time_range.start, e.time_range.end)
        for e in events
        if e.name.startswith(LABEL) and e.name[len(LABEL) :] in PASSES
    ]
    rows = []
    for e in events:
        if e.name.startswith((LABEL, "ProfilerStep")):
            continue
        where = next((name for name, lo, hi in labels if lo <= e.time_range.start <= hi), "other")
        device_s = backend.op_time_us(e, self_only=True) / 1e6 if device_timed else float("nan")
        rows.append((where, e.name, e.self_cpu_time_total / 1e6, device_s))
    df = pd.DataFrame(rows, columns=["pass", "op", "self_cpu_s", "self_device_s"])
    return df.groupby(["pass", "op"], as_index=False).agg(
        calls=("op", "size"),
        self_cpu_s=("self_cpu_s", "sum"),
        self_device_s=("self_device_s", lambda s: s.sum(min_count=1)),
    )


def top_ops(table: pd.DataFrame, k: int, by: str = "self_cpu_s") -> pd.DataFrame:
    """The ``k`` operators with the largest ``by`` in each pass, with their share of the pass (%)."""
    out = []
    for _, g in table.groupby("pass", sort=False):
        total = g[by].sum()
        g = g.sort_values(by, ascending=False).head(k).assign(rank=range(1, min(k, len(g)) + 1))
        out.append(g.assign(share_of_pass_pct=100 * g[by] / total if total > 0 else float("nan")))
    return pd.concat(out, ignore_index=True) if out else table


def export(prof, folder: Path, model: str) -> Path:
    """The Chrome/Perfetto trace ``trace_<model>.json`` (gzipped when large: Perfetto opens .json.gz)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"trace_{model}.json"
    prof.export_chrome_trace(str(path))
    if not path.is_file():
        raise OSError(f"the profiler could not write {path}")
    if path.stat().st_size > GZIP_ABOVE_MIB * 2**20:
        with path.open("rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        path = Path(f"{path}.gz")
    return path


RANKED_BY = {"device": "self_device_s", "host": "self_cpu_s", "queue": "self_cpu_s"}
QUEUE_NOTE = "times are the host's time to queue each op on the device, not the device's time to run it"


def profile_model(cfg: engine.Config, device, p, folder: Path) -> list[dict]:
    """Rows of the top operators of ``profile_steps`` traced training steps of ``cfg``, per pass."""
    b, steps = timing.backend_of(device), p.profile_steps
    base = {k: getattr(cfg, k) for k in ("model", "batch_size", "image_size", "num_classes", "precision")}
    base |= dict(optimizer=p.optimizer, lr=p.lr, device_kind=b.kind, device_name=b.name())
    base["profiled_steps"] = steps
    try:
        plan = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
        with engine.Workload(
            cfg.replace(phase="train", data_mode="device"), b, p, optimizer=p.optimizer
        ) as work:
            with torch.profiler.profile(activities=b.profiler_activities(), schedule=plan) as prof:
                for _ in range(steps + 1):  # each pass labelled for the profiler (the loss in the forward)
                    x, y = work.next_batch()
                    with torch.profiler.record_function(LABEL + "forward"):
                        loss = work.loss_fn(models.logits(work.forward(x)), y)
                    with torch.profiler.record_function(LABEL + "backward"):
                        loss.backward()
                    with torch.profiler.record_function(LABEL + "optimizer"):
                        work.optimizer.step()
                        work.optimizer.zero_grad(set_to_none=True)
                    b.synchronize()
                    prof.step()
        trace = export(prof, folder, cfg.model)
        by = RANKED_BY[b.op_time]
        ops = top_ops(op_table(prof.events(), b), p.profile_top_k, by)
        note = QUEUE_NOTE if b.op_time == "queue" else ""
        done = {"ranked_by": by, "time_note": note, "trace_file": trace.name, "status": "ok", "error": ""}
        return [{**base, **r, **done} for r in ops.to_dict("records")]
    except Exception as err:  # noqa: BLE001 - a failure is a row, the run goes on
        return [{**base, "pass": "", "op": "", **engine.failure(err, b)}]
