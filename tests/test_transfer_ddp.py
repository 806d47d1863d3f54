"""The real thing: DistributedDataParallel over 2 gloo processes launched by torchrun, against 1 process at the
same global batch."""

import types

import pytest

from cnnbench import scaling as distributed


def _job(out, batch_size=4, model="mnist_cnn", steps=1, repeats=1, reference_batches=()):
    from cnnbench.measure.engine import Config
    from cnnbench.params import Params
    from cnnbench.scaling import ddp

    p = Params(
        seed=0, warmup_steps=1, telemetry_interval_s=0.05, scaling_steps=steps, scaling_repeats=repeats
    )
    cfg = Config.of(model, "train", 28, 10, 1, batch_size=batch_size, threads=1)
    return ddp.job(p, cfg, "gloo", out, reference_batches)


def test_two_gloo_processes_give_the_single_process_loss_at_the_same_global_batch(tmp_path):
    one = distributed.launch(
        distributed.command(1, _job(tmp_path / "one", steps=2, repeats=1, reference_batches=(8,))),
        tmp_path / "one",
    )
    two = distributed.launch(
        distributed.command(2, _job(tmp_path / "two", steps=2, repeats=2)), tmp_path / "two"
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
    cmd = distributed.command(1, _job(tmp_path, model="nonet"))
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
    monkeypatch.setattr(ddp, "DistributedDataParallel", lambda net, **k: wrapped.append(net) or net)
    monkeypatch.setattr(ddp, "global_batches", lambda *a: [])
    work = types.SimpleNamespace(
        device=torch.device("cuda", 0),
        cfg=None,
        model=nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)),
        backend=types.SimpleNamespace(ddp_device_ids=lambda: [0]),
    )
    monkeypatch.setattr(ddp, "CHECK_STEPS", 0)
    ddp._run({}, types.SimpleNamespace(), work, 0, 2, 8, check_only=True)
    assert converted == [] and not any(isinstance(m, nn.SyncBatchNorm) for m in wrapped[0].modules())


def test_a_rank_imports_no_plotting():
    """Every torchrun rank imports cnnbench.scaling for its script: the package imported 06's launcher and plots
    with it (matplotlib, seaborn, the seeds' tables), 1.5 of a rank's 2.9 s of imports before its first step."""
    import subprocess
    import sys

    code = "import sys, cnnbench.scaling.ddp; print(sorted({'matplotlib', 'seaborn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
