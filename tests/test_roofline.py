"""The byte counter against hand-computed traffic, peaks within sane bounds, roofline plots produce files."""

import re
import types

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from cnnbench import devices, plots, results, roofline
from cnnbench.measure import engine, traffic
from cnnbench.roofline import peaks

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
    assert small["optimizer_gbytes"] == pytest.approx(
        large["optimizer_gbytes"]
    )  # weights: per step, not per image
    # training FLOPs of the step agree with 01's per-image count
    from cnnbench.measure import flops

    per_image = flops.complexity("resnet18", 64, 200, with_fvcore=False).gflops_train
    assert large["gflops"] == pytest.approx(64 * per_image, rel=0.01)


def test_a_batch_a_model_cannot_train_on_is_a_row_saying_why():
    """Issue 44: 04's intensity_vs_batch raised at batch 1 for ResNet-18 at 32 px (its last BatchNorm sees one
    value per channel, which PyTorch refuses in training): the notebook failed after 02 and 03 had measured."""
    from cnnbench import params

    p = params.validate({"models": ["resnet18"], "image_size": 32}, check_device=False)
    rows = roofline.intensity_vs_batch(["resnet18"], [1, 8], p).set_index("batch_size")
    assert list(rows.status) == ["error", "ok"] and "more than 1 value per channel" in rows.error[1]
    assert np.isnan(rows.intensity_flop_per_byte[1]) and rows.intensity_flop_per_byte[8] > 0


def _second_of_two_steps(model_name, batch, size, classes):
    """The steady-state training step as counted by running two and keeping the second (momentum buffers exist)."""
    from torch.utils.module_tracker import ModuleTracker

    from cnnbench import models
    from cnnbench.measure import flops

    torch.manual_seed(0)
    model = models.build_meta(model_name, num_classes=classes, image_size=size).to("meta").train()
    x = torch.randn((batch, *models.input_shape(model_name, size)), device="meta")
    y = torch.randint(0, classes, (batch,), device="meta")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    with (
        flops.attention_fastpath_off(),
        ModuleTracker() as tracker,
        traffic.TrafficCounter(tracker) as counter,
    ):
        for _ in range(2):
            counter.records.clear()
            opt.zero_grad(set_to_none=True)
            traffic.train_step(model, x, y, opt, counter)
    return counter.frame()


@pytest.mark.parametrize(
    ("model", "size"), [("resnet18", 32), ("mobilenet_v2", 32), ("mnist_cnn", 28), ("vit_b_16", 224)]
)
def test_a_training_step_is_counted_in_its_steady_state(model, size):
    # counted once with the momentum buffers already in place: every op of the second of two steps, none more
    counted = traffic._count_step(model, 4, size, 10, "train", "fp32")
    pd.testing.assert_frame_equal(counted, _second_of_two_steps(model, 4, size, 10))


def test_an_autocast_step_keeps_fp32_weights_gradients_and_optimizer_state():
    """The bf16 and fp16 knobs are autocast over an fp32 model: its optimizer reads and writes fp32 weights,
    gradients and momentum. The count converted the whole model, halving the optimizer's bytes."""
    fp32 = traffic.summary(traffic._count_step("mnist_cnn", 4, 28, 10, "train", "fp32"))
    for precision in ("bf16", "fp16"):
        half = traffic.summary(traffic._count_step("mnist_cnn", 4, 28, 10, "train", precision))
        assert half["optimizer_gbytes"] == fp32["optimizer_gbytes"]
        assert half["optimizer_gflops"] == fp32["optimizer_gflops"]
        assert half["forward_gbytes"] < fp32["forward_gbytes"]  # activations in 16 bits


def test_eval_step_is_forward_only():
    s = traffic.summary(traffic.count_step("mnist_cnn", 16, 28, 10, phase="eval"))
    assert s["gflops"] > 0 and "backward_gbytes" not in s


def test_measured_peaks_are_sane():
    cpu = torch.device("cpu")
    before = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # tiny kernels on threads shared with other work measure the scheduler, not the code
    try:
        b = devices.backend(cpu)
        mm = max(peaks.matmul_rates(b, "fp32", n=256, repeats=2))
        conv = max(peaks.conv_rates(b, "fp32", batch=2, channels=16, size=8, repeats=2))
        sweep = pd.DataFrame(b.bandwidth_sweep([32 * 2**20], 2, 1))
    finally:
        torch.set_num_threads(before)
    bw = sweep.groupby("kernel").bandwidth_gbs.max()
    assert 0.1 < mm < 1e5 and 0.01 < conv < 1e5
    assert 0.1 < bw["read"] < 1e4 and 0.1 < bw["triad"] < 1e4  # CPU: the numba read and triad kernels
    assert devices.backend(cpu).roof_precisions()[0] == "fp32"


def test_spec_table_sources_and_exact_rows():
    table = peaks.specs()
    assert table.source.str.len().gt(10).all() and (table.bandwidth_gbs > 0).all()
    # a compute peak wherever one is published; the M3/M4 rows hold bandwidth only (issue 32), saying why
    unpeaked = table[table.peak_gflops.isna()]
    assert (table.peak_gflops.dropna() > 0).all() and unpeaked.device.str.match(r"Apple M[34]\b").all()
    assert unpeaked.source.str.contains("publishes no GPU TFLOPS").all()
    for name in (
        "Tesla T4",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H200",
        "NVIDIA L4",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA RTX A6000",
        "Tesla V100-SXM2-16GB",
    ):
        assert len(peaks.spec(name, "cuda")[0]), name
    t4 = peaks.spec("Tesla T4", "cuda")[0].set_index("precision")
    assert t4.loc["fp32", "peak_gflops"] == 8100 and t4.loc["fp32", "ridge_flop_per_byte"] == pytest.approx(
        8100 / 320
    )
    assert peaks.spec("NVIDIA A100-SXM4-80GB", "cuda")[0].bandwidth_gbs.iloc[0] == 2039  # not the 40GB part
    assert peaks.spec("Some Unknown Device", "cuda")[0].empty


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA L40",
        "NVIDIA L40S",
        "NVIDIA H200 NVL",
        "NVIDIA GH200 480GB",
        "Tesla V100S-PCIE-32GB",
        "NVIDIA H100 NVL",
        "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        "NVIDIA T4G",
        "Apple M3 Pro",
    ],
)
def test_no_substring_matches(name):
    """Substring matching gave L40/L40S the L4's roofs, H200 NVL/GH200 the H200's, V100S the V100's."""
    rows, note = peaks.spec(name, "cuda")
    assert rows.empty and note.startswith("no spec roof") and name in note


def test_names_match_up_to_case_spacing_and_prefix_but_variant_counts():
    assert peaks.spec("nvidia  h200", "cuda")[0].peak_gflops.max() == 989400
    assert peaks.spec("H200", "cuda")[0].bandwidth_gbs.iloc[0] == 4800
    pcie = peaks.spec("Tesla V100-PCIE-16GB", "cuda")[0].set_index("precision")
    assert pcie.loc["fp32", "peak_gflops"] == 14000  # the PCIe part, not SXM2's 15700


def test_apple_rows_need_the_gpu_core_count():
    m2pro19 = peaks.spec("Apple M2 Pro GPU (MPS)", "mps", 19)[0]
    m2pro16 = peaks.spec("Apple M2 Pro GPU (MPS)", "mps", 16)[0]
    assert m2pro19.peak_gflops.iloc[0] == 6800 and m2pro16.peak_gflops.iloc[0] == 5730
    rows, note = peaks.spec("Apple M2 Pro GPU (MPS)", "mps", None)
    assert rows.empty and "core count" in note
    assert peaks.spec("Apple M2 Pro GPU (MPS)", "mps", 99)[0].empty
    assert peaks.spec("Apple M2 GPU (MPS)", "mps", 19)[0].empty  # not the M2 Pro's row


@pytest.mark.parametrize(
    "chip, cores", [("Apple M3 Pro", 18), ("Apple M3", 10), ("Apple M4 Max", 40), ("Apple M4 Pro", 20)]
)
def test_m3_and_m4_have_no_spec_roof_and_the_note_says_why(chip, cores):
    """Apple publishes no GPU clock or TFLOPS for the M3/M4 families and the published clock estimates range
    1.38-1.6 GHz: a roof resting on one of them would be a guess, so none is drawn and the note says why."""
    rows, note = peaks.spec(f"{chip} GPU (MPS)", "mps", cores)
    assert rows.empty and "1.38-1.6 GHz" in note and "publishes no" in note
    listed = peaks.specs()[
        peaks.specs().device == chip
    ]  # its bandwidth and source, no compute peak (issue 32)
    assert len(listed) and listed.peak_gflops.isna().all() and (listed.bandwidth_gbs > 0).all()


def test_a_cpu_run_on_a_mac_never_gets_the_gpu_row(monkeypatch):

    import platform

    from cnnbench.devices import cpu, host

    monkeypatch.setattr(host, "cpu_model", lambda: "Apple M3 Pro")
    monkeypatch.setattr(host, "cpu_clock_ghz", lambda: (4.05, "fake sysctl", True))
    monkeypatch.setattr(host, "cpu_features", lambda: frozenset())
    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    assert cpu.CpuBackend.spec_for_name("Apple M3 Pro")[0] == []  # never a GPU row
    rows, note = peaks.spec_for_device(torch.device("cpu"), threads=6)
    assert len(rows) == 1 and rows.source.iloc[0].startswith("derived:")
    assert rows.peak_gflops.iloc[0] == pytest.approx(
        6 * 4 * 4 * 2 * 4.05
    )  # cores x FMA pipes x lanes x 2 x GHz
    assert rows.bandwidth_gbs.isna().all() and rows.device_kind.iloc[0] == "cpu"


def cpu_spec(*args, **kw) -> pd.DataFrame:
    from cnnbench.devices.cpu import cpu_spec as derive

    rows, note = derive(*args, **kw)
    return pd.DataFrame(rows), note


def test_derived_cpu_roof_from_cores_isa_and_clock():
    rows, _ = cpu_spec("Xeon", 4, 2.2, "fake", frozenset({"avx2", "fma", "avx"}), "x86_64")
    assert rows.peak_gflops.iloc[0] == pytest.approx(4 * 2 * 8 * 2 * 2.2)
    assert "derived" in rows.source.iloc[0] and "AVX2" in rows.source.iloc[0]
    rows, _ = cpu_spec("Xeon", 2, 2.0, "fake", frozenset({"avx512f", "avx2", "fma"}), "x86_64")
    assert rows.peak_gflops.iloc[0] == pytest.approx(2 * 2 * 16 * 2 * 2.0)
    rows, note = cpu_spec("Xeon", 2, None, "unreadable", frozenset({"avx2", "fma"}), "x86_64")
    assert rows.empty and "clock" in note


def test_cpu_clock_is_the_boost_clock_where_the_system_tells_it():
    """The derived roof used /proc/cpuinfo's 2.45 GHz (a VM's nominal clock) and sat below the measured 188.3
    GFLOP/s, unlabelled; the maximum clock comes first, and a base clock is said to be one."""
    from cnnbench import devices

    cpuinfo = "cpu MHz\t\t: 2445.404\n"
    lscpu = (
        "Model name:  AMD EPYC 7763\nCPU max MHz:                         3529.0520\nCPU min MHz: 1500.0\n"
    )
    assert devices.clock_from("3500000", None, lscpu, cpuinfo) == (
        3.5,
        "maximum clock, sysfs cpuinfo_max_freq",
        True,
    )
    assert devices.clock_from(None, 3400.0, lscpu, cpuinfo)[0] == pytest.approx(3.4)
    clock, source, is_max = devices.clock_from(None, 0.0, lscpu, cpuinfo)  # psutil's max is 0 in many VMs
    assert clock == pytest.approx(3.529052) and "lscpu" in source and is_max
    clock, source, is_max = devices.clock_from(None, None, "Model name: AMD EPYC\n", cpuinfo)
    assert clock == pytest.approx(2.445404) and "base" in source and not is_max
    assert devices.clock_from() == (None, "clock not readable", False)
    flags = frozenset({"avx2", "fma", "avx"})
    base, _ = cpu_spec("AMD EPYC", 2, clock, source, flags, "x86_64", clock_is_max=False)
    assert "base clock, not an upper bound" in base.source.iloc[0] and "exceed" in base.source.iloc[0]
    boost, _ = cpu_spec("AMD EPYC", 2, 3.529052, "lscpu", flags, "x86_64")
    assert (
        boost.peak_gflops.iloc[0] == pytest.approx(2 * 2 * 8 * 2 * 3.529052)
        and "base" not in boost.source.iloc[0]
    )


def test_apple_gpu_cores_and_cpu_clock_parsers():
    from cnnbench import devices
    from cnnbench.devices.mps import parse_gpu_cores

    assert parse_gpu_cores("Chipset Model: Apple M3 Pro\n      Total Number of Cores: 18\n") == 18
    assert parse_gpu_cores('| |   "gpu-core-count" = 14\n') == 14
    assert parse_gpu_cores("nothing here") is None
    assert devices.parse_cpu_mhz("cpu MHz\t\t: 2445.406\ncpu MHz\t\t: 3100.0\n") == 3100.0
    clock, source, _ = devices.cpu_clock_ghz()
    assert clock is None or 0.2 < clock < 10 and source


def fake_sysfs(root, caches):
    for i, (level, kind, size, shared) in enumerate(caches):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    return root


def test_cache_levels_from_sysfs(tmp_path):
    root = fake_sysfs(
        tmp_path,
        [
            (1, "Data", "32K", "0"),
            (1, "Instruction", "32K", "0"),
            (2, "Unified", "1024K", "0"),
            (3, "Unified", "32768K", "0-7"),
        ],
    )
    levels = devices.backend("cpu").cache_levels(threads=4, sysfs_root=root)
    assert [lv["level"] for lv in levels] == ["l1", "l2", "l3"]  # the instruction cache is no data level
    assert [lv["capacity_bytes"] for lv in levels] == [
        4 * 32 * 2**10,
        4 * 2**20,
        32 * 2**20,
    ]  # private x threads
    assert devices.backend("cpu").cache_levels(sysfs_root=tmp_path / "none") == []


def fake_sweep(points):
    return pd.DataFrame([{"working_set_bytes": w, "kernel": "copy", "bandwidth_gbs": bw} for w, bw in points])


def test_level_roofs_from_sizes_and_from_knees():
    sweep = fake_sweep(
        [(8e3, 40), (16e3, 92), (48e3, 90), (60e3, 88), (128e3, 70), (256e3, 72), (512e3, 68)]
        + [(2e6, 30), (4e6, 31), (8e6, 29), (128e6, 11), (256e6, 10), (512e6, 9)]
    )
    levels = [
        {"level": "l1", "size_bytes": 64e3, "capacity_bytes": 64e3, "size_source": "fake"},
        {"level": "l2", "size_bytes": 1e6, "capacity_bytes": 1e6, "size_source": "fake"},
        {"level": "l3", "size_bytes": 32e6, "capacity_bytes": 32e6, "size_source": "fake"},
    ]
    roofs = peaks.level_roofs(sweep, levels).set_index("level")
    assert roofs.bandwidth_gbs.to_dict() == {"l1": 89, "l2": 70, "l3": 30, "dram": 10}
    # no cache sizes readable: the knees bound the levels
    knees = peaks.level_roofs(sweep, []).set_index("level")
    assert list(knees.index) == ["l1", "l2", "dram"] and knees.loc["dram", "bandwidth_gbs"] == 10


def test_a_level_roof_is_the_median_its_working_sets_hold_not_its_one_outlier():
    """Issue 44: the example's L1 read curve jumped between 245 and 880 GB/s and the L1 roof was the 880 point;
    the DRAM roof (100.6 GB/s) came from the first set past 4x the last cache while the curve settled near 82.
    A roof is the median of the level's working sets, of the kernel with the highest median, over at least
    MIN_POINTS sets; a level with fewer has no roof, and the source names the rule."""
    kib, mib = 2**10, 2**20
    levels = [
        {"level": "l1", "size_bytes": 64 * kib, "capacity_bytes": 64 * kib, "size_source": "fake"},
        {"level": "l2", "size_bytes": mib, "capacity_bytes": mib, "size_source": "fake"},
    ]
    read = [(8, 250), (12, 880), (16, 245), (24, 260), (32, 255), (48, 250)]  # KiB, GB/s: one outlier
    triad = [(8, 200), (16, 600), (32, 205), (48, 210)]
    points = [(w * kib, "read", bw) for w, bw in read] + [(w * kib, "triad", bw) for w, bw in triad]
    points += [(w * kib, "read", 150) for w in (256, 512)]  # two sets only: no l2 roof
    points += [(w * mib, "read", bw) for w, bw in ((4, 100.6), (6, 82.0), (8, 81.5), (16, 82.5))]
    sweep = pd.DataFrame(
        [
            {"working_set_bytes": w, "kernel": k, "bandwidth_gbs": bw, "threads": 2, "calls": 3}
            for w, k, bw in points
        ]
    )
    roofs = peaks.level_roofs(sweep, levels).set_index("level")
    assert roofs.bandwidth_gbs.to_dict() == {"l1": 252.5, "dram": 82.25}
    assert roofs.kernel.to_dict() == {"l1": "read", "dram": "read"}
    src = roofs.loc["l1", "bandwidth_source"]
    assert (
        "median read of 6 working sets" in src and "245.0 to 880.0 GB/s" in src and "best of 3 calls" in src
    )
    assert roofs.sweep_points.to_dict() == {"l1": 6, "dram": 4} and (roofs.bandwidth_note == "").all()


def test_with_too_few_main_memory_sets_the_largest_stand_in_and_the_row_says_so():
    mib = 2**20
    levels = [{"level": "l3", "size_bytes": 32 * mib, "capacity_bytes": 32 * mib, "size_source": "fake"}]
    sweep = fake_sweep(
        [(w * mib, bw) for w, bw in ((4, 90), (8, 91), (16, 89), (48, 40), (64, 30), (128, 25))]
    )
    roofs = peaks.level_roofs(sweep, levels).set_index("level")
    assert roofs.loc["l3", "bandwidth_gbs"] == 90 and roofs.loc["dram", "bandwidth_gbs"] == 30
    assert "the largest 3 past it stand in" in roofs.loc["dram", "bandwidth_note"]


def test_the_sweep_gives_main_memory_three_working_sets_far_past_the_last_cache(monkeypatch):
    """The example's 480 MiB L3 took the sweep to 4x that and no further: its DRAM roof was one working set. A
    GPU's sweep (ratio 4) had two sets past 4x a 50 MiB L2. Now every sweep has MIN_POINTS of them at least."""
    from cnnbench.devices import base
    from cnnbench.devices.cpu import CpuBackend

    mib = 2**20
    assert len([s for s in base.sweep_sizes([{"capacity_bytes": 50 * mib}], 2**30) if s >= 200 * mib]) >= 3
    last = {"level": "l3", "size_bytes": 480 * mib, "capacity_bytes": 480 * mib, "size_source": "fake"}
    monkeypatch.setattr(CpuBackend, "cache_levels", lambda self, *a, **k: [last])
    seen = []

    def sweep(self, sizes, repeats, threads):
        seen.extend(sizes)
        rows = [{"working_set_bytes": s, "kernel": "read", "bandwidth_gbs": 1e3 / np.log(s)} for s in sizes]
        return [{**r, "threads": 1, "calls": 1, "method": "fake"} for r in rows]

    monkeypatch.setattr(CpuBackend, "bandwidth_sweep", sweep)
    for name in ("matmul_rates", "conv_rates"):
        monkeypatch.setattr(peaks, name, lambda *a, **k: [1.0])
    measured, _ = peaks.measure(devices.backend("cpu"), 64, stream_mb=16, repeats=1, threads=1)
    assert len([s for s in seen if s >= 4 * 480 * mib]) >= peaks.MIN_POINTS == 3
    dram = measured[measured.level == "dram"].iloc[0]
    assert "median read of 3 working sets" in dram.source and dram.bandwidth_note == ""


def test_level_roofs_never_copy_an_outer_level_inwards():
    """The committed example's sweep rose with size (per-call overhead), and a running maximum gave l1 and l2 the
    l3 figure (133.1 GB/s on every cache level). Each level keeps its own measurement, flagged when slower."""
    rising = fake_sweep(
        [(8e3, 10), (16e3, 14), (48e3, 24), (96e3, 50), (256e3, 60), (768e3, 90)]
        + [(2e6, 120), (4e6, 133), (8e6, 140), (128e6, 36), (256e6, 35), (512e6, 34)]
    )
    roofs = peaks.level_roofs(rising, LEVELS).set_index("level")
    assert roofs.bandwidth_gbs.to_dict() == {"l1": 14, "l2": 60, "l3": 133, "dram": 35}
    assert "slower than the outer l2" in roofs.loc["l1", "bandwidth_note"]
    assert "slower than the outer l3" in roofs.loc["l2", "bandwidth_note"]
    assert roofs.loc["l3", "bandwidth_note"] == "" and roofs.loc["dram", "bandwidth_note"] == ""


LEVELS = [
    {"level": "l1", "size_bytes": 64e3, "capacity_bytes": 64e3, "size_source": "fake"},
    {"level": "l2", "size_bytes": 1e6, "capacity_bytes": 1e6, "size_source": "fake"},
    {"level": "l3", "size_bytes": 32e6, "capacity_bytes": 32e6, "size_source": "fake"},
]


def test_each_level_gets_its_own_plateau_from_its_own_sizes():
    """Plateaus at 300 / 180 / 130 / 25 GB/s, two kernels; a level with no size of its own gets no roof (it used to
    take the largest size below it, another level's)."""
    points = [
        (w, k, bw)
        for k, scale in (("read", 0.7), ("triad", 1.0))
        for w, bw in (
            (8e3, 250),
            (16e3, 300),
            (32e3, 310),
            (48e3, 300),
            (128e3, 180),
            (256e3, 185),
            (512e3, 170),
            (2e6, 130),
            (8e6, 135),
            (16e6, 120),
            (128e6, 25),
            (256e6, 24),
            (512e6, 26),
        )
        for bw in [bw * scale]
    ]
    sweep = pd.DataFrame(
        [
            {"working_set_bytes": w, "kernel": k, "bandwidth_gbs": bw, "threads": 2, "calls": 5}
            for w, k, bw in points
        ]
    )
    roofs = peaks.level_roofs(sweep, LEVELS).set_index("level")
    assert roofs.bandwidth_gbs.to_dict() == {"l1": 300, "l2": 180, "l3": 130, "dram": 25}
    assert (roofs.kernel == "triad").all() and roofs.sweep_points.to_dict() == {
        "l1": 4,
        "l2": 3,
        "l3": 3,
        "dram": 3,
    }
    src = roofs.loc["l1", "bandwidth_source"]
    assert "median triad of 4 working sets" in src and "2 thread(s)" in src and "best of 5 calls" in src
    assert (roofs.bandwidth_note == "").all()
    gap = LEVELS + [{"level": "l4", "size_bytes": 48e6, "capacity_bytes": 48e6, "size_source": "fake"}]
    assert "l4" not in set(peaks.level_roofs(sweep, gap).level)  # nothing measured between 32 and 48 MB


def test_matmul_calls_carry_enough_work(monkeypatch):
    """Today inner is 1 for any n >= 1000: a fast GPU's timed call was one short matmul."""
    clock = {"t": 0.0}
    import time

    monkeypatch.setattr(time, "perf_counter", lambda: clock["t"])

    def call():
        clock["t"] += 0.004

    cpu = devices.backend("cpu")
    assert cpu.inner_calls(call, min_call_s=0.05) == 13
    assert cpu.inner_calls(call, min_call_s=0.001) == 1
    assert devices.backend_class("cuda").min_call_s >= 0.01
    assert cpu.matmul_size == 2048
    from cnnbench.params import Params

    assert Params().matmul_size == 0  # by device unless the params set one


def fake_peaks():
    """Two roofs without memory levels, as the results layer reads them (level NA)."""
    return results.schema.declared(
        pd.DataFrame(
            [
                {
                    "device_name": "dev",
                    "kind": "measured",
                    "precision": "fp32",
                    "peak_gflops": 100.0,
                    "bandwidth_gbs": 10.0,
                    "ridge_flop_per_byte": 10.0,
                },
                {
                    "device_name": "dev",
                    "kind": "spec",
                    "precision": "fp32",
                    "peak_gflops": 150.0,
                    "bandwidth_gbs": 20.0,
                    "ridge_flop_per_byte": 7.5,
                },
            ]
        ),
        "device_peaks",
    )


def test_attainable_and_placement():
    assert roofline.attainable(1.0, 100, 10) == 10 and roofline.attainable(50, 100, 10) == 100
    results = pd.DataFrame(
        [
            {
                "status": "ok",
                "device_name": "dev",
                "device_kind": "cpu",  # a key column of every measured row
                "model": "m",
                "phase": "train",
                "batch_size": 8,
                "image_size": 32,
                "precision": "bf16",
                "memory_format": "nchw",
                "achieved_gflops": 5.0,
            }
        ]
    )
    intens = pd.DataFrame(
        [
            {
                "model": "m",
                "phase": "train",
                "batch_size": 8,
                "image_size": 32,
                "precision": "bf16",
                "intensity_flop_per_byte": 2.0,
                "gbytes": float("nan"),  # no byte count: no level known, the DRAM roof applies
            }
        ]
    )
    placed = roofline.place(results, intens, fake_peaks(), "scenario_a")
    r = placed.iloc[0]
    assert (r.attainable_gflops, r.efficiency, r.bound) == (20.0, 0.25, "memory")
    assert r.roof == "measured fp32 dram"  # no bf16 roof measured: the fp32 one applies (no levels: DRAM)


def level_peaks():
    """A device with l1 (64 KiB in use, 100 GB/s), l2 (1 MiB, 50 GB/s) and DRAM (10 GB/s), compute 100 GFLOP/s;
    the DRAM row deliberately not first."""
    rows = [("l1", 0.0625, 100.0), ("l2", 1.0, 50.0), ("dram", float("nan"), 10.0)]
    return pd.DataFrame(
        [
            {
                "device_name": "dev",
                "device_kind": "cpu",
                "kind": "measured",
                "precision": "fp32",
                "level": lv,
                "capacity_mib": cap,
                "peak_gflops": 100.0,
                "bandwidth_gbs": bw,
                "ridge_flop_per_byte": 100.0 / bw,
            }
            for lv, cap, bw in rows
        ]
    )


def test_roof_for_is_the_dram_roof():
    roof = roofline.roof_for(level_peaks(), "bf16")
    assert (roof.level, roof.bandwidth_gbs, roof.name) == ("dram", 10.0, "fp32")


def layer(working_set_mib, intensity, achieved):
    return {
        "model": "m",
        "phase": "train",
        "batch_size": 8,
        "layer": "features.0",
        "op": "relu",
        "calls_per_step": 2.0,
        "bytes": 2 * working_set_mib * 2**20,
        "intensity_flop_per_byte": intensity,
        "achieved_gflops": achieved,
    }


def test_layer_points_against_their_levels_roof():
    """An elementwise op served from L2 sat above the DRAM roof (129 of 962 layer points in a default run)."""
    layers = pd.DataFrame(
        [
            layer(0.5, 0.25, 11.0),  # in l2: roof 12.5 GFLOP/s; 4.4x the DRAM roof
            layer(0.01, 0.25, 20.0),  # in l1: roof 25
            layer(64, 0.25, 2.0),  # in DRAM: roof 2.5
            layer(64, 0.25, 3.0),
        ]
    )  # in DRAM, 20% above its roof: flagged
    pts = roofline.layer_points(layers, level_peaks())
    assert pts.level.tolist() == ["l2", "l1", "dram", "dram"]
    assert pts.attainable_gflops.tolist() == [12.5, 25.0, 2.5, 2.5]
    assert pts.above_roof.tolist() == [False, False, False, True]
    assert (pts.attainable_dram_gflops == 2.5).all() and pts.efficiency_dram.iloc[0] == pytest.approx(4.4)
    assert pts.above_roof_reason.iloc[:3].eq("").all() and "dram roof" in pts.above_roof_reason.iloc[3]
    assert pts.working_set_mib.tolist() == [0.5, 0.01, 64, 64] and (pts.device_kind == "cpu").all()
    assert len(roofline.flagged(pts)) == 1
    summary = roofline.above_roof_summary(pts).set_index("level")
    assert summary.loc["dram", "above_own_roof"] == 1 and summary.loc["l2", "above_dram_roof"] == 1


def test_points_carry_what_every_level_would_allow():
    """Each point is judged against one roof (its level's) and carries the attainable under every measured level."""
    pts = roofline.layer_points(pd.DataFrame([layer(0.5, 0.25, 11.0), layer(64, 2.0, 30.0)]), level_peaks())
    assert pts.attainable_l1_gflops.tolist() == [25.0, 100.0]
    assert pts.attainable_l2_gflops.tolist() == [12.5, 100.0]
    assert pts.attainable_dram_gflops.tolist() == [2.5, 20.0]
    assert pts.above_roof.tolist() == [False, True] and "dram roof" in pts.above_roof_reason.iloc[1]
    results = pd.DataFrame(
        [
            {
                "status": "ok",
                "device_name": "dev",
                "device_kind": "cpu",  # a key column of every measured row
                "model": "m",
                "phase": "train",
                "batch_size": 8,
                "image_size": 32,
                "precision": "fp32",
                "memory_format": "nchw",
                "achieved_gflops": 5.0,
            }
        ]
    )
    intens = pd.DataFrame(
        [
            {
                "model": "m",
                "phase": "train",
                "batch_size": 8,
                "image_size": 32,
                "precision": "fp32",
                "intensity_flop_per_byte": 0.5,
                "gbytes": 1.0,
            }
        ]
    )
    r = roofline.place(results, intens, level_peaks(), "scenario_a").iloc[0]
    assert (r.level, r.attainable_l1_gflops, r.attainable_l2_gflops, r.attainable_gflops) == (
        "dram",
        50,
        25,
        5,
    )


def test_point_above_the_compute_peak_is_flagged_with_its_reason():
    pts = roofline.layer_points(pd.DataFrame([layer(64, 1000.0, 130.0)]), level_peaks())
    assert pts.above_roof.iloc[0] and "compute peak" in pts.above_roof_reason.iloc[0]


def test_a_point_above_the_spec_sheets_peak_too_is_counted_flops_the_kernel_did_not_do():
    """The H200 example's 3x3 convolutions at 94-108 TFLOP/s in fp32 (spec 67 TFLOP/s, measured 51) were said to show
    the micro-benchmarks' best is a lower bound: no kernel beats the hardware, an algorithm doing fewer FLOPs than
    the direct count (Winograd, FFT) does. Between the measured and the spec peak the old reason stands."""
    spec = {**level_peaks().iloc[2].to_dict(), "kind": "spec", "level": "dram", "peak_gflops": 150.0}
    peaks_ = pd.concat([level_peaks(), pd.DataFrame([spec])], ignore_index=True)
    pts = roofline.layer_points(pd.DataFrame([layer(64, 1000.0, 180.0), layer(64, 1000.0, 130.0)]), peaks_)
    assert pts.above_roof.tolist() == [True, True]
    above_spec, above_measured = pts.above_roof_reason
    assert "spec sheet's fp32 peak 150" in above_spec and "counted FLOPs" in above_spec
    assert "lower bound" not in above_spec
    assert "lower bound on the hardware" in above_measured


def test_layer_time_shares_count_each_kernel_once():
    """Under CPU + CUDA activities the profiler credits each kernel's time to the aten op that launched it (its
    self device time) and again to the kernel's own event: the H200 example's shares summed over every event were
    half the real ones (a 0.481 s step where the step took 0.240 s)."""
    from torch.profiler import DeviceType

    shapes = [[4, 8, 14, 14]]
    counted = {("aten::convolution", str(shapes)): {"flops": 1e6, "flops_elementwise": 0, "bytes": 5e4}}
    counted[("aten::convolution", str(shapes))] |= {"calls": 1, "modules": ["conv1"]}

    def event(key, device_us, device_type=DeviceType.CPU, host_us=5.0):
        times = {"device_time_total": device_us, "self_device_time_total": device_us}
        times |= {"cpu_time_total": host_us, "self_cpu_time_total": host_us}
        return types.SimpleNamespace(key=key, input_shapes=shapes, count=2, device_type=device_type, **times)

    events = [
        event("aten::convolution", 600.0),
        event("aten::relu", 200.0),
        event("cudaLaunchKernel", 0.0),
        event("implicit_convolve_sgemm", 600.0, DeviceType.CUDA, 0.0),
        event("vectorized_elementwise_kernel", 200.0, DeviceType.CUDA, 0.0),
    ]
    cfg = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=4, workers=0)
    table = roofline.layer_table(events, counted, 2, cfg, devices.backend("cuda"))
    assert table.op.tolist() == ["convolution"] and table.time_share.iloc[0] == pytest.approx(
        0.75
    )  # of 800 us


def test_step_points_use_the_step_bytes_as_working_set():
    results = pd.DataFrame(
        [
            {
                "status": "ok",
                "device_name": "dev",
                "device_kind": "cpu",  # a key column of every measured row
                "model": "m",
                "phase": "train",
                "batch_size": 8,
                "image_size": 32,
                "precision": "fp32",
                "memory_format": "nchw",
                "achieved_gflops": 5.0,
            }
        ]
    )
    intens = pd.DataFrame(
        [
            {
                "model": "m",
                "phase": "train",
                "batch_size": 8,
                "image_size": 32,
                "precision": "fp32",
                "intensity_flop_per_byte": 0.5,
                "gbytes": 0.0005,
            }
        ]
    )  # 0.48 MiB: in l2
    r = roofline.place(results, intens, level_peaks(), "scenario_a").iloc[0]
    assert (r.level, r.attainable_gflops, r.attainable_dram_gflops, r.above_roof) == ("l2", 25.0, 5.0, False)


def test_roofline_04_without_inputs_or_with_every_row_failed():
    failed = pd.DataFrame(
        [
            {
                "status": "oom",
                "model": "m",
                "phase": "train",
                "batch_size": 8,
                "image_size": 32,
                "num_classes": 10,
                "precision": "fp32",
                "device_name": "dev",
            },
            {
                "status": "error",
                "model": "m",
                "phase": "eval",
                "batch_size": 8,
                "image_size": 32,
                "num_classes": 10,
                "precision": "fp32",
                "device_name": "dev",
            },
        ]
    )
    note = roofline.inputs_note(
        {"complexity": pd.DataFrame(), "scenario_a": failed, "batch_sweep": pd.DataFrame()}
    )
    assert "\n" not in note and "complexity.csv missing (run 01_complexity first)" in note
    assert "every scenario_a row failed (oom 1, error 1)" in note
    intens = roofline.intensities_for(failed)
    assert intens.empty and roofline.place(failed, intens, level_peaks(), "scenario_a").empty
    assert (
        roofline.layers_for_models(None, failed).empty
        and roofline.layer_points(pd.DataFrame(), level_peaks()).empty
    )
    assert roofline.flagged(pd.DataFrame()).empty and roofline.above_roof_summary(pd.DataFrame()).empty
    seeds = roofline.compare_with_seeds(intens, pd.DataFrame()).set_index("model")
    assert seeds.loc["resnet18", "published_by_000_as_flop_per_byte"] == pytest.approx(40.8)


def test_plots_write_files(tmp_path):
    points = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "phase": ["train", "eval", "train"],
            "batch_size": [8, 8, 8],
            "intensity_flop_per_byte": [2.0, 20.0, 0.5],
            "achieved_gflops": [5.0, 60.0, 1.0],
        }
    )
    plots.roofline(fake_peaks(), points, "t", tmp_path / "r.png")
    plots.roofline(level_peaks(), points, "t", tmp_path / "levels.png")
    plots.trajectory(level_peaks(), points.iloc[0:0], "empty", None)
    sweep = fake_sweep([(16e3, 40), (4e6, 30), (64e6, 10)]).assign(
        working_set_mib=lambda d: d.working_set_bytes / 2**20
    )
    plots.bandwidth_sweep(sweep, level_peaks(), "t", tmp_path / "bw.png")
    plots.trajectory(fake_peaks(), points, "t", tmp_path / "t.png")
    two = pd.concat([points.assign(device_name="dev"), points.assign(device_name="other")])
    roofs = pd.concat([fake_peaks(), fake_peaks().assign(device_name="other")])
    figs = plots.per_model_rooflines(two, roofs, tmp_path)
    assert set(figs) == {"a", "b"}
    for name in ("r.png", "t.png", "roofline_model_a.png", "levels.png", "bw.png"):
        assert (tmp_path / name).stat().st_size > 5000
    assert np.isfinite(points.intensity_flop_per_byte).all()


@pytest.mark.slow
def test_peak_measurement_restores_threads_and_reports_spread(small_last_cache):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        df, _ = peaks.measure(devices.backend("cpu"), matmul_size=128, stream_mb=8, repeats=3, threads=2)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    row = df.iloc[0]
    assert row.matmul_gflops_median <= row.matmul_gflops and row.peak_gflops_median <= row.peak_gflops
    assert row.peak_spread >= 0 and row.peak_calls == 3 and "spread" in row.source
    assert row.peak_gflops == max(row.matmul_gflops, row.conv3x3_gflops)
    assert row.level == "dram" and "dram" in set(df.level) and df.device_kind.eq("cpu").all()
    fp32 = df[df.precision == "fp32"]
    assert len(fp32) == fp32.level.nunique() >= 2  # one row per memory level
    assert fp32.source.str.contains("thread").all() and fp32.threads.eq(2).all()  # measure's threads=2


def test_notebook_04_completes_when_every_scenario_a_row_failed(tmp_path, smoke_run):
    """04 with no complexity.csv and only failed Scenario A rows: it completes and says so in one line. The roofs
    are the shared smoke run's (measured with the same settings, so 04 keeps them)."""
    import shutil

    import nbformat
    import papermill as pm

    from cnnbench import results

    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    run_dir = tmp_path / "run"
    row = {
        "status": "oom",
        "model": "squeezenet1_1",
        "phase": "train",
        "batch_size": 8,
        "image_size": 32,
        "num_classes": 10,
        "in_channels": 3,
        "precision": "fp32",
        "memory_format": "nchw",
        "compile": False,
        "device_name": "cpu",
        "device_kind": "cpu",
        "achieved_gflops": "",
    }
    results.write_rows(run_dir / "scenario_a.csv", [row, {**row, "phase": "eval", "status": "error"}])
    for name in ("device_peaks.csv", "bandwidth_sweep.csv"):
        shutil.copy(smoke_run[0] / name, run_dir / name)
    out = tmp_path / "04.ipynb"
    pm.execute_notebook(
        str(root / "notebooks" / "04_roofline.ipynb"),
        str(out),
        cwd=str(root),
        progress_bar=False,
        parameters={
            "params_file": str(root / "params" / "smoke.yaml"),
            "run_dir": str(run_dir),
        },
    )
    text = "".join(
        o.get("text", "")
        for c in nbformat.read(out, as_version=4).cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    assert "complexity.csv missing (run 01_complexity first)" in text
    assert "every scenario_a row failed (oom 1, error 1)" in text and "no Scenario A point to place" in text
    assert re.search(r"kept (\d+) of \1 measured roofs from device_peaks.csv; measured 0\b", text), text


def _roofline_run(outputs, name, device="dev"):
    from cnnbench import results

    d = outputs / name
    pts = [
        {
            "source": "scenario_a",
            "device_name": device,
            "model": "a",
            "phase": "train",
            "batch_size": 8,
            "intensity_flop_per_byte": 2.0,
            "achieved_gflops": 5.0,
        }
    ]
    results.write_rows(d / "roofline.csv", pts)
    results.write_rows(d / "device_peaks.csv", level_peaks().assign(device_name=device).to_dict("records"))
    return d


def test_per_model_rooflines_across_the_named_runs_grouped_by_run(tmp_path, monkeypatch):
    first, second = (
        _roofline_run(tmp_path, "first"),
        _roofline_run(tmp_path, "second"),
    )  # one device, two runs
    _roofline_run(tmp_path, "smoke", device="elsewhere")  # not named: never read
    points, roofs = roofline.across_runs([first, second])
    assert set(points.run_name) == set(roofs.run_name) == {"first", "second"}
    drawn = []
    monkeypatch.setattr(  # the roofs (a marker moved aside gets a two-point line to its place)
        plots.plt.Axes, "plot", lambda ax, x, y, *a, **k: len(x) > 2 and drawn.append(float(np.asarray(y)[0]))
    )
    assert set(plots.per_model_rooflines(points, roofs, tmp_path)) == {"a"}  # same device, two runs: a plot
    assert drawn == [pytest.approx(0.5)] * 2  # at 0.05 FLOP/byte: the DRAM roof (10 GB/s), not l1's 100 GB/s
    alone, alone_roofs = roofline.across_runs([first])
    assert plots.per_model_rooflines(alone, alone_roofs, tmp_path) == {}


def _fake_run(tmp_path, **params):
    from types import SimpleNamespace

    from cnnbench.params import Params

    prm = Params(**params)
    return SimpleNamespace(
        params=prm, threads=prm.threads, device=torch.device("cpu"), dir=tmp_path, path=lambda n: tmp_path / n
    )


def _sa_row(**kw):
    row = {
        "status": "ok",
        "model": "m",
        "host_id": "h",  # the machine that measured it (the results layer's stamp)
        "phase": "train",
        "batch_size": 8,
        "image_size": 32,
        "num_classes": 10,
        "in_channels": 3,
        "dataset": "synthetic",
        "precision": "fp32",
        "memory_format": "nchw",
        "device_name": "dev",
        "threads": 2,
        "measured_steps": 5,
        "lr": 0.01,
        "seed": 0,
        "workers": 2,
        "repeats": 3,
        "throughput_img_s": 1.0,
    }
    return {**row, **kw}


def test_04_reads_only_the_rows_of_the_current_params_and_profiles_fp32_nchw(tmp_path, monkeypatch):
    from cnnbench import results

    rows = [
        _sa_row(),
        _sa_row(measured_steps=9, throughput_img_s=2.0, memory_format="channels_last"),
        _sa_row(measured_steps=9, throughput_img_s=3.0),
        _sa_row(measured_steps=9, threads=4, batch_size=16),
    ]
    results.write_rows(tmp_path / "scenario_a.csv", rows)
    results.table("scenario_a").plan(
        tmp_path, rows[1:3], "scenario_a"
    )  # what 02's latest invocation measured
    run = _fake_run(tmp_path, measured_steps=9, threads=2)
    sa = roofline.read_inputs(run)["scenario_a"]
    assert sorted(sa.throughput_img_s) == [2.0, 3.0] and set(sa.batch_size) == {
        8
    }  # stale protocol, threads out
    profiled = []
    monkeypatch.setattr(
        roofline, "profile_layers", lambda cfg, *a, **k: profiled.append(cfg) or pd.DataFrame()
    )
    roofline.layers_for_models(run, sa)
    assert [(c.model, c.memory_format) for c in profiled] == [("m", "nchw")]


def test_the_main_memory_roof_comes_from_sets_far_beyond_the_last_cache():
    """The example's first point past a 32 MiB L3 (45 MiB, still partly cache-resident) read 50.8 GB/s, twice
    what sets of 128 MiB and more gave: it must not be the DRAM roof."""
    mib = 2**20
    rates = {
        4 * mib: 138.0,
        8 * mib: 140.0,
        16 * mib: 141.0,
        45 * mib: 50.8,
        64 * mib: 43.0,
        128 * mib: 30.0,
        512 * mib: 25.0,
        1024 * mib: 24.0,
    }
    sweep = pd.DataFrame(
        [
            {
                "working_set_bytes": ws,
                "kernel": "triad",
                "bandwidth_gbs": r,
                "bandwidth_median_gbs": r,
                "threads": 2,
                "calls": 3,
                "method": "m",
            }
            for ws, r in rates.items()
        ]
    )
    levels = [{"level": "l3", "size_bytes": 32 * mib, "capacity_bytes": 32 * mib, "size_source": "sysfs"}]
    roofs = peaks.level_roofs(sweep, levels).set_index("level")
    assert roofs.loc["dram", "bandwidth_gbs"] == 25.0 and roofs.loc["l3", "bandwidth_gbs"] == 140.0


def test_torch_without_l2_cache_size_or_device_time_total_is_no_error(monkeypatch):
    """L2_cache_size came with torch 2.5 and device_time_total with 2.4: an older torch gives no L2 level
    (the sweep's knees name it) and the CUDA time under its old name, instead of an error or a zero."""
    import types

    cuda = devices.backend("cuda")
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(name="old torch GPU")
    )
    assert cuda.cache_levels() == []
    assert cuda.op_time_us(types.SimpleNamespace(cuda_time_total=7.0)) == 7.0
    assert cuda.op_time_us(types.SimpleNamespace(device_time_total=5.0, cuda_time_total=7.0)) == 5.0


def test_l2_reread_kernel_is_one_long_call_over_an_l2_resident_buffer(monkeypatch):
    """On CUDA, L2 is measured with one kernel that re-reads a buffer that fits the L2 many times (a sum over the
    buffer expanded R times, stride 0), not with copies of <= 25 MiB whose launch gaps dominate: sized so one call
    moves at least REREAD_TARGET_BYTES, only for working sets from REREAD_MIN_BYTES (past one SM's L1) up to the
    L2. Driven on the CPU with a fake L2 and fake timings."""
    import types

    from cnnbench.devices import base, cuda

    mib = 2**20
    assert cuda.reread_kernel(torch.device("cpu"), 4 * mib, 1024 * mib)[1] == 256 * 4 * mib
    assert cuda.reread_kernel(torch.device("cpu"), 3 * mib, 1024 * mib)[1] == 342 * 3 * mib  # never below it
    h100_l2 = {
        "capacity_bytes": 50 * mib,
        "above_bytes": 132 * 256 * 2**10,
    }  # 132 SMs x 256 KiB of L1: 33 MiB
    assert cuda.reread_sizes([64 * 2**10, mib, 4 * mib, 25 * mib, 37 * mib, 512 * mib], h100_l2) == [37 * mib]
    fn, nbytes = cuda.reread_kernel(torch.device("cpu"), 64 * 2**10, target_bytes=2 * mib)
    n = 64 * 2**10 // 4
    assert nbytes == 32 * n * 4 and nbytes >= 2 * mib
    out = fn()
    assert out.numel() == nbytes // (n * 4)  # one sum per re-read of the whole buffer, in one call

    calls = []
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda d: types.SimpleNamespace(L2_cache_size=50 * mib, multi_processor_count=4, major=9, minor=0),
    )
    monkeypatch.setattr(base, "stream_kernels", lambda d, s: {"copy": (lambda: None, s)})
    monkeypatch.setattr(cuda, "reread_kernel", lambda d, s: (lambda: None, 1000 * s))
    monkeypatch.setattr(
        base.Backend, "rates", lambda self, fn, nbytes, r, m=None, graph=False: calls.append(nbytes) or [1e12]
    )
    monkeypatch.setattr(cuda.CudaBackend, "empty_cache", lambda self: None)
    sweep = pd.DataFrame(devices.backend("cuda").bandwidth_sweep([mib, 8 * mib, 512 * mib], 1, 1))
    reread = sweep[sweep.kernel == "l2_reread"]
    assert list(reread.working_set_bytes) == [8 * mib] and "re-read" in reread.method.iloc[0]
    assert set(sweep[sweep.kernel == "copy"].working_set_bytes) == {mib, 8 * mib, 512 * mib}


def test_layer_figures_one_per_model_with_its_top_k_layers(tmp_path):
    """04's per-layer rooflines come from one package call (the notebook cell no longer loops over models)."""
    layers = pd.DataFrame(
        {
            "model": ["a"] * 4 + ["b"] * 2,
            "op": ["conv", "bn", "relu", "fc", "conv", "fc"],
            "level": ["L1", "L2", "dram", "L1", "dram", "L2"],
            "phase": "train",
            "batch_size": 8,
            "intensity_flop_per_byte": [8.0, 0.5, 0.2, 4.0, 6.0, 3.0],
            "achieved_gflops": [40.0, 3.0, 1.0, 20.0, 30.0, 9.0],
        }
    )
    figs = roofline.layer_figures(level_peaks(), layers, 3, tmp_path / "figures")
    assert set(figs) == {"a", "b"}
    for model, top in (("a", 3), ("b", 2)):
        assert (tmp_path / "figures" / f"roofline_layers_{model}.png").stat().st_size > 5000
        ax = figs[model].axes[0]
        drawn = sum(len(c.get_offsets()) for c in ax.collections if len(c.get_offsets()))
        assert drawn == top  # the top k layers only
        assert "top 3 layers" in ax.get_title()
    assert roofline.layer_figures(level_peaks(), pd.DataFrame(), 3, tmp_path) == {}


def test_the_l2_roof_comes_from_working_sets_larger_than_the_l1_of_all_sms(monkeypatch):
    """Issue 41: the H100's L2 roof (14.9 TB/s) came from working sets of 2-25 MiB, which the 132 SMs' 33 MiB of
    L1 can hold: the L2 level starts above the SMs' total L1 (L1_PER_SM_KIB by compute capability), and the sweep
    has the three working sets a roof needs between the two."""
    import types

    from cnnbench.devices import cuda

    mib = 2**20
    props = types.SimpleNamespace(L2_cache_size=50 * mib, multi_processor_count=132, major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props)
    (l2,) = cuda.CudaBackend(torch.device("cuda")).cache_levels()
    assert l2["above_bytes"] == 132 * 256 * 2**10 and l2["capacity_bytes"] == 50 * mib
    sizes = cuda.CudaBackend(torch.device("cuda")).sweep_sizes([l2], 1024 * mib, 1)
    inside = [s for s in sizes if l2["above_bytes"] < s <= l2["capacity_bytes"]]
    assert len(inside) >= peaks.MIN_POINTS
    sets = [8 * mib, *inside, 600 * mib, 800 * mib, 1024 * mib]
    sweep = pd.DataFrame(
        {
            "working_set_bytes": sets,
            "kernel": "copy",
            "bandwidth_gbs": [9e3] + [7e3] * len(inside) + [3e3] * 3,
        }
    )
    roofs = peaks.level_roofs(sweep, [l2], "hbm")
    assert roofs.set_index("level").bandwidth_gbs.to_dict() == {"l2": 7e3, "hbm": 3e3}


@pytest.mark.parametrize(
    "spec, roof, flagged", [(120.0, 100.0, "conv"), (None, 130.0, ""), (90.0, 100.0, "matmul")]
)
def test_a_measured_roof_above_the_spec_sheet_is_flagged_and_a_conv_above_it_is_not_the_roof(
    monkeypatch, small_last_cache, spec, roof, flagged
):
    """Issue 41: the H100's fp32 roof was a 3x3 convolution at 69.2 TFLOP/s, 103% of its 67 TFLOPS spec: cuDNN's
    Winograd/FFT engines do fewer FLOPs than the direct count credits them. A convolution above the spec is no
    roof (the matmul is); any roof above the spec sheet is flagged."""
    from cnnbench.devices.cpu import CpuBackend

    monkeypatch.setattr(peaks, "matmul_rates", lambda *a, **k: [100.0, 99.0])
    monkeypatch.setattr(peaks, "conv_rates", lambda *a, **k: [130.0, 129.0])
    rows = [{"precision": "fp32", "peak_gflops": spec, "level": "dram"}] if spec else []
    monkeypatch.setattr(CpuBackend, "spec", lambda self, threads: (rows, ""))
    df, _ = peaks.measure(devices.backend("cpu"), matmul_size=64, stream_mb=8, repeats=1, threads=1)
    fp32 = df[df.precision == "fp32"].iloc[0]
    assert fp32.peak_gflops == roof and fp32.conv3x3_gflops == 130.0
    assert (
        (flagged in fp32.peak_note and "above the spec" in fp32.peak_note) if flagged else not fp32.peak_note
    )


def test_a_peaks_file_without_levels_read_through_the_results_layer_places_against_the_dram_roof(tmp_path):
    """Declared columns come back as NA when a file lacks them: no levels means the DRAM roof, not an IndexError."""
    from cnnbench import results
    from cnnbench.analysis import overview
    from cnnbench.results.files import write_rows

    row = {
        "kind": "measured",
        "precision": "fp32",
        "peak_gflops": 100.0,
        "bandwidth_gbs": 10.0,
        "peak_spread": 0.01,
    }
    write_rows(tmp_path / "device_peaks.csv", [row])
    roofs = roofline._Roofs(results.read(tmp_path, "device_peaks"))
    assert roofs.attainable("fp32", 5.0) == {} and roofs.level_roof("fp32", 1e6).peak_gflops == 100.0
    assert "GB/s from main memory" in overview.roof_sentence(tmp_path)


def test_each_precision_of_a_run_gets_its_own_roof_in_the_per_model_roofline(tmp_path):
    """The H200 example's ResNet-50 roofline drew only the fp32 roof (51 TFLOP/s), with its bf16 points at 115 and
    127 TFLOP/s above it: each precision a run's points were measured in now has its own measured roof."""
    from cnnbench import plots

    point = {"run_name": "gpu", "device_name": "NVIDIA H200", "model": "resnet50", "phase": "train"}
    points = pd.DataFrame(
        [
            {**point, "precision": "fp32", "intensity_flop_per_byte": 30.0, "achieved_gflops": 25_000.0},
            {**point, "precision": "bf16", "intensity_flop_per_byte": 60.0, "achieved_gflops": 115_000.0},
        ]
    )
    roof = {"run_name": "gpu", "kind": "measured", "level": "hbm", "bandwidth_gbs": 4_326.0}
    roofs = pd.DataFrame(
        [{**roof, "precision": p, "peak_gflops": g} for p, g in [("fp32", 51_268.0), ("bf16", 683_572.0)]]
    )
    with plots.detached():
        fig = plots.per_model_rooflines(points, roofs, tmp_path, min_runs=1)["resnet50"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert {
        "gpu (NVIDIA H200): its measured fp32 hbm roof",
        "gpu (NVIDIA H200): its measured bf16 hbm roof",
    } <= set(labels)


def test_a_point_carries_every_variant_knob_so_a_compiled_one_is_not_the_seeds_default():
    """roofline.csv named precision and memory_format of a configuration's knobs only: an eager and a compiled
    point of one model came out as two identical keys, and knobs.default_variant (which 08's summary and seed 003's
    efficiency read) took the compiled one for the seeds' default, its missing compile filled with "off"."""
    from cnnbench import knobs

    row = {"status": "ok", "device_name": "dev", "device_kind": "cpu", "model": "m", "phase": "train"}
    row |= {"batch_size": 8, "image_size": 32, "precision": "fp32", "memory_format": "nchw", "replica": 0}
    measured = pd.DataFrame([row | {"compile": "off", "achieved_gflops": 5.0}, row | {"compile": "default"}])
    measured.loc[1, "achieved_gflops"] = 9.0
    intens = pd.DataFrame(
        [{**{k: row[k] for k in roofline._KEYS}, "intensity_flop_per_byte": 2.0, "gbytes": 1.0}]
    )
    placed = roofline.place(measured, intens, fake_peaks(), "scenario_a")
    assert list(placed.compile) == ["off", "default"]
    assert list(knobs.default_variant(placed).achieved_gflops) == [5.0]


def test_a_layer_point_carries_the_variant_its_layers_were_profiled_in():
    """04 profiles each model's layers at the seeds' variant where 02 measured it, else at 02's first: a run of
    channels_last only had its layers labelled NCHW. They keep the profiled row's memory format and copy, eager."""
    layers = pd.DataFrame([layer(0.5, 0.25, 11.0) | {"memory_format": "channels_last", "replica": 1}])
    (pt,) = roofline.layer_points(layers, level_peaks()).to_dict("records")
    assert (pt["memory_format"], pt["replica"], pt["compile"]) == ("channels_last", 1, "off")
    (plain,) = roofline.layer_points(pd.DataFrame([layer(0.5, 0.25, 11.0)]), level_peaks()).to_dict("records")
    assert (plain["memory_format"], plain["precision"]) == (
        "nchw",
        "fp32",
    )  # a row without them: the defaults


def test_04_returns_its_layer_profiles_with_the_variant_they_ran_in(tmp_path, monkeypatch):
    """layers_for_models kept only its layer columns, so layer_points stamped the defaults on a channels_last
    profile (a second review of this fix)."""
    from cnnbench import results

    rows = [_sa_row(measured_steps=9, throughput_img_s=2.0, memory_format="channels_last")]
    results.write_rows(tmp_path / "scenario_a.csv", rows)
    results.table("scenario_a").plan(tmp_path, rows, "scenario_a")
    run = _fake_run(tmp_path, measured_steps=9, threads=2)
    one = {k: v for k, v in layer(0.5, 0.25, 11.0).items() if k not in ("model", "phase", "batch_size")}
    monkeypatch.setattr(roofline, "profile_layers", lambda cfg, *a, **k: pd.DataFrame([one]))
    layers = roofline.layers_for_models(run, roofline.read_inputs(run)["scenario_a"])
    assert list(layers.memory_format) == ["channels_last"]
    assert list(roofline.layer_points(layers, level_peaks()).memory_format) == ["channels_last"]


@pytest.mark.parametrize("cc", [(7, 5), (8, 0)])
def test_04s_compute_roofs_are_the_precision_knobs_values_a_device_runs_in_the_knobs_order(cc):
    """The precisions with a compute roof were listed a second time in the device layer (fp16 before bf16): they are
    the precision knob's values (cnnbench.knobs) this device does not lack, in that order."""
    from fakes import FakeGPU, using

    from cnnbench.knobs import KNOBS

    with using(FakeGPU.fresh(cc=cc)):
        b = devices.backend(torch.device("cpu"))
        runs = [p for p in KNOBS["precision"].values if not b.lacks("precision", p, b.hardware())]
        assert b.roof_precisions() == runs and "fp32" in runs
    assert list(devices.base.DTYPES) == list(KNOBS["precision"].values)


def test_layers_profiled_in_bf16_are_labelled_bf16_and_read_against_the_bf16_roof():
    """04 profiles a model's layers in 02's first variant where 02 did not measure fp32 (`--set precision=bf16`):
    its bf16 layers were labelled fp32 and placed under the fp32 compute roof."""
    peaks = pd.concat([level_peaks(), level_peaks().assign(precision="bf16", peak_gflops=400.0)])
    compute_bound = layer(64, 1000.0, 150.0) | {"precision": "bf16"}  # above fp32's 100, under bf16's 400
    (pt,) = roofline.layer_points(pd.DataFrame([compute_bound]), peaks).to_dict("records")
    assert pt["precision"] == "bf16" and pt["roof"] == "measured bf16 dram"
    assert pt["attainable_gflops"] == 400.0 and not pt["above_roof"]


def test_an_mps_run_in_bf16_gets_a_bf16_compute_roof(monkeypatch):
    """MPS listed its roofs by hand (fp32, fp16) though it runs bf16 on macOS 14 (torch 2.6+): a bf16 run's points
    were read against the fp32 roof. Its roofs are the precisions it does not lack, as every device's."""
    from cnnbench.devices.base import Hardware
    from cnnbench.devices.mps import MpsBackend

    b = MpsBackend(torch.device("cpu"))
    hw = Hardware("mps", "Apple M3 GPU (MPS)", 8, macos=(14, 0), torch_version=(2, 8))
    monkeypatch.setattr(b, "hardware", lambda: hw)
    assert b.roof_precisions() == ["fp32", "bf16", "fp16"]
    monkeypatch.setattr(b, "hardware", lambda: Hardware("mps", "Apple M1 GPU (MPS)", 8, macos=(13, 6)))
    assert "bf16" not in b.roof_precisions() and "tf32" not in b.roof_precisions()


def test_04_profiles_02s_first_variant_where_the_seeds_one_was_not_measured(tmp_path, monkeypatch):
    """layers_for_models said it profiles 02's first variant where fp32/NCHW/eager was not measured, and took a
    model's last row: the H200 example without its fp32 rows profiled bf16+channels_last, not tf32 (variants[0])."""
    tf32, bf16 = {"precision": "tf32"}, {"precision": "bf16", "memory_format": "channels_last"}
    sa = pd.DataFrame([_sa_row(**tf32), _sa_row(**tf32, throughput_img_s=2.0), _sa_row(**bf16)])
    profiled = []
    monkeypatch.setattr(
        roofline, "profile_layers", lambda cfg, *a, **k: profiled.append(cfg) or pd.DataFrame()
    )
    roofline.layers_for_models(_fake_run(tmp_path, variants=[tf32, bf16]), sa)
    assert [(c.precision, c.memory_format) for c in profiled] == [("tf32", "nchw")]
    profiled.clear()
    roofline.layers_for_models(_fake_run(tmp_path / "b", variants=[bf16, tf32]), sa)
    assert [(c.precision, c.memory_format) for c in profiled] == [("bf16", "channels_last")]


def test_the_host_step_is_timed_eager_in_the_default_memory_format_of_its_precision(monkeypatch):
    """host_steps.csv is keyed by precision alone and its ops are the eager count, but the host step ran in
    variants[0] whole: compiled and channels_last under `--set compile=default --set memory_format=channels_last`."""
    from cnnbench.measure import dispatch
    from cnnbench.params import Params

    ran = []

    class Stop(Exception):
        pass

    def workload(cfg, *a):
        ran.append(cfg)
        raise Stop

    monkeypatch.setattr(dispatch.engine, "Workload", workload)
    monkeypatch.setattr(dispatch.engine, "failure", lambda err, device: {"status": "error"})
    p = Params(
        models=["resnet18"],
        variants=[{"precision": "bf16", "memory_format": "channels_last", "compile": "default"}],
    )
    row = dispatch.host_step(p, torch.device("cpu"), "resnet18", "train", "bf16")
    assert row["precision"] == "bf16"
    assert [(c.precision, c.memory_format, c.compile) for c in ran] == [("bf16", "nchw", "off")]
