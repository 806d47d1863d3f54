"""Every seed's published numbers beside ours, one :func:`beside` over one map (:data:`BESIDE`): each table stacks
the seed's rows (``source`` "published by <seed file>") and ours ("ours: <run>"), a ``differences`` column naming
what differs; a seed table no merged run matches is shown alone with a ``note``, and a row of another device
class or configuration says "not matched"."""

from __future__ import annotations

import math
from contextvars import ContextVar

import pandas as pd

from cnnbench import knobs, published
from cnnbench.analysis.compare import configured, match_keys
from cnnbench.results.runs import Merged
from cnnbench.scratch import summary as scratch_summary

MIB_TO_MB = 2**20 / 1e6  # our MiB shown in the seeds' MB (read as 10^6 bytes)
MODEL_002 = "densenet121"  # the network seed 002 fine-tuned and timed
P = published


# While set (by :func:`_elsewhere`), :func:`_fp32` keeps every variant and adds the labels of those it kept here.
_OTHER_VARIANTS: ContextVar[set | None] = ContextVar("other_variants", default=None)


def _fp32(scenario_a: pd.DataFrame, pick=None) -> pd.DataFrame:
    """Our ok rows in the seeds' variant (fp32, NCHW, eager) with their seed device class, where ``pick`` holds."""
    ok, seen = configured(scenario_a), _OTHER_VARIANTS.get()
    ok = knobs.default_variant(ok) if seen is None else ok  # configured(): every knob read
    ok = ok.assign(device_class=list(map(P.device_class, ok.device_kind, ok.device_name)))
    ok = ok[pick(ok)] if pick else ok
    if seen is not None:
        seen.update(knobs.label(r, knobs.variant_only()) for _, r in ok.iterrows())
    return ok


def _elsewhere(name: str, read: list[pd.DataFrame]) -> str:
    """Why ``name`` has no row of ours where the run measured its models in other variants only, else ""."""
    if not any(len(t) for t in read):
        return ""
    token = _OTHER_VARIANTS.set(seen := set())
    try:
        measured = len(_OURS[name](*read))
    finally:
        _OTHER_VARIANTS.reset(token)
    variants = ", ".join(sorted(seen))
    return f"measured only in {variants}; the seeds ran {knobs.default_label()}" if measured else ""


def _config(r) -> str:
    """Our configuration in words, from a row of ours."""
    return (
        f"ours: {r.dataset} data ({r.data_mode} mode), {r.image_size} px, batch {r.batch_size}, synchronised "
        "measured windows"
    )


def _match(device_class: str, seed_classes) -> str:
    matched = device_class in set(seed_classes)
    return f"{'matched device class' if matched else 'not matched: no seed device of class'}: {device_class}"


def _wide(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per run and configuration (phase apart), ``<phase>_<value>`` columns."""
    keys = "run_name device_name device_class model batch_size image_size dataset data_mode".split()
    values = ["throughput_img_s", "achieved_tflops", "peak_device_mem_mib", "peak_rss_mib"]
    wide = ok.pivot_table(index=keys, columns="phase", values=[v for v in values if v in ok], aggfunc="first")
    wide.columns = [f"{phase}_{value}" for value, phase in wide.columns]
    return wide.reset_index()


def _tflops_000(p: pd.DataFrame) -> list[str]:
    """Per row of seed 000's Table 3: its configuration and its TFLOP/s as img/s x the 224 px forward count where
    that is what it is (within 10%), else how many times that product it is (no stated formula gives it)."""
    r = p.train_tflops / (p.train_img_s * p.model.map(P.COMPLEXITY_000.set_index("model").flops_g) / 1e3)
    said = [
        "TFLOP/s = img/s x the 224 px forward count (MACs, no training factor)"
        if abs(x - 1) < 0.1
        else f"TFLOP/s (train) = {x:.2f}x img/s x the 224 px forward count: no stated formula gives it"
        for x in r
    ]
    memory = "peak GPU memory in MB as printed (N/A on MPS and CPU)"
    return [f"{c}; {s}; {memory}" for c, s in zip(p.configuration, said, strict=True)]


def _pairs_000() -> pd.DataFrame:
    sp = P.SPEEDUPS_000
    pairs = sp.melt(["model", "source"], [c for c in sp.columns if "_over_" in c], "pair", "speedup_x")
    return pairs.assign(a=pairs.pair.str.split("_over_").str[0], b=pairs.pair.str.split("_over_").str[1])


def _speedups_000(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Our rows beside each seed device's throughput of the same model (``b_img_s``, the same phase)."""
    seed = P.THROUGHPUT_000[["model", "device_class", "batch_size", "train_img_s", "eval_img_s"]]
    ours = _fp32(scenario_a).merge(
        seed.rename(columns={"device_class": "seed_class", "batch_size": "seed_batch_size"}), on="model"
    )
    px, seed_bs = P.setup("000")["image_px"], zip(ours.batch_size, ours.seed_batch_size, strict=True)
    return ours.assign(  # the parts of its differences (data/seed_columns.csv) that depend on the row
        b_img_s=ours.train_img_s.where(ours.phase == "train", ours.eval_img_s),
        said_px=[f"ours {s} px vs {px} px" if s != px else f"{px} px both" for s in ours.image_size],
        said_batch=[f"; batch: ours {b} vs {s}" if b != s else "" for b, s in seed_bs],
    )


def _s_per_image_002(i: pd.DataFrame) -> pd.Series:
    return i.s_per_image.fillna((i.s_per_image_low + i.s_per_image_high) / 2)


_CPU_002 = "util_low_pct util_high_pct memory_gb temp_low_c temp_high_c processes threads clock_ghz".split()


def _cpu_002() -> pd.DataFrame:
    c, alone = P.CPU_002, "operating-system monitor snapshots (its Figs. 8-9), whole system of "
    return pd.DataFrame(
        {
            "source": "published by " + P.SEED_002,
            "what": ["CPU while its GPUs fine-tuned (batch 64)", "CPU-only fine-tuning"],
            "device": "cpu",
            "cpu_util_pct": [c["cpu_util_during_gpu_pct"], math.nan],
            "differences": [
                "one operating-system monitor reading, whole system",
                f"{alone}{c['cpu_total_ram_gb']} GB; batch size not stated for the CPU run",
            ],
            **{f"cpu_{k}": [math.nan, c[f"cpu_{k}"]] for k in _CPU_002},
        }
    )


def _cpu_ours_002(transfer: pd.DataFrame, scenario_a: pd.DataFrame) -> pd.DataFrame:
    """06's fine-tuning's peak RSS on the CPU, and the same network's Scenario A CPU training step."""
    t = transfer.query("status == 'ok' and device_kind == 'cpu'")
    ok = _fp32(scenario_a, lambda d: (d.model == MODEL_002) & (d.phase == "train") & (d.device_kind == "cpu"))
    return pd.DataFrame(
        [
            {
                "source": f"ours: {run}",
                "what": "06 fine-tuning on the CPU",
                "device": g.device_name.iloc[0],
                "cpu_memory_gb": g.rss_mib.max() * MIB_TO_MB / 1e3,
                "differences": f"ours: the fine-tuning process's peak RSS over {len(g)} epoch row(s), "
                f"{g.image_size.iloc[0]} px, batch {', '.join(map(str, sorted(g.batch_size.unique())))}; "
                "one process, not the whole system",
            }
            for run, g in t.groupby("run_name")
        ]
        + [
            {
                "source": f"ours: {r.run_name}",
                "what": f"02 {MODEL_002} training step",
                "device": r.device_name,
                "cpu_util_pct": getattr(r, "util_cpu_mean_pct", math.nan),
                "cpu_memory_gb": getattr(r, "peak_rss_mib", math.nan) * MIB_TO_MB / 1e3,
                "differences": f"{_config(r)}; CPU % over every core, sampled in the measured windows; "
                "memory: the worker's peak RSS",
            }
            for r in ok.itertuples()
        ]
    )


_ROOF_KEYS = ["run_name", "source", "model", "phase", "batch_size"]
_INTENSITY = [*_ROOF_KEYS, "ai_flop_per_byte", "efficiency_vs_roof_pct"]


def _intensity(roofline: pd.DataFrame) -> pd.DataFrame:
    """Our counted intensity and efficiency against the attainable roof, per run, source and configuration."""
    if roofline.empty:
        return pd.DataFrame(columns=_INTENSITY)
    r = knobs.default_variant(roofline)
    r = r.assign(ai_flop_per_byte=r.intensity_flop_per_byte, efficiency_vs_roof_pct=r.efficiency * 100)
    return r[_INTENSITY].drop_duplicates(_ROOF_KEYS, keep="last")


def _achieved_003(
    batch_sweep: pd.DataFrame, scenario_a: pd.DataFrame, roofline: pd.DataFrame
) -> pd.DataFrame:
    """Our training rows of seed 003's models (batch sweep first; Scenario A for batches the sweep lacks) with
    04's intensity, and one row per run, model and seed batch the run did not measure."""
    a, frames = P.ACHIEVED_003, []
    for source, df in (("batch_sweep", batch_sweep), ("scenario_a", scenario_a)):
        ok = _fp32(df, lambda d: d.model.isin(set(a.model)) & (d.phase == "train"))
        if len(ok):
            frames.append(ok.assign(source=source))
    if not frames:
        return pd.DataFrame()
    ours = pd.concat(frames, ignore_index=True).drop_duplicates(["run_name", "model", "batch_size"])
    ours = ours.merge(_intensity(roofline), on=_ROOF_KEYS, how="left")
    ours["differences"] = [
        f"{_match(r.device_class, a.device_class)}; {_config(r)}; intensity = counted FLOPs / modelled DRAM "
        "traffic of the step; efficiency against the measured roof at that intensity"
        for r in ours.itertuples()
    ]
    unsampled = [
        {
            "run_name": run,
            "model": model,
            "batch_size": bs,
            "source": "not sampled",
            "differences": f"not sampled: this run measured {model} at batch {', '.join(map(str, have))} only "
            f"(its params' sweep lacks batch {bs})",
        }
        for (run, model), g in ours.groupby(["run_name", "model"])
        for have in [sorted(int(b) for b in g.batch_size.unique())]
        for bs in sorted(set(a[a.model == model].batch_size) - set(have))
    ]
    return pd.concat([ours, pd.DataFrame(unsampled)], ignore_index=True)


_SIDE_004 = {"numpy": ("cpu", "NumPy on its CPU"), "cupy": ("gpu", "CuPy on its GPU")}


def _times_004() -> pd.DataFrame:
    t, n, images = P.TIMES_004.set_index("what"), P.setup("004")["iterations"], P.SHAPE_004["inputs"]
    why = t.configuration.iloc[0]
    rows = [
        [b, t.loc["total_training", f"{side}_ms"] / 1e3, t.loc["iteration", f"{side}_ms"], f"{label}; {why}"]
        for b, (side, label) in _SIDE_004.items()
    ]
    out = pd.DataFrame(rows, columns=["backend", "total_training_s", "iteration_ms", "differences"])
    out = out.assign(source="published by " + P.SEED_004, model="mlp", iterations=n)
    return out.assign(iteration_us_per_image=out.iteration_ms * 1e3 / images)


def _times_ours_004(backends: pd.DataFrame) -> pd.DataFrame:
    """Our MLP per run and backend: every step summed, per step, per image, and at the seed's iteration count."""
    mlp = backends[(backends.model == "mlp") & (backends.status == "ok")]
    g = mlp.assign(per_step=mlp.images / mlp.steps).groupby(["run_name", "backend"], sort=False)
    out = pd.DataFrame({"iterations": g.steps.sum(), "total_training_s": g.epoch_s.sum()})
    out = out.assign(per_step=g.per_step.first(), device=g.device_name.first())
    step_s = out.total_training_s / out.iterations
    return out.assign(
        iteration_ms=step_s * 1e3,
        iteration_us_per_image=step_s * 1e6 / out.per_step,
        at_its_iterations_s=step_s * P.setup("004")["iterations"],
    ).reset_index()


def _memory_004() -> pd.DataFrame:
    m, why = P.MEMORY_004, P.OPS_004.configuration.iloc[0]
    sides = [
        m.assign(backend=b, published_mb=m[f"{side}_mb"], differences=f"{label}, MB as printed; {why}")
        for b, (side, label) in _SIDE_004.items()
    ]
    return pd.concat(sides, ignore_index=True).assign(source="published by " + P.SEED_004, model="mlp")


def _throughputs(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """Each of our runs and configurations (fp32 NCHW eager; ``train``, ``eval``, ``train_ci95``: its rates) beside
    seeds 000's and 003's rows of its model and device class (``published_*``, ``seed`` and what it ``said``)."""
    ok = _fp32(scenario_a)
    index = ["run_name", "device_class", "device_name", *[k for k in match_keys() if k != "phase"]]
    ours = ok.pivot_table(index=index, columns="phase", values="throughput_img_s", aggfunc="first")
    cis = ok.pivot_table(index=index, columns="phase", values="throughput_ci95_img_s", aggfunc="first")
    ours = ours.reset_index().merge(cis.add_suffix("_ci95").reset_index(), on=index, how="left")
    t000, t003 = P.THROUGHPUT_000.assign(seed="000", said=""), P.THROUGHPUT_003.assign(seed="003")
    seed = pd.concat([t000, t003.assign(said=", batch " + t003.batch_size.astype(str))], ignore_index=True)
    seed = seed.rename(columns=lambda c: c if c in ("model", "device_class") else f"published_{c}")
    return ours.merge(seed, on=["model", "device_class"])


def _transfer_002(transfer: pd.DataFrame) -> pd.DataFrame:
    """06's ok rows, in seed 002's columns where they share one and every timing, rate and memory column."""
    ok = transfer[transfer.status == "ok"]
    mine = ok.assign(source="ours: " + ok.run_name.astype(str))
    cols = list(dict.fromkeys(c for c in ["source", "device_class", *P.TIMES_002.columns] if c in mine))
    extra = [c for c in mine.columns if c not in cols and c.endswith(("_s", "_img_s", "_pct", "_mib", "_mb"))]
    return mine[cols + extra]


def _accuracy_gap_001(epochs: int, images: float) -> str:
    s = P.setup("001")
    data = "MNIST's" if images == s["train_images"] else f"{images:,.0f} (not MNIST's {s['train_images']:,})"
    return (
        f"ours: {epochs} epoch(s) of {data} training images (synthetic MNIST-shaped glyphs unless "
        f"scratch_dataset is mnist) vs the seed's {s['epochs']} epochs of real MNIST: our accuracy is "
        "not the seed's for that reason, not the backend's; total_s sums every epoch, the first "
        "included; process RSS is one reading after a step (baseline + growth), the seed's an average "
        "over training"
    )


def _backends_001(backends: pd.DataFrame, memory: pd.DataFrame) -> pd.DataFrame:
    """Our MNIST CNN (``backends.csv``'s ``mnist_cnn`` rows only) summarised as 05 does (every epoch but the
    first), with its total time (every epoch), the process RSS after a step and the accuracy gap explained."""
    cnn = backends[backends.model == "mnist_cnn"]
    summ = scratch_summary.summarize(cnn) if len(cnn) else pd.DataFrame()
    if summ.empty:
        return summ
    g = cnn[cnn.status == "ok"].groupby(["run_name", "backend"])
    per = pd.DataFrame({"total_s": g.epoch_s.sum(), "epochs": g.epoch.nunique(), "images": g.images.first()})
    rss = memory.model.eq("mnist_cnn") & memory.component.isin(["process_rss_baseline", "process_rss_growth"])
    rss_by = memory[rss].groupby(["run_name", "backend"])  # the RSS after one step: baseline + growth (MiB)
    per["process_rss_mib"] = rss_by.measured_mib.sum(min_count=1) if rss.any() else math.nan
    per = per.reindex(list(zip(summ.run_name, summ.backend, strict=True)))
    cols = "model backend device_name epoch_s_mean throughput_img_s throughput_ci95_img_s".split()
    out = summ[cols].rename(columns={"epoch_s_mean": "epoch_s"})
    out.insert(0, "source", "ours: " + summ.run_name.astype(str))
    return out.assign(
        **{f"{k}_test_accuracy_pct": summ[f"{k}_test_accuracy"] * 100 for k in ("final", "max")},
        total_s=per.total_s.to_numpy(),
        process_rss_mib=per.process_rss_mib.to_numpy(),
        differences=[_accuracy_gap_001(int(e), i) for e, i in zip(per.epochs, per.images, strict=True)],
    )


def _backends_join(pub: pd.DataFrame, ours: pd.DataFrame) -> pd.DataFrame:
    pub, first = pub.rename(columns={"configuration": "differences"}), ["source", "model", "backend"]
    return pd.concat([pub[[*first, *pub.columns.drop(first)]], ours], ignore_index=True)


def _ops_004(ops: pd.DataFrame) -> pd.DataFrame:
    """The MLP's ms per step by op kind per run and backend, the seed's figures beside (scratch.summary)."""
    blocks = {run: b for run, g in ops.groupby("run_name") if len(b := scratch_summary.beside_seed_004(g))}
    return pd.concat(blocks, names=["run_name", "op_kind"]).reset_index() if blocks else pd.DataFrame()


_TELEMETRY_CONFIG = (
    "source model phase batch_size image_size precision memory_format compile data_mode".split()
)
_GPU_SUMMARY = {
    ("mean", "util_device_pct"): "gpu_util_mean_pct",
    ("max", "util_device_pct"): "gpu_util_max_pct",
    ("mean", "gpu_power_w"): "gpu_power_w_mean",
    ("max", "gpu_power_w"): "gpu_power_w_max",
    ("mean", "gpu_temp_c"): "gpu_temp_c_mean",
    ("max", "gpu_temp_c"): "gpu_temp_c_max",
    ("max", "gpu_mem_used_mib"): "gpu_mem_used_max_mib",
}


def _telemetry_002(tele: pd.DataFrame) -> pd.DataFrame:
    """Our sampled GPU telemetry, one row per run, configuration and GPU (``gpu``: its index): utilisation,
    power and temperature (mean and max over the measured windows), memory used (max) and the sample count."""
    g = tele[tele.metric.isin({m for _, m in _GPU_SUMMARY})]
    if g.empty:
        return pd.DataFrame()
    keys = ["run_name", "device_name", *[c for c in _TELEMETRY_CONFIG if c in g], "device_index"]
    by = g.groupby([*keys, "metric"], dropna=False, sort=False)
    wide = by.value.agg(["mean", "max", "size"]).unstack("metric")
    samples = wide["size"].max(axis=1).rename("samples")
    wide = wide[[c for c in _GPU_SUMMARY if c in wide.columns]]
    wide.columns = [_GPU_SUMMARY[c] for c in wide.columns]
    ours = wide.join(samples).reset_index().rename(columns={"device_index": "gpu", "source": "measured_in"})
    return ours.assign(source="ours: " + ours.run_name.astype(str))


# Each seed table beside ours: data/seed_beside.csv says which results tables ours reads, the published view of
# the seed's rows, the keys both stack by (none: concatenated) and what no run did when ours is empty (the seed's
# rows alone with a ``note``); here: the seed's rows where no view holds them, ours, the column map applied to
# both (none: both already in the table's columns) and a join by hand.
BESIDE = P.data("seed_beside.csv").set_index("table").to_dict("index")
_THEIRS = {
    "speedups_000": _pairs_000,
    "throughputs": pd.DataFrame,
    "memory_004": _memory_004,
    "times_004": _times_004,
    "cpu_002": _cpu_002,
}
_OURS = {
    "performance_000": lambda sa: _wide(_fp32(sa, lambda d: d.model.isin(P.THROUGHPUT_000.model))),
    "speedups_000": _speedups_000,
    "utilisation_000": lambda sa: _fp32(
        sa, lambda d: (d.phase == "train") & d.model.isin(P.UTILISATION_000.model)
    ),
    "epochs_000": lambda epochs: epochs[epochs.status == "ok"],
    "sweep_000": lambda bs: bs[(bs.model == "squeezenet1_1") & (bs.phase == "train")],
    "throughputs": _throughputs,
    "achieved_003": _achieved_003,
    "backends_001": _backends_001,
    "ops_004": _ops_004,
    "memory_004": lambda mem: mem[(mem.model == "mlp") & (mem.status == "ok")],
    "times_004": _times_ours_004,
    "telemetry_002": _telemetry_002,
    "times_002": _transfer_002,
    "inference_002": lambda sa: _fp32(sa, lambda d: (d.model == MODEL_002) & (d.phase == "eval")),
    "cpu_002": _cpu_ours_002,
}
_COMPUTED = {  # the cells of data/seed_columns.csv computed by a function of the rows (``=name``)
    "tflops_000": _tflops_000,
    "utilisation_000": lambda u: (
        "one reading per model and device, when and how not stated (phase neither; "
        f"{u.gpu_util_pct.min():.0f}-{u.gpu_util_pct.max():.0f}% GPU on a training T4 suggests a reading outside "
        "the run: our inference); GPU N/A on MPS and CPU"
    ),
    "sweep_device": lambda s: s.configuration.str.split(";").str[0],
    "s_per_image_002": _s_per_image_002,
    "inference_img_s_002": lambda i: 1 / _s_per_image_002(i),
    "epoch_images_000": lambda p: [  # its SqueezeNet T4 'epoch' half the others
        P.EPOCH_IMAGES_000 // (2 if q else 1) for q in (p.model == "squeezenet1_1") & (p.device_class == "t4")
    ],
    "mib_004": lambda o: f"ours: MiB x {MIB_TO_MB} = MB; " + o.method.fillna(""),
}


def _said(text: str, table: str, rows: pd.DataFrame) -> list[str]:
    """``text`` formatted per row: ``r`` the row, ``P`` this module's seeds, ``match`` its device class against the
    seed's rows of ``table`` and ``config`` our configuration in words."""
    seed = BESIDE[table]["theirs"]
    return [
        text.format(
            r=r,
            P=P,
            match=_match(r.device_class, getattr(P, seed).device_class) if "{match}" in text else "",
            config=_config(r) if "{config}" in text else "",
        )
        for r in rows.itertuples()
    ]


def _side(rows: pd.DataFrame, table: str, i: str) -> pd.DataFrame:
    """Side ``i`` ("theirs" or "ours") of ``table``'s column map (data/seed_columns.csv): each cell a column of
    ``rows`` (missing: empty), ``=name`` a function of them (:data:`_COMPUTED`) or ``=expression`` of their columns
    (``DataFrame.eval``, ``@MIB_TO_MB`` this module's), ``'text`` a text formatted per row (:func:`_said`) or absent on that side (empty)."""
    if rows.empty:
        return pd.DataFrame()

    def cell(v: str):
        if v[0] == "=":
            computed = _COMPUTED.get(v[1:])
            return computed(rows) if computed else rows.eval(v[1:], local_dict={"MIB_TO_MB": MIB_TO_MB})
        return _said(v[1:], table, rows) if v[0] == "'" else rows.get(v)

    columns = _COLUMNS[table]
    return pd.DataFrame({c: cell(v) for c, v in zip(columns.column, columns[i], strict=True) if v})


_COLUMNS = dict(tuple(P.data("seed_columns.csv").groupby("table", sort=False)))
_JOIN = {"backends_001": _backends_join, "ops_004": lambda pub, ours: ours}


def beside(name: str, merged=None) -> pd.DataFrame:
    """Seed table ``name`` (a key of :data:`BESIDE`) beside our rows from ``merged`` (a
    :class:`~cnnbench.results.runs.Merged` or a dict of results tables; a table it lacks is empty)."""
    said, mapped = BESIDE[name], name in _COLUMNS
    merged = merged if isinstance(merged, Merged) else Merged([], {}, dict(merged or {}))
    read = [merged[t] for t in said["reads"].split()]  # each with its declared columns
    mine = _OURS[name](*read) if any(len(t) for t in read) else pd.DataFrame()
    pub = _THEIRS[name]() if name in _THEIRS else getattr(P, said["theirs"])
    pub = pub if name in _THEIRS or mapped else pub.assign(source="published by " + pub.source)
    if mapped:
        pub, mine = _side(pub, name, "theirs"), _side(mine, name, "ours")
    if mine.empty:
        note = _elsewhere(name, read) or f"no run of this analysis {said['alone']}: the published table alone"
        return pub.assign(note=note) if said["alone"] else pub
    if name in _JOIN or not said["join"]:
        return _JOIN.get(name, lambda pub, mine: pd.concat([pub, mine], ignore_index=True))(pub, mine)
    by = said["join"].split()  # each group with the seed's rows first
    out = pd.concat([pub, mine], ignore_index=True).sort_values(by, kind="stable").reset_index(drop=True)
    return out[["source", *[c for c in out.columns if c != "source"]]]
