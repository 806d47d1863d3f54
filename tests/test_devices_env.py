import json

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
    cpu = torch.device("cpu")
    devices.synchronize(cpu)
    mem = devices.peak_memory_mib(cpu)
    assert set(mem) == {"peak_device_mem_mib", "peak_device_reserved_mib"}


def test_oom_detection():
    assert devices.is_oom(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert devices.is_oom(MemoryError())
    assert not devices.is_oom(RuntimeError("shape mismatch"))


def test_environment_capture_has_what_the_report_needs():
    env = envinfo.capture(torch.device("cpu"), {"batch_size": 8})
    for key in ("os", "python", "torch", "torchvision", "cuda_runtime", "cudnn", "device_kind", "device_name",
                "cpu_model", "cpu_physical_cores", "cpu_logical_cores", "torch_threads", "ram_gb", "mps_available",
                "git_commit", "schema_version"):
        assert key in env, key
    assert env["device_kind"] == "cpu" and env["ram_gb"] > 0 and env["cpu_logical_cores"] >= env["cpu_physical_cores"]
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


# --- one helper for the math of a precision (issue 18's helpers once; issue 19's TF32) ---------------------------

def _tf32():
    import torch

    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("precision, inside", [("fp32", (False, False)), ("tf32", (True, True))])
def test_math_precision_sets_tf32_for_the_block_and_restores_it(precision, inside):
    import torch

    from cnnbench import devices

    before = _tf32()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # cuDNN's default: on
    try:
        with devices.math_precision(torch.device("cuda"), precision):
            assert _tf32() == inside
        assert _tf32() == (True, True)
        with devices.math_precision(torch.device("cpu"), "fp32"):
            assert _tf32() == (True, True)  # other devices untouched
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_every_fp32_experiment_runs_its_steps_with_tf32_off(monkeypatch, tmp_path):
    """scratch (05), fine-tuning and DDP (06) left cuDNN's TF32 at its default (on): on an A100/H100 their "fp32"
    rows were TF32. Each now enters devices.math_precision(..., "fp32") around its steps."""
    import types

    import torch

    from cnnbench import devices
    from cnnbench.scaling import ddp
    from cnnbench.scratch import experiment
    from cnnbench.transfer import finetuning

    seen = []

    class Spy(devices.math_precision):
        def __enter__(self):
            seen.append((self.device.type, self.precision))
            return super().__enter__()

    monkeypatch.setattr(devices, "math_precision", Spy)
    monkeypatch.setattr(experiment, "_run_all", lambda *a: {})
    experiment.run_all(types.SimpleNamespace(), data=object())
    monkeypatch.setattr(ddp, "train", lambda *a: seen.append("ddp steps") or {})
    monkeypatch.setattr(ddp.dist, "init_process_group", lambda *a, **k: None)
    monkeypatch.setattr(ddp.dist, "destroy_process_group", lambda: None)
    ddp.main(["--out", str(tmp_path), "--backend", "gloo"])
    monkeypatch.setattr(finetuning, "datasets", lambda p: (None, None, 10))
    monkeypatch.setattr(finetuning, "check_weights", lambda *a: "")
    monkeypatch.setattr(finetuning, "fit", lambda *a, **k: seen.append("fine-tuning steps"))
    from cnnbench.params import Params

    run = types.SimpleNamespace(params=Params(transfer_devices=["cpu"], transfer_batch_sizes=[8], transfer_lrs=[0.01]),
                                device=torch.device("cpu"), dir=tmp_path, path=lambda n: tmp_path / n)
    finetuning.run_grid(run, log=lambda *a: None)
    assert seen == [("cuda", "fp32"), ("cpu", "fp32"), "ddp steps", ("cpu", "fp32"), "fine-tuning steps"]


@pytest.mark.parametrize("setting", [True, False])
def test_math_precision_sets_cudnn_benchmark_on_cuda_for_the_block_and_restores_it(setting):
    """cuDNN's autotuner (torch.backends.cudnn.benchmark) is set around a CUDA step and restored after; left
    alone where no setting is given and on other devices."""
    import torch

    from cnnbench import devices

    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = not setting
    try:
        with devices.math_precision(torch.device("cuda"), "fp32", cudnn_benchmark=setting):
            assert torch.backends.cudnn.benchmark is setting
        assert torch.backends.cudnn.benchmark is (not setting)
        with devices.math_precision(torch.device("cpu"), "fp32", cudnn_benchmark=setting):
            assert torch.backends.cudnn.benchmark is (not setting)
        with devices.math_precision(torch.device("cuda"), "fp32"):
            assert torch.backends.cudnn.benchmark is (not setting)
    finally:
        torch.backends.cudnn.benchmark = before


def test_engine_rows_record_cudnn_benchmark_and_the_step_runs_under_it(monkeypatch):
    """The measured step runs with cudnn.benchmark as the protocol says (default on, for fixed-shape steps),
    and the row records the setting."""
    import torch

    from cnnbench import devices
    from cnnbench.measure import engine

    assert engine.Protocol().cudnn_benchmark is True
    seen = []

    class Spy(devices.math_precision):
        def __init__(self, device, precision, cudnn_benchmark=None):
            seen.append(cudnn_benchmark)
            super().__init__(device, precision, cudnn_benchmark)

    monkeypatch.setattr(devices, "math_precision", Spy)
    cfg = engine.Config("mnist_cnn", "train", 4, 28, 10, in_channels=1)
    proto = engine.Protocol(warmup_steps=1, measured_steps=2, repeats=1, cudnn_benchmark=False,
                            telemetry_interval_s=0.05)
    row = engine.measure(cfg, torch.device("cpu"), proto)
    assert row["status"] == "ok", row["error"]
    assert row["cudnn_benchmark"] is False and seen and set(seen) == {False}


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


@pytest.mark.parametrize("kind, pinned, expected", [("cuda", True, True), ("cuda", False, False),
                                                    ("mps", True, False), ("mps", False, False),
                                                    ("cpu", False, False)])
def test_host_batches_copy_non_blocking_only_to_cuda_from_pinned_memory(kind, pinned, expected):
    """An asynchronous copy from unpinned memory freed at once can let MPS read released memory; only a
    pinned host tensor going to CUDA is copied non-blocking, in the engine and in the fine-tuning loop."""
    import types
    from unittest import mock

    import torch

    from cnnbench import devices
    from cnnbench.measure import engine
    from cnnbench.transfer import finetuning

    device = torch.device(kind)
    x, y = _HostTensor(pinned), _HostTensor(pinned)
    devices.to_device(x, device)
    assert x.copies == [(kind, expected)]
    x, y = _HostTensor(pinned), _HostTensor(pinned)
    engine.Workload.to_device(types.SimpleNamespace(device=device, channels_last=False), x, y)
    assert x.copies == y.copies == [(kind, expected)]

    x, y = _HostTensor(pinned), _HostTensor(pinned)
    with mock.patch.object(devices, "synchronize", lambda d: None), \
            mock.patch.object(torch, "zeros", lambda *a, **k: torch.tensor(0.0)), pytest.raises(_Stop):
        finetuning.train_epoch(_StopNet(), types.SimpleNamespace(zero_grad=lambda **k: None), None, [(x, y)], device)
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
    import types

    import torch

    from cnnbench import devices
    from cnnbench.measure import engine

    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: 30 * 2**20, raising=False)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 90 * 2**20, raising=False)
    mem = devices.peak_memory_mib(torch.device("mps"))
    assert math.isnan(mem["peak_device_mem_mib"]) and math.isnan(mem["peak_device_reserved_mib"])
    assert mem["mps_allocated_after_window_mib"] == 30 and mem["mps_driver_allocated_mib"] == 90
    out = engine._memory(torch.device("mps"), types.SimpleNamespace(), {"mps_mem_max_mib": 55.0})
    assert math.isnan(out["peak_device_mem_mib"]) and out["mps_allocated_max_sampled_mib"] == 55.0
