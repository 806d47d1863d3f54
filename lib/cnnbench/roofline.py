"""The roofline: attainable performance min(peak, bandwidth x intensity) from measured roofs, and the placement
of every measured workload (Scenario A, the batch sweep, single layers from the profiler) on it."""

from __future__ import annotations

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

from cnnbench import devices, engine, published, results, scenarios, traffic


def attainable(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """GFLOP/s the roofline allows at ``intensity`` FLOP/byte."""
    return min(peak_gflops, bandwidth_gbs * intensity)


def roof_for(peaks: pd.DataFrame, precision: str) -> pd.Series:
    """The measured roof of ``precision`` (tf32 falls back to fp32, missing half precisions to fp32)."""
    measured = peaks[peaks.kind == "measured"].set_index("precision")
    for p in (precision, "fp32"):
        if p in measured.index:
            return measured.loc[p]
    raise KeyError(f"no measured roof for {precision}")


def step_intensity(model: str, batch_size: int, image_size: int, num_classes: int, phase: str,
                   precision: str = "fp32") -> dict:
    """Whole-step FLOPs, bytes and intensity of one configuration (see :mod:`cnnbench.traffic`)."""
    ops = traffic.count_step(model, batch_size, image_size, num_classes, phase, precision)
    return {"model": model, "phase": phase, "batch_size": batch_size, "image_size": image_size,
            "precision": precision, **traffic.summary(ops)}


def intensities_for(results: pd.DataFrame) -> pd.DataFrame:
    """Intensity of every distinct configuration of a results table (Scenario A or the sweep)."""
    keys = results[["model", "phase", "batch_size", "image_size", "num_classes", "precision"]].drop_duplicates()
    return pd.DataFrame([step_intensity(r.model, int(r.batch_size), int(r.image_size), int(r.num_classes), r.phase,
                                        r.precision) for r in keys.itertuples()])


def place(results: pd.DataFrame, intensities: pd.DataFrame, peaks: pd.DataFrame, source: str) -> pd.DataFrame:
    """roofline.csv rows: each measured configuration at its intensity, with attainable and efficiency."""
    ok = results[results.status == "ok"]
    merged = ok.merge(intensities[["model", "phase", "batch_size", "image_size", "precision",
                                   "intensity_flop_per_byte"]], on=["model", "phase", "batch_size", "image_size", "precision"])
    rows = []
    for r in merged.itertuples():
        roof = roof_for(peaks, r.precision)
        att = attainable(r.intensity_flop_per_byte, roof.peak_gflops, roof.bandwidth_gbs)
        rows.append({
            "source": source, "device_name": r.device_name, "model": r.model, "phase": r.phase,
            "batch_size": r.batch_size, "precision": r.precision, "memory_format": r.memory_format,
            "intensity_flop_per_byte": r.intensity_flop_per_byte, "achieved_gflops": r.achieved_gflops,
            "attainable_gflops": att, "efficiency": r.achieved_gflops / att,
            "bound": "memory" if r.intensity_flop_per_byte < roof.ridge_flop_per_byte else "compute",
            "roof": f"measured {roof.name}",
        })
    return pd.DataFrame(rows)


def parameter_proxy(complexity: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's proxy, FLOPs per image / parameter bytes, recomputed from our counts (seed 000 used MACs at 224)."""
    ref = complexity[complexity.role.str.startswith("reference")]
    return pd.DataFrame({"model": ref.model,
                         "proxy_ai_macs224_over_param_bytes": ref.gmacs_fwd * 1e9 / (ref.param_mib * 2**20)})


def profile_layers(cfg: engine.Config, device: torch.device, protocol: engine.Protocol, steps: int = 3,
                   warmup: int = 2) -> pd.DataFrame:
    """Time every op of ``steps`` real steps with ``torch.profiler`` (shapes recorded) and join each (op, shapes)
    with its counted FLOPs and bytes: one row per layer-op with its own intensity and achieved rate."""
    work = engine.Workload(cfg, device, protocol)
    for _ in range(warmup):
        work.step()
    devices.synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(steps):
            work.step()
        devices.synchronize(device)
    counted = traffic.by_op_shape(
        traffic.count_step(cfg.model, cfg.batch_size, cfg.image_size, cfg.num_classes, cfg.phase, cfg.precision))
    rows = []
    for evt in prof.key_averages(group_by_input_shape=True):
        c = counted.get((evt.key, str(evt.input_shapes)))
        if c is None:
            continue
        total_us = getattr(evt, "device_time_total", 0) if device.type == "cuda" else evt.cpu_time_total
        time_s = total_us / 1e6 / steps
        if time_s <= 0 or c["bytes"] == 0:
            continue
        # per-call counts times the calls the profiler timed, so FLOPs, bytes and time cover the same calls
        calls = evt.count / steps
        scale = calls / c["calls"]
        work_flops = (c["flops"] or c["flops_elementwise"]) * scale
        c = {**c, "bytes": c["bytes"] * scale, "calls": calls}
        mods = c["modules"]
        rows.append({
            "model": cfg.model, "phase": cfg.phase, "batch_size": cfg.batch_size, "op": evt.key.replace("aten::", ""),
            "layer": mods[0] + (f" (+{len(mods) - 1})" if len(mods) > 1 else ""), "calls_per_step": c["calls"],
            "time_per_step_s": time_s, "flops": work_flops, "flops_counted": "matmul/conv" if c["flops"] else
            "1 per output element", "bytes": c["bytes"], "intensity_flop_per_byte": work_flops / c["bytes"],
            "achieved_gflops": work_flops / time_s / 1e9,
        })
    df = pd.DataFrame(rows)
    if len(df):
        df["time_share"] = df.time_per_step_s / df.time_per_step_s.sum()
        df = df.sort_values("time_per_step_s", ascending=False).reset_index(drop=True)
    return df


def compare_with_seeds(intensity: pd.DataFrame, complexity: pd.DataFrame) -> pd.DataFrame:
    """Our counted step intensities beside seed 000's parameter-bytes proxy and seed 003's figures."""
    ours = intensity.pivot_table(index="model", columns="phase", values="intensity_flop_per_byte", aggfunc="first")
    ours.columns = [f"ours_{c}_step_flop_per_byte" for c in ours.columns]
    out = ours.reset_index().merge(parameter_proxy(complexity), on="model", how="left")
    out["published_by_000_proxy"] = out.model.map(published.PARAM_PROXY_AI_000)
    out["published_by_003"] = out.model.map(published.AI_003)
    return out


def intensity_vs_batch(model_names, batch_sizes, p) -> pd.DataFrame:
    """Training-step intensity of each model at each batch size (the run's resolution and classes)."""
    rows = []
    for model in model_names:
        _, _, size, classes = scenarios.model_data(p, model)
        rows += [step_intensity(model, bs, size, classes, "train") for bs in batch_sizes]
    return pd.DataFrame(rows)


def layers_for_models(run, scenario_a: pd.DataFrame, steps: int = 2) -> pd.DataFrame:
    """Profiled layers of each model's training step at its Scenario A configuration (first variant)."""
    ok = scenario_a[(scenario_a.status == "ok") & (scenario_a.phase == "train")].drop_duplicates("model")
    protocol = engine.Protocol.from_params(run.params)
    frames = []
    for r in ok.itertuples():
        cfg = engine.Config(r.model, "train", int(r.batch_size), int(r.image_size), int(r.num_classes),
                            int(r.in_channels), r.precision, r.memory_format, False, "device")
        frames.append(profile_layers(cfg, run.device, protocol, steps=steps))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def layer_points(layers: pd.DataFrame, peaks: pd.DataFrame) -> pd.DataFrame:
    """roofline.csv rows for profiled layers (fp32 roof)."""
    if layers.empty:
        return pd.DataFrame()
    roof = roof_for(peaks, "fp32")
    att = [attainable(i, roof.peak_gflops, roof.bandwidth_gbs) for i in layers.intensity_flop_per_byte]
    return pd.DataFrame({
        "source": "layer", "device_name": roof.device_name, "model": layers.model, "phase": layers.phase,
        "batch_size": layers.batch_size, "precision": "fp32", "layer": layers.layer, "op": layers.op,
        "intensity_flop_per_byte": layers.intensity_flop_per_byte, "achieved_gflops": layers.achieved_gflops,
        "attainable_gflops": att, "efficiency": layers.achieved_gflops / pd.Series(att, index=layers.index),
        "bound": ["memory" if i < roof.ridge_flop_per_byte else "compute" for i in layers.intensity_flop_per_byte],
        "roof": "measured fp32",
    })


def across_runs(outputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scenario A roofline points and measured roofs of every run under ``outputs`` (for per-model plots)."""
    points, roofs = [], []
    for run_dir in sorted(d for d in outputs.iterdir() if (d / "roofline.csv").is_file()):
        pts = pd.DataFrame(results.read_rows(run_dir / "roofline.csv"))
        points.append(pts[pts.source == "scenario_a"].assign(run=run_dir.name))
        if (run_dir / "device_peaks.csv").is_file():
            roofs.append(pd.DataFrame(results.read_rows(run_dir / "device_peaks.csv")).assign(run=run_dir.name))
    num = ["intensity_flop_per_byte", "achieved_gflops", "peak_gflops", "bandwidth_gbs", "batch_size"]
    frames = [pd.concat(f, ignore_index=True) if f else pd.DataFrame() for f in (points, roofs)]
    for df in frames:
        for col in num:
            if col in df:
                df[col] = pd.to_numeric(df[col], errors="coerce")
    return frames[0], frames[1]
