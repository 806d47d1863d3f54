"""Numbers published by the seed reports, kept only to be shown beside our own measurements.

Each table names its source file; nothing here feeds a computation of ours except as a labelled comparison.
"""

from __future__ import annotations

import pandas as pd

SEED_000 = "000_6d833120f7fd5a11.txt"
SEED_003 = "003_d864536e1488ac01.txt"

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
# Seed 003, section 2.3 and its per-model table: arithmetic intensity, method not stated.
AI_003 = {"resnet18": 230.0, "resnet50": 234.0, "mobilenet_v2": 220.0}

# Seed 000, Table 3 "Performance Summary": 1 epoch of Tiny-ImageNet (64x64) from disk, 4 DataLoader workers,
# bs 128 (SqueezeNet 64), throughput = images / epoch time. Device classes: apple = M3 Pro (MPS),
# cpu = e2-standard-4 (4 vCPU), t4 = Tesla T4.
THROUGHPUT_000 = pd.DataFrame(
    [
        ("resnet18", "apple", 110.07, 189.56, 0.306, 0.850), ("resnet18", "cpu", 8.88, 27.64, 0.016, 0.050),
        ("resnet18", "t4", 315.74, 412.36, 0.592, 0.775), ("mobilenet_v2", "apple", 99.64, 177.36, 0.047, 0.131),
        ("mobilenet_v2", "cpu", 11.71, 47.94, 0.004, 0.016), ("mobilenet_v2", "t4", 250.47, 379.06, 0.082, 0.128),
        ("resnet50", "apple", 50.60, 92.13, 0.249, 0.535), ("resnet50", "cpu", 3.37, 11.78, 0.014, 0.049),
        ("resnet50", "t4", 98.45, 312.44, 0.407, 1.297), ("squeezenet1_1", "apple", 178.03, 228.73, 0.140, 0.281),
        ("squeezenet1_1", "cpu", 24.32, 60.35, 0.0085, 0.0211), ("squeezenet1_1", "t4", 346.57, 407.77, 0.124, 0.148),
    ],
    columns=["model", "device_class", "train_img_s", "eval_img_s", "train_tflops", "eval_tflops"],
).assign(source=SEED_000, configuration="Tiny-ImageNet from disk, 4 workers, 1 epoch, images / epoch time, one run")

# Seed 003, section 5.1 and 5.3: training throughput on ImageNette, 10 warm-up + 100 measured iterations
# (50 on CPU), one run per configuration, resolution not stated.
THROUGHPUT_003 = pd.DataFrame(
    [
        ("resnet18", 128, "rtx4080", 1107.0), ("resnet18", 128, "t4", 650.0), ("resnet18", 64, "cpu", 10.0),
        ("resnet50", 32, "rtx4080", 359.0), ("resnet50", 32, "t4", 111.0), ("resnet50", 64, "rtx4080", 366.0),
        ("resnet50", 64, "t4", 117.0), ("resnet50", 128, "rtx4080", 31.0), ("resnet50", 128, "t4", 120.0),
        ("mobilenet_v2", 128, "rtx4080", 752.0), ("mobilenet_v2", 128, "t4", 308.0),
    ],
    columns=["model", "batch_size", "device_class", "train_img_s"],
).assign(source=SEED_003, configuration="ImageNette, 10 warm-up + 100 measured iterations, one run")


def device_class(device_kind: str, device_name: str) -> str:
    """The seeds' device classes: t4, rtx4080, apple (MPS), cpu; anything else is 'other'."""
    name = device_name.lower()
    if device_kind == "cuda":
        return "t4" if "t4" in name else "rtx4080" if "4080" in name else "other"
    return {"mps": "apple", "cpu": "cpu"}.get(device_kind, "other")
