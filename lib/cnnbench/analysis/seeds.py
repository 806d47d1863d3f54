"""Every seed's published numbers beside ours: each table stacks the seed's rows (``source`` "published by
<seed file>") and ours ("ours: <run>"), a ``differences`` column naming what differs; a seed figure no merged
run matches is shown alone with a ``note``, and a row of another device class or configuration says "not
matched"."""

from __future__ import annotations

import math

import pandas as pd

from cnnbench import knobs, published
from cnnbench.analysis.compare import configured, match_keys
from cnnbench.scratch import summary as scratch_summary

MIB_TO_MB = 2**20 / 1e6  # our MiB shown in the seeds' MB (read as 10^6 bytes)


def _pub(seed_file: str) -> str:
    return f"published by {seed_file}"


def _ours_label(run) -> str:
    return "ours: " + str(run)


def _where(df: pd.DataFrame, need: set[str], pick) -> pd.DataFrame:
    """``df``'s rows where ``pick(df)`` holds; empty when ``df`` is, or lacks a column of ``need``."""
    return df[pick(df)] if len(df) and need <= set(df.columns) else pd.DataFrame()


def _runs(df: pd.DataFrame) -> pd.Series:
    """``df``'s run names as text ("" where it has none)."""
    return df.run_name.astype(str) if "run_name" in df else pd.Series("", index=df.index)


def _alone(pub: pd.DataFrame, csv: str) -> pd.DataFrame:
    return pub.assign(note=f"no run of this analysis wrote {csv}: the published table alone")


def _fp32(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Our ok Scenario A rows in the seeds' variant (fp32, NCHW, eager), one per run and configuration."""
    if scenario_a.empty or "status" not in scenario_a:
        return pd.DataFrame()
    ok = knobs.default_variant(configured(scenario_a))
    classes = [published.device_class(k, n) for k, n in zip(ok.device_kind, ok.device_name, strict=True)]
    return ok.assign(device_class=classes)


def _config(r) -> str:
    """Our configuration in words, from a row of ours."""
    return (
        f"ours: {getattr(r, 'dataset', '?')} data ({getattr(r, 'data_mode', '?')} mode), "
        f"{getattr(r, 'image_size', '?')} px, batch {getattr(r, 'batch_size', '?')}, synchronised "
        "measured windows"
    )


def _stack(pub: pd.DataFrame, ours: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The seed's rows and ours in one table, each group of ``by`` with the seed's rows first."""
    out = pd.concat([pub.assign(_o=0), ours.assign(_o=1)], ignore_index=True)
    out = out.sort_values([*by, "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)
    return out[["source", *[c for c in out.columns if c != "source"]]]


def _match(device_class: str, seed_classes) -> str:
    matched = device_class in set(seed_classes)
    return f"{'matched device class' if matched else 'not matched: no seed device of class'}: {device_class}"


# --- seed 000 ------------------------------------------------------------------------------------------------
def _wide(ok: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    """One row per run and configuration (phase apart), ``<phase>_<value>`` columns."""
    keys = "run_name device_name device_class model batch_size image_size dataset data_mode".split()
    keys = [k for k in keys if k in ok]
    vals = [v for v in values if v in ok]
    wide = ok.pivot_table(index=keys, columns="phase", values=vals, aggfunc="first")
    wide.columns = [f"{phase}_{value}" for value, phase in wide.columns]
    return wide.reset_index()


def _tflops_formula_000(p: pd.DataFrame) -> list[str]:
    """Per row of seed 000's Table 3: its TFLOP/s as img/s x the 224 px forward count where that is what it is
    (within 10%), else how many times that product it is (no stated formula gives it)."""
    flops = p.model.map(published.COMPLEXITY_000.set_index("model").flops_g)
    r = p.train_tflops / (p.train_img_s * flops / 1e3)
    return [
        "TFLOP/s = img/s x the 224 px forward count (MACs, no training factor)"
        if abs(x - 1) < 0.1
        else f"TFLOP/s (train) = {x:.2f}x img/s x the 224 px forward count: no stated formula gives it"
        for x in r
    ]


_SOURCE = (lambda p: _pub(p.source.iloc[0]), lambda o: o.run_name.map(_ours_label))
# seed 000's Table 3 -> our Scenario A rows (phases side by side); each column: (the seed's, ours)
_TABLE_3 = {
    "source": _SOURCE,
    "model": ("model", "model"),
    "device": ("device_class", "device_name"),
    "batch_size": ("batch_size", "batch_size"),
    **{
        f"{p}_{c}": (f"{p}_{c}", f"{p}_{o}")
        for c, o in (("img_s", "throughput_img_s"), ("tflops", "achieved_tflops"))
        for p in ("train", "eval")
    },
    "peak_gpu_mem_mb": ("peak_gpu_mem_mb", None),
    "peak_device_mem_mib": (None, "train_peak_device_mem_mib"),
    "peak_rss_mib": (None, "train_peak_rss_mib"),
    "differences": (
        lambda p: [
            f"{c}; {f}; peak GPU memory in MB as printed (N/A on MPS and CPU)"
            for c, f in zip(p.configuration, _tflops_formula_000(p), strict=True)
        ],
        lambda w: [
            f"{_match(r.device_class, published.THROUGHPUT_000.device_class)}; {_config(r)}; TFLOP/s = img/s x "
            f"counted FLOPs of the step at {r.image_size} px (training: forward + backward); memory: the "
            "allocator's peak (MiB, CUDA/MPS) and the worker's peak RSS (MiB)"
            for r in w.itertuples()
        ],
    ),
}
# seed 000's Table 5 -> our Scenario A training rows
_TABLE_5 = {
    "source": _SOURCE,
    "model": ("model", "model"),
    "device": ("device_class", "device_name"),
    "gpu_util_pct": ("gpu_util_pct", "util_device_mean_pct"),
    "cpu_util_pct": ("cpu_util_pct", "util_cpu_mean_pct"),
    "process_cpu_util_pct": (None, "util_process_cpu_mean_pct"),
    "samples": (None, "telemetry_samples"),
    "differences": (
        lambda u: (
            "one reading per model and device, when and how not stated (phase neither; "
            f"{u.gpu_util_pct.min():.0f}-{u.gpu_util_pct.max():.0f}% GPU on a training T4 suggests a reading outside "
            "the run: our inference); GPU N/A on MPS and CPU"
        ),
        lambda o: [
            f"{_match(r.device_class, published.UTILISATION_000.device_class)}; {_config(r)}; mean of the samples "
            "taken during the training step's measured windows (CPU: every core, 100% = all busy)"
            for r in o.itertuples()
        ],
    ),
}
# seed 000's Table 6 -> our batch sweep's training rows
_TABLE_6 = {
    **{c: (c, c) for c in ("model", "batch_size", "throughput_img_s", "achieved_gflops", "status")},
    "source": _SOURCE,
    "device": (lambda s: s.configuration.str.split(";").str[0], "device_name"),
    "differences": (
        "configuration",
        lambda o: [f"{_config(r)}; achieved GFLOP/s from counted training FLOPs" for r in o.itertuples()],
    ),
}


def _side(rows: pd.DataFrame, columns: dict, i: int) -> pd.DataFrame:
    """Side ``i`` (0: the seed's, 1: ours) of a column map: each column a column of ``rows`` (missing: empty),
    a function of ``rows``, or absent on that side (None)."""
    return pd.DataFrame(
        {
            c: v(rows) if callable(v) else rows.get(v)
            for c, pair in columns.items()
            if (v := pair[i]) is not None
        }
    )


def _paired(
    theirs: pd.DataFrame, ours: pd.DataFrame, columns: dict, by: list[str], alone: str
) -> pd.DataFrame:
    """A seed's table and ours by one column map (:func:`_side`), stacked by ``by`` with the seed's rows first;
    the seed's alone, labelled (``alone``: the CSV no run wrote), when we have no row."""
    pub = _side(theirs, columns, 0)
    return _alone(pub, alone) if ours.empty else _stack(pub, _side(ours, columns, 1), by)


def performance_beside_000(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 3 whole (img/s, TFLOP/s, peak GPU memory in MB) beside ours per run: our throughput,
    achieved TFLOP/s from counted FLOPs at our resolution, the allocator's peak (MiB) and the worker's peak
    RSS."""
    p, ok = published.THROUGHPUT_000, _fp32(scenario_a)
    ok = ok[ok.model.isin(p.model)] if len(ok) else ok
    w = (
        _wide(ok, ["throughput_img_s", "achieved_tflops", "peak_device_mem_mib", "peak_rss_mib"])
        if len(ok)
        else ok
    )
    return _paired(p, w, _TABLE_3, ["model"], "scenario_a.csv with the seed's models")


def utilisation_beside_000(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 5 (GPU and CPU utilisation, %) beside ours: the mean of the samples taken during the
    measured windows of each training step, per run and model."""
    u, ok = published.UTILISATION_000, _fp32(scenario_a)
    ok = ok[(ok.phase == "train") & ok.model.isin(u.model)] if len(ok) else ok
    return _paired(u, ok, _TABLE_5, ["model"], "scenario_a.csv with the seed's models")


def sweep_beside_000(batch_sweep: pd.DataFrame, model: str = "squeezenet1_1") -> pd.DataFrame:
    """Seed 000's Table 6 (SqueezeNet's batch sweep: img/s, GFLOP/s, the unstable batch) beside every run's
    training rows of the same model, failed batches (oom, unstable) kept as rows."""
    rows = _where(batch_sweep, {"model", "phase"}, lambda d: (d.model == model) & (d.phase == "train"))
    return _paired(
        published.SWEEP_000, rows, _TABLE_6, ["model", "batch_size"], f"batch_sweep.csv with {model}"
    )


def _speedup_differences(r, seed_class: str) -> str:
    cfg = published.THROUGHPUT_000
    seed_bs = cfg[(cfg.model == r.model)].batch_size.iloc[0]
    px = published.setup("000")["image_px"]
    diffs = [
        f"data: ours {r.dataset} ({r.data_mode} mode) vs Tiny-ImageNet from disk",
        f"resolution: ours {r.image_size} px vs {px} px"
        if r.image_size != px
        else f"resolution: {px} px both",
        f"epoch size: ours synchronised windows vs {published.EPOCH_IMAGES_000:,}-image 'epochs' / epoch time",
    ]
    if r.batch_size != seed_bs:
        diffs.append(f"batch: ours {r.batch_size} vs {seed_bs}")
    return f"not matched (other machine: 000's {seed_class}); " + "; ".join(diffs)


def speedups_beside_000(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 8 (its training speedups between its devices) and, for a run on any device, our
    throughput over each seed device's for the same model and phase, labelled "not matched" with the
    configuration differences named (data, resolution, epoch size, batch): a ratio of two machines measured
    differently, never a speedup of ours."""
    sp = published.SPEEDUPS_000
    cols = [c for c in sp.columns if "_over_" in c]
    pub = sp.melt(id_vars="model", value_vars=cols, var_name="pair", value_name="speedup_x")
    pub = pub.assign(
        source=_pub(sp.source.iloc[0]),
        phase="train",
        a=pub.pair.str.split("_over_").str[0],
        b=pub.pair.str.split("_over_").str[1],
        comparison="published (its Table 8)",
        differences="its devices in its configuration: " + published.THROUGHPUT_000.configuration.iloc[0],
    ).drop(columns="pair")
    ok = _fp32(scenario_a)
    if ok.empty:
        return _alone(pub, "scenario_a.csv")
    seed = published.THROUGHPUT_000
    rows = []
    for r in ok.itertuples():
        ci = float(getattr(r, "throughput_ci95_img_s", math.nan))
        for s in seed[seed.model == r.model].itertuples():
            theirs = getattr(s, f"{r.phase}_img_s")
            rows.append(
                {
                    "source": _ours_label(r.run_name),
                    "model": r.model,
                    "phase": r.phase,
                    "a": f"{r.run_name} ({r.device_name})",
                    "b": f"000's {s.device_class}",
                    "a_img_s": r.throughput_img_s,
                    "a_ci95_img_s": ci,
                    "b_img_s": theirs,
                    "speedup_x": r.throughput_img_s / theirs,
                    "speedup_ci95_x": ci / theirs,  # theirs has no interval
                    "comparison": "not matched",
                    "differences": _speedup_differences(r, s.device_class),
                }
            )
    return _stack(pub, pd.DataFrame(rows), ["model", "phase"])


# --- seed 001 ------------------------------------------------------------------------------------------------
def _rss_001(memory: pd.DataFrame | None) -> pd.Series:
    """Process RSS after one step (baseline + growth, MiB) per run and backend, from backend_memory.csv."""
    need = {"model", "component", "measured_mib", "backend"}
    if memory is None or memory.empty or not need <= set(memory.columns):
        return pd.Series(dtype=float)
    m = memory[
        memory.model.eq("mnist_cnn") & memory.component.isin(["process_rss_baseline", "process_rss_growth"])
    ]
    return m.assign(run_name=_runs(m)).groupby(["run_name", "backend"]).measured_mib.sum(min_count=1)


def _accuracy_gap_001(epochs: int, images: float) -> str:
    s = published.setup("001")
    data = "MNIST's" if images == s["train_images"] else f"{images:,.0f} (not MNIST's {s['train_images']:,})"
    return (
        f"ours: {epochs} epoch(s) of {data} training images (synthetic MNIST-shaped glyphs unless "
        f"scratch_dataset is mnist) vs the seed's {s['epochs']} epochs of real MNIST: our accuracy is "
        "not the seed's for that reason, not the backend's; total_s sums every epoch, the first "
        "included; process RSS is one reading after a step (baseline + growth), the seed's an average "
        "over training"
    )


def cnn_extras_001(ours: pd.DataFrame, cnn: pd.DataFrame, memory: pd.DataFrame | None) -> pd.DataFrame:
    """Our CNN rows of :func:`backends_beside_001` with total training time, process RSS and differences."""
    ok = cnn[cnn.status == "ok"].assign(run_name=_runs(cnn))
    g = ok.groupby(["run_name", "backend"])
    per = pd.DataFrame({"total_s": g.epoch_s.sum(), "epochs": g.epoch.nunique(), "images": g.images.first()})
    per["process_rss_mib"] = _rss_001(memory).reindex(per.index)
    per = per.reindex(
        zip(ours.source.str.removeprefix("ours: ").str.removeprefix("ours"), ours.backend, strict=True)
    )
    return ours.assign(
        total_s=per.total_s.to_numpy(),
        process_rss_mib=per.process_rss_mib.to_numpy(),
        differences=[_accuracy_gap_001(int(e), i) for e, i in zip(per.epochs, per.images, strict=True)],
    )


# --- seed 002 ------------------------------------------------------------------------------------------------
def inference_beside_002(scenario_a: pd.DataFrame, model: str = "densenet121") -> pd.DataFrame:
    """Seed 002's inference "throughput" (seconds per test image: CPU ~5, GPU 2-3) as images/s beside our eval
    step of the same network (Scenario A) in images/s and seconds per image, per run."""
    inf = published.table("INFERENCE_002")
    s_img = inf.s_per_image.fillna((inf.s_per_image_low + inf.s_per_image_high) / 2)
    columns = {
        "source": _SOURCE,
        "model": (lambda i: model, "model"),
        "device": ("device_class", "device_name"),
        "s_per_image": (lambda i: s_img, lambda o: 1 / o.throughput_img_s),
        "inference_img_s": (lambda i: 1 / s_img, "throughput_img_s"),
        "inference_img_s_low": (lambda i: 1 / i.s_per_image_high, None),
        "inference_img_s_high": (lambda i: 1 / i.s_per_image_low, None),
        "differences": (
            lambda i: (
                "testing time for one image, as printed (GPU: the midpoint of its 2-3 s), inverted to "
                "images/s; batch size and resolution not stated (the seed prints no resolution)"
            ),
            lambda o: [
                f"{_config(r)}, {r.num_classes} classes: an eval step's forward under inference_mode, batched (not "
                "one image at a time), untrained weights"
                for r in o.itertuples()
            ],
        ),
    }
    ok = _fp32(scenario_a)
    ok = ok[(ok.model == model) & (ok.phase == "eval")] if len(ok) else ok
    return _paired(inf, ok, columns, ["model"], f"scenario_a.csv with {model} eval")


_CPU_002_KEYS = ("cpu_util_low_pct", "cpu_util_high_pct", "cpu_memory_gb", "cpu_temp_low_c")
_CPU_002_KEYS += ("cpu_temp_high_c", "cpu_processes", "cpu_threads", "cpu_clock_ghz")


def cpu_beside_002(
    transfer: pd.DataFrame, scenario_a: pd.DataFrame, model: str = "densenet121"
) -> pd.DataFrame:
    """Seed 002's CPU utilisation (while its GPUs trained, and in its CPU-only run) and its CPU-only run's
    memory (GB) beside ours: the peak RSS of 06's fine-tuning on the CPU (``transfer.csv``; GB = MiB x 2^20 /
    10^9) and the CPU utilisation and peak RSS of the same network's training step in Scenario A (06's own CPU
    samples are in ``transfer_telemetry.csv``, which the analysis does not merge)."""
    c = published.CPU_002
    pub = pd.DataFrame(
        [
            {
                "source": _pub(published.SEED_002),
                "what": "CPU while its GPUs fine-tuned (batch 64)",
                "device": "cpu",
                "cpu_util_pct": c["cpu_util_during_gpu_pct"],
                "differences": "one operating-system monitor reading, whole system",
            },
            {
                "source": _pub(published.SEED_002),
                "what": "CPU-only fine-tuning",
                "device": "cpu",
                **{k: c[k] for k in _CPU_002_KEYS},
                "differences": f"operating-system monitor snapshots (its Figs. 8-9), whole system of "
                f"{c['cpu_total_ram_gb']} GB; batch size not stated for the CPU run",
            },
        ]
    )
    rows = []
    t = _where(
        transfer, {"status", "device_kind", "rss_mib"}, lambda d: d.status.eq("ok") & d.device_kind.eq("cpu")
    )
    for run, g in t.groupby("run_name") if len(t) else []:
        rows.append(
            {
                "source": _ours_label(run),
                "what": "06 fine-tuning on the CPU",
                "device": g.device_name.iloc[0],
                "cpu_memory_gb": g.rss_mib.max() * MIB_TO_MB / 1e3,
                "differences": f"ours: the fine-tuning process's peak RSS over {len(g)} epoch row(s), "
                f"{g.image_size.iloc[0]} px, batch {', '.join(map(str, sorted(g.batch_size.unique())))}; "
                "one process, not the whole system",
            }
        )
    ok = _fp32(scenario_a)
    ok = ok[(ok.model == model) & (ok.phase == "train") & (ok.device_kind == "cpu")] if len(ok) else ok
    for r in ok.itertuples():
        rows.append(
            {
                "source": _ours_label(r.run_name),
                "what": f"02 {model} training step",
                "device": r.device_name,
                "cpu_util_pct": getattr(r, "util_cpu_mean_pct", math.nan),
                "cpu_memory_gb": getattr(r, "peak_rss_mib", math.nan) * MIB_TO_MB / 1e3,
                "differences": f"{_config(r)}; CPU % over every core, sampled in the measured windows; "
                "memory: the worker's peak RSS",
            }
        )
    if not rows:
        return _alone(pub, "transfer.csv or a CPU scenario_a.csv")
    return pd.concat([pub, pd.DataFrame(rows)], ignore_index=True)


# --- seed 003 ------------------------------------------------------------------------------------------------
_ROOF_KEYS = ["run_name", "source", "model", "phase", "batch_size"]


def _intensity(roofline: pd.DataFrame) -> pd.DataFrame:
    """Our counted intensity and efficiency against the attainable roof, per run, source and configuration."""
    if roofline.empty or not set(_ROOF_KEYS) <= set(roofline.columns):
        return pd.DataFrame(columns=[*_ROOF_KEYS, "ai_flop_per_byte", "efficiency_vs_roof_pct"])
    r = knobs.default_variant(roofline)
    r = r.assign(ai_flop_per_byte=r.intensity_flop_per_byte, efficiency_vs_roof_pct=r.get("efficiency") * 100)
    return r[[*_ROOF_KEYS, "ai_flop_per_byte", "efficiency_vs_roof_pct"]].drop_duplicates(
        _ROOF_KEYS, keep="last"
    )


def _ours_003(batch_sweep: pd.DataFrame, scenario_a: pd.DataFrame, models) -> pd.DataFrame:
    """Our training rows of ``models`` (batch sweep first; Scenario A for batches the sweep lacks)."""
    frames = []
    for source, df in (("batch_sweep", batch_sweep), ("scenario_a", scenario_a)):
        ok = _fp32(df)
        if len(ok):
            frames.append(ok[ok.model.isin(models) & (ok.phase == "train")].assign(source=source))
    if not frames:
        return pd.DataFrame()
    ours = pd.concat(frames, ignore_index=True)
    return ours.drop_duplicates(["run_name", "model", "batch_size"], keep="first")


# seed 003's achieved rates by batch -> our training rows (the batch sweep's, else Scenario A's) and 04's intensity
_ACHIEVED_003 = {
    **{c: (c, c) for c in ("model", "batch_size")},
    "device": ("device_class", "device_name"),
    **{c: (c, c) for c in ("ai_flop_per_byte", "achieved_tflops")},
    "efficiency_pct": ("efficiency_pct", None),
    "efficiency_vs_roof_pct": (None, "efficiency_vs_roof_pct"),
    "source": _SOURCE,
    "measured_in": (lambda a: "its section 4", "source"),
    "differences": (
        lambda a: (
            published.THROUGHPUT_003.configuration.iloc[0]
            + "; intensity by a method not stated; efficiency = achieved / its spec peak"
        ),
        lambda o: [
            f"{_match(r.device_class, published.ACHIEVED_003.device_class)}; {_config(r)}; intensity = counted "
            "FLOPs / modelled DRAM traffic of the step; efficiency against the measured roof at that intensity"
            for r in o.itertuples()
        ],
    ),
}


def achieved_beside_003(
    batch_sweep: pd.DataFrame, scenario_a: pd.DataFrame, roofline: pd.DataFrame
) -> pd.DataFrame:
    """Seed 003's achieved TFLOP/s beside its intensity by batch (ResNet-50 at 32/64/128, ResNet-18 at 128)
    and ours per run: achieved TFLOP/s of the training step, our counted intensity and efficiency against the
    roof at that intensity; a seed batch our run did not sample is a row saying so."""
    a = published.ACHIEVED_003
    pub, ours = _side(a, _ACHIEVED_003, 0), _ours_003(batch_sweep, scenario_a, set(a.model))
    if ours.empty:
        return _alone(pub, "batch_sweep.csv or scenario_a.csv with these models")
    ours = ours.merge(_intensity(roofline), on=_ROOF_KEYS, how="left")
    mine = pd.concat([_side(ours, _ACHIEVED_003, 1), _unsampled_003(ours, a)], ignore_index=True)
    return _stack(pub, mine, ["model", "batch_size"])


def _unsampled_003(ours: pd.DataFrame, a: pd.DataFrame) -> pd.DataFrame:
    """One row per run, model and seed batch that run did not measure, naming the batches it did."""
    rows = []
    for (run, model), g in ours.groupby(["run_name", "model"]):
        have = sorted(int(b) for b in g.batch_size.unique())
        for bs in sorted(set(a[a.model == model].batch_size) - set(have)):
            rows.append(
                {
                    "source": _ours_label(run),
                    "model": model,
                    "batch_size": bs,
                    "measured_in": "not sampled",
                    "differences": f"not sampled: this run measured {model} at batch "
                    f"{', '.join(map(str, have))} only (its params' sweep lacks batch {bs})",
                }
            )
    return pd.DataFrame(rows)


# --- seed 004 ------------------------------------------------------------------------------------------------
_SIDE_004 = {"numpy": ("cpu", "NumPy on its CPU"), "cupy": ("gpu", "CuPy on its GPU")}


def times_beside_004(backends: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 3 (total training time in s, time per iteration in ms, NumPy and CuPy) beside our MLP
    per run and backend: every measured step summed (total_training_s), per step, per step x the seed's
    iteration count (at_its_iterations_s) when our run made fewer or more steps, and per step and image
    (iteration_us_per_image: full-batch steps over different image counts compare only per image)."""
    t = published.TIMES_004.set_index("what")
    n, images = published.setup("004")["iterations"], published.SHAPE_004["inputs"]
    pub = pd.DataFrame(
        [
            {
                "source": _pub(published.SEED_004),
                "backend": b,
                "model": "mlp",
                "iterations": n,
                "total_training_s": t.loc["total_training", f"{side}_ms"] / 1e3,
                "iteration_ms": t.loc["iteration", f"{side}_ms"],
                "iteration_us_per_image": t.loc["iteration", f"{side}_ms"] * 1e3 / images,
                "differences": f"{label}; " + t.configuration.iloc[0],
            }
            for b, (side, label) in _SIDE_004.items()
        ]
    )
    mlp = _where(backends, {"model", "status", "steps"}, lambda d: (d.model == "mlp") & (d.status == "ok"))
    if mlp.empty:
        return _alone(pub, "backends.csv with the MLP")
    g = mlp.assign(run_name=_runs(mlp), per_step=mlp.images / mlp.steps).groupby(
        ["run_name", "backend"], sort=False
    )
    per = pd.DataFrame(
        {
            "steps": g.steps.sum(),
            "total": g.epoch_s.sum(),
            "images": g.per_step.first(),
            "device": g.device_name.first(),
        }
    ).reset_index()
    ours = pd.DataFrame(
        {
            "source": per.run_name.map(_ours_label),
            "backend": per.backend,
            "model": "mlp",
            "iterations": per.steps,
            "total_training_s": per.total,
            "iteration_ms": per.total / per.steps * 1e3,
            "iteration_us_per_image": per.total / per.steps * 1e6 / per.images,
            "at_its_iterations_s": per.total / per.steps * n,
            "device": per.device,
            "differences": [
                f"ours: {int(s)} full-batch steps of {i:,.0f} images each (the seed: {n} of "
                f"{images:,}), the device synchronised at the end of every block of steps; JIT "
                "compilation (jit_s) kept out"
                for s, i in zip(per.steps, per.images, strict=True)
            ],
        }
    )
    return pd.concat([pub, ours], ignore_index=True)


def memory_mb_beside_004(mem: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 5 in its own unit, MB as printed (NumPy = its CPU column, CuPy = its GPU column),
    beside ours converted to MB (MiB x 2^20 / 10^6) with our MiB kept beside, per run, backend and component,
    the MLP (seed 004's network) only."""
    m = published.MEMORY_004
    pub = pd.concat(
        [
            pd.DataFrame(
                {
                    "source": _pub(published.SEED_004),
                    "backend": b,
                    "model": "mlp",
                    "component": m.component,
                    "published_mb": m[f"{side}_mb"],
                    "differences": f"{label}, MB as printed; " + published.OPS_004.configuration.iloc[0],
                }
            )
            for b, (side, label) in _SIDE_004.items()
        ],
        ignore_index=True,
    )
    need = {"model", "component", "status", "computed_mib", "measured_mib"}
    ok = _where(mem, need, lambda d: (d.model == "mlp") & (d.status == "ok"))
    ok = ok[ok.component.astype(str).str.len() > 0] if len(ok) else ok
    if ok.empty:
        return _alone(pub, "backend_memory.csv with the MLP")
    ours = pd.DataFrame(
        {
            "source": _runs(ok).map(_ours_label),
            "backend": ok.backend,
            "model": ok.model,
            "component": ok.component,
            "computed_mb": ok.computed_mib * MIB_TO_MB,
            "measured_mb": ok.measured_mib * MIB_TO_MB,
            "computed_mib": ok.computed_mib,
            "measured_mib": ok.measured_mib,
            "differences": "ours: MiB x 1.048576 = MB; "
            + ok.get("method", pd.Series("", index=ok.index)).fillna(""),
        }
    )
    return pd.concat([pub, ours], ignore_index=True)


# --- the seeds' throughputs and tables stacked beside ours ------------------------------------------------
def _differences(seed: str, s, r) -> str:
    ours = (
        f"ours: {r.dataset} {r.image_size}x{r.image_size}, batch {r.batch_size}, {r.data_mode} data "
        "mode, synchronised windows"
    )
    if seed == "000":
        return f"000: {s.configuration}; {ours}"
    return f"003: {s.configuration}, batch {s.batch_size}; {ours}"


def published_beside_ours(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """The seeds' published throughputs beside ours, every run and configuration (fp32 NCHW eager) shown."""
    ok = _fp32(scenario_a)
    if ok.empty:
        return pd.DataFrame()
    index = ["run_name", "device_class", "device_name", *[k for k in match_keys() if k != "phase"]]
    ours = ok.pivot_table(index=index, columns="phase", values="throughput_img_s", aggfunc="first")
    cis = ok.pivot_table(index=index, columns="phase", values="throughput_ci95_img_s", aggfunc="first")
    ours = ours.reset_index().merge(cis.add_suffix("_ci95").reset_index(), on=index, how="left")
    tables = (("000", published.THROUGHPUT_000), ("003", published.THROUGHPUT_003))
    return pd.DataFrame(
        [
            {
                "model": r.model,
                "device_class": r.device_class,
                "source": f"published by {seed}",
                "published_batch_size": s.batch_size,
                "published_train_img_s": s.train_img_s,
                "published_eval_img_s": getattr(s, "eval_img_s", None),
                "ours_run": r.run_name,
                "ours_device": r.device_name,
                "ours_batch_size": r.batch_size,
                "ours_train_img_s": getattr(r, "train", None),
                "ours_train_ci95_img_s": getattr(r, "train_ci95", None),
                "ours_eval_img_s": getattr(r, "eval", None),
                "differences": _differences(seed, s, r),
            }
            for r in ours.itertuples()
            for seed, table in tables
            for s in table[(table.model == r.model) & (table.device_class == r.device_class)].itertuples()
        ]
    )


def epochs_beside_published(epochs: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's epoch times (6,400-image 'epochs') beside ours, per model, with each epoch's images."""
    pub = published.EPOCHS_000.assign(source=_pub(published.SEED_000), images=published.EPOCH_IMAGES_000)
    sq_t4 = (pub.model == "squeezenet1_1") & (pub.device_class == "t4")
    pub.loc[sq_t4, "images"] = published.EPOCH_IMAGES_000 // 2
    cols = ["source", "model", "device", "images", "train_epoch_s", "val_epoch_s"]
    pub = pub.rename(columns={"device_class": "device"})[cols]
    if epochs.empty or "train_epoch_s" not in epochs:
        return pub
    ok = epochs[epochs.status == "ok"]
    named = {"device_name": "device", "train_images": "images"}
    ours = ok[["model", *named, "train_epoch_s", "val_epoch_s"]].rename(columns=named)
    return pd.concat([pub, ours.assign(source="ours: " + ok.run_name)[cols]], ignore_index=True).sort_values(
        ["model", "source"], kind="stable"
    )


def beside(published_table: pd.DataFrame, ours: pd.DataFrame, key: str, label: str) -> pd.DataFrame:
    """A seed's table and ours stacked with a ``source`` column (ours per run); the seed's alone, labelled,
    when no run produced ``label``'s CSV."""
    pub = published_table.assign(source=_pub(published_table.source.iloc[0]))
    if ours.empty:
        return _alone(pub, f"{label}.csv")
    ok = ours[ours.status == "ok"] if "status" in ours else ours
    mine = ok.assign(source="ours: " + ok.run_name.astype(str))
    shared = [c for c in [key, *pub.columns] if c in mine.columns and c != "source"]
    cols = list(dict.fromkeys(["source", *shared]))
    extra = [c for c in mine.columns if c not in cols and c.endswith(("_s", "_img_s", "_pct", "_mib", "_mb"))]
    return pd.concat([pub, mine[cols + extra]], ignore_index=True)


def backends_beside_001(backends: pd.DataFrame, memory: pd.DataFrame | None = None) -> pd.DataFrame:
    """Seed 001's Table I (the MNIST CNN per backend) beside our CNN, like with like: one row per run and
    backend from ``backends.csv``'s ``mnist_cnn`` rows only (the MLP's rows are seed 004's experiment),
    summarised as 05 does (:func:`cnnbench.scratch.summary.summarize`: every epoch but the first), a ``model``
    column on both sides; the seed's table alone, labelled, when no run wrote the CNN's rows. Ours also
    carries its total training time (every epoch, the first included, as the seed's), the process RSS after a
    step from ``backend_memory.csv`` (``memory``) and the ``differences`` that explain the accuracy gap (our
    data, our epochs)."""
    pub = published.BACKENDS_001.assign(model="mnist_cnn")
    has = {"model", "status"} <= set(backends.columns)
    cnn = backends[backends.model == "mnist_cnn"] if has else backends.iloc[:0]
    summ = scratch_summary.summarize(cnn) if len(cnn) else pd.DataFrame()
    if summ.empty:
        return beside(pub, pd.DataFrame(), "backend", "backends")
    ours = pd.DataFrame(
        {
            "source": "ours: " + summ.run_name.astype(str) if "run_name" in summ else "ours",
            "model": summ.model,
            "backend": summ.backend,
            "device_name": summ.device_name,
            "epoch_s": summ.epoch_s_mean,
            "throughput_img_s": summ.throughput_img_s,
            "throughput_ci95_img_s": summ.throughput_ci95_img_s,
            "final_test_accuracy_pct": summ.final_test_accuracy * 100,
            "max_test_accuracy_pct": summ.max_test_accuracy * 100,
        }
    )
    ours = cnn_extras_001(ours, cnn, memory)
    pub = pub.rename(columns={"configuration": "differences"}).assign(source=_pub(published.SEED_001))
    first = ["source", "model", "backend"]
    cols = [*first, *[c for c in pub.columns if c not in first]]
    return pd.concat([pub[cols], ours], ignore_index=True)


def ops_beside_published(ops: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 4 beside ours: the MLP's ms per step by op kind (sums of per-op medians), one column
    per backend, one block of rows per run, the seed's NumPy and CuPy figures beside each; the seed's table
    alone, labelled, when no run wrote backend_ops.csv with the MLP."""
    groups = ops.groupby("run_name") if len(ops) and {"op_kind", "median_ms"} <= set(ops.columns) else []
    blocks = {run: b for run, g in groups if len(b := scratch_summary.beside_seed_004(g))}
    if not blocks:
        return beside(published.OPS_004, pd.DataFrame(), "operation", "backend_ops")
    return pd.concat(blocks, names=["run_name", "op_kind"]).reset_index()


_TELEMETRY_CONFIG = ("source", "model", "phase", "batch_size", "image_size", "precision", "memory_format")
_TELEMETRY_CONFIG += ("compile", "data_mode")
_GPU_SUMMARY = {
    ("mean", "util_device_pct"): "gpu_util_mean_pct",
    ("max", "util_device_pct"): "gpu_util_max_pct",
    ("mean", "gpu_power_w"): "gpu_power_w_mean",
    ("max", "gpu_power_w"): "gpu_power_w_max",
    ("mean", "gpu_temp_c"): "gpu_temp_c_mean",
    ("max", "gpu_temp_c"): "gpu_temp_c_max",
    ("max", "gpu_mem_used_mib"): "gpu_mem_used_max_mib",
}


def telemetry_summary(tele: pd.DataFrame) -> pd.DataFrame:
    """Our sampled GPU telemetry, one row per run, configuration and GPU (``gpu``: its index): utilisation,
    power and temperature (mean and max over the measured windows) and memory used (max), with the sample
    count."""
    has = len(tele) and "metric" in tele
    g = tele[tele.metric.isin({m for _, m in _GPU_SUMMARY})] if has else pd.DataFrame()
    if g.empty:
        return pd.DataFrame()
    keys = ["run_name", "device_name", *[c for c in _TELEMETRY_CONFIG if c in g], "device_index"]
    by = g.groupby([*keys, "metric"], dropna=False, sort=False)
    wide = by.value.agg(["mean", "max", "size"]).unstack("metric")
    samples = wide["size"].max(axis=1).rename("samples")
    wide = wide[[c for c in _GPU_SUMMARY if c in wide.columns]]
    wide.columns = [_GPU_SUMMARY[c] for c in wide.columns]
    return wide.join(samples).reset_index().rename(columns={"device_index": "gpu"})


def telemetry_beside_published(tele: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's single nvidia-smi snapshots beside our GPU telemetry summarised per run, configuration and
    GPU (:func:`telemetry_summary`); the seed's table alone, labelled, when no run sampled a GPU."""
    ours = telemetry_summary(tele)
    pub = published.TELEMETRY_002.assign(source=_pub(published.SEED_002))
    if ours.empty:
        return pub.assign(
            note="no run of this analysis sampled a GPU (telemetry.csv): the published table alone"
        )
    ours = ours.rename(columns={"source": "measured_in"}).assign(source="ours: " + ours.run_name.astype(str))
    return pd.concat([pub, ours], ignore_index=True)
