"""Seed 000's epoch times: one train and one validation epoch per model through a real DataLoader, timed as
seed 000 timed them (loader start-up and the first step inside the clock)."""

from __future__ import annotations

import time

import pandas as pd

from cnnbench import data, devices, results
from cnnbench.measure import engine, telemetry, timing, worker
from cnnbench.measure.engine import Config
from cnnbench.progress import bar, resumed


def _epoch(
    work: engine.Workload, loader, phase: str, max_batches: int, max_images: int = 0, clock=time.perf_counter
):
    """One epoch capped at ``max_batches``/``max_images`` (0: none), loader start-up and first step timed apart too."""
    step = work.train_step if phase == "train" else work.eval_step
    n = batches = 0
    first_step = 0.0
    work.backend.synchronize()
    start = clock()
    it = iter(loader)
    batch = next(it, None)
    loader_start = clock() - start
    while batch is not None:
        x, y = batch
        t0 = clock()
        step(work.to_device(x, y))
        if batches == 0:
            work.backend.synchronize()
            first_step = clock() - t0
        n, batches = n + x.shape[0], batches + 1
        if (max_batches and batches >= max_batches) or (max_images and n >= max_images):
            break
        batch = next(it, None)
    work.backend.synchronize()
    seconds = clock() - start
    timed = {"epoch_s": seconds, "images": n, "throughput_img_s": n / seconds, "loader_start_s": loader_start}
    return {**timed, "first_step_s": first_step}


def epoch_pair(p, cfg: Config, device, cap: int) -> dict:
    """One train and one validation epoch of ``cfg``, with the telemetry of both: an ``epochs.csv`` row."""
    b = timing.backend_of(device)  # the caller's backend, or this worker's one made from the spec
    dataset_for, splits = data.for_configs(p), {}
    for phase in ("train", "eval"):
        c = cfg.replace(phase=phase, data_mode="loader")
        ds = dataset_for(c) or data.SyntheticImages(
            p.synthetic_images, c.in_channels, c.image_size, c.num_classes, p.seed + (phase == "eval")
        )
        splits[phase] = data.loader(
            ds, c.batch_size, cfg.workers, b.pin(cfg.pin_memory), shuffle=phase == "train", seed=p.seed
        )
    with engine.Workload(cfg, b, p) as work, telemetry.Sampler(b, p.telemetry_interval_s) as sampler:
        train = _epoch(work, splits["train"], "train", p.max_batches, cap)
        work.check_loss()
        work.model.eval()
        val = _epoch(work, splits["eval"], "eval", p.max_batches, cap)
    row = {f"{split}_{k}": v for split, e in (("train", train), ("val", val)) for k, v in e.items()}
    return {**row, **sampler.summary()}


def epochs(run) -> pd.DataFrame:
    """Seed 000's epoch times -> epochs.csv: each model's :func:`epoch_pair`, in a fresh worker unless not ``isolate``."""
    p, device, b = run.params, run.device, devices.backend(run.device)
    file = results.file(run.dir, "epochs")
    protocol = {k: getattr(p, k) for k in ("synthetic_images", "data_path", "isolate")}
    planned = []
    for model in p.models:
        cfg = engine.config(p, model, "train", p.variants[0], threads=run.threads)
        row = engine.base_row(cfg, b, p, keys=()) | {"status": "ok", "error": ""}
        del row["phase"]
        images = p.epoch_images_per_model.get(model, p.epoch_images)
        row |= {"max_batches": p.max_batches, "epoch_images": images, **protocol}
        planned.append((model, cfg, row))
    file.plan([row for *_, row in planned], "epochs")
    kept = sum(file.done(row) for *_, row in planned)
    for model, cfg, row in bar(planned, desc="epochs", unit="model"):
        if file.done(row):
            continue
        cap, name = row["epoch_images"], f"cnnbench-epochs-{model}"
        if p.isolate:  # its own process: its peak RSS is not that of the models measured before it
            row.update(worker.call_isolated(epoch_pair, p, cfg, str(device), cap, device=device, name=name))
        else:
            row.update(worker.as_row(b, epoch_pair, p, cfg, b, cap, isolation="in_process"))
        file.append(row)
    resumed(kept, len(planned), file.path.name, "models' epochs")
    return results.read(run.dir, "epochs")
