import json
from types import SimpleNamespace

import pytest
import torch

from cnnbench import devices, envinfo


def test_auto_prefers_cuda_then_mps_then_cpu():
    device = devices.resolve("auto")
    assert device.type == devices.available()[0]
    assert devices.available()[-1] == "cpu"


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cpu:0:1", ""])
def test_unknown_device_spec(spec):
    with pytest.raises(devices.DeviceError, match="unknown device"):
        devices.resolve(spec)


def test_cpu_threads_are_set_and_reported():
    before = torch.get_num_threads()
    try:
        assert devices.set_threads(1) == 1
        assert devices.set_threads(0) == devices.physical_cores()
    finally:
        torch.set_num_threads(before)


def test_synchronize_and_memory_on_cpu():
    cpu = devices.backend("cpu")
    cpu.synchronize()
    assert set(cpu.peak_memory_mib()) == {"peak_device_mem_mib", "peak_device_reserved_mib"}


def test_oom_detection():
    for kind in ("cpu", "cuda", "mps"):
        b = devices.backend(kind)
        assert b.is_oom(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")) and b.is_oom(
            MemoryError()
        )
        assert not b.is_oom(RuntimeError("shape mismatch"))
    capture = RuntimeError("operation failed due to a previous error during capture")
    assert devices.backend("cuda").is_oom(capture) and not devices.backend("cpu").is_oom(capture)


def test_each_device_kind_is_one_backend_and_rocm_is_not_run_under_nvidias_rules(monkeypatch):
    """ROCm's torch calls its GPUs "cuda": recognised by torch.version.hip, it is a kind of its own (no TF32, no
    NVML telemetry or energy), not NVIDIA's."""
    from cnnbench.devices.base import Hardware

    assert [type(devices.backend(k)).kind for k in ("cpu", "cuda", "mps")] == ["cpu", "cuda", "mps"]
    monkeypatch.setattr(torch.version, "hip", "6.2", raising=False)
    rocm = devices.backend("cuda")
    assert rocm.kind == "rocm" and rocm.gpus() == (None, [], None)
    assert "ROCm" in rocm.energy_counter().note
    hw = Hardware(kind="rocm", name="AMD Instinct MI300X", cores=64, capability=(9, 4), triton=True, sms=304)
    assert "ROCm has none" in devices.backend_class("rocm").lacks("precision", "tf32", hw)
    assert devices.backend_class("rocm").lacks("precision", "bf16", hw) == ""


def test_environment_capture_has_what_the_report_needs():
    env = envinfo.capture(torch.device("cpu"), {"batch_size": 8})
    for key in (
        "os",
        "python",
        "torch",
        "torchvision",
        "cuda_runtime",
        "cudnn",
        "device_kind",
        "device_name",
        "cpu_model",
        "cpu_physical_cores",
        "cpu_logical_cores",
        "torch_threads",
        "ram_gb",
        "mps_available",
        "git_commit",
        "schema_version",
    ):
        assert key in env, key
    assert (
        env["device_kind"] == "cpu"
        and env["ram_gb"] > 0
        and env["cpu_logical_cores"] >= env["cpu_physical_cores"]
    )
    assert env["params"] == {"batch_size": 8}
    json.dumps(env)  # serialisable as environment.json
    assert "params" not in envinfo.table(env).index


def test_git_dirty_ignores_regenerated_outputs(tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "wb"
    for folder in ("params", "notebooks", "outputs/run"):
        (repo / folder).mkdir(parents=True)
    (repo / "code.py").write_text("x = 1\n")
    (repo / "outputs" / "run" / "r.csv").write_text("a\n1\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=repo, check=True)
    monkeypatch.setenv("CNNBENCH_ROOT", str(repo))
    (repo / "outputs" / "run" / "r.csv").write_text("a\n2\n")
    assert envinfo.git_commit()["git_dirty"] is False
    (repo / "code.py").write_text("x = 2\n")
    assert envinfo.git_commit()["git_dirty"] is True


# --- every setting a knob applies is restored after it (issue 28) --------------------------------------------------


def _precisions():
    return torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision


@pytest.fixture
def tf32_flags():
    """torch's TF32 flags as they were, restored after the test (new API; the legacy flags follow them)."""
    before = _precisions()
    yield
    torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = before


@pytest.mark.parametrize("precision, inside", [("fp32", ("ieee", "ieee")), ("tf32", ("tf32", "tf32"))])
def test_cuda_math_sets_tf32_through_fp32_precision_and_restores_it(tf32_flags, precision, inside):
    """torch 2.9+: fp32_precision only. Mixed with the legacy allow_tf32 flags torch raises (a conv flag set by
    the new API, then allow_tf32 read: the old math() did exactly that on torch 2.14)."""
    torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = "tf32", "tf32"
    torch.backends.cudnn.conv.fp32_precision = "ieee"  # cuDNN's default changed by someone, the new way
    with devices.backend("cuda").math(precision):
        assert _precisions() == inside
    assert _precisions() == ("tf32", "ieee")
    with devices.backend("cpu").math("fp32"):
        assert _precisions() == ("tf32", "ieee")  # other devices untouched


@pytest.mark.parametrize("precision, inside", [("fp32", (False, False)), ("tf32", (True, True))])
def test_cuda_math_uses_the_legacy_flags_where_torch_has_no_fp32_precision(monkeypatch, precision, inside):
    flags = SimpleNamespace(allow_tf32=True)
    backends = SimpleNamespace(cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=True)), cudnn=flags)
    monkeypatch.setattr(torch, "backends", backends)
    with devices.backend("cuda").math(precision):
        assert (backends.cuda.matmul.allow_tf32, flags.allow_tf32) == inside
    assert (backends.cuda.matmul.allow_tf32, flags.allow_tf32) == (True, True)


@pytest.mark.parametrize("setting", [True, False])
def test_cuda_autotune_sets_cudnn_benchmark_for_the_block_and_restores_it(setting):
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = not setting
    try:
        with devices.backend("cuda").autotune(setting):
            assert torch.backends.cudnn.benchmark is setting
        assert torch.backends.cudnn.benchmark is (not setting)
        with devices.backend("cpu").autotune(setting):
            assert torch.backends.cudnn.benchmark is (not setting)
    finally:
        torch.backends.cudnn.benchmark = before


def test_every_fp32_experiment_runs_its_steps_with_tf32_off(monkeypatch, tmp_path):
    """scratch (05), fine-tuning and DDP (06) left cuDNN's TF32 at its default (on): on an A100/H100 their "fp32"
    rows were TF32. Each enters its device's fp32 math around its steps."""
    import types

    from fakes import FakeGPU, using

    from cnnbench import scaling as launch
    from cnnbench import transfer as finetuning
    from cnnbench.measure import engine
    from cnnbench.params import Params
    from cnnbench.results import files
    from cnnbench.scaling import ddp
    from cnnbench.scratch import experiment

    every = FakeGPU.fresh(claims=classmethod(lambda cls, device: True))  # cpu and cuda alike
    monkeypatch.setattr(
        files, "host_id", lambda: "this machine"
    )  # read with the real cpu backend, not the fake
    with using(every):
        monkeypatch.setattr(experiment, "_run_all", lambda *a: every.log.append("scratch steps") or {})
        experiment.run_all(types.SimpleNamespace(), data=object())
        monkeypatch.setattr(ddp, "_run", lambda *a, **k: every.log.append("ddp steps") or {})
        monkeypatch.setattr(ddp.dist, "init_process_group", lambda *a, **k: None)
        monkeypatch.setattr(ddp.dist, "destroy_process_group", lambda: None)
        cfg = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=2)
        ddp.main(
            [
                launch.command(1, ddp.job(Params(scaling_steps=1, scaling_repeats=1), cfg, "gloo", tmp_path))[
                    -1
                ]
            ]
        )
        monkeypatch.setattr(finetuning, "datasets", lambda p: (range(10), range(4), 10))
        monkeypatch.setattr(finetuning, "check_weights", lambda *a: "")
        epoch = (1.0, 8, 0.5)  # seconds, images, loss: the epoch's rows are written, the steps end normally
        monkeypatch.setattr(
            finetuning, "train_epoch", lambda *a: every.log.append("fine-tuning steps") or epoch
        )
        monkeypatch.setattr(finetuning, "evaluate", lambda *a: (1.0, 0.5))
        monkeypatch.setattr(torch.optim.swa_utils, "update_bn", lambda *a, **k: None)
        run = types.SimpleNamespace(
            params=Params(
                transfer_devices=["cpu"],
                transfer_batch_sizes=[8],
                transfer_lrs=[0.01],
                transfer_model="squeezenet1_1",
                transfer_epochs=1,
                pretrained=False,
                workers=0,
            ),
            device=torch.device("cpu"),
            dir=tmp_path,
            path=lambda n: tmp_path / n,
        )
        finetuning.run_grid(run, log=lambda *a: None)
    steps = [e for e in every.log if e.startswith(("math", "scratch", "ddp", "fine"))]
    assert steps == [
        "math fp32",
        "scratch steps",
        "math fp32 restored",
        "math fp32",
        "ddp steps",
        "math fp32 restored",
        "math fp32",
        "fine-tuning steps",
        "math fp32 restored",
    ]


def test_a_measurement_applies_every_knob_around_its_steps_records_it_and_restores_it(fake_gpu):
    """cudnn_benchmark and the precision's math are applied around the measured steps (as the configuration says)
    and undone after, so a notebook kernel's later rows never run under settings they do not record."""
    from cnnbench.measure import engine
    from cnnbench.params import Params

    cfg = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=4, cudnn_benchmark=False, workers=0)
    row = engine.measure(
        cfg,
        torch.device("cpu"),
        Params(warmup_steps=1, measured_steps=2, repeats=1, telemetry_interval_s=0.05),
    )
    assert row["status"] == "ok", row["error"]
    assert row["cudnn_benchmark"] is False and row["device_kind"] == "cuda"
    applied = [e for e in fake_gpu.log if e.startswith(("math", "autotune"))]
    assert applied == ["math fp32", "autotune False", "autotune False restored", "math fp32 restored"]


class _HostTensor:
    """A host batch that records how it was copied (no device needed)."""

    def __init__(self, pinned):
        self.pinned, self.copies = pinned, []

    def is_pinned(self):
        return self.pinned

    def to(self, device, non_blocking=False):
        self.copies.append((str(device), non_blocking))
        return self

    def contiguous(self, memory_format=None):
        return self


@pytest.mark.parametrize(
    "kind, pinned, expected",
    [
        ("cuda", True, True),
        ("cuda", False, False),
        ("mps", True, False),
        ("mps", False, False),
        ("cpu", False, False),
    ],
)
def test_host_batches_copy_non_blocking_only_to_cuda_from_pinned_memory(kind, pinned, expected):
    """An asynchronous copy from unpinned memory freed at once can let MPS read released memory; only a
    pinned host tensor going to CUDA is copied non-blocking, in the engine and in the fine-tuning loop."""
    import types
    from unittest import mock

    from cnnbench import transfer as finetuning
    from cnnbench.measure import engine

    b = devices.backend(kind)
    x, y = _HostTensor(pinned), _HostTensor(pinned)
    b.to_device(x)
    assert x.copies == [(kind, expected)]
    x, y = _HostTensor(pinned), _HostTensor(pinned)
    engine.Workload.to_device(
        types.SimpleNamespace(backend=b, cfg=types.SimpleNamespace(memory_format="nchw")), x, y
    )
    assert x.copies == y.copies == [(kind, expected)]

    x, y = _HostTensor(pinned), _HostTensor(pinned)
    work = types.SimpleNamespace(
        backend=b, device=torch.device(kind), cfg=types.SimpleNamespace(memory_format="nchw")
    )
    work.to_device = lambda *xy: engine.Workload.to_device(work, *xy)
    work.model, work.train_step = _StopNet(), lambda batch: _StopNet()(batch[0])
    with (
        mock.patch.object(type(b), "synchronize", lambda self: None),
        mock.patch.object(torch, "zeros", lambda *a, **k: torch.tensor(0.0)),
        pytest.raises(_Stop),
    ):
        finetuning.train_epoch(work, [(x, y)])
    assert x.copies == y.copies == [(kind, expected)]


class _Stop(Exception):
    pass


class _StopNet:
    def train(self):
        pass

    def __call__(self, x):
        raise _Stop


def test_mps_memory_columns_are_named_for_what_they_hold_and_never_called_a_peak(monkeypatch):
    """MPS has no high-water mark: the allocation after the window, the largest 0.1 s sample and the driver's
    allocation go to columns named for them; peak_device_mem_mib / peak_device_reserved_mib (CUDA's true peaks,
    which 08 compares) stay empty on MPS."""
    import math

    from cnnbench.measure import engine

    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: 30 * 2**20, raising=False)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 90 * 2**20, raising=False)
    mps = devices.backend("mps")
    mem = mps.peak_memory_mib()
    assert math.isnan(mem["peak_device_mem_mib"]) and math.isnan(mem["peak_device_reserved_mib"])
    assert mem["mps_allocated_after_window_mib"] == 30 and mem["mps_driver_allocated_mib"] == 90
    out = engine._memory(mps, {"mps_mem_max_mib": 55.0}, {})
    assert math.isnan(out["peak_device_mem_mib"]) and out["mps_allocated_max_sampled_mib"] == 55.0
