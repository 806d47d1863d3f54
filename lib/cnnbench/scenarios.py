"""The experiments of the seeds, as configurations built from the parameters of a run.

Scenario A (02): every model, train and eval, at the seeds' configuration, in every variant of the params.
Scenario B (03): throughput against batch size. Epochs: full train and validation epochs (seed 000's Table 2).

02's and 03's one entry point: their tables (:mod:`cnnbench.tables`: measured, performance_summary,
variants_side_by_side, utilisation), figures (:mod:`cnnbench.plots`: throughput, batch_sweep,
telemetry_timeline) and the telemetry reader (``read_telemetry``) are re-exported here, imported on first use.
"""

from __future__ import annotations

import time
from dataclasses import asdict

import pandas as pd
import torch

from cnnbench import data, devices, models, results
from cnnbench.measure import engine, runner, telemetry, worker
from cnnbench.measure.engine import Config, Protocol
from cnnbench.progress import bar, resumed


def model_data(p, model: str) -> tuple[str, int, int, int]:
    """(dataset, channels, image size, classes) a model runs on in this run.

    ImageNet models train on the run's dataset at its resolution. The MNIST CNN of seed 001 trains on MNIST
    (or MNIST-shaped synthetic data): 1x28x28, 10 classes, whatever the run's dataset.
    """
    spec = models.spec(model)
    if spec.native_data == "mnist":
        return ("mnist" if p.dataset == "mnist" else "synthetic"), spec.in_channels, spec.reference_size, spec.reference_classes
    return p.dataset, spec.in_channels, p.image_size, p.num_classes


def _config(p, model: str, phase: str, batch_size: int, variant: dict) -> Config:
    dataset, channels, size, classes = model_data(p, model)
    return Config(model=model, phase=phase, batch_size=batch_size, image_size=size, num_classes=classes,
                  in_channels=channels, precision=variant.get("precision", "fp32"),
                  memory_format=variant.get("memory_format", "nchw"), compile=variant.get("compile", False),
                  data_mode=p.data_mode, dataset=dataset)


def scenario_a_configs(p) -> list[Config]:
    return [_config(p, m, phase, p.batch_size_for(m), v) for m in p.models for v in p.variants for phase in p.phases]


def sweep_configs(p) -> list[Config]:
    return [_config(p, m, phase, bs, p.variants[0]) for m, sizes in p.sweep.items() for bs in sizes for phase in p.phases]


def dataset_loader(p):
    """``Config -> Dataset`` for configurations on real data (None: synthetic, made by the engine)."""
    cache: dict = {}

    def dataset_for(cfg: Config):
        if cfg.dataset == "synthetic":
            return None
        split = "train" if cfg.phase == "train" else "val"
        key = (cfg.dataset, split, cfg.in_channels, cfg.image_size)
        if key not in cache:
            ds = data.open_dataset(cfg.dataset, p.data_path, split, cfg.in_channels, cfg.image_size, p.download)
            own = models.spec(cfg.model).reference_classes  # the model's own head, as seed 003 trained it
            if data.num_classes(ds) != cfg.num_classes != own:
                raise data.DataError(f"{cfg.dataset} has {data.num_classes(ds)} classes; set num_classes to match")
            cache[key] = ds
        return cache[key]

    return dataset_for


def run(run, name: str, configs: list[Config]) -> pd.DataFrame:
    """Measure ``configs`` into ``<run>/<name>.csv`` (resuming), ``<name>_windows.csv``, ``<name>_steps.csv``
    and ``telemetry.csv`` (source ``name``), each configuration in several processes in interleaved rounds
    (:mod:`cnnbench.measure.runner`); return the rows of exactly these configurations, failures included, every measurement
    column present (empty where every configuration failed). Each configuration runs in a fresh worker process
    unless the params say ``isolate: false``."""
    p = run.params
    rows = runner.run_configs(configs, run.device, Protocol.from_params(p), run.path(f"{name}.csv"),
                              run.path(f"{name}_steps.csv"), dataset_for=dataset_loader(p), desc=name,
                              telemetry_path=run.path("telemetry.csv"), source=name, isolate=p.isolate)
    return results.frame(rows, ("model", "phase", "batch_size", "status", *engine.MEASURE_COLUMNS))


def diminishing_returns(df: pd.DataFrame, within: float = 0.05) -> pd.DataFrame:
    """Per model and phase: the best throughput and the smallest batch within ``within`` of it."""
    ok = df[df.status == "ok"]
    rows = []
    for (model, phase), g in ok.groupby(["model", "phase"]):
        best = g.throughput_img_s.max()
        knee = g[g.throughput_img_s >= (1 - within) * best].batch_size.min()
        rows.append({"model": model, "phase": phase, "best_throughput_img_s": best,
                     "best_batch_size": int(g.loc[g.throughput_img_s.idxmax(), "batch_size"]),
                     "knee_batch_size": int(knee)})
    return pd.DataFrame(rows, columns=["model", "phase", "best_throughput_img_s", "best_batch_size", "knee_batch_size"])




def _epoch(work: engine.Workload, loader, phase: str, max_batches: int, max_images: int = 0,
           clock=time.perf_counter, sync=devices.synchronize) -> dict:
    """One epoch over ``loader``: stops after ``max_batches`` batches or ``max_images`` images (0 = no cap).

    ``epoch_s`` is everything, as seed 000 timed its epochs: the loader's start-up (``iter(loader)``, worker
    start, the first batch) and the first step (allocation, kernel selection) are inside the clock, no warm-up.
    They are also measured apart: ``loader_start_s`` (``iter(loader)`` until the first batch is in hand) and
    ``first_step_s`` (the first step, synchronised; this one synchronisation is the only one inside the epoch).
    """
    step = work.train_step if phase == "train" else work.eval_step
    n = batches = 0
    first_step = 0.0
    sync(work.device)
    start = clock()
    it = iter(loader)
    batch = next(it, None)
    loader_start = clock() - start
    while batch is not None:
        x, y = batch
        if batches == 0:
            t0 = clock()
            step(work.to_device(x, y))
            sync(work.device)
            first_step = clock() - t0
        else:
            step(work.to_device(x, y))
        n, batches = n + x.shape[0], batches + 1
        if (max_batches and batches >= max_batches) or (max_images and n >= max_images):
            break
        batch = next(it, None)
    sync(work.device)
    return {"epoch_s": clock() - start, "images": n, "loader_start_s": loader_start, "first_step_s": first_step}


def _epoch_pair(p, cfg: Config, device_spec: str, cap: int) -> dict:
    """One train and one validation epoch of ``cfg`` (module level: :func:`cnnbench.measure.worker.call_isolated` runs
    it in a fresh worker process), with the telemetry summary of both: the fields of an ``epochs.csv`` row."""
    device = torch.device(device_spec)
    dataset_for, splits, row = dataset_loader(p), {}, {}
    for phase in ("train", "eval"):
        c = Config(**{**asdict(cfg), "phase": phase, "data_mode": "loader"})
        ds = dataset_for(c) or data.synthetic_for(c.in_channels, c.image_size, c.num_classes, p.synthetic_images,
                                                  p.seed + (phase == "eval"))
        splits[phase] = data.loader(ds, c.batch_size, p.workers, p.pin_memory and device.type == "cuda",
                                    shuffle=phase == "train", seed=p.seed)
    work = engine.Workload(cfg, device, Protocol.from_params(p))
    with telemetry.Sampler(device, p.telemetry_interval_s) as sampler:
        train = _epoch(work, splits["train"], "train", p.max_batches, cap)
        work.check_loss()
        work.model.eval()
        val = _epoch(work, splits["eval"], "eval", p.max_batches, cap)
    for split, e in (("train", train), ("val", val)):
        row.update({f"{split}_epoch_s": e["epoch_s"], f"{split}_images": e["images"],
                    f"{split}_throughput_img_s": e["images"] / e["epoch_s"],
                    f"{split}_loader_start_s": e["loader_start_s"], f"{split}_first_step_s": e["first_step_s"]})
    return {**row, **sampler.summary()}


def epochs(run) -> pd.DataFrame:
    """Seed 000's epoch times: one train and one validation epoch per model, capped by ``max_batches`` and by
    ``epoch_images`` (per model: ``epoch_images_per_model``), as seed 000's 6,400-image "epochs" were. Each
    model's pair of epochs runs in a fresh worker process unless the params say ``isolate: false`` (column
    ``isolation``: "worker" or "in_process"), so its ``peak_rss_mib`` is its own, not the largest model's before it."""
    p, device = run.params, run.device
    file = results.file(run.dir, "epochs")
    planned = []
    for model in p.models:
        cfg = _config(p, model, "train", p.batch_size_for(model), p.variants[0])
        config = {k: v for k, v in asdict(cfg).items() if k not in ("phase", "data_mode")}
        planned.append((model, cfg, {**config, "device_kind": device.type, "device_name": devices.device_name(device),
                                     "status": "ok", "error": "", "threads": torch.get_num_threads(),
                                     "workers": p.workers, "max_batches": p.max_batches,
                                     "epoch_images": p.epoch_images_per_model.get(model, p.epoch_images)}))
    file.plan([row for *_, row in planned], "epochs")
    kept = sum(file.done(row) for *_, row in planned)
    for model, cfg, row in bar(planned, desc="epochs", unit="model"):
        if file.done(row):
            continue
        if p.isolate:  # its own process: its peak RSS is not that of the models measured before it
            row.update(worker.call_isolated(_epoch_pair, p, cfg, str(device), row["epoch_images"], device=device,
                                            name=f"cnnbench-epochs-{model}"))
        else:
            row["isolation"] = "in_process"
            try:
                row.update(_epoch_pair(p, cfg, str(device), row["epoch_images"]))
            except Exception as err:  # noqa: BLE001 - a failure is a row
                row.update(engine.failure(err))
        file.append(row)
    resumed(kept, len(planned), file.path.name, "models' epochs")
    return results.read(run.dir, "epochs")


_PRESENTED = {"measured": "cnnbench.tables", "performance_summary": "cnnbench.tables",
              "variants_side_by_side": "cnnbench.tables", "utilisation": "cnnbench.tables",
              "throughput": "cnnbench.plots", "batch_sweep": "cnnbench.plots", "telemetry_timeline": "cnnbench.plots",
              "read_telemetry": "cnnbench.measure.telemetry"}


def __getattr__(name: str):
    """02's and 03's tables, figures and telemetry reader, imported on first use (workers do not draw)."""
    import importlib

    if name in _PRESENTED:
        return getattr(importlib.import_module(_PRESENTED[name]), "read" if name == "read_telemetry" else name)
    raise AttributeError(f"module 'cnnbench.scenarios' has no attribute '{name}'")
