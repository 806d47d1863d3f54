"""The experiments of the seeds as configurations of a run's params: Scenario A (02: every model, phase and
variant), the batch sweep (03) and epochs (seed 000's Table 2), and their tables and figures."""

from __future__ import annotations

import pandas as pd

from cnnbench import data, devices, results, tables
from cnnbench.measure import engine, reproducibility, runner
from cnnbench.measure.engine import Config

# 02's and 03's epochs, tables and figures, named here for their one entry point
from cnnbench.measure.epochs import epochs as epochs  # noqa: I001
from cnnbench.params import NUMBERED
from cnnbench.plots import batch_sweep, telemetry_timeline, throughput  # noqa: F401
from cnnbench.progress import say
from cnnbench.tables import measured, performance_summary, utilisation, variants_side_by_side  # noqa: F401


def scenario_a_configs(p) -> list[Config]:
    return [engine.config(p, m, phase, v) for m in p.models for v in p.variants for phase in p.phases]


def workloads(configs: list[Config]) -> str:
    """What ``configs`` feed each model, one clause per batch size and input, e.g. "batch 256, 3x224x224 images,
    200 classes (synthetic): resnet50": 02's protocol as the run's params set it."""
    models: dict[str, dict] = {}  # per workload, its models in order (dict keys)
    for c in configs:
        shape = f"{c.in_channels}x{c.image_size}x{c.image_size} images, {c.num_classes} classes ({c.dataset})"
        models.setdefault(f"batch {c.batch_size}, {shape}", {})[c.model] = None
    return "; ".join(f"{workload}: {', '.join(names)}" for workload, names in models.items())


def sweep_configs(p) -> list[Config]:
    return [
        engine.config(p, m, phase, p.variants[0], batch_size=bs)
        for m, sizes in p.sweep.items()
        for bs in sizes
        for phase in p.phases
    ]


def sweep_to_measure(p) -> list[Config]:
    """03's configurations less those it takes from 02's rows (``reuse``), where 02 runs before it."""
    order = [*p.notebooks, NUMBERED["03"]]  # 03 asked for even where the params leave it out
    if NUMBERED["02"] not in order or order.index(NUMBERED["02"]) > order.index(NUMBERED["03"]):
        return sweep_configs(p)
    taken = set(scenario_a_configs(p))
    return [c for c in sweep_configs(p) if c not in taken]


def headline(configs: list[Config]) -> list[Config]:
    """The configurations measured first (a first trusted number within minutes): the first model's training
    step, in every variant."""
    first = next((c.model for c in configs if c.phase == "train"), None)
    return [c for c in configs if c.model == first and c.phase == "train"]


def first_number(rows: pd.DataFrame) -> str:
    """Prints, sends to the pipeline's console and returns the headline rows' variants and rates: "first trusted
    number" where an interval is within reproducibility.PRECISE_PCT, else "not yet precise"."""
    lines = []
    for r in rows.assign(variant=tables.variant_label(rows))[lambda d: d.status == "ok"].itertuples():
        pct = 100 * r.throughput_ci95_img_s / r.throughput_img_s
        verdict = "first trusted number" if pct <= reproducibility.PRECISE_PCT else "not yet precise"
        rate = reproducibility.rate_text(r.throughput_img_s, r.throughput_ci95_img_s)
        interval = " (95% interval)" if pd.notna(r.throughput_ci95_img_s) else ""  # else rate_text says none
        lines.append(f"{verdict}: {r.model} {r.variant} {r.phase} bs={r.batch_size}: {rate}{interval}")
    text = "\n".join(lines) or "no headline configuration measured"
    say(text)
    return text


def measure(
    run, name: str, configs: list[Config], only: list[Config] | None = None, reuse: str | None = None
) -> pd.DataFrame:
    """Measure ``configs`` into ``<run>/<name>.csv`` (resuming) and its windows, steps and telemetry files in
    interleaved rounds of fresh processes (:mod:`cnnbench.measure.runner`), the device's backend made once here;
    return their rows, every measurement column present. ``only``: these now (:func:`headline`); ``reuse``: a
    table of the run whose rows of the same configurations are taken (03 takes 02's)."""
    p = run.params
    rows = runner.run_configs(
        configs,
        devices.backend(run.device),  # the one backend of this measurement, passed down
        p,
        run.path(f"{name}.csv"),
        run.path(f"{name}_steps.csv"),
        dataset_for=data.for_configs(p),
        desc=name,
        telemetry_path=run.path("telemetry.csv"),
        source=name,
        isolate=p.isolate,
        only=only,
        reuse=run.path(f"{reuse}.csv") if reuse else None,
    )
    return results.frame(rows, ("model", "phase", "batch_size", "status", *engine.MEASURE_COLUMNS))


def diminishing_returns(df: pd.DataFrame, within: float = 0.05) -> pd.DataFrame:
    """Per model and phase: the best throughput and the knee, the smallest batch within ``within`` of it or,
    where both have a 95% interval, not :func:`~cnnbench.measure.reproducibility.distinguishable` from it."""
    rows = []
    for (model, phase), g in df[df.status == "ok"].groupby(["model", "phase"]):
        best = g.loc[g.throughput_img_s.idxmax()]
        top = (best.throughput_img_s, best.throughput_ci95_img_s)
        same = [
            pd.notna(c * top[1]) and not reproducibility.distinguishable(r, c, *top)
            for r, c in zip(g.throughput_img_s, g.throughput_ci95_img_s, strict=True)
        ]
        near = (g.throughput_img_s >= (1 - within) * best.throughput_img_s).to_numpy()
        knee = g[near | same].batch_size.min()
        rows.append((model, phase, best.throughput_img_s, int(best.batch_size), int(knee)))
    columns = ["model", "phase", "best_throughput_img_s", "best_batch_size", "knee_batch_size"]
    return pd.DataFrame(rows, columns=columns)
