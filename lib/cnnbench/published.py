"""Numbers published by the seed reports, kept only to be shown beside our own measurements: every number once in
``data/seed_numbers.csv``, one row per value (:data:`COLUMNS`) with the seed's printed text, its origin, line and
section; :func:`table` shows one table as the workbook reads it."""

from __future__ import annotations

import contextlib
import functools
import math
from importlib import resources

import pandas as pd

from cnnbench import models

DATA_FILE = "data/seed_numbers.csv"
COLUMNS = ["seed", "table", "key", "column", "value", "printed", "origin", "line", "where", "note"]


@functools.cache
def data(name: str) -> pd.DataFrame:
    """One of the package's seed data files (``data/<name>``), every column text ("" where empty)."""
    with resources.files("cnnbench").joinpath(f"data/{name}").open() as f:
        return pd.read_csv(f, dtype=str, keep_default_na=False)


@functools.cache
def _values() -> pd.DataFrame:
    v = data("seed_numbers.csv")
    return v.assign(line=v.line.astype(int))


def values() -> pd.DataFrame:
    """Every stored seed number, one row per value (:data:`COLUMNS`)."""
    return _values().copy()


def _parse_key(key: str) -> dict:
    return dict(part.split("=", 1) for part in key.split(";")) if key else {}


def _convert(col: pd.Series) -> pd.Series:
    """Numbers where every non-empty value is one (ints stay ints unless a value is missing); "" is missing."""
    blank = col.mask(col == "")
    try:
        return pd.to_numeric(blank)
    except (ValueError, TypeError):
        return blank


def provenance(name: str) -> pd.DataFrame:
    """The stored values of one table, one row each (:data:`COLUMNS`)."""
    v = _values()
    return v[v.table == name].reset_index(drop=True)


@functools.cache
def _stored(name: str) -> pd.DataFrame:
    """One stored table as rows: its key columns, its stored columns (in order) and ``source``, the seed file."""
    v = provenance(name)
    if v.empty:
        raise KeyError(f"no table {name!r} in {DATA_FILE}")
    rows: dict[str, dict] = {}
    for r in v.itertuples():
        rows.setdefault(r.key, _parse_key(r.key))[r.column] = r.value
    return pd.DataFrame(list(rows.values())).apply(_convert).assign(source=v.seed.iloc[0])


def _scalar(text: str) -> int | float | str:
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def _items(name: str) -> dict:
    v = provenance(name)
    return {_parse_key(k)["item"]: _scalar(x) for k, x in zip(v.key, v.value, strict=True)}


def setup(seed: str) -> dict:
    """A seed's configuration and dataset numbers (``SETUP_<seed>``), item -> value."""
    return _items(f"SETUP_{seed}")


def _line(name: str, key: str) -> int:
    p = provenance(name)
    return int(p.line[p.key == key].iloc[0])


def _lines(*names: str) -> str:
    lines = pd.concat([provenance(name).line for name in names])
    return f"line {lines.min()}" if lines.min() == lines.max() else f"lines {lines.min()}-{lines.max()}"


SEEDS = {s[:3]: s for s in sorted(_values().seed.unique())}
SEED_000, SEED_001, SEED_002, SEED_003, SEED_004 = (SEEDS[s] for s in ("000", "001", "002", "003", "004"))

# --- the views: each stored table with what the workbook derives from it, by table() -------------------------
_SETUP_000, _SETUP_001, _SETUP_002, _SETUP_003, _SETUP_004 = map(setup, SEEDS)
_CLAIMS_002, _INFERENCE_002 = _items("CLAIMS_002"), _stored("INFERENCE_002").set_index("device_class")


# Seed 000's "epoch": every throughput x its Table 4 epoch time (images per model, device and phase, to the
# nearest 100) gives the same few thousand images (half as many for SqueezeNet on the T4), a subset of
# Tiny-ImageNet's training set; params/seeds_full.yaml caps epochs to match.
_E = _stored("THROUGHPUT_000").merge(_stored("EPOCHS_000"))  # by model, device class and seed file
_E = _E.assign(
    train_images=(_E.train_img_s * _E.train_epoch_s).round(-2),
    val_images=(_E.eval_img_s * _E.val_epoch_s).round(-2),
)
_IMAGES_000 = pd.concat([_E.train_images, _E.val_images])
EPOCH_IMAGES_000 = int(_IMAGES_000.median())
_SQ_T4_000 = _E.set_index(["model", "device_class"]).train_images[("squeezenet1_1", "t4")]


def _throughput_000(t: pd.DataFrame) -> pd.DataFrame:
    # SqueezeNet ran at its section 2.3 batch on all three devices, as its text says three times (sections 1.4,
    # 2.3 and 4.3), in epochs capped at "a fixed maximum number of batches" (section 1.4): the cap its T4
    # SqueezeNet row gives. Its M3 Pro and CPU rows hold twice those images: inconsistencies() says so.
    s, sq, line = _SETUP_000, t.model == "squeezenet1_1", _line("SETUP_000", "item=batch_size_squeezenet1_1")
    b = s["batch_size_squeezenet1_1"]
    t["batch_size"] = [b if q else s["batch_size"] for q in sq]
    said = f"; batch {b} on every device, as its text says (line {line}; its M3 Pro and CPU rows' images disagree)"
    return t.assign(configuration=[said if q else "" for q in sq])


def _sweep_000(t: pd.DataFrame) -> pd.DataFrame:
    t.insert(4, "status", ["unstable" if pd.isna(x) else "ok" for x in t.throughput_img_s])
    return t.assign(configuration=", ".join(map(str, t.batch_size)))


def _times_002(t: pd.DataFrame) -> pd.DataFrame:
    # accuracy: the CPU and the GPU at batch 64 only; inference per device, shown on the first GPU row
    inf, c = _INFERENCE_002, _CLAIMS_002
    gpu = (inf.s_per_image_low["cuda"] + inf.s_per_image_high["cuda"]) / 2
    t = t.reindex(columns=["device_class", "batch_size", "train_20_epochs_h", "source"])
    cpu, first = t.device_class == "cpu", t.index[t.device_class == "cuda"][0]  # device kind: as published
    t.insert(3, "test_accuracy_pct", c["test_accuracy_cpu_and_gpu_bs64"])
    t["test_accuracy_pct"] = t.test_accuracy_pct.where(cpu | (t.batch_size == 64))
    t.insert(4, "inference_s_per_image", math.nan)
    t.loc[cpu, "inference_s_per_image"], t.loc[first, "inference_s_per_image"] = inf.s_per_image["cpu"], gpu
    return t


# the seed-004 network's shapes (inputs: its training images); the seed prints no parameter count
SHAPE_004 = {
    "inputs": _SETUP_004["train_images"],
    **{k: _SETUP_004[k] for k in ("features", "hidden", "classes")},
}
MNIST_TRAIN_IMAGES = _SETUP_001["train_images"]
# Seed 001 padded each epoch to whole batches of its batch size (section III.A.2): more samples than MNIST has.
EPOCH_SAMPLES_001 = math.ceil(MNIST_TRAIN_IMAGES / _SETUP_001["batch_size"]) * _SETUP_001["batch_size"]
# What the workbook derives from each stored table beyond its configuration in words (data/seed_tables.csv,
# followed by the view's own configuration where it has one): the columns the seed implies.
_VIEWS = {
    "THROUGHPUT_000": _throughput_000,
    "SWEEP_000": _sweep_000,
    "THROUGHPUT_003": lambda t: t.assign(
        configuration=[
            f"{_SETUP_003['measured_iterations_cpu' if d == 'cpu' else 'measured_iterations']} measured iterations, "
            "one run"
            for d in t.device_class
        ]
    ),
    # its achieved TFLOP/s and efficiency beside its intensity at the same model and batch
    "ACHIEVED_003": lambda t: t.merge(
        _stored("AI_003").drop(columns="source"), on=["model", "batch_size"], how="left"
    )["model batch_size device_class ai_flop_per_byte achieved_tflops efficiency_pct source".split()],
    # its Numba rows measure less work: no backward through either conv (Numba CUDA's dense backward on the host)
    "BACKENDS_001": lambda t: t.assign(model="mnist_cnn"),
    "TIMES_002": _times_002,
    # printed in seconds where its table says so, shown here in ms
    "TIMES_004": lambda t: t[["what", "cpu_ms", "gpu_ms", "speedup_printed", "source"]].assign(
        cpu_ms=t.cpu_ms.fillna(t.cpu_s * 1e3), gpu_ms=t.gpu_ms.fillna(t.gpu_s * 1e3)
    ),
}


@functools.cache
def _view(name: str) -> pd.DataFrame:
    # what each view holds, the tables it is stored in and its configuration in words (a template)
    said = data("seed_tables.csv").set_index("table").configuration.get(name, "")
    t = _VIEWS.get(name, lambda t: t)(_stored(name).copy())
    return t.assign(configuration=said.format_map(globals()) + t.get("configuration", "")) if said else t


def table(name: str) -> pd.DataFrame:
    """One seed table as the workbook shows it: its stored rows with what :data:`_VIEWS` derives from them (its
    configuration in words, implied columns); also ``published.<NAME>``."""
    return _view(name).copy()


def __getattr__(name: str) -> pd.DataFrame:
    if name.isupper() and name in set(_values().table):  # published.THROUGHPUT_000: table("THROUGHPUT_000")
        return _view(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PARAM_PROXY_AI_000 = dict(zip(table("AI_TABLE_000").model, table("AI_TABLE_000").ai_printed, strict=True))
AI_BY_BATCH_003 = {  # sections 2.3, 4.2-4.3, 5.2: arithmetic intensity (method not stated) by batch size
    int(r.batch_size): float(r.ai_flop_per_byte)
    for r in table("AI_003").query("model == 'resnet50'").itertuples()
}
# its per-model table (section 5.2) gives each model's batch-128 value (for ResNet-50 not batch 64's)
AI_003 = {r.model: float(r.ai_flop_per_byte) for r in table("AI_003").query("batch_size == 128").itertuples()}
# sections VIII.A-C: the CPU's utilisation (%) while the GPUs trained and in the CPU-only run, the CPU-only run's
# memory (GB) of the machine's RAM (GB), temperature (C), processes, threads and clock (GHz), read from its text
CPU_002 = {k: v for k, v in _CLAIMS_002.items() if k.startswith("cpu_")}


# The device each seed's rows ran on (seed, its device class or backend) -> (name, kind): our spec table's name
# where it has the device, else the seed's own words (data/seed_devices.csv).
DEVICES = {
    (d.seed, d.device_class): (d.name.format_map(globals()), d.kind)
    for d in data("seed_devices.csv").itertuples()
}


def device_class(device_kind: str, device_name: str) -> str:
    """The seeds' device classes: t4, rtx4080, apple (MPS), cpu; anything else is 'other'."""
    name = device_name.lower()
    if device_kind == "cuda":  # device kind: a row's, matched to the devices the seeds name
        return "t4" if "t4" in name else "rtx4080" if "4080" in name else "other"
    return {"mps": "apple", "cpu": "cpu"}.get(device_kind, "other")


def _spec_rows(device: str) -> pd.DataFrame:
    from cnnbench.roofline import peaks

    spec = peaks.specs()
    return spec[(spec.device == device) & (spec.precision == "fp32") & spec.peak_gflops.notna()]


def _checks_000() -> dict:
    s, n, cases = _SETUP_000, int((_IMAGES_000 == EPOCH_IMAGES_000).sum()), len(_IMAGES_000)
    sq = _E[_E.model == "squeezenet1_1"].set_index("device_class")
    sq_t4 = sq.train_img_s["t4"] * sq.train_epoch_s["t4"]
    sq_images = "; ".join(f"{d}: {k:,.0f} images" for d, k in sq.train_images.items())
    ai = ", ".join(f"{r.model} {r.ai_printed}" for r in table("AI_TABLE_000").itertuples())
    per_byte = ", ".join(
        f"{r.model} {r.flops_g * 1e9 / (r.model_mb * 1e6):.1f}" for r in table("AI_TABLE_000").itertuples()
    )
    per, cx = EPOCH_IMAGES_000 // s["batch_size"], table("COMPLEXITY_000")
    pub = {m: models.spec(m).published_gmacs for m in cx.model}
    flops = ", ".join(f"{r.model} {r.flops_g}" for r in cx.itertuples())
    off = ", ".join(f"{r.model} {100 * (r.flops_g / pub[r.model] - 1):+.1f}%" for r in cx.itertuples())
    tc = table("THROUGHPUT_000").merge(cx[["model", "flops_g"]])
    ratio = pd.concat([tc[f"{p}_tflops"] / (tc[f"{p}_img_s"] * tc.flops_g / 1e3) for p in ("train", "eval")])
    apple = pd.concat([tc.device_class == "apple"] * 2)
    plain, mps = (ratio[~apple].min(), ratio[~apple].max()), (ratio[apple].min(), ratio[apple].max())
    px_line = _line("SETUP_000", "item=dataset_image_px")
    mem = table("THROUGHPUT_000").dropna(subset="peak_gpu_mem_mb")
    # Table 3's T4 memory over batch x 01's activation memory per image, at the files' size and at the input's
    per_px = {
        px: [
            r.peak_gpu_mem_mb * 1e6 / 2**20 / r.batch_size / _activation_mib(r.model, px)
            for r in mem.itertuples()
        ]
        for px in (s["dataset_image_px"], s["image_px"])
    }
    at = "; ".join(f"at {px} px {min(v):.2f}-{max(v):.2f}x" for px, v in per_px.items())
    thr = table("THROUGHPUT_000").pivot_table(index="model", columns="device_class", values="train_img_s")
    ours = pd.DataFrame(
        {f"{a}_over_{b}": thr[a] / thr[b] for a, b in (("t4", "apple"), ("t4", "cpu"), ("apple", "cpu"))}
    )
    printed, most = table("SPEEDUPS_000").set_index("model"), ours.t4_over_cpu.max()
    speed_off = "; ".join(  # Table 8 prints GPU/M3 with two decimals, the other columns with one
        f"{m} {col}: printed {printed.loc[m, col]:.2f}, Table 3 gives {ours.loc[m, col]:.2f}"
        for m in printed.index
        for col in ours.columns
        if abs(printed.loc[m, col] - ours.loc[m, col]) > (0.006 if col == "t4_over_apple" else 0.06)
    )
    peak = table("PEAKS_000").set_index("device_class").peak_gflops["apple"]
    # Apple publishes no M3 Pro GPU clock (our spec table has no row): the range its published estimates give
    lo, hi = (cores * 128 * 2 * ghz for cores, ghz in ((14, 1.38), (18, 1.6)))
    sweep_line, lines = _line("SETUP_000", "item=sweep_text_batch_sizes"), _lines("SWEEP_000")
    batches = ", ".join(map(str, table("SWEEP_000").batch_size))
    return locals()


def _checks_001() -> dict:
    # its average throughput, a mean of per-epoch rates (lines 142, 147), needs no check
    b = table("BACKENDS_001")
    low, fastest = b.loc[b.final_test_accuracy_pct.idxmin()], b.loc[b.epoch_s.idxmin()]
    cuda = b.set_index("backend").epoch_s["torch_cuda"]
    return locals()


def _checks_002() -> dict:
    tel = table("TELEMETRY_002")
    t, idle = tel[(tel.batch_size == tel.batch_size.max()) & (tel.gpu == 0)].iloc[0], tel[tel.gpu == 1]
    share, pstate, power = t.mem_used_mib / t.mem_total_mib, idle.pstate.iloc[0], idle.power_w.max()
    return locals()


def _checks_003() -> dict:
    g = table("COMPLEXITY_003").set_index("model").train_flops_g
    thr = table("THROUGHPUT_003").set_index(["model", "batch_size", "device_class"]).train_img_s
    rates = "; ".join(
        f"{r.model} bs{r.batch_size} {r.device_class}: printed {r.achieved_tflops}, {thr[r[1:4]]:.0f} img/s x "
        f"{g[r.model]} G = {thr[r[1:4]] * g[r.model] / 1e3:.2f}"
        for r in table("ACHIEVED_003").itertuples()
    )
    pairs = table("THROUGHPUT_003").pivot_table(
        index=["model", "batch_size"], columns="device_class", values="train_img_s"
    )
    ratio = (pairs.rtx4080 / pairs.t4).dropna()
    normal, low = (ratio[ratio > 1].min(), ratio[ratio > 1].max()), ratio.min()
    peak = table("PEAKS_003").set_index("device_class").loc["rtx4080"]
    lap = _spec_rows(DEVICES["003", "rtx4080"][0]).iloc[0]
    tflops = lap.peak_gflops / 1e3
    eff = "; ".join(
        f"{r.model} bs{r.batch_size}: {r.achieved_tflops} / {tflops:g} = {100 * r.achieved_tflops / tflops:.1f}% "
        f"(printed {r.efficiency_pct}%)"
        for r in table("ACHIEVED_003")[table("ACHIEVED_003").device_class == "rtx4080"].itertuples()
    )
    ridge, its_ridge = lap.peak_gflops / peak.bandwidth_gbs, peak.peak_tflops * 1e3 / peak.bandwidth_gbs
    return locals()


def _checks_004() -> dict:
    sh, s, mem = SHAPE_004, _SETUP_004, table("MEMORY_004").set_index("component").cpu_mb
    n = sh["features"] * sh["hidden"] + sh["hidden"] + sh["hidden"] * sh["classes"] + sh["classes"]
    mb, f64 = n * 8 / 1e6, sh["inputs"] * sh["features"] * 8 / 1e6
    times = mem["parameters"] / mb
    raw, labelled = s["mnist_train_images"] * sh["features"] / 1e6, sh["inputs"] + s["validation_images"]
    step = table("TIMES_004").set_index("what")
    totals = {side: table("OPS_004")[f"{side}_ms"].sum() for side in ("cpu", "gpu")}
    near = all(abs(totals[k] - step.loc["iteration", f"{k}_ms"]) < 0.05 for k in totals)
    exact = " exactly" if near else ""
    sums = "; ".join(
        f"{k.upper()}: operations sum to {v:.1f} ms, Table 3's iteration {step.loc['iteration', f'{k}_ms']} ms"
        for k, v in totals.items()
    )
    own = labelled == s["mnist_train_images"]
    mnist = f"; {labelled:,} is MNIST's own training set (its Table 2)" if own else ""
    return locals()


def inconsistencies() -> pd.DataFrame:
    """The seeds' numbers checked against each other: each row's prose from ``data/seed_checks.csv``, formatted
    with this module's names, ``_checks_<seed>``'s locals, ``s`` (the seed's setup) and ``c`` (its claims)."""
    checks, columns = data("seed_checks.csv"), ["published", "computed_from_its_own_numbers", "note"]
    figures = {
        s: {**globals(), **globals()[f"_checks_{s}"](), "s": setup(s), "c": _items(f"CLAIMS_{s}")}
        for s in checks.seed.unique()
    }
    return checks.apply(
        lambda r: pd.Series([SEEDS[r.seed], *(r[c].format(**figures[r.seed]) for c in columns)]), axis=1
    ).set_axis(["seed", *columns], axis=1)


# --- what the seeds' numbers should have been --------------------------------------------------------
# each row's figure, unit, label, formula and inputs: its kind's texts in data/seed_correction_texts.csv, formatted
# with the numbers the code below computes


@functools.cache
def _activation_mib(model: str, size: int) -> float:
    """MiB autograd saves per image in a training forward at seed 000's classes (01's activation memory)."""
    import torch

    from cnnbench import paths
    from cnnbench.measure import flops

    def count() -> float:
        torch.manual_seed(0)
        net = models.build(model, num_classes=_SETUP_000["classes"], image_size=size).train()
        x = torch.randn(1, *models.input_shape(model, size))
        return flops.activation_bytes(net, x, _SETUP_000["classes"]) / 2**20

    return paths.cached("activation", [model, size, torch.__version__], count, (flops, models))


@functools.cache
def _step(model: str, batch: int, size: int, classes: int, phase: str) -> pd.DataFrame:
    """Every op of one step with its counted FLOPs and compulsory traffic (cnnbench.measure.traffic)."""
    from cnnbench.measure import traffic

    return traffic.count_step(model, batch, size, classes, phase)


def _fix(kind: str, seed: str, printed, corrected: float, said: dict, **row) -> dict:
    """One row of CORRECTION_COLUMNS, its texts ``kind``'s in data/seed_correction_texts.csv formatted with ``said``."""
    texts = data("seed_correction_texts.csv").set_index("kind").loc[kind]
    return {**row, "seed": seed, "printed": printed, "corrected": corrected} | {
        c: t.format(**said) for c, t in texts.items()
    }


def _placed(seed, r, phase, size, classes, roof, printed, line) -> dict:
    """A seed's achieved rate from its throughput and our FLOPs under ``roof`` (peak GFLOP/s, GB/s, whose) at its
    step's intensity; ``ceiling_x`` (not a column): its rate over the step's with every op at the roof."""
    (peak, bw, whose), ops = roof, _step(r.model, r.batch_size, size, classes, phase)
    img_s, g = getattr(r, f"{phase}_img_s"), ops.flops.sum() / r.batch_size / 1e9  # GFLOP per image
    tflops = img_s * g / 1e3
    ai, op_s = ops.flops.sum() / ops.bytes.sum(), (ops.flops / peak).clip(lower=ops.bytes / bw).sum() / 1e9
    step, x = "training step" if phase == "train" else "forward", img_s * op_s / r.batch_size
    above = f"; {x:.2f}x what the roof allows with every op at it (above the ceiling)" if x > 1 else ""
    row = dict(model=r.model, device=r.device_class, phase=phase, batch_size=r.batch_size, ceiling_x=x)
    pct, bound = 100 * tflops * 1e3, "memory" if ai < peak / bw else "compute"
    row |= dict(corrected_pct_of_peak=pct / peak, of_attainable_pct=pct / min(peak, bw * ai), bound=bound)
    row["intensity_flop_per_byte"] = ai
    return _fix("placed", seed, printed, tflops, locals(), **row)


def _intensity_row(seed, model, batch, size, classes, printed, what, line) -> dict:
    ops = _step(model, batch, size, classes, "train")
    ai = ops.flops.sum() / ops.bytes.sum()
    return _fix("intensity", seed, printed, ai, locals(), model=model, batch_size=batch, phase="train")


def _corrections_000() -> list[dict]:
    size, classes = _SETUP_000["image_px"], _SETUP_000["classes"]
    peaks = table("PEAKS_000").set_index("device_class")
    rows = []
    for r in table("THROUGHPUT_000").itertuples():
        roof = (peaks.peak_gflops[r.device_class], peaks.bandwidth_gbs[r.device_class], "its Table 7 roof")
        line = _line("THROUGHPUT_000", f"model={r.model};device_class={r.device_class}")
        for phase in ("train", "eval"):
            said = (r.model, r.device_class, phase) == ("resnet50", "t4", "eval")  # '1.3 TFLOPs, 16% of peak'
            row = _placed(SEED_000, r, phase, size, classes, roof, getattr(r, f"{phase}_tflops"), line)
            pct = _items("CLAIMS_000")["t4_resnet50_pct_of_peak"] if said else math.nan
            rows.append({**row, "printed_pct_of_peak": pct})
    batch = table("THROUGHPUT_000").groupby("model").batch_size.first()
    for r in table("AI_TABLE_000").itertuples():
        what = f"{r.flops_g} GFLOP per image at 224 px / {r.model_mb} MB of parameters"
        line = _line("AI_TABLE_000", f"model={r.model}")
        rows.append(
            _intensity_row(SEED_000, r.model, batch[r.model], size, classes, r.ai_printed, what, line)
        )
    return rows


def _corrections_003() -> list[dict]:
    size, classes = _SETUP_003["image_px"], _SETUP_003["classes_head"]
    own = table("PEAKS_003").set_index("device_class")
    a = table("ACHIEVED_003").set_index(["model", "batch_size", "device_class"])
    rows = []
    for r in table("THROUGHPUT_003").itertuples():
        key = (r.model, r.batch_size, r.device_class)
        mine = own.loc[r.device_class]
        spec = _spec_rows(DEVICES["003", r.device_class][0]).itertuples()  # our spec table's, where it has it
        spec = [(s.peak_gflops, s.bandwidth_gbs, f"our spec table's {s.device}") for s in spec]
        roof = [*spec, (mine.peak_tflops * 1e3, mine.bandwidth_gbs, "its section 1.4 figures")][0]
        printed = a.reindex([key]).iloc[0]  # NaN where it printed none
        line = _line("THROUGHPUT_003", "model={};batch_size={};device_class={}".format(*key))
        row = _placed(SEED_003, r, "train", size, classes, roof, printed.achieved_tflops, line)
        own_pct = 100 * row["corrected"] / mine.peak_tflops if roof[0] != mine.peak_tflops * 1e3 else math.nan
        seed_peak = f"; the seed's {mine.peak_tflops * 1e3:,.0f} GFLOP/s ({mine.device}) gives {own_pct:.1f}%"
        row["formula"] += seed_peak if own_pct == own_pct else ""  # our spec table's peak: the seed's too
        rows.append({**row, "printed_pct_of_peak": printed.efficiency_pct, "own_pct": own_pct})
    per = pd.DataFrame(rows)
    for device in ("rtx4080", "t4"):
        d, item = per[(per.device == device) & per.printed.notna()], f"{device}_mean_efficiency_pct"
        ok, out = d[d.ceiling_x <= 1], d[d.ceiling_x > 1]
        own = f" ({ok.own_pct.mean():.1f}% of the peak the seed used)" if ok.own_pct.notna().any() else ""
        left = ", ".join(f"{r.model} bs{r.batch_size:.0f}" for r in out.itertuples())
        left = (
            left and f"; left out, above the ceiling: {left} (with it {d.corrected_pct_of_peak.mean():.1f}%)"
        )
        line, kept, printed_rows = _line("CLAIMS_003", f"item={item}"), len(ok), len(d)
        mean, claim = ok.corrected_pct_of_peak.mean(), _items("CLAIMS_003")[item]
        rows.append(_fix("efficiency", SEED_003, claim, mean, locals(), device=device))
    for r in table("AI_003").itertuples():
        line, ai = _line("AI_003", f"model={r.model};batch_size={r.batch_size}"), r.ai_flop_per_byte
        rows.append(
            _intensity_row(SEED_003, r.model, r.batch_size, size, classes, ai, "method not stated", line)
        )
    return rows


def _corrections_004() -> list[dict]:
    n, f, h, k = (SHAPE_004[key] for key in ("inputs", "features", "hidden", "classes"))
    params, mem = f * h + h + h * k + k, table("MEMORY_004").set_index("component")
    times = table("TIMES_004").set_index("what")
    arrays = {
        "parameters": (params, "W1, b1, W2, b2"),
        "inputs": (n * f, f"X: {n:,} x {f}"),
        "activations": (2 * (h + k) * n, f"Z1, A1, Z2, A2: {2 * (h + k)} x {n:,}"),
        "gradients": ((h + k) * n + params, f"dZ1, dZ2 ({h + k} x {n:,}) and dW1, db1, dW2, db2"),
    }
    rows = []
    for c, (count, what) in arrays.items():
        line, mb = _line("MEMORY_004", f"component={c}"), count * 8 / 1e6
        said, row = dict(what=what, count=count, line=line), dict(device="numpy and cupy", model="mlp")
        rows.append(_fix("memory", SEED_004, mem.cpu_mb[c], mb, said, **row))
    for what in ("iteration", "forward", "backward"):
        for side, lib in (("cpu", "numpy"), ("gpu", "cupy")):
            ms, line = times.loc[what, f"{side}_ms"], _line("TIMES_004", f"what={what}")
            row = dict(model="mlp", device=lib, phase="train", batch_size=n)
            rows.append(_fix("time", SEED_004, ms, ms * 1e3 / n, locals(), **row))
    return rows


CORRECTION_COLUMNS = (
    "seed figure model device phase batch_size printed corrected unit printed_pct_of_peak corrected_pct_of_peak "
    "intensity_flop_per_byte bound of_attainable_pct formula inputs label"
).split()


@functools.cache
def _corrections() -> pd.DataFrame:
    rows = pd.DataFrame(_corrections_000() + _corrections_003() + _corrections_004())
    return rows.reindex(columns=CORRECTION_COLUMNS)


def corrections() -> pd.DataFrame:
    """Every seed figure we can recompute beside the one printed (:data:`CORRECTION_COLUMNS`), each labelled,
    with its formula (with the numbers) and where its inputs come from."""
    return _corrections().copy()


def memory_bound_verdict() -> str:
    """Seed 000's claim that its cloud CPU is memory-bound, judged at its corrected placement: which side of
    its own roof's ridge each model's training step sits, and how near that roof it ran."""
    c = _corrections()
    cpu = c[(c.seed == SEED_000) & (c.device == "cpu") & (c.figure == "achieved TFLOP/s (train)")]
    peak, bw = table("PEAKS_000").set_index("device_class").loc["cpu", ["peak_gflops", "bandwidth_gbs"]]
    left, near, ai = cpu[cpu.bound == "memory"], cpu[cpu.of_attainable_pct >= 50], cpu.intensity_flop_per_byte
    claim, line = _items("CLAIMS_000")["cloud_cpu_bound"], _line("CLAIMS_000", "item=cloud_cpu_bound")
    n, n_left, ridge = len(cpu), len(left), peak / bw
    names, moved = ", ".join(left.model) or "none", (cpu.corrected * 1e3 / ai).max()
    ai_lo, ai_hi, of_lo, of_hi = ai.min(), ai.max(), cpu.of_attainable_pct.min(), cpu.of_attainable_pct.max()
    verdict = f"not memory-bound for {n - n_left} of {n} models; " if n_left < n else ""
    verdict += (
        "its CPU ran far below both roofs, limited by neither."
        if near.empty
        else "near its roof only " + ", ".join(f"{r.model} ({r.bound}-bound)" for r in near.itertuples())
    )
    return data("seed_verdicts.csv").set_index("claim").text["cloud_cpu_bound"].format(**locals())


def tables() -> dict[str, pd.DataFrame]:
    """Every seed table by its seed, section, lines and what it holds (``data/seed_tables.csv``), with ``source``."""
    out = {}
    for name, what, stored_in, _ in data("seed_tables.csv").itertuples(index=False):
        parts, what = stored_in.split(), what.format_map(globals())
        where = "; ".join(dict.fromkeys(w for p in parts for w in provenance(p)["where"]))
        out[f"seed {name[-3:]} {where} ({_lines(*parts)}): {what}"] = _view(name)
    v = _values()  # the figures each seed's sentences state, each with its line
    for (s, seed), claims in v[v.table.str.startswith("CLAIMS_")].groupby([v.table.str[-3:], "seed"]):
        kept = claims[["key", "value", "printed", "line", "where", "note"]].reset_index(drop=True)
        out[f"seed {s}: figures stated in its text"] = kept.assign(source=seed)
    return out
