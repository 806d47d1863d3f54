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
