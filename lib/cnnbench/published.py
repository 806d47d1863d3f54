"""Numbers published by the seed reports, kept only to be shown beside our own measurements.

Every number lives once, in the package data file ``data/seed_numbers.csv``, one row per value: its seed file
(``seed``), the table it belongs to here (``table``), its row (``key``, ``name=value`` pairs joined by ``;``) and
column, the ``value``, the text as the seed printed it where that differs from the value (``printed``: "around
2 hours", a thousands separator, "N/A" for a missing value), its ``origin`` (``printed``; ``read``: our reading of
the seed's words, e.g. "around 1 hour 15 minutes" in hours; ``reference``: a fact the seed does not print, about
something it names, with its source in ``note``), and where it stands in the seed's text file (``line``: the line
of ``<seed>`` as the workbook's seed texts number them, ``where``: section and table).

:func:`values` reads that file (the one loader) and :func:`table` turns one of its tables into rows; every table
and constant below is a view built from them, and ``analysis``, ``scratch`` and ``transfer`` use these views.
Nothing here feeds a computation of ours except as a labelled comparison.
"""

from __future__ import annotations

import functools
import math
import re
from importlib import resources

import pandas as pd

DATA_FILE = "data/seed_numbers.csv"
COLUMNS = ["seed", "table", "key", "column", "value", "printed", "origin", "line", "where", "note"]


@functools.cache
def _values() -> pd.DataFrame:
    with resources.files("cnnbench").joinpath(DATA_FILE).open() as f:
        v = pd.read_csv(f, dtype=str, keep_default_na=False)
    return v.assign(line=v.line.astype(int))


def values() -> pd.DataFrame:
    """Every stored seed number, one row per value with its seed file, table, row, column, printed text, origin,
    line and section (see the module docstring)."""
    return _values().copy()


def _parse_key(key: str) -> dict:
    return dict(part.split("=", 1) for part in key.split(";")) if key else {}


def _convert(col: pd.Series) -> pd.Series:
    """Numbers where every non-empty value is one (ints stay ints unless a value is missing); "" is missing."""
    filled = col.dropna()
    filled = filled[filled != ""]
    if filled.empty:
        return pd.Series(math.nan, index=col.index)
    numbers = pd.to_numeric(filled, errors="coerce")
    blank = col.mask(col == "")
    if numbers.isna().any():
        return blank
    out = pd.to_numeric(blank, errors="coerce")
    if len(filled) == len(col) and filled.str.fullmatch(r"-?\d+").all():
        return out.astype(int)
    return out.astype(float)


def table(name: str) -> pd.DataFrame:
    """One stored table as rows: its key columns, one column per stored column (in the order stored), and
    ``source``, the seed file."""
    v = _values()
    v = v[v.table == name]
    if v.empty:
        raise KeyError(f"no table {name!r} in {DATA_FILE}")
    rows: dict[str, dict] = {}
    for r in v.itertuples():
        rows.setdefault(r.key, _parse_key(r.key))[r.column] = r.value
    df = pd.DataFrame(list(rows.values()))
    df = df.apply(_convert)
    return df.assign(source=v.seed.iloc[0])


def provenance(name: str) -> pd.DataFrame:
    """Where every value of one stored table comes from: seed file, row, column, value, printed text, origin,
    line and section of the seed's text."""
    v = _values()
    return v[v.table == name].reset_index(drop=True)


def _scalar(text: str) -> int | float | str:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def _items(name: str) -> dict:
    v = provenance(name)
    return {_parse_key(k)["item"]: _scalar(x) for k, x in zip(v.key, v.value, strict=True)}


def setup(seed: str) -> dict:
    """A seed's configuration and dataset numbers (``SETUP_<seed>``), item -> value."""
    return _items(f"SETUP_{seed}")


def _claims(seed: str) -> dict:
    return _items(f"CLAIMS_{seed}")


def _line(name: str, key: str, column: str | None = None) -> int:
    p = provenance(name)
    p = p[(p.key == key) & ((p.column == column) if column else True)]
    return int(p.line.iloc[0])


def _lines(name: str) -> str:
    lines = provenance(name).line
    return f"line {lines.min()}" if lines.min() == lines.max() else f"lines {lines.min()}-{lines.max()}"


SEEDS = {s[:3]: s for s in sorted(_values().seed.unique())}
SEED_000 = SEEDS["000"]
SEED_001 = SEEDS["001"]
SEED_002 = SEEDS["002"]
SEED_003 = SEEDS["003"]
SEED_004 = SEEDS["004"]

# --- seed 000 ------------------------------------------------------------------------------------------------
_SETUP_000 = setup("000")
# Table 1: params (M) and "FLOPs/Image (G)" per 224x224 input (torchvision's MACs).
COMPLEXITY_000 = table("COMPLEXITY_000")
# Table 2: "AI (FLOPs/Byte)" = FLOPs per image / model size in bytes (its figures are GFLOP/MB).
AI_TABLE_000 = table("AI_TABLE_000")
PARAM_PROXY_AI_000 = dict(zip(AI_TABLE_000.model, AI_TABLE_000.ai_printed, strict=True))
# Table 3 "Performance Summary" (device classes: apple = M3 Pro (MPS), cpu = e2-standard-4, t4 = Tesla T4) and
# Table 4 (headed "Table 2: Epoch Time Comparison"): train and validation "epoch" times (s).
THROUGHPUT_000 = table("THROUGHPUT_000")
EPOCHS_000 = table("EPOCHS_000")


def _epoch_images_000() -> pd.DataFrame:
    """Images per 'epoch' = throughput x epoch time, to the nearest 100, per model, device and phase."""
    t = THROUGHPUT_000.merge(EPOCHS_000[["model", "device_class", "train_epoch_s", "val_epoch_s"]])
    return t.assign(
        train_images=(t.train_img_s * t.train_epoch_s).round(-2),
        val_images=(t.eval_img_s * t.val_epoch_s).round(-2),
    )


# Seed 000's "epoch": every throughput x its Table 4 epoch time gives the same few thousand images (half as many
# for SqueezeNet on the T4), a subset of Tiny-ImageNet's training set; computed here, and
# params/seeds_full.yaml caps epochs to match.
EPOCH_IMAGES_000 = int(pd.concat([_epoch_images_000().train_images, _epoch_images_000().val_images]).median())
_SQ_T4_000 = _epoch_images_000().set_index(["model", "device_class"]).train_images[("squeezenet1_1", "t4")]
THROUGHPUT_000["batch_size"] = [
    _SETUP_000["batch_size_squeezenet1_1"] if m == "squeezenet1_1" else _SETUP_000["batch_size"]
    for m in THROUGHPUT_000.model
]
THROUGHPUT_000["configuration"] = (
    f"Tiny-ImageNet ({_SETUP_000['image_px']}x{_SETUP_000['image_px']}) from disk, {_SETUP_000['workers']} "
    f"workers, {_SETUP_000['epochs']} epoch of {EPOCH_IMAGES_000:,} images, images / epoch time, one run"
)
EPOCHS_000["configuration"] = (
    f"an 'epoch' of {EPOCH_IMAGES_000:,} images ({_SQ_T4_000:,.0f} for SqueezeNet on the T4)"
)
# Table 5: utilisation (%), sampled outside the run (GPU N/A on MPS and CPU).
UTILISATION_000 = table("UTILISATION_000")
# Table 6: SqueezeNet batch sweep, approximate ("~") values; its largest batch was unstable (NaNs).
SWEEP_000 = table("SWEEP_000")
SWEEP_000.insert(4, "status", ["unstable" if pd.isna(t) else "ok" for t in SWEEP_000.throughput_img_s])
SWEEP_000["configuration"] = (
    f"device unclear: text says M3 Pro (MPS), caption says T4; batch sizes unclear: text says "
    f"{_SETUP_000['sweep_text_batch_sizes']}, table {', '.join(map(str, SWEEP_000.batch_size))}"
)
# Table 7: spec-sheet roofs it used (CPU values approximate); Table 8: cross-device training speedups (x).
PEAKS_000 = table("PEAKS_000")
SPEEDUPS_000 = table("SPEEDUPS_000")

# --- seed 003 ------------------------------------------------------------------------------------------------
_SETUP_003 = setup("003")
# Section 5.1: training throughput, one run per configuration; the CPU ran fewer measured iterations.
THROUGHPUT_003 = table("THROUGHPUT_003")
_RESOLUTION_003 = (
    f"ImageNette ({_SETUP_003['dataset']}) through PyTorch's ImageNet example: {_SETUP_003['image_px']} px crops, a "
    f"{_SETUP_003['classes_head']}-class head (the example's defaults; the text prints neither)"
)
THROUGHPUT_003["configuration"] = [
    f"{_RESOLUTION_003}, {_SETUP_003['warmup_iterations']} warm-up + "
    f"{_SETUP_003['measured_iterations_cpu' if d == 'cpu' else 'measured_iterations']} measured iterations, one run"
    for d in THROUGHPUT_003.device_class
]
# Sections 2.3, 4.2-4.3, 5.2: arithmetic intensity (method not stated), per model and batch size.
_AI_003 = table("AI_003")
AI_BY_BATCH_003 = {
    int(r.batch_size): float(r.ai_flop_per_byte) for r in _AI_003[_AI_003.model == "resnet50"].itertuples()
}
# its per-model table (section 5.2) gives each model's batch-128 value (for ResNet-50 not batch 64's)
AI_003 = {r.model: float(r.ai_flop_per_byte) for r in _AI_003[_AI_003.batch_size == 128].itertuples()}
# Sections 4.2/4.3: achieved TFLOP/s and efficiency vs its spec peaks (section 1.4).
ACHIEVED_003 = table("ACHIEVED_003").merge(
    _AI_003.drop(columns="source"), on=["model", "batch_size"], how="left"
)[["model", "batch_size", "device_class", "ai_flop_per_byte", "achieved_tflops", "efficiency_pct", "source"]]
# Section 1.4: spec-sheet peaks (TFLOP/s), bandwidth (GB/s) and memory (GB) it used.
PEAKS_003 = table("PEAKS_003")
# Section 2.1: params (M), "FLOPs" per image (G; torchvision's MACs) and training "FLOPs" (3x).
COMPLEXITY_003 = table("COMPLEXITY_003")
# Its summary sentences, checked against its own tables by inconsistencies().
_CLAIMS_003 = _claims("003")
SUMMARY_003 = {"rtx4080_over_t4": (_CLAIMS_003["rtx4080_over_t4_low"], _CLAIMS_003["rtx4080_over_t4_high"])}

# --- seed 001 ------------------------------------------------------------------------------------------------
_SETUP_001 = setup("001")
MNIST_TRAIN_IMAGES = _SETUP_001["train_images"]
# Seed 001 padded each epoch to whole batches of its batch size (section III.A.2): more samples than MNIST has.
EPOCH_SAMPLES_001 = math.ceil(MNIST_TRAIN_IMAGES / _SETUP_001["batch_size"]) * _SETUP_001["batch_size"]
# Table I: the MNIST CNN per backend, one run each. Its Numba backends skipped backpropagation through both
# convolutions (and Numba CUDA did the dense backward on the host): its Numba rows measure less work.
BACKENDS_001 = table("BACKENDS_001").assign(
    model="mnist_cnn",
    configuration=f"MNIST {MNIST_TRAIN_IMAGES:,} training images (epochs padded to {EPOCH_SAMPLES_001:,}), "
    f"bs {_SETUP_001['batch_size']}, {_SETUP_001['epochs']} epochs, SGD lr {_SETUP_001['lr']} momentum "
    f"{_SETUP_001['momentum']}, means over epochs; conv backprop skipped in Numba",
)

# --- seed 002 ------------------------------------------------------------------------------------------------
_SETUP_002 = setup("002")
_CLAIMS_002 = _claims("002")
# DenseNet-121 transfer learning on cats vs dogs, 2x RTX A6000: nvidia-smi snapshots (Figs. 4 and 7), one row
# per GPU and batch size.
TELEMETRY_002 = table("TELEMETRY_002").assign(
    configuration=f"single nvidia-smi snapshots, power cap {_SETUP_002['power_cap_w']} W"
)
# Sections VIII.D-F: total training time for its epochs, test accuracy and seconds per test image. The CPU run's
# batch size is not stated; the accuracy figure covers the CPU and the GPU at batch 64 only; inference is per
# device (the seed ties it to no batch size) and is shown on the first GPU row.
_INFERENCE_002 = table("INFERENCE_002").set_index("device_class")
_inference_s = {
    "cpu": _INFERENCE_002.s_per_image["cpu"],
    "cuda": (_INFERENCE_002.s_per_image_low["cuda"] + _INFERENCE_002.s_per_image_high["cuda"]) / 2,
}
TIMES_002 = table("TIMES_002").reindex(columns=["device_class", "batch_size", "train_20_epochs_h", "source"])
TIMES_002.insert(
    3,
    "test_accuracy_pct",
    [
        _CLAIMS_002["test_accuracy_cpu_and_gpu_bs64"] if d == "cpu" or b == 64 else math.nan
        for d, b in zip(TIMES_002.device_class, TIMES_002.batch_size, strict=True)
    ],
)
_first_gpu = TIMES_002.index[TIMES_002.device_class == "cuda"][0]  # device kind: seed 002's rows, as published
TIMES_002.insert(
    4,
    "inference_s_per_image",
    [
        _inference_s["cpu"] if d == "cpu" else _inference_s["cuda"] if i == _first_gpu else math.nan
        for i, d in zip(TIMES_002.index, TIMES_002.device_class, strict=True)
    ],
)
# Sections VIII.A-B: the CPU's utilisation (%) while the GPUs trained and in the CPU-only run, and the CPU-only
# run's memory (GB) of the machine's RAM (GB), read from its text (operating-system monitor snapshots).
CPU_002 = {
    k: _CLAIMS_002[k]
    for k in ("cpu_util_during_gpu_pct", "cpu_util_low_pct", "cpu_util_high_pct", "cpu_memory_gb", "cpu_total_ram_gb")
}
TIMES_002["configuration"] = (
    f"DenseNet-121 transfer, Adam, {_SETUP_002['epochs']} epochs of {_SETUP_002['train_images']:,} images; "
    f"CPU batch size not stated; accuracy: '{_CLAIMS_002['test_accuracy_cpu_and_gpu_bs64']}% in both cases' "
    f"(section D: CPU, and GPU at batch 64), '{_CLAIMS_002['test_accuracy_low']}-"
    f"{_CLAIMS_002['test_accuracy_high']}%' (section F), no figure at batch 128; GPU inference "
    f"'{_INFERENCE_002.s_per_image_low['cuda']:g}-{_INFERENCE_002.s_per_image_high['cuda']:g} s' per image "
    "(no batch size stated), shown as its midpoint on the first GPU row"
)

# --- seed 004 ------------------------------------------------------------------------------------------------
_SETUP_004 = setup("004")
# the network's shapes (inputs: its training images); the seed prints no parameter count (inconsistencies()
# computes it from these)
SHAPE_004 = {
    "inputs": _SETUP_004["train_images"],
    "features": _SETUP_004["features"],
    "hidden": _SETUP_004["hidden"],
    "classes": _SETUP_004["classes"],
}
_CONFIGURATION_004 = (
    f"{SHAPE_004['features']}-{SHAPE_004['hidden']}-{SHAPE_004['classes']} network, NumPy (CPU) vs CuPy (GPU), "
    f"{_SETUP_004['iterations']} full-batch iterations on {SHAPE_004['inputs']:,} images, lr {_SETUP_004['lr']}, "
    "one run (no device synchronisation stated)"
)
# Table 3: total training (printed in seconds, shown here in ms), per iteration, forward and backward.
_TIMES_004 = table("TIMES_004")
TIMES_004 = pd.DataFrame(
    {
        "what": _TIMES_004["what"],
        "cpu_ms": _TIMES_004.cpu_ms.fillna(_TIMES_004.cpu_s * 1e3),
        "gpu_ms": _TIMES_004.gpu_ms.fillna(_TIMES_004.gpu_s * 1e3),
        "speedup_printed": _TIMES_004.speedup_printed,
        "source": _TIMES_004.source,
        "configuration": _CONFIGURATION_004,
    }
)
# Table 4: time per operation (ms per iteration); ``operation`` is our op kind (cnnbench.scratch's names),
# ``label`` the seed's.
OPS_004 = table("OPS_004").assign(configuration=_CONFIGURATION_004)
# Table 5: memory (MB as printed).
MEMORY_004 = table("MEMORY_004")


def device_class(device_kind: str, device_name: str) -> str:
    """The seeds' device classes: t4, rtx4080, apple (MPS), cpu; anything else is 'other'."""
    name = device_name.lower()
    if device_kind == "cuda":  # device kind: a row's, matched to the devices the seeds name
        return "t4" if "t4" in name else "rtx4080" if "4080" in name else "other"
    return {"mps": "apple", "cpu": "cpu"}.get(device_kind, "other")


def _row(seed: str, claim: str, computed: str, note: str) -> dict:
    return {"seed": seed, "published": claim, "computed_from_its_own_numbers": computed, "note": note}


def _spec_rows(device: str) -> pd.DataFrame:
    from cnnbench.roofline import peaks

    spec = peaks.specs()
    return spec[(spec.device == device) & (spec.precision == "fp32")]


def _inconsistencies_000() -> list[dict]:
    rows = []
    e = _epoch_images_000()
    imgs = pd.concat([e.train_images, e.val_images])
    sq_t4 = e[(e.model == "squeezenet1_1") & (e.device_class == "t4")].iloc[0]
    rows.append(
        _row(
            SEED_000,
            f"1 epoch of Tiny-ImageNet ({_SETUP_000['dataset_train_images']:,} training images)",
            f"throughput x epoch time = {int(imgs.median()):,} images in "
            f"{int((imgs == imgs.median()).sum())} of {len(imgs)} cases; SqueezeNet on T4: "
            f"{sq_t4.train_img_s * sq_t4.train_epoch_s:,.0f}",
            f"its 'epoch' was a {EPOCH_IMAGES_000:,}-image subset ({sq_t4.train_images:,.0f} for SqueezeNet on the T4)",
        )
    )
    a = AI_TABLE_000.assign(flop_per_byte=AI_TABLE_000.flops_g * 1e9 / (AI_TABLE_000.model_mb * 1e6))
    rows.append(
        _row(
            SEED_000,
            "AI " + ", ".join(f"{r.model} {r.ai_printed}" for r in a.itertuples()) + " FLOP/byte",
            ", ".join(f"{r.model} {r.flop_per_byte:.1f}" for r in a.itertuples()) + " FLOP/byte",
            "its figures are GFLOP per MB (x1000 = FLOP/byte), of parameter bytes only, at 224x224",
        )
    )
    c = THROUGHPUT_000.merge(COMPLEXITY_000[["model", "flops_g"]])
    ratio = c.train_tflops / (c.train_img_s * c.flops_g / 1e3)
    plain = ratio[c.device_class != "apple"]
    mps = ratio[c.device_class == "apple"]
    rows.append(
        _row(
            SEED_000,
            "TFLOP/s (train) per device",
            "TFLOP/s / (img/s x 224-pixel forward count) = "
            f"{plain.min():.2f}-{plain.max():.2f} on CPU and T4, "
            f"{mps.min():.1f}-{mps.max():.1f} on MPS",
            "CPU and T4 columns are img/s x the 224x224 forward 'FLOPs' (MACs): wrong resolution, "
            "no training "
            "factor; the MPS rows follow no stated formula",
        )
    )
    thr = THROUGHPUT_000.pivot_table(index="model", columns="device_class", values="train_img_s")
    recomputed = pd.DataFrame(
        {
            "t4_over_apple": thr.t4 / thr.apple,
            "t4_over_cpu": thr.t4 / thr.cpu,
            "apple_over_cpu": thr.apple / thr.cpu,
        }
    )
    printed = SPEEDUPS_000.set_index("model")
    off = [
        (m, col, printed.loc[m, col], recomputed.loc[m, col])
        for m in printed.index
        for col in recomputed.columns
        if abs(printed.loc[m, col] - recomputed.loc[m, col]) > (0.006 if col == "t4_over_apple" else 0.06)
    ]
    # Table 8 prints GPU/M3 with two decimals, the other columns with one
    rows.append(
        _row(
            SEED_000,
            f"Table 8 speedups; '~{_claims('000')['gpu_over_cpu_max']}x' on compute-heavy models",
            "; ".join(f"{m} {col}: printed {p:.2f}, Table 3 gives {r:.2f}" for m, col, p, r in off)
            + f"; largest GPU/CPU speedup in its table: {recomputed.t4_over_cpu.max():.1f}x",
            "speedups recomputed from its own Table 3 throughputs",
        )
    )
    apple = PEAKS_000.set_index("device_class").peak_gflops["apple"]
    spec = _spec_rows("Apple M3 Pro")
    if not len(spec):  # no spec row (Apple publishes no M3 GPU clock): the range the published clocks give
        lo, hi = (cores * 128 * 2 * ghz for cores, ghz in ((14, 1.38), (18, 1.6)))
        rows.append(
            _row(
                SEED_000,
                f"M3 Pro peak {apple:,} GFLOP/s",
                f"Apple publishes no M3 Pro GPU clock or TFLOPS; 14-18 cores x 128 ALUs x 2 FLOP at the 1.38-1.6 GHz "
                f"published estimates give {lo:,.0f}-{hi:,.0f} GFLOP/s",
                "an estimate, never measured: our spec table has no M3/M4 row",
            )
        )
    else:
        near = spec.loc[(spec.peak_gflops - apple).abs().idxmin()]
        rows.append(
            _row(
                SEED_000,
                f"M3 Pro peak {apple:,} GFLOP/s",
                f"nearest row of our spec table: Apple M3 Pro with {near.gpu_cores:g} GPU cores, "
                f"{near.peak_gflops:,.0f} GFLOP/s ({near.source})",
                "a spec-sheet product, never measured",
            )
        )
    sweep_line = _line("SETUP_000", "item=sweep_text_batch_sizes")
    rows.append(
        _row(
            SEED_000,
            f"Scenario B: 'three CSVs (batch sizes {_SETUP_000['sweep_text_batch_sizes']})' on the M3 Pro "
            f"(line {sweep_line})",
            f"its Table 6 ({_lines('SWEEP_000')}) has batch sizes {', '.join(map(str, SWEEP_000.batch_size))}, "
            "and its caption says T4",
            "its text and its table disagree on the batches swept and on the device",
        )
    )
    return rows


def _inconsistencies_001_002() -> list[dict]:
    rows = []
    b = BACKENDS_001.assign(images=BACKENDS_001.throughput_img_s * BACKENDS_001.epoch_s)
    rows.append(
        _row(
            SEED_001,
            "average throughput (samples/s) = samples / epoch time",
            ", ".join(
                f"{r.backend}: {r.throughput_img_s:,} x {r.epoch_s} s = {r.images:,.0f} images"
                for r in b.itertuples()
            )
            + f"; its epochs had {EPOCH_SAMPLES_001:,} = {EPOCH_SAMPLES_001 // _SETUP_001['batch_size']} x "
            f"{_SETUP_001['batch_size']} samples: "
            + ", ".join(
                f"{r.backend} {EPOCH_SAMPLES_001:,} / {r.epoch_s} s = {EPOCH_SAMPLES_001 / r.epoch_s:,.0f} "
                f"(published {r.throughput_img_s:,})"
                for r in b.itertuples()
            ),
            "its average throughput is not samples / average epoch time",
        )
    )
    fastest = b.loc[b.epoch_s.idxmin(), "backend"]
    cuda = b.set_index("backend").epoch_s["torch_cuda"]
    rows.append(
        _row(
            SEED_001,
            "conclusion: PyTorch CUDA and MPS significantly outperform",
            f"fastest epoch in its Table I: {fastest} ({b.epoch_s.min()} s); torch_cuda {cuda} s",
            "the text contradicts its table on which backend is faster",
        )
    )
    t = TELEMETRY_002[
        (TELEMETRY_002.batch_size == TELEMETRY_002.batch_size.max()) & (TELEMETRY_002.gpu == 0)
    ].iloc[0]
    idle = TELEMETRY_002[TELEMETRY_002.gpu == 1]
    rows.append(
        _row(
            SEED_002,
            f"GPU:0 takes {t.gpu_util_pct}% of its total memory (batch {t.batch_size})",
            f"{t.mem_used_mib} / {t.mem_total_mib} MiB = {t.mem_used_mib / t.mem_total_mib:.1%} of memory; "
            f"{t.gpu_util_pct}% is the GPU-Util column",
            f"GPU 1 sits in {idle.pstate.iloc[0]} at {idle.power_w.max()} W in every snapshot: "
            "the idle display GPU",
        )
    )
    return rows


def _inconsistencies_003() -> list[dict]:
    rows = []
    c = COMPLEXITY_003.set_index("model")
    thr = THROUGHPUT_003.set_index(["model", "batch_size", "device_class"]).train_img_s
    rows.append(
        _row(
            SEED_003,
            "achieved TFLOP/s = throughput x training FLOPs",
            "; ".join(
                f"{r.model} bs{r.batch_size} {r.device_class}: printed {r.achieved_tflops}, "
                f"{thr[(r.model, r.batch_size, r.device_class)]:.0f} img/s x {c.train_flops_g[r.model]} G "
                f"= {thr[(r.model, r.batch_size, r.device_class)] * c.train_flops_g[r.model] / 1e3:.2f}"
                for r in ACHIEVED_003.itertuples()
            ),
            "its achieved rates do not follow from its own throughputs",
        )
    )
    pairs = THROUGHPUT_003.pivot_table(
        index=["model", "batch_size"], columns="device_class", values="train_img_s"
    )
    ratio = (pairs.rtx4080 / pairs.t4).dropna()
    normal = ratio[ratio > 1]
    lo, hi = SUMMARY_003["rtx4080_over_t4"]
    rows.append(
        _row(
            SEED_003,
            f"RTX 4080 is {lo}-{hi}x faster than T4",
            f"its table gives {normal.min():.1f}-{normal.max():.1f}x "
            f"(and {ratio.min():.2f}x at ResNet-50 bs128)",
            "its summary does not match its table",
        )
    )
    rows.append(
        _row(
            SEED_003,
            "ResNet-50 AI in its per-model table",
            f"{AI_BY_BATCH_003[128]:.0f} at batch 128 ({AI_BY_BATCH_003[64]:.0f} is batch 64)",
            f"AI_003 uses {AI_003['resnet50']:.0f}",
        )
    )
    peak = PEAKS_003.set_index("device_class").loc["rtx4080"]
    laptop = _spec_rows("NVIDIA GeForce RTX 4080 Laptop GPU")
    if len(laptop):
        lap = laptop.iloc[0]
        lap_tflops = lap.peak_gflops / 1e3
        a = ACHIEVED_003[ACHIEVED_003.device_class == "rtx4080"]
        rows.append(
            _row(
                SEED_003,
                f"'{peak.device}' peak {peak.peak_tflops} TFLOP/s; efficiency = achieved / peak",
                "; ".join(
                    f"{r.model} bs{r.batch_size}: {r.achieved_tflops} / {lap_tflops:g} = "
                    f"{100 * r.achieved_tflops / lap_tflops:.1f}% (printed {r.efficiency_pct}%)"
                    for r in a.itertuples()
                )
                + f"; ridge point {lap.peak_gflops / peak.bandwidth_gbs:.0f} FLOP/byte at its "
                f"{peak.bandwidth_gbs:g} GB/s, not {peak.peak_tflops * 1e3 / peak.bandwidth_gbs:.0f}",
                f"its peak is the desktop RTX 4080's fp32 figure; its laptop GPU ({lap.device} in our spec table: "
                f"{lap.source}) has {lap_tflops:g} TFLOP/s",
            )
        )
    return rows


def _inconsistencies_004() -> list[dict]:
    rows = []
    s = SHAPE_004
    n_params = s["features"] * s["hidden"] + s["hidden"] + s["hidden"] * s["classes"] + s["classes"]
    mem = MEMORY_004.set_index("component").cpu_mb
    rows.append(
        _row(
            SEED_004,
            f"parameters take {mem['parameters']} MB",
            f"{n_params:,} parameters x 8 bytes (float64) = {n_params * 8 / 1e6:.3f} MB",
            "off by about 100x",
        )
    )
    mnist = _SETUP_004["mnist_train_images"]
    rows.append(
        _row(
            SEED_004,
            f"{s['inputs']:,} x {s['features']} inputs take {mem['inputs']} MB",
            f"as float64: {s['inputs'] * s['features'] * 8 / 1e6:.0f} MB; "
            f"{mnist * s['features'] / 1e6:.1f} MB is {mnist:,} x {s['features']} bytes (uint8)",
            "its input memory is the raw 8-bit file, not the float64 arrays it trained on",
        )
    )
    step = TIMES_004.set_index("what")
    sums = {side: OPS_004[f"{side}_ms"].sum() for side in ("cpu", "gpu")}
    rows.append(
        _row(
            SEED_004,
            "Table 4: time per operation (matmul, ReLU, softmax, gradients) of an iteration",
            "; ".join(
                f"{side.upper()}: operations sum to {sums[side]:.1f} ms, Table 3's iteration "
                f"{step.loc['iteration', f'{side}_ms']} ms"
                for side in sums
            ),
            "its operations add up to the whole iteration"
            + (
                " exactly"
                if all(abs(sums[k] - step.loc["iteration", f"{k}_ms"]) < 0.05 for k in sums)
                else ""
            )
            + ": nothing is left for the bias additions, the one-hot encoding and the parameter update its "
            "Algorithm 1 runs every iteration",
        )
    )
    labelled = s["inputs"] + _SETUP_004["validation_images"]
    rows.append(
        _row(
            SEED_004,
            f"Kaggle's digit-recognizer split into {s['inputs']:,} training and "
            f"{_SETUP_004['validation_images']:,} validation images",
            f"{s['inputs']:,} + {_SETUP_004['validation_images']:,} = {labelled:,} labelled images; the Kaggle "
            f"file's train.csv has {_SETUP_004['kaggle_train_rows']:,} labelled rows",
            "its split cannot come from the file it names"
            + (f"; {labelled:,} is MNIST's own training set (its Table 2)" if labelled == mnist else ""),
        )
    )
    return rows


def inconsistencies() -> pd.DataFrame:
    """The seeds' numbers checked against each other: each row computed here from the stored numbers (and, where
    named, our spec table)."""
    return pd.DataFrame(
        _inconsistencies_000() + _inconsistencies_001_002() + _inconsistencies_003() + _inconsistencies_004()
    )


# What each view holds (units), shown with the seed's section, table and lines in tables().
_TABLES = {
    "COMPLEXITY_000": "params (M) and 'FLOPs' per 224x224 image (G, MACs)",
    "AI_TABLE_000": "'AI' = FLOPs / model bytes (printed as FLOP/byte; GFLOP/MB)",
    "THROUGHPUT_000": "throughput (img/s), TFLOP/s, peak GPU memory (MB)",
    "EPOCHS_000": f"epoch times (s) of {EPOCH_IMAGES_000:,}-image 'epochs'",
    "UTILISATION_000": "utilisation (%)",
    "SWEEP_000": "SqueezeNet batch sweep (img/s, GFLOP/s)",
    "PEAKS_000": "spec roofs (GFLOP/s, GB/s)",
    "SPEEDUPS_000": "speedups (x)",
    "THROUGHPUT_003": "training throughput (img/s)",
    "ACHIEVED_003": "achieved TFLOP/s, efficiency (%), AI (FLOP/byte)",
    "PEAKS_003": "spec peaks (TFLOP/s, GB/s, GB)",
    "COMPLEXITY_003": "complexity (M params, G 'FLOPs' = MACs)",
    "BACKENDS_001": "per backend (s, img/s, %, MB)",
    "TELEMETRY_002": "nvidia-smi snapshots (%, MiB, C, W)",
    "TIMES_002": "training time (h), accuracy (%), inference (s/image)",
    "TIMES_004": "times (ms)",
    "OPS_004": "time per operation (ms)",
    "MEMORY_004": "memory (MB)",
}
_STORED = {
    "ACHIEVED_003": ["ACHIEVED_003", "AI_003"],
    "TIMES_002": ["TIMES_002", "CLAIMS_002", "INFERENCE_002"],
}


def tables() -> dict[str, pd.DataFrame]:
    """Every seed table, by the seed's section and table, its lines and what it holds (each carries its
    ``source`` seed file)."""
    out = {}
    for name, what in _TABLES.items():
        parts = _STORED.get(name, [name])
        where = "; ".join(dict.fromkeys(w for p in parts for w in provenance(p)["where"]))
        lines = pd.concat([provenance(p).line for p in parts])
        span = f"line {lines.min()}" if lines.min() == lines.max() else f"lines {lines.min()}-{lines.max()}"
        out[f"seed {name[-3:]} {where} ({span}): {what}"] = globals()[name]
    return out
