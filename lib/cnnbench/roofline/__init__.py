"""The roofline: attainable performance min(peak, bandwidth x intensity) from measured roofs, and every measured
workload (Scenario A, the batch sweep, profiled layers) placed on it hierarchically, as Nsight Compute does: against
the roof of the innermost memory level its working set fits in, with the DRAM-only view and every level's
``attainable_<level>_gflops`` beside it; a point more than 5% above its own roof is flagged with the reason."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from torch.profiler import DeviceType, profile

from cnnbench import devices, knobs, progress, published, results
from cnnbench.measure import dispatch, engine, traffic

# 04's figures, writer and run finder, named here for 04's one entry point
from cnnbench.plots import bandwidth_sweep, layer_figures, per_model_rooflines, trajectory  # noqa: F401, I001
from cnnbench.plots import roofline as plot  # noqa: F401
from cnnbench.results import write_rows as write_rows
from cnnbench.results.runs import runs_for as runs_for
from cnnbench.roofline import peaks as peaks_mod


def attainable(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """GFLOP/s the roofline allows at ``intensity`` FLOP/byte."""
    return min(peak_gflops, bandwidth_gbs * intensity)


# A point may sit this far above its roof before it is flagged (timer and counting noise).
ABOVE_ROOF_TOLERANCE = 0.05


class _Roofs:
    """A peaks table's measured roofs per precision (unmeasured: fp32's) and level (none: DRAM), filtered once."""

    def __init__(self, peaks: pd.DataFrame):
        m = results.schema.declared(peaks, "device_peaks")
        # the spec sheet's compute peak per precision: no kernel runs faster than the hardware
        self.spec = m[m.kind == "spec"].groupby("precision").peak_gflops.max().to_dict()
        m = m[m.kind == "measured"]
        self.leveled = m.level.notna().any()
        self.rows = dict(tuple(m.fillna({"level": "dram"}).groupby("precision", sort=False)))
        one = {p: g.drop_duplicates("level").set_index("level", drop=False) for p, g in self.rows.items()}
        self.levels = {p: {lv: r.rename(p) for lv, r in f.iterrows()} for p, f in one.items()}

    def measured(self, precision: str) -> tuple[pd.DataFrame, str]:
        p = precision if precision in self.rows else "fp32"  # measured on every device
        return self.rows[p], p

    def dram(self, precision: str) -> pd.Series:
        """The main-memory roof (else the first measured one)."""
        levels = self.levels[self.measured(precision)[1]]
        return levels[next((lv for lv in levels if lv in peaks_mod.MAIN_MEMORY), next(iter(levels)))]

    def level_roof(self, precision: str, working_set_bytes: float) -> pd.Series:
        """The roof of the innermost level holding ``working_set_bytes`` (unknown: main memory's)."""
        rows, p = self.measured(precision)
        return self.levels[p][peaks_mod.level_of(working_set_bytes, rows)]

    def attainable(self, precision: str, intensity: float) -> dict:
        """``attainable_<level>_gflops`` under every measured level's roof of ``precision`` (none without levels)."""
        levels = self.levels[self.measured(precision)[1]] if self.leveled else {}
        return {
            f"attainable_{lv}_gflops": attainable(intensity, r.peak_gflops, r.bandwidth_gbs)
            for lv, r in levels.items()
        }


def roof_for(peaks: pd.DataFrame, precision: str) -> pd.Series:
    """The measured main-memory roof of ``precision`` (else fp32's), named by its precision."""
    return _Roofs(peaks).dram(precision)


def step_intensity(
    model: str, batch_size: int, image_size: int, num_classes: int, phase: str, precision: str = "fp32"
) -> dict:
    """Whole-step FLOPs, bytes and intensity of one configuration (see :mod:`cnnbench.measure.traffic`)."""
    ops = traffic.count_step(model, batch_size, image_size, num_classes, phase, precision)
    config = {"model": model, "phase": phase, "batch_size": batch_size, "image_size": image_size}
    return {**config, "precision": precision, **traffic.summary(ops)}


_KEYS = ["model", "phase", "batch_size", "image_size", "precision"]


def intensities_for(results: pd.DataFrame) -> pd.DataFrame:
    """Intensity of every distinct configuration of a results table (Scenario A or the sweep) that ran (status ok)."""
    ok = results[results.status == "ok"]
    keys = ok[[*_KEYS, "num_classes"]].drop_duplicates() if len(ok) else ok  # absent: no knob columns
    rows = [
        step_intensity(r.model, *map(int, (r.batch_size, r.image_size, r.num_classes)), r.phase, r.precision)
        for r in keys.itertuples()
    ]
    return pd.DataFrame(
        rows, columns=None if rows else [*_KEYS, "gflops", "gbytes", "intensity_flop_per_byte"]
    )


def place(results: pd.DataFrame, intensities: pd.DataFrame, peaks: pd.DataFrame, source: str) -> pd.DataFrame:
    """roofline.csv rows: each ok configuration against its level's roof and the DRAM roof (:func:`_points`)."""
    ok = knobs.columns(results[results.status == "ok"])  # a knob a row lacks at its default
    if ok.empty or intensities.empty:
        return pd.DataFrame()
    merged = ok.merge(intensities[[*_KEYS, "intensity_flop_per_byte", "gbytes"]], on=_KEYS)
    merged = merged.assign(source=source, working_set=merged.gbytes * 1e9)
    return _points(merged, _IDENT, _Roofs(peaks))


_IDENT = [*"source device_name device_kind model phase batch_size".split(), *knobs.variant_only()]


def _points(df: pd.DataFrame, ident: list[str], roofs: _Roofs) -> pd.DataFrame:
    """roofline.csv rows: each point of ``df`` against its level's roof and the DRAM roof, flagged (with why) above."""
    rows = []
    for r in df.itertuples():
        row = {k: getattr(r, k) for k in ident}
        x, ws, achieved = r.intensity_flop_per_byte, r.working_set, r.achieved_gflops
        roof, dram = roofs.level_roof(r.precision, ws), roofs.dram(r.precision)
        row |= {"intensity_flop_per_byte": x, "achieved_gflops": achieved, "working_set_mib": ws / 2**20}
        row |= {"level": roof.level, "level_bandwidth_gbs": roof.bandwidth_gbs}
        for suffix, rf in (("", roof), ("_dram", dram)):
            att = row[f"attainable{suffix}_gflops"] = attainable(x, rf.peak_gflops, rf.bandwidth_gbs)
            row[f"efficiency{suffix}"] = achieved / att if att else float("nan")
            row[f"bound{suffix}"] = "memory" if x < rf.peak_gflops / rf.bandwidth_gbs else "compute"
        above, reason = bool(achieved > (1 + ABOVE_ROOF_TOLERANCE) * row["attainable_gflops"]), ""
        spec = roofs.spec.get(roof.name, math.inf)
        if above and achieved > spec:
            reason = (
                f"{achieved:.4g} GFLOP/s is above the spec sheet's {roof.name} peak {spec:.4g}: the counted FLOPs "
                "exceed what the hardware can do, the kernel did fewer (an algorithm such as Winograd or FFT "
                "convolution, not the direct count)"
            )
        elif above and achieved > roof.peak_gflops:
            reason = (
                f"{achieved:.4g} GFLOP/s beats the measured compute peak {roof.peak_gflops:.4g}: the "
                "micro-benchmarks' best is a lower bound on the hardware, this kernel ran faster"
            )
        elif above:
            reason = (
                f"moves {achieved / x:.4g} GB/s of counted bytes, above the {roof.level} roof "
                f"{roof.bandwidth_gbs:.4g} GB/s: its data is reused inside the op or came from a faster level "
                "than its working set suggests, so the compulsory byte count overstates its traffic"
            )
        row |= {"above_roof": above, "above_roof_reason": reason}
        rows.append(row | {"roof": f"measured {roof.name} {roof.level}", **roofs.attainable(roof.name, x)})
    return pd.DataFrame(rows)


LAYER_COLUMNS = """model phase batch_size op layer calls_per_step time_per_step_s flops flops_counted bytes
intensity_flop_per_byte achieved_gflops time_share""".split()


def profile_layers(
    cfg: engine.Config, b: devices.Backend, p, steps: int = 3, warmup: int = 2
) -> pd.DataFrame:
    """Every op of ``steps`` steps on ``b``'s device, timed by ``torch.profiler``, with its counted FLOPs and bytes
    (:func:`layer_table`); :class:`cnnbench.devices.Unavailable` where ops have no device time (MPS)."""
    if b.op_time == "queue":
        raise devices.Unavailable(
            f"torch.profiler times {b.kind} ops on the host (the time to queue them), not on "
            "the device: a per-layer roofline needs each op's device time"
        )
    with engine.Workload(cfg, b, p) as work:
        for _ in range(warmup):
            work.step()
        b.synchronize()
        with profile(activities=b.profiler_activities(), record_shapes=True) as prof:
            for _ in range(steps):
                work.step()
            b.synchronize()
    ops = traffic.count_step(
        cfg.model, cfg.batch_size, cfg.image_size, cfg.num_classes, cfg.phase, cfg.precision
    )
    counted = traffic.by_op_shape(ops)
    return layer_table(prof.key_averages(group_by_input_shape=True), counted, steps, cfg, b)


def layer_table(events, counted: dict, steps: int, cfg: engine.Config, b: devices.Backend) -> pd.DataFrame:
    """One row per profiled (op, shapes) that has a count (under the counter's name: ``b.op_names()``), with its
    device time per step; ``time_share`` is over all the ops' time in the step, matched or not."""
    aliases = b.op_names()
    # a kernel's time is its launching op's self device time and again its own event's: the ops' only, once each
    host_ops = [e for e in events if getattr(e, "device_type", DeviceType.CPU) == DeviceType.CPU]
    total_us = sum(b.op_time_us(evt, self_only=True) for evt in host_ops)
    rows = []
    for evt in events:
        c = counted.get((aliases.get(evt.key, evt.key), str(evt.input_shapes)))
        time_s = b.op_time_us(evt) / 1e6 / steps
        if c is None or time_s <= 0 or c["bytes"] == 0:
            continue
        # per-call counts times the calls the profiler timed, so FLOPs, bytes and time cover the same calls
        calls = evt.count / steps
        scale = calls / c["calls"]
        work_flops = (c["flops"] or c["flops_elementwise"]) * scale
        nbytes = c["bytes"] * scale
        mods = c["modules"]
        rows.append(
            {
                "model": cfg.model,
                "phase": cfg.phase,
                "batch_size": cfg.batch_size,
                "op": evt.key.replace("aten::", ""),
                "layer": mods[0] + (f" (+{len(mods) - 1})" if len(mods) > 1 else ""),
                "calls_per_step": calls,
                "time_per_step_s": time_s,
                "flops": work_flops,
                "flops_counted": "matmul/conv" if c["flops"] else "1 per output element",
                "bytes": nbytes,
                "intensity_flop_per_byte": work_flops / nbytes,
                "achieved_gflops": work_flops / time_s / 1e9,
                "time_share": time_s / (total_us / 1e6 / steps) if total_us > 0 else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=LAYER_COLUMNS).sort_values(
        "time_per_step_s", ascending=False, ignore_index=True
    )


def compare_with_seeds(intensity: pd.DataFrame, complexity: pd.DataFrame) -> pd.DataFrame:
    """Our counted step intensities beside seed 000's parameter-bytes proxy (in GFLOP/MB: x 10^9 / 10^6 is FLOP/byte,
    x 10^9 / 2^20 with its MB read as MiB, as its fp32 model sizes are) and seed 003's figures."""
    if intensity.empty:
        out = pd.DataFrame({"model": sorted(set(published.PARAM_PROXY_AI_000) | set(published.AI_003))})
    else:
        ours = intensity.pivot_table(
            index="model", columns="phase", values="intensity_flop_per_byte", aggfunc="first"
        )
        ours.columns = [f"ours_{c}_step_flop_per_byte" for c in ours.columns]
        out = ours.reset_index()
    if not complexity.empty:
        ref = complexity[complexity.role.str.startswith("reference")]  # seed 000's proxy from our counts
        proxy = ref.gmacs_fwd * 1e9 / (ref.param_mib * 2**20)  # MACs at 224 px over parameter bytes
        proxy = pd.DataFrame({"model": ref.model, "proxy_ai_macs224_over_param_bytes": proxy})
        out = out.merge(proxy, on="model", how="left")
    seed = out.model.map(published.PARAM_PROXY_AI_000)
    out["published_by_000_gflop_per_mb"] = seed
    out["published_by_000_as_flop_per_byte"] = seed * 1e9 / 1e6
    out["published_by_000_as_flop_per_byte_mib"] = seed * 1e9 / 2**20
    out["published_by_003_flop_per_byte"] = out.model.map(published.AI_003)
    return out


def read_inputs(run) -> dict[str, pd.DataFrame]:
    """The results 04 builds on (complexity, scenario_a, batch_sweep): current rows, empty frames when missing."""
    return {name: results.read(run.dir, name) for name in ("complexity", *results.RATES)}


def host_steps(run) -> pd.DataFrame:
    """host_steps.csv: the host's cost of each model's steps on this device (:func:`dispatch.host_step`), resuming."""
    table, p, b = results.table("host_steps"), run.params, devices.backend(run.device)  # passed down
    name = b.name()
    keys = [{"device_name": name, "model": m, "phase": ph, "precision": p.variants[0].get("precision", "fp32")}
            for m in p.models for ph in p.phases]  # fmt: skip
    table.plan(run.dir, keys, "host_steps")
    rows = table.file(run.dir)
    todo = [k for k in keys if not rows.done(k)]
    for k in todo:
        progress.note(f"host cost: {k['model']} {k['phase']}")
        rows.append({"device_name": name, **dispatch.host_step(p, b, k["model"], k["phase"], k["precision"])})
    progress.resumed(len(keys) - len(todo), len(keys), table.filename, "host step costs")
    return results.read(run.dir, "host_steps")


def inputs_note(inputs: dict[str, pd.DataFrame]) -> str:
    """One line saying what 04 has to place and what is missing or failed (never a traceback)."""
    parts = []
    for name, df in inputs.items():
        if df.empty:
            parts.append(f"{name}.csv missing (run {results.table(name).notebook} first)")
        elif "status" in df and not (df.status == "ok").any():
            counts = ", ".join(f"{s} {n}" for s, n in df.status.value_counts().items())
            parts.append(f"every {name} row failed ({counts}): nothing of it to place")
        else:
            parts.append(f"{name}: {int((df.status == 'ok').sum()) if 'status' in df else len(df)} row(s)")
    return "; ".join(parts) + ". The roofs above stand on their own."


def intensity_vs_batch(model_names, batch_sizes, p) -> pd.DataFrame:
    """Training-step intensity of each model at each batch size; a batch it cannot train on is an "error" row."""
    rows = []
    for model, bs in ((m, bs) for m in model_names for bs in batch_sizes):
        cfg = engine.config(p, model, "train")
        try:
            row = {**step_intensity(model, bs, cfg.image_size, cfg.num_classes, "train"), "status": "ok"}
        except (ValueError, RuntimeError) as err:
            row = {"model": model, "batch_size": bs, "status": "error", "error": str(err).splitlines()[0]}
        rows.append(row)
    return pd.DataFrame(rows)


def layers_for_models(run, scenario_a: pd.DataFrame, steps: int = 2) -> pd.DataFrame:
    """Profiled layers of each model's training step, eager, at its Scenario A configuration (the seeds' variant
    where measured, else the first of the params' ``variants`` measured, else the first in the table's order; the
    newest row of one measured twice)."""
    ok = knobs.columns(scenario_a[(scenario_a.status == "ok") & (scenario_a.phase == "train")])
    if ok.empty:
        return pd.DataFrame(columns=LAYER_COLUMNS)
    names = list(knobs.variant_only())
    variants = [tuple(knobs.Setting(v)[k] for k in names) for v in run.params.variants]
    rows = list(ok[names].itertuples(index=False, name=None))
    order = [tuple(knobs.KNOBS[k].default for k in names), *variants, *rows]
    ok = ok.assign(_rank=[order.index(r) for r in rows]).iloc[::-1].sort_values("_rank", kind="stable")
    ok = ok.drop_duplicates("model").sort_index()
    table = results.table("roofline_layers")
    cache, planned, profiled = table.file(run.dir), [], 0
    b = devices.backend(run.device)  # the one backend of these profiles, passed down
    where = {"device_kind": b.kind, "device_name": b.name()}
    where |= {"seed": run.params.seed, "layer_steps": steps}
    for r in ok.to_dict("records"):
        setting = knobs.Setting({k: r[k] for k in knobs.keyed()}).with_(compile="off", data_mode="device")
        sizes = (int(r["image_size"]), int(r["num_classes"]), int(r["in_channels"]))
        cfg = engine.Config(r["model"], "train", *sizes, r.get("dataset", "synthetic"), setting)
        planned.append(key := {**cfg.columns(), **where})
        if not cache.finished(key, table.plan_columns):  # profiled before with the same key: kept
            profiled += 1
            try:
                layers = profile_layers(cfg, b, run.params, steps=steps)
            except devices.Unavailable as why:
                progress.note(f"layer roofline of {cfg.model}: {why}")
                continue
            cache.extend(
                [{**key, **row, "status": "ok"} for row in layers.to_dict("records")], table.plan_columns
            )
    table.plan(run.dir, planned, "roofline")
    progress.resumed(len(planned) - profiled, len(planned), cache.path.name, "layer profiles")
    layers = results.read(run.dir, "roofline_layers")  # profiles' rows together, with the variant profiled
    return layers.reindex(columns=[*LAYER_COLUMNS, *knobs.variant_only()])


def layer_points(layers: pd.DataFrame, peaks: pd.DataFrame) -> pd.DataFrame:
    """roofline.csv rows for profiled layers against the roofs of the precision they ran in, as :func:`place`
    (working set: one call's bytes)."""
    if layers.empty:
        return pd.DataFrame()
    roofs = _Roofs(peaks)
    dram = roofs.dram("fp32")  # its device names every layer's row
    layers = layers.assign(source="layer", device_name=dram.device_name, device_kind=dram.device_kind)
    sets = layers.bytes / layers.calls_per_step.clip(lower=1e-9)  # one call's bytes must fit in the level
    layers = knobs.columns(layers).assign(compile="off", working_set=sets)  # profiled eager
    return _points(layers, [*_IDENT, "layer", "op"], roofs)


def flagged(points: pd.DataFrame) -> pd.DataFrame:
    """The points more than 5% above their own roof, with the reason (empty when none)."""
    rates = ["achieved_gflops", "attainable_gflops", "above_roof_reason"]
    if points.empty or "above_roof" not in points:
        return pd.DataFrame(columns=["source", "model", "op", "level", *rates])
    cols = [*"source model phase op layer level working_set_mib intensity_flop_per_byte".split(), *rates]
    return points.loc[points.above_roof.astype(bool), [c for c in cols if c in points]]


def above_roof_summary(points: pd.DataFrame) -> pd.DataFrame:
    """Points per source and level, how many sit more than 5% above their own roof, and above the DRAM roof."""
    if points.empty:
        return pd.DataFrame(columns=["source", "level", "points", "above_own_roof", "above_dram_roof"])
    return (
        points.groupby(["source", "level"])
        .agg(
            points=("achieved_gflops", "size"),
            above_own_roof=("above_roof", "sum"),
            above_dram_roof=("efficiency_dram", lambda e: int((e > 1 + ABOVE_ROOF_TOLERANCE).sum())),
        )
        .reset_index()
    )


def across_runs(run_dirs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scenario A roofline points and measured roofs of ``run_dirs`` (:func:`runs_for`), tagged ``run_name``."""
    points, roofs = [], []
    for run_dir in sorted(map(Path, run_dirs)):
        pts = results.read(run_dir, "roofline")
        if not len(pts):  # a run with nothing placed
            continue
        points.append(pts[pts.source == "scenario_a"].assign(run_name=run_dir.name))
        peaks = results.read(run_dir, "device_peaks")
        if len(peaks):
            roofs.append(peaks.assign(run_name=run_dir.name))
    return tuple(pd.concat(f, ignore_index=True) if f else pd.DataFrame() for f in (points, roofs))
