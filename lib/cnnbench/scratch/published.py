"""Numbers published by seeds 001 and 004, kept only to be shown beside our own measurements.

Nothing here feeds a computation of ours; every table carries its source file and what the seed measured.
"""

from __future__ import annotations

import pandas as pd

SEED_001 = "001_4079f4ca21c61f7c.txt"
SEED_004 = "004_aa4f04737ed0e132.txt"

# Seed 001, Table I "Performance summary results": MNIST CNN, bs 512, 10 epochs, SGD lr 0.01 momentum 0.9.
# Its Numba backends skipped backpropagation through both convolutions, and Numba CUDA did the dense
# backward on the host: its Numba rows measure less work than its PyTorch rows. Epochs were padded to
# 60,416 images; its "average throughput" is not 60,416 / average epoch time (e.g. 65,188 for Numba CUDA).
TABLE_I_001 = pd.DataFrame(
    [
        ("numba_cpu", "CPU (Numba)", 2.0928, 20.928, 30501, 96.33, 97.42, 1334.572, 0.0),
        ("numba_cuda", "GPU CUDA (Numba)", 0.9268, 9.268, 71758, 96.68, 97.56, 1156.894, 0.0),
        ("torch_cpu", "CPU PyTorch", 11.2687, 112.687, 5340, 97.57, 98.5, 1611.935, 0.0),
        ("torch_cuda", "CUDA PyTorch", 8.7219, 87.219, 6948, 97.21, 98.5, 1363.258, 16.87),
        ("torch_mps", "MPS PyTorch", 9.0544, 90.544, 6645, 97.31, 98.5, 1188.246, 0.0),
    ],
    columns=["backend", "platform", "epoch_s", "total_train_s", "throughput_img_s", "final_test_acc_pct",
             "max_test_acc_pct", "proc_ram_mb", "max_gpu_vram_mb"],
).assign(model="mnist_cnn", source=SEED_001,
         configuration="Intel Core Ultra 7 155H / RTX 4060 / M4 Pro; conv backprop skipped in Numba; one run")

# Seed 004, Table 3: the 784-10-10 MLP, full batch (59,000 images), 500 iterations, lr 0.1, one unsynchronised
# run. Its GPU (CuPy) times were read without synchronising the device.
TABLE_3_004 = pd.DataFrame(
    [
        ("total_train_s", 42.3, 15.1), ("step_ms", 84.6, 30.2), ("forward_ms", 36.7, 11.9),
        ("backward_ms", 47.9, 18.3),
    ],
    columns=["metric", "numpy", "cupy"],
).assign(model="mlp", source=SEED_004)

# Seed 004, Table 4: time per operation kind (ms per iteration).
TABLE_4_004 = pd.DataFrame(
    [("matmul", 42.3, 6.7), ("relu", 3.1, 1.8), ("softmax", 5.6, 2.9), ("gradient", 33.6, 18.8)],
    columns=["op_kind", "numpy_ms", "cupy_ms"],
).assign(model="mlp", source=SEED_004)

# Seed 004, Table 5 (MB as printed). Its 7.9 MB of parameters are 7,960 float64 = 0.06 MB; its 47.1 MB of
# inputs are about 60,000 x 784 bytes, while 59,000 x 784 float64 are 370 MB.
TABLE_5_004 = pd.DataFrame(
    [
        ("parameters", 7.9, 7.9), ("inputs", 47.1, 47.1), ("activations", 26.3, 26.3),
        ("gradients", 34.2, 34.2), ("framework_overhead", 12.5, 158.6), ("total", 128.0, 274.1),
    ],
    columns=["component", "numpy_mb", "cupy_mb"],
).assign(model="mlp", source=SEED_004)
