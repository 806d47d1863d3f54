"""Numbers published by the seed reports, kept only to be shown beside our own measurements.

Each table names its source file; nothing here feeds a computation of ours except as a labelled comparison.
"""

from __future__ import annotations

import pandas as pd

SEED_000 = "000_6d833120f7fd5a11.txt"
SEED_001 = "001_4079f4ca21c61f7c.txt"
SEED_002 = "002_bc90e244f62b95e3.txt"
SEED_003 = "003_d864536e1488ac01.txt"
SEED_004 = "004_aa4f04737ed0e132.txt"

# Seed 000, Table 1 "Model Complexity Estimates (per 224x224 input)": params (M) and "FLOPs/Image (G)".
COMPLEXITY_000 = pd.DataFrame(
    [
        ("resnet18", 11.69, 1.824),
        ("mobilenet_v2", 3.50, 0.328),
        ("resnet50", 25.56, 4.134),
        ("squeezenet1_1", 1.24, 0.349),
    ],
    columns=["model", "params_m", "flops_g"],
).assign(source=SEED_000)

# Seed 000, Table 2: "AI (FLOPs/Byte)" = FLOPs per image / model size in bytes.
PARAM_PROXY_AI_000 = {"resnet18": 0.0408, "mobilenet_v2": 0.0240, "resnet50": 0.0423, "squeezenet1_1": 0.0392}
# Seed 000, Table 2 in full: "FLOPs" per image (G, at 224x224), model size (MB) and the "AI" it printed.
AI_TABLE_000 = pd.DataFrame(
    [
        ("resnet18", 1.824, 44.67, 0.0408),
        ("mobilenet_v2", 0.3275, 13.63, 0.0240),
        ("resnet50", 4.1337, 97.81, 0.0423),
        ("squeezenet1_1", 0.349, 8.90, 0.0392),
    ],
    columns=["model", "flops_g", "model_mb", "ai_printed"],
).assign(source=SEED_000)
# Seed 003, section 2.3 and its per-model table: arithmetic intensity, method not stated. ResNet-50 is 238 in
# the per-model table and at batch 128 (234 is its batch-64 value, 227 batch 32).
AI_003 = {"resnet18": 230.0, "resnet50": 238.0, "mobilenet_v2": 220.0}
AI_BY_BATCH_003 = {32: 227.0, 64: 234.0, 128: 238.0}  # ResNet-50, section 2.3
# Seed 000's "epoch": every throughput x its Table 2 epoch time gives 6,400 images (3,200 for SqueezeNet on
# the T4), a subset of Tiny-ImageNet's 100,000 training images. params/seeds_full.yaml caps epochs to match.
EPOCH_IMAGES_000 = 6400

# Seed 000, Table 3 "Performance Summary": 1 "epoch" (6,400 images, see EPOCH_IMAGES_000) of Tiny-ImageNet
# (64x64) from disk, 4 DataLoader workers,
# bs 128 (SqueezeNet 64), throughput = images / epoch time. Device classes: apple = M3 Pro (MPS),
# cpu = e2-standard-4 (4 vCPU), t4 = Tesla T4.
THROUGHPUT_000 = pd.DataFrame(
    [
        ("resnet18", "apple", 110.07, 189.56, 0.306, 0.850),
        ("resnet18", "cpu", 8.88, 27.64, 0.016, 0.050),
        ("resnet18", "t4", 315.74, 412.36, 0.592, 0.775),
        ("mobilenet_v2", "apple", 99.64, 177.36, 0.047, 0.131),
        ("mobilenet_v2", "cpu", 11.71, 47.94, 0.004, 0.016),
        ("mobilenet_v2", "t4", 250.47, 379.06, 0.082, 0.128),
        ("resnet50", "apple", 50.60, 92.13, 0.249, 0.535),
        ("resnet50", "cpu", 3.37, 11.78, 0.014, 0.049),
        ("resnet50", "t4", 98.45, 312.44, 0.407, 1.297),
        ("squeezenet1_1", "apple", 178.03, 228.73, 0.140, 0.281),
        ("squeezenet1_1", "cpu", 24.32, 60.35, 0.0085, 0.0211),
        ("squeezenet1_1", "t4", 346.57, 407.77, 0.124, 0.148),
    ],
    columns=["model", "device_class", "train_img_s", "eval_img_s", "train_tflops", "eval_tflops"],
).assign(
    source=SEED_000,
    configuration="Tiny-ImageNet from disk, 4 workers, 1 epoch of 6,400 images, images / epoch time, one run",
)
THROUGHPUT_000["peak_gpu_mem_mb"] = [None, None, 3135, None, None, 10278, None, None, 11345, None, None, 1503]

# Seed 000, Table 4 (titled "Table 2: Epoch Time Comparison"): train and validation "epoch" times (s).
EPOCHS_000 = pd.DataFrame(
    [
        ("resnet18", "apple", 58.15, 33.76),
        ("resnet18", "cpu", 720.89, 231.59),
        ("resnet18", "t4", 20.27, 15.52),
        ("mobilenet_v2", "apple", 64.23, 36.09),
        ("mobilenet_v2", "cpu", 546.57, 133.51),
        ("mobilenet_v2", "t4", 25.55, 16.88),
        ("resnet50", "apple", 126.49, 69.47),
        ("resnet50", "cpu", 1899.62, 543.22),
        ("resnet50", "t4", 65.01, 20.48),
        ("squeezenet1_1", "apple", 35.95, 27.98),
        ("squeezenet1_1", "cpu", 263.17, 106.05),
        ("squeezenet1_1", "t4", 9.23, 7.85),
    ],
    columns=["model", "device_class", "train_epoch_s", "val_epoch_s"],
).assign(source=SEED_000, configuration="an 'epoch' of 6,400 images (3,200 for SqueezeNet on the T4)")

# Seed 000, Table 5: utilisation (%), sampled outside the run (GPU N/A on MPS and CPU).
UTILISATION_000 = pd.DataFrame(
    [
        ("resnet18", "apple", None, 14.8),
        ("resnet18", "cpu", None, 2.4),
        ("resnet18", "t4", 0.0, 5.0),
        ("mobilenet_v2", "apple", None, 21.7),
        ("mobilenet_v2", "cpu", None, 0.0),
        ("mobilenet_v2", "t4", 1.0, 0.0),
        ("resnet50", "apple", None, 17.9),
        ("resnet50", "cpu", None, 0.0),
        ("resnet50", "t4", 3.0, 0.0),
        ("squeezenet1_1", "apple", None, 13.2),
        ("squeezenet1_1", "cpu", None, 0.0),
        ("squeezenet1_1", "t4", 0.0, 10.5),
    ],
    columns=["model", "device_class", "gpu_util_pct", "cpu_util_pct"],
).assign(source=SEED_000)

# Seed 000, Table 6: SqueezeNet batch sweep, approximate ("~") values; batch 128 was unstable (NaNs).
SWEEP_000 = pd.DataFrame(
    [
        ("squeezenet1_1", 32, 160.0, 50.0, "ok"),
        ("squeezenet1_1", 64, 300.0, 80.0, "ok"),
        ("squeezenet1_1", 128, None, None, "unstable"),
    ],
    columns=["model", "batch_size", "throughput_img_s", "achieved_gflops", "status"],
).assign(source=SEED_000, configuration="device unclear: text says M3 Pro (MPS), caption says T4")

# Seed 000, Table 7: spec-sheet roofs it used (CPU values approximate).
PEAKS_000 = pd.DataFrame(
    [("apple", 5700.0, 150.0), ("cpu", 160.0, 30.0), ("t4", 8100.0, 320.0)],
    columns=["device_class", "peak_gflops", "bandwidth_gbs"],
).assign(source=SEED_000)

# Seed 000, Table 8: cross-device training speedups (x).
SPEEDUPS_000 = pd.DataFrame(
    [
        ("resnet18", 2.87, 35.5, 12.4),
        ("mobilenet_v2", 2.51, 21.4, 8.5),
        ("resnet50", 1.93, 29.2, 15.0),
        ("squeezenet1_1", 1.95, 14.2, 7.3),
    ],
    columns=["model", "t4_over_apple", "t4_over_cpu", "apple_over_cpu"],
).assign(source=SEED_000)

# Seed 003, section 5.1 and 5.3: training throughput on ImageNette, 10 warm-up + 100 measured iterations
# (50 on CPU), one run per configuration, resolution not stated.
THROUGHPUT_003 = pd.DataFrame(
    [
        ("resnet18", 128, "rtx4080", 1107.0),
        ("resnet18", 128, "t4", 650.0),
        ("resnet18", 64, "cpu", 10.0),
        ("resnet50", 32, "rtx4080", 359.0),
        ("resnet50", 32, "t4", 111.0),
        ("resnet50", 64, "rtx4080", 366.0),
        ("resnet50", 64, "t4", 117.0),
        ("resnet50", 128, "rtx4080", 31.0),
        ("resnet50", 128, "t4", 120.0),
        ("mobilenet_v2", 128, "rtx4080", 752.0),
        ("mobilenet_v2", 128, "t4", 308.0),
    ],
    columns=["model", "batch_size", "device_class", "train_img_s"],
).assign(source=SEED_003, configuration="ImageNette, 10 warm-up + 100 measured iterations, one run")

# Seed 003, sections 4.2/4.3: achieved TFLOP/s and efficiency vs its spec peaks (RTX 4080 48.7, T4 8.1).
ACHIEVED_003 = pd.DataFrame(
    [
        ("resnet18", 128, "rtx4080", 230.0, 5.5, 11.4),
        ("resnet50", 32, "rtx4080", 227.0, 4.1, 8.5),
        ("resnet50", 64, "rtx4080", 234.0, 4.2, 8.6),
        ("resnet50", 128, "rtx4080", 238.0, 0.3, 0.6),
        ("resnet18", 128, "t4", 230.0, 2.9, 36.2),
        ("resnet50", 32, "t4", 227.0, 1.3, 15.5),
        ("resnet50", 64, "t4", 234.0, 1.3, 16.1),
        ("resnet50", 128, "t4", 238.0, 1.3, 16.1),
    ],
    columns=["model", "batch_size", "device_class", "ai_flop_per_byte", "achieved_tflops", "efficiency_pct"],
).assign(source=SEED_003)

# Seed 003, section 1.4: spec-sheet peaks (TFLOP/s) and bandwidth (GB/s).
PEAKS_003 = pd.DataFrame(
    [("rtx4080", 48.7, 384.0, 12.0), ("cpu", 1.5, 89.6, 32.0), ("t4", 8.1, 300.0, 16.0)],
    columns=["device_class", "peak_tflops", "bandwidth_gbs", "memory_gb"],
).assign(source=SEED_003)

# Seed 003, section 2.1: params (M), "FLOPs" per image (G; torchvision's MACs) and training "FLOPs" (3x).
COMPLEXITY_003 = pd.DataFrame(
    [("resnet18", 11.7, 1.82, 5.46), ("resnet50", 25.6, 4.09, 12.27), ("mobilenet_v2", 3.5, 0.30, 0.90)],
    columns=["model", "params_m", "flops_g", "train_flops_g"],
).assign(source=SEED_003)
# Seed 003's summary sentences, checked against its own tables by inconsistencies().
SUMMARY_003 = {"rtx4080_over_t4": (1.4, 2.7)}

# Seed 001, Table I: MNIST CNN, bs 512, 10 epochs, SGD lr 0.01 momentum 0.9, one run per backend.
BACKENDS_001 = pd.DataFrame(
    [
        ("numba_cpu", 2.0928, 20.928, 30501, 96.33, 97.42, 1334.572, 0.0),
        ("numba_cuda", 0.9268, 9.268, 71758, 96.68, 97.56, 1156.894, 0.0),
        ("torch_cpu", 11.2687, 112.687, 5340, 97.57, 98.5, 1611.935, 0.0),
        ("torch_cuda", 8.7219, 87.219, 6948, 97.21, 98.5, 1363.258, 16.87),
        ("torch_mps", 9.0544, 90.544, 6645, 97.31, 98.5, 1188.246, 0.0),
    ],
    columns=[
        "backend",
        "epoch_s",
        "total_s",
        "throughput_img_s",
        "final_test_accuracy_pct",
        "max_test_accuracy_pct",
        "process_ram_mb",
        "max_gpu_vram_mb",
    ],
).assign(source=SEED_001, configuration="MNIST 60,000 training images (epochs padded to 60,416), bs 512, 10 epochs, means over epochs")
MNIST_TRAIN_IMAGES = 60000
# Seed 001 padded each epoch to whole batches of 512: 118 x 512 = 60,416 samples per epoch (not MNIST's 60,000).
EPOCH_SAMPLES_001 = 118 * 512

# Seed 002: DenseNet-121 transfer learning on cats vs dogs (8,005 train, 2,023 test), 20 epochs, 2x RTX A6000.
# nvidia-smi snapshots (Figs. 4 and 7): one row per GPU and batch size.
TELEMETRY_002 = pd.DataFrame(
    [
        (64, 0, 3, 3564, 49140, 59, 77, "P2"),
        (64, 1, 14, 2374, 49140, 38, 23, "P8"),
        (128, 0, 69, 5060, 49140, 69, 152, "P2"),
        (128, 1, 14, 1838, 49140, 41, 23, "P8"),
    ],
    columns=[
        "batch_size",
        "gpu",
        "gpu_util_pct",
        "mem_used_mib",
        "mem_total_mib",
        "temp_c",
        "power_w",
        "pstate",
    ],
).assign(source=SEED_002, configuration="single nvidia-smi snapshots, power cap 300 W")
# Seed 002, sections D-F: total training times for 20 epochs, accuracy and seconds per test image.
TIMES_002 = pd.DataFrame(
    [("cpu", 64, 13.0, 98.5, 5.0), ("cuda", 64, 2.0, 98.5, 2.5), ("cuda", 128, 1.25, 98.5, None)],
    columns=["device_class", "batch_size", "train_20_epochs_h", "test_accuracy_pct", "inference_s_per_image"],
).assign(
    source=SEED_002, configuration="DenseNet-121 transfer, Adam, 20 epochs; accuracy '98-99%', GPU '2-3 s'"
)

# Seed 004: 784-10-10 network, NumPy (CPU) vs CuPy (GPU), 500 full-batch iterations on 59,000 MNIST images.
TIMES_004 = pd.DataFrame(
    [
        ("total_500_iterations", 42300.0, 15100.0, 2.8),
        ("iteration", 84.6, 30.2, 2.8),
        ("forward", 36.7, 11.9, 3.1),
        ("backward", 47.9, 18.3, 2.6),
    ],
    columns=["what", "cpu_ms", "gpu_ms", "speedup_printed"],
).assign(source=SEED_004)
OPS_004 = pd.DataFrame(
    [
        ("matmul", 42.3, 6.7, 6.3),
        ("relu", 3.1, 1.8, 1.7),
        ("softmax", 5.6, 2.9, 1.9),
        ("gradients", 33.6, 18.8, 1.8),
    ],
    columns=["operation", "cpu_ms", "gpu_ms", "speedup_printed"],
).assign(source=SEED_004)
MEMORY_004 = pd.DataFrame(
    [
        ("parameters", 7.9, 7.9),
        ("inputs", 47.1, 47.1),
        ("activations", 26.3, 26.3),
        ("gradients", 34.2, 34.2),
        ("framework_overhead", 12.5, 158.6),
        ("total", 128.0, 274.1),
    ],
    columns=["component", "cpu_mb", "gpu_mb"],
).assign(source=SEED_004)
# the seed prints no parameter count: 784 x 10 + 10 + 10 x 10 + 10 = 7,960 follow from its shapes
SHAPE_004 = {"inputs": 59000, "features": 784, "hidden": 10, "classes": 10}


def device_class(device_kind: str, device_name: str) -> str:
    """The seeds' device classes: t4, rtx4080, apple (MPS), cpu; anything else is 'other'."""
    name = device_name.lower()
    if device_kind == "cuda":
        return "t4" if "t4" in name else "rtx4080" if "4080" in name else "other"
    return {"mps": "apple", "cpu": "cpu"}.get(device_kind, "other")


def _row(seed: str, claim: str, computed: str, note: str) -> dict:
    return {"seed": seed, "published": claim, "computed_from_its_own_numbers": computed, "note": note}


def _inconsistencies_000() -> list[dict]:
    rows = []
    t = THROUGHPUT_000.merge(EPOCHS_000[["model", "device_class", "train_epoch_s", "val_epoch_s"]])
    imgs = pd.concat([t.train_img_s * t.train_epoch_s, t.eval_img_s * t.val_epoch_s]).round(-2)
    sq_t4 = t[(t.model == "squeezenet1_1") & (t.device_class == "t4")]
    rows.append(
        _row(
            SEED_000,
            "1 epoch of Tiny-ImageNet (100,000 training images)",
            f"throughput x epoch time = {int(imgs.median()):,} images in "
            f"{int((imgs == imgs.median()).sum())} of {len(imgs)} cases; SqueezeNet on T4: "
            f"{sq_t4.train_img_s.iloc[0] * sq_t4.train_epoch_s.iloc[0]:,.0f}",
            "its 'epoch' was a 6,400-image subset (3,200 for SqueezeNet on the T4)",
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
            "Table 8 speedups; '~50x' on compute-heavy models",
            "; ".join(f"{m} {col}: printed {p:.2f}, Table 3 gives {r:.2f}" for m, col, p, r in off)
            + f"; largest GPU/CPU speedup in its table: {recomputed.t4_over_cpu.max():.1f}x",
            "speedups recomputed from its own Table 3 throughputs",
        )
    )
    rows.append(
        _row(
            SEED_000,
            "M3 Pro peak 5,700 GFLOP/s",
            f"14 GPU cores x 128 ALUs x 2 FLOP x 1.6 GHz = {14 * 128 * 2 * 1.6:,.0f} GFLOP/s",
            "a spec-sheet product, never measured",
        )
    )
    return rows


def _inconsistencies_others() -> list[dict]:
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
            + f"; its epochs had {EPOCH_SAMPLES_001:,} = 118 x 512 samples: "
            + ", ".join(f"{r.backend} {EPOCH_SAMPLES_001:,} / {r.epoch_s} s = {EPOCH_SAMPLES_001 / r.epoch_s:,.0f} "
                        f"(published {r.throughput_img_s:,})" for r in b.itertuples()),
            "its average throughput is not samples / average epoch time",
        )
    )
    fastest = b.loc[b.epoch_s.idxmin(), "backend"]
    rows.append(
        _row(
            SEED_001,
            "conclusion: PyTorch CUDA and MPS significantly outperform",
            f"fastest epoch in its Table I: {fastest} ({b.epoch_s.min()} s); torch_cuda {b.epoch_s[3]} s",
            "the text contradicts its table on which backend is faster",
        )
    )
    t = TELEMETRY_002[(TELEMETRY_002.batch_size == 128) & (TELEMETRY_002.gpu == 0)].iloc[0]
    idle = TELEMETRY_002[TELEMETRY_002.gpu == 1]
    rows.append(
        _row(
            SEED_002,
            "GPU:0 takes 69% of its total memory (batch 128)",
            f"{t.mem_used_mib} / {t.mem_total_mib} MiB = {t.mem_used_mib / t.mem_total_mib:.1%} of memory; "
            f"69% is the GPU-Util column",
            f"GPU 1 sits in {idle.pstate.iloc[0]} at {idle.power_w.max()} W in every snapshot: "
            "the idle display GPU",
        )
    )
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
            f"238 at batch 128 ({AI_BY_BATCH_003[64]:.0f} is batch 64)",
            "AI_003 uses 238",
        )
    )
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
    rows.append(
        _row(
            SEED_004,
            f"{s['inputs']:,} x {s['features']} inputs take {mem['inputs']} MB",
            f"as float64: {s['inputs'] * s['features'] * 8 / 1e6:.0f} MB; "
            f"{60000 * s['features'] / 1e6:.1f} MB is 60,000 x 784 bytes (uint8)",
            "its input memory is the raw 8-bit file, not the float64 arrays it trained on",
        )
    )
    return rows


def inconsistencies() -> pd.DataFrame:
    """The seeds' numbers checked against each other: each row computed here from the transcribed tables."""
    return pd.DataFrame(_inconsistencies_000() + _inconsistencies_others())


def tables() -> dict[str, pd.DataFrame]:
    """Every transcribed table, by what it holds (each carries its ``source`` seed file)."""
    return {
        "seed 000 Table 1: params (M) and 'FLOPs' per 224x224 image (G, MACs)": COMPLEXITY_000,
        "seed 000 Table 2: 'AI' = FLOPs / model bytes (printed as FLOP/byte; GFLOP/MB)": AI_TABLE_000,
        "seed 000 Table 3: throughput (img/s), TFLOP/s, peak GPU memory (MB)": THROUGHPUT_000,
        "seed 000 Table 4: epoch times (s) of 6,400-image 'epochs'": EPOCHS_000,
        "seed 000 Table 5: utilisation (%)": UTILISATION_000,
        "seed 000 Table 6: SqueezeNet batch sweep (img/s, GFLOP/s)": SWEEP_000,
        "seed 000 Table 7: spec roofs (GFLOP/s, GB/s)": PEAKS_000,
        "seed 000 Table 8: speedups (x)": SPEEDUPS_000,
        "seed 003: training throughput (img/s)": THROUGHPUT_003,
        "seed 003: achieved TFLOP/s, efficiency (%), AI (FLOP/byte)": ACHIEVED_003,
        "seed 003: spec peaks (TFLOP/s, GB/s, GB)": PEAKS_003,
        "seed 003: complexity (M params, G 'FLOPs' = MACs)": COMPLEXITY_003,
        "seed 001 Table I: per backend (s, img/s, %, MB)": BACKENDS_001,
        "seed 002: nvidia-smi snapshots (%, MiB, C, W)": TELEMETRY_002,
        "seed 002: training time (h), accuracy (%), inference (s/image)": TIMES_002,
        "seed 004 Table 3: times (ms)": TIMES_004,
        "seed 004 Table 4: time per operation (ms)": OPS_004,
        "seed 004 Table 5: memory (MB)": MEMORY_004,
    }
