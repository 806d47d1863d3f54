"""The real thing: DistributedDataParallel over 2 gloo processes launched by torchrun, against 1 process at the
same global batch."""

import types

import pytest

from cnnbench.scaling import launch as distributed


def test_two_gloo_processes_give_the_single_process_loss_at_the_same_global_batch(tmp_path):
    args = dict(
        model="mnist_cnn",
        image_size=28,
        num_classes=10,
        backend="gloo",
        threads=1,
        warmup=1,
        seed=0,
        telemetry_interval=0.05,
    )
    one = distributed.launch(
        distributed.command(1, tmp_path / "one", (8,), batch_size=4, steps=2, repeats=1, **args),
        tmp_path / "one",
    )
    two = distributed.launch(
        distributed.command(2, tmp_path / "two", batch_size=4, steps=2, repeats=2, **args), tmp_path / "two"
    )
    assert two["world_size"] == 2 and two["backend"] == "gloo" and two["global_batch"] == 8
    assert len(two["ranks"]) == 2 and {r["rank"] for r in two["ranks"]} == {0, 1}
    assert two["throughput_img_s"] > 0 and len(two["window_times_s"]) == 2
    assert len(two["check_losses"]) == 3
    assert two["check_losses"] == pytest.approx(one["reference_losses"]["8"], rel=1e-4)
    assert one["check_losses"] != pytest.approx(two["check_losses"], rel=1e-4)  # a different global batch


def test_a_failing_launch_says_why_in_one_line(tmp_path, monkeypatch):
    stderr = (
        "[rank0]: Traceback (most recent call last):\n[rank0]:   File x\n"
        "[rank0]: ValueError: unknown model 'nonet'; valid models: a, b\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    )
    monkeypatch.setattr(
        distributed.subprocess,
        "run",
        lambda *a, **k: types.SimpleNamespace(returncode=1, stdout="", stderr=stderr),
    )
    cmd = distributed.command(
        1,
        tmp_path,
        model="nonet",
        batch_size=4,
        image_size=28,
        num_classes=10,
        backend="gloo",
        threads=1,
        steps=1,
        warmup=0,
        repeats=0,
        seed=0,
        telemetry_interval=0.1,
    )
    with pytest.raises(distributed.LaunchFailed) as err:
        distributed.launch(cmd, tmp_path)
    assert str(err.value) == "ValueError: unknown model 'nonet'; valid models: a, b"


def test_ddp_on_cuda_trains_the_single_device_model_without_syncbatchnorm(monkeypatch):
    """Issue 19: transfer/ddp.py wrapped the model in SyncBatchNorm on CUDA (not on CPU, and not in the
    single-process reference): world size 2 paid an all-reduce per BN layer that world size 1 did not."""
    import types

    import torch
    from torch import nn

    from cnnbench.scaling import ddp

    converted, wrapped = [], []
    monkeypatch.setattr(
        nn.SyncBatchNorm, "convert_sync_batchnorm", lambda net, *a: converted.append(net) or net
    )
    monkeypatch.setattr(nn.Module, "to", lambda self, *a, **k: self)
    monkeypatch.setattr(ddp, "DistributedDataParallel", lambda net, **k: wrapped.append(net) or net)
    monkeypatch.setattr(ddp, "global_batches", lambda *a: [])
    args = types.SimpleNamespace(seed=0, model="resnet18", num_classes=10, image_size=32, lr=0.01)
    ddp.setup(args, 0, 2, torch.device("cuda", 0), 8)
    assert converted == [] and not any(isinstance(m, nn.SyncBatchNorm) for m in wrapped[0].modules())


def test_a_rank_imports_no_plotting():
    """Every torchrun rank imports cnnbench.scaling for its script: the package imported 06's launcher and plots
    with it (matplotlib, seaborn, the seeds' tables), 1.5 of a rank's 2.9 s of imports before its first step."""
    import subprocess
    import sys

    code = "import sys, cnnbench.scaling.ddp; print(sorted({'matplotlib', 'seaborn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
