"""The byte counter against hand-computed traffic, peaks within sane bounds, roofline plots produce files."""

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from cnnbench import peaks, plots, roofline, traffic

F32 = 4


def count(module, x):
    with traffic.TrafficCounter() as counter:
        module(x)
    return counter.frame()


def test_linear_traffic_and_flops():
    m, k, n = 8, 32, 16
    ops = count(nn.Linear(k, n), torch.randn(m, k))
    assert ops.op.tolist() == ["aten::addmm"]
    r = ops.iloc[0]
    assert r.bytes_read == (m * k + n * k + n) * F32  # input, weight, bias
    assert r.bytes_written == m * n * F32
    assert r.flops == 2 * m * n * k


def test_conv_traffic():
    x = torch.randn(2, 4, 10, 10)
    ops = count(nn.Conv2d(4, 8, 3, padding=1, bias=False), x)
    r = ops[ops.op == "aten::convolution"].iloc[0]
    assert r.bytes_read == (2 * 4 * 10 * 10 + 8 * 4 * 9) * F32
    assert r.bytes_written == 2 * 8 * 10 * 10 * F32
    assert r.flops == 2 * 2 * 10 * 10 * 8 * 4 * 9


def test_depthwise_conv_is_low_intensity():
    x = torch.randn(2, 16, 10, 10)
    ops = count(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), x)
    r = ops[ops.op == "aten::convolution"].iloc[0]
    assert r.bytes_read == (2 * 16 * 100 + 16 * 9) * F32
    assert r.bytes_written == 2 * 16 * 100 * F32
    assert r.flops == 2 * 2 * 100 * 16 * 9
    assert r.flops / (r.bytes_read + r.bytes_written) < 3  # ~2.2 FLOP/byte: memory-bound everywhere


def test_batch_norm_traffic():
    n, c, h, w = 2, 3, 4, 4
    bn = nn.BatchNorm2d(c).train()
    ops = count(bn, torch.randn(n, c, h, w))
    r = ops[ops.op.str.contains("batch_norm")].iloc[0]
    # reads x, weight, bias, running mean and var; writes y and the saved mean and inverse std
    assert r.bytes_read == (n * c * h * w + 4 * c) * F32
    assert r.bytes_written == (n * c * h * w + 2 * c) * F32
    assert r.flops == 0 and r.flops_elementwise > 0  # no matmul FLOPs: pure traffic


def test_views_move_nothing_and_profiler_shapes_match():
    x = torch.randn(4, 6)
    with traffic.TrafficCounter() as counter:
        x.view(2, 12).t()
    assert counter.records == []
    assert traffic.shapes_key((torch.zeros(2, 3), None, 1)) == "[[2, 3], [], []]"


def test_training_step_intensity_grows_with_batch():
    small = traffic.summary(traffic.count_step("resnet18", 1, 64, 200))
    large = traffic.summary(traffic.count_step("resnet18", 64, 64, 200))
    assert large["intensity_flop_per_byte"] > 5 * small["intensity_flop_per_byte"]
    assert small["optimizer_gbytes"] == pytest.approx(large["optimizer_gbytes"])  # weights: per step, not per image
    # training FLOPs of the step agree with 01's per-image count
    from cnnbench import flops

    per_image = flops.complexity("resnet18", 64, 200, with_fvcore=False).gflops_train
    assert large["gflops"] == pytest.approx(64 * per_image, rel=0.01)


def test_eval_step_is_forward_only():
    s = traffic.summary(traffic.count_step("mnist_cnn", 16, 28, 10, phase="eval"))
    assert s["gflops"] > 0 and "backward_gbytes" not in s


def test_measured_peaks_are_sane():
    cpu = torch.device("cpu")
    mm = peaks.matmul_gflops(cpu, "fp32", n=256, repeats=2)
    conv = peaks.conv_gflops(cpu, "fp32", batch=2, channels=16, size=8, repeats=2)
    bw = peaks.stream_gbs(cpu, mb=16, repeats=2)
    assert 0.1 < mm < 1e5 and 0.01 < conv < 1e5
    assert 0.1 < bw["copy_gbs"] < 1e4 and 0.1 < bw["triad_gbs"] < 1e4
    assert peaks.precisions(cpu)[0] == "fp32"


def test_spec_table():
    table = peaks.specs()
    assert table.source.str.len().gt(10).all() and (table.peak_gflops > 0).all()
    for name in ("Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA L4",
                 "NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000", "Apple M3 Pro GPU (MPS)"):
        assert len(peaks.spec_for(name)), name
    t4 = peaks.spec_for("Tesla T4").set_index("precision")
    assert t4.loc["fp32", "peak_gflops"] == 8100 and t4.loc["fp32", "ridge_flop_per_byte"] == pytest.approx(8100 / 320)
    assert peaks.spec_for("NVIDIA A100-SXM4-80GB").bandwidth_gbs.iloc[0] == 2039  # not the 40GB part
    assert peaks.spec_for("Some Unknown Device").empty


def fake_peaks():
    return pd.DataFrame([
        {"device_name": "dev", "kind": "measured", "precision": "fp32", "peak_gflops": 100.0, "bandwidth_gbs": 10.0,
         "ridge_flop_per_byte": 10.0},
        {"device_name": "dev", "kind": "spec", "precision": "fp32", "peak_gflops": 150.0, "bandwidth_gbs": 20.0,
         "ridge_flop_per_byte": 7.5},
    ])


def test_attainable_and_placement():
    assert roofline.attainable(1.0, 100, 10) == 10 and roofline.attainable(50, 100, 10) == 100
    results = pd.DataFrame([{"status": "ok", "device_name": "dev", "model": "m", "phase": "train", "batch_size": 8,
                             "image_size": 32, "precision": "bf16", "memory_format": "nchw", "achieved_gflops": 5.0}])
    intens = pd.DataFrame([{"model": "m", "phase": "train", "batch_size": 8, "image_size": 32, "precision": "bf16",
                            "intensity_flop_per_byte": 2.0}])
    placed = roofline.place(results, intens, fake_peaks(), "scenario_a")
    r = placed.iloc[0]
    assert (r.attainable_gflops, r.efficiency, r.bound) == (20.0, 0.25, "memory")
    assert r.roof == "measured fp32"  # no bf16 roof measured: the fp32 one applies


def test_plots_write_files(tmp_path):
    points = pd.DataFrame({"model": ["a", "a", "b"], "phase": ["train", "eval", "train"], "batch_size": [8, 8, 8],
                           "intensity_flop_per_byte": [2.0, 20.0, 0.5], "achieved_gflops": [5.0, 60.0, 1.0]})
    plots.roofline(fake_peaks(), points, "t", tmp_path / "r.png")
    plots.trajectory(fake_peaks(), points, "t", tmp_path / "t.png")
    two = pd.concat([points.assign(device_name="dev"), points.assign(device_name="other")])
    roofs = pd.concat([fake_peaks(), fake_peaks().assign(device_name="other")])
    figs = plots.per_model_rooflines(two, roofs, tmp_path)
    assert set(figs) == {"a", "b"}
    for name in ("r.png", "t.png", "roofline_model_a.png"):
        assert (tmp_path / name).stat().st_size > 5000
    assert np.isfinite(points.intensity_flop_per_byte).all()


def test_peak_measurement_restores_threads_and_reports_spread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        df = peaks.measure(torch.device("cpu"), matmul_size=128, stream_mb=8, repeats=3)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    row = df.iloc[0]
    assert row.matmul_gflops_median <= row.matmul_gflops
    assert row.peak_gflops == max(row.matmul_gflops, row.conv3x3_gflops)
