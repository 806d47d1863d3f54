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
