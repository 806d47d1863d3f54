"""What a first GPU or Mac run would have hit (issue 28, item 4), each driven through the fake device backend
(tests/fakes.py) or the backend's own code: every test here failed on the code before the redesign."""

import math
import os
import subprocess
import sys
import types
import weakref

import pandas as pd
import pytest
import torch
from fakes import FakeGPU, using

from cnnbench import devices, params
from cnnbench.measure import engine
from cnnbench.params import Params
from conftest import ROOT

CPU = torch.device("cpu")
MNIST = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=4, workers=0)


def test_a_device_whose_profiler_sees_only_the_host_queueing_ops_gets_no_per_layer_roofline(tmp_path):
    """04's per-layer roofline on MPS read cpu_time_total, the host's time to queue each op, as the GPU's; 06's
    profiler ranked MPS ops the same way. A backend says what its profiler's op times are."""
    from cnnbench import roofline
    from cnnbench import steps as profiler

    queued = FakeGPU.fresh(op_time="queue", kind="mps")
    with using(queued):
        with pytest.raises(devices.Unavailable, match="host .*queue"):
            roofline.profile_layers(MNIST, devices.backend(CPU), Params(), steps=1, warmup=1)
        rows = profiler.profile_model(
            MNIST, CPU, Params(optimizer="sgd", profile_steps=1, profile_top_k=3), tmp_path
        )
    assert rows[0]["status"] == "ok" and all("queue each op" in r["time_note"] for r in rows)
    assert all(math.isnan(r["self_device_s"]) for r in rows)  # no device time is claimed


class Event(types.SimpleNamespace):
    """A profiler event as key_averages() gives it: inclusive and self times on the host and the device."""


def test_cudnn_batch_norm_joins_its_counted_op_and_time_shares_are_over_the_whole_step():
    """On CUDA the profiler names batch norm cudnn_batch_norm while the FLOP counter (on the meta device) counts
    native_batch_norm: batch norm fell out of the layer table, and time_share was over the ops that were left."""
    from cnnbench import roofline

    shapes = [[4, 8, 14, 14]]
    counted = {
        ("aten::native_batch_norm", str(shapes)): {
            "flops": 0,
            "flops_elementwise": 6272,
            "bytes": 25088,
            "calls": 1,
            "modules": ["bn1"],
        },
        ("aten::convolution", str(shapes)): {
            "flops": 1e6,
            "flops_elementwise": 0,
            "bytes": 50000,
            "calls": 1,
            "modules": ["conv1"],
        },
    }
    events = [
        Event(
            key="aten::cudnn_batch_norm",
            input_shapes=shapes,
            count=2,
            device_time_total=200.0,
            self_device_time_total=200.0,
            cpu_time_total=5.0,
            self_cpu_time_total=5.0,
        ),
        Event(
            key="aten::convolution",
            input_shapes=shapes,
            count=2,
            device_time_total=600.0,
            self_device_time_total=600.0,
            cpu_time_total=5.0,
            self_cpu_time_total=5.0,
        ),
        Event(
            key="aten::relu",
            input_shapes=shapes,
            count=2,
            device_time_total=200.0,
            self_device_time_total=200.0,
            cpu_time_total=5.0,
            self_cpu_time_total=5.0,
        ),
    ]
    table = roofline.layer_table(events, counted, 2, MNIST, devices.backend("cuda")).set_index("op")
    assert set(table.index) == {"cudnn_batch_norm", "convolution"}
    assert table.time_share.to_dict() == pytest.approx(
        {"convolution": 0.6, "cudnn_batch_norm": 0.2}
    )  # of 1000 us


def test_07_that_cannot_finish_in_its_cell_is_refused_before_any_work_and_seeds_full_fits():
    """seeds_full.yaml's 07 had ten searches of 600 s each (and the guard's compiles outside the budget) in one
    cell against a 3,600 s timeout: it could not get through."""
    with pytest.raises(
        params.ParamsError, match="cell_timeout_s' 3600 is less than 07's cell takes at least"
    ):
        params.validate(
            {"tune_models": ["resnet18", "resnet50"], "tune_phases": ["train", "eval"], "tune_budget_s": 900},
            check_device=False,
        )
    raw = params.read_yaml(ROOT / "params" / "seeds_full.yaml")
    full = params.validate(
        {k: v for k, v in raw.items() if "data" not in k and k != "dataset"}, check_device=False
    )
    assert params.tuning_cell_s(full) <= full.cell_timeout_s


def test_the_guards_compiles_count_in_the_guards_own_budget():
    from test_tuning import SEARCH, FakeClock

    from cnnbench import knobs
    from cnnbench.knobs import Setting
    from cnnbench.tuning import search

    clock, guarded = FakeClock(), []

    def guard_loss(numerics):  # each guarded configuration compiles for 40 s
        guarded.append(numerics)
        clock.t += 40.0
        return 5.0, 4.0

    hw = devices.Hardware("cuda", "NVIDIA H100", cores=16, capability=(9, 0), triton=True, sms=132)
    p = Params(
        **{
            **SEARCH,
            "tune_compile_modes": ["default", "max-autotune", "reduce-overhead"],
            "tune_guard_budget_s": 100.0,
        }
    )
    sp = knobs.space(hw, Setting(batch_size=128, threads=16), p)
    s = search.Search(
        engine.Config.of("resnet50", "train", 64, 200),
        sp,
        p,
        {},
        lambda c, w: None,
        guard_loss,
        lambda c, n: {},
        lambda row: None,
        clock,
    )
    s.run_guard()
    assert len(guarded) == 3  # the reference, then two more before the 100 s were spent
    out = [v for v in s.verdicts.values() if not v.ok]
    assert out and all("tune_guard_budget_s was spent" in v.reason for v in out)


def test_device_peak_memory_is_the_windows_own_and_the_whole_run_peak_is_a_column_of_its_own(fake_gpu):
    """Peaks were reset before the warm-up, so CUDA's peak included cuDNN's one-off benchmarking workspace."""
    fake_gpu.peaks = [9000.0, 1000.0]  # the warm-up's peak (the workspace), then the measured windows'
    row = engine.measure(MNIST, CPU, Params(warmup_steps=2, measured_steps=2, repeats=1))
    assert row["status"] == "ok", row["error"]
    assert row["peak_device_mem_mib"] == 1000.0 and row["peak_device_mem_run_mib"] == 9000.0
    log = [e for e in fake_gpu.log if e in ("reset_peak", "read_peak")]
    assert log[:4] == ["reset_peak", "read_peak", "reset_peak", "read_peak"]  # reset again after the warm-up


def test_fp16_never_trains_unscaled_where_torch_has_no_grad_scaler(fake_gpu, monkeypatch):
    """On torch 2.2 (below the floor the code needs) torch.amp.GradScaler is missing and fp16 rows trained
    without loss scaling, in silence."""
    monkeypatch.delattr(torch.amp, "GradScaler")
    row = engine.measure(
        MNIST.replace(precision="fp16"), CPU, Params(warmup_steps=1, measured_steps=2, repeats=1)
    )
    assert row["status"] == "unavailable" and "GradScaler" in row["error"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"torch>=2.3' in pyproject  # torch.amp.GradScaler's release


def test_conv_roofs_are_timed_from_a_graph_and_keep_no_output_past_the_next_call(fake_gpu):
    """conv_rates launched one convolution at a time (host-bound on a fast GPU) and kept every output alive."""
    from cnnbench.roofline import peaks

    peaks.conv_rates(devices.backend(CPU), batch=1, channels=4, size=8, repeats=1, min_call_s=0.001)
    assert "batched graph=True" in fake_gpu.log
    alive = []

    def call():
        out = torch.ones(1024)
        alive.append(weakref.ref(out))
        return out

    fake_gpu(CPU).batched(call, 50)()
    assert sum(ref() is not None for ref in alive) <= 1


def test_a_gddr7_card_is_not_labelled_hbm_and_data_centre_parts_are():
    from cnnbench.devices.cuda import main_memory

    assert main_memory("NVIDIA GeForce RTX 5090", (12, 0)) == "dram"  # Blackwell consumer: GDDR7
    assert main_memory("Some Future Data-Centre GPU", (10, 0)) == "hbm"
    assert main_memory("Tesla T4", (7, 5)) == "dram" and main_memory("NVIDIA H100 80GB HBM3", (9, 0)) == "hbm"


def test_the_numba_cuda_sgd_kernel_gets_float32_scalars():
    """lr and momentum reached the SGD kernel as Python floats: FP64 arithmetic on every parameter, every step."""
    code = (
        "import numpy as np\n"
        "from cnnbench.scratch import numba_cuda\n"
        "from cnnbench.scratch.base import torch_weights\n"
        "b = numba_cuda.NumbaCudaBackend('numba_cuda', 'mlp', lr=0.1, momentum=0.9)\n"
        "b.init(torch_weights('mlp', 0))\n"
        "seen = []\n"
        # the launches' arguments recorded, the kernels not run: the simulator runs one Python thread per element
        "b._launch = lambda kernel, n, *args, **k: seen.append((kernel, args))\n"
        "x = np.random.default_rng(0).random((8, 784), dtype=np.float32)\n"
        "b.train_step(x, np.arange(8) % 10)\n"
        "print(sorted({type(a).__name__ for k, args in seen if k is numba_cuda.sgd for a in args[-2:]}))\n"
        "print(sorted({getattr(k, '__name__', type(k).__name__) for k, args in seen}), numba_cuda.SIMULATED)\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT / "lib")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[0] == "['float32']", out.stdout  # the kernels launched, if sgd was not


def test_rocm_main_memory_and_spec_rows_come_from_the_spec_table_only(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "6.2", raising=False)
    rocm = devices.backend("cuda")
    monkeypatch.setattr(type(rocm), "name", lambda self: "AMD Instinct MI300X")
    assert rocm.main_memory == "dram"  # not in the table: no guess from a compute capability
    assert pd.DataFrame(rocm.spec(8)[0]).empty and "no row" in rocm.spec(8)[1]
