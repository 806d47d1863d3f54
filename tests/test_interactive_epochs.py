"""The widget explorer (live and static) and seed 000's epoch mode."""

import os
import types

import pandas as pd
import pytest
import torch

import cnnbench
from cnnbench import interactive, scenarios
from cnnbench.measure import epochs
from conftest import ROOT

SMOKE = ROOT / "params" / "smoke.yaml"


def test_explorer_measures_on_click(tmp_path, monkeypatch):
    monkeypatch.delenv("CNNBENCH_HEADLESS", raising=False)
    run = cnnbench.open_run(SMOKE, {}, tmp_path / "run")
    controls = interactive.explorer(run)
    controls["model"].value, controls["batch_size"].value = "mnist_cnn", 8
    controls["measure"].click()
    (row,) = controls["history"]
    assert row["status"] == "ok" and row["batch_size"] == 8 and row["throughput_img_s"] > 0
    assert len(pd.read_csv(tmp_path / "run" / "explore.csv")) == 1


def test_an_error_after_a_click_is_shown_and_the_button_comes_back(tmp_path, monkeypatch):
    # Run from the kernel's event loop (a click over a subshell), an exception went to asyncio's log on the
    # kernel's stderr: nothing in the notebook, and a label that still said "waiting".
    monkeypatch.delenv("CNNBENCH_HEADLESS", raising=False)
    run = cnnbench.open_run(SMOKE, {}, tmp_path / "run")
    controls = interactive.explorer(run)

    def broken(*args, **kwargs):
        raise OSError("explore.csv: disk full")

    monkeypatch.setattr(interactive, "quick_measure", broken)
    controls["measure"].click()
    assert controls["status"].value == "failed: OSError: explore.csv: disk full"
    assert not controls["measure"].disabled and controls["history"] == []
    shown = "".join(o.get("text", "") for o in controls["output"].outputs)
    assert "OSError: explore.csv: disk full" in shown and "Traceback" in shown


def test_explorer_is_static_under_papermill(tmp_path, monkeypatch):
    monkeypatch.setenv("CNNBENCH_HEADLESS", "1")
    run = cnnbench.open_run(SMOKE, {}, tmp_path / "run")
    assert interactive.explorer(run) is None
    explored = pd.read_csv(tmp_path / "run" / "explore.csv")
    assert explored.model.tolist() == [run.params.models[0]]


def test_epoch_mode_times_train_and_validation_epochs(tmp_path, capsys):
    run = cnnbench.open_run(
        SMOKE, {"epoch_mode": True, "max_batches": 2, "models": ["mnist_cnn"]}, tmp_path / "run"
    )
    first = scenarios.epochs(run)
    assert "kept 0 of 1 models' epochs from epochs.csv; measured 1" in capsys.readouterr().out
    row = first.iloc[0]
    assert row.status == "ok" and row.train_images == 2 * 16 and row.val_images == 2 * 16
    assert row.train_epoch_s > 0 and row.train_throughput_img_s == row.train_images / row.train_epoch_s
    for split in ("train", "val"):  # the start-up costs inside the epoch time, measured apart
        assert 0 < row[f"{split}_loader_start_s"] + row[f"{split}_first_step_s"] <= row[f"{split}_epoch_s"]
    assert scenarios.epochs(run).train_epoch_s.tolist() == first.train_epoch_s.tolist()  # resumed, not redone
    assert "kept 1 of 1 models' epochs from epochs.csv; measured 0" in capsys.readouterr().out


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def test_epochs_run_in_a_fresh_worker_with_their_own_memory_peak(tmp_path):
    # issue 17: mnist_cnn's epochs reported 2,595.7 MiB peak RSS (504.3 isolated): the larger models measured
    # before it in the same process. 512 MiB held here must not show in the epochs' peak.
    ballast = bytearray(512 * 2**20)
    ballast[::4096] = b"\1" * len(ballast[::4096])
    here = _rss_mib()
    run = cnnbench.open_run(
        SMOKE, {"epoch_mode": True, "max_batches": 2, "models": ["mnist_cnn"]}, tmp_path / "run"
    )
    assert run.params.isolate
    row = scenarios.epochs(run).iloc[0]
    assert row.status == "ok" and row.train_images == 32
    assert 0 < row.peak_rss_mib < here - 256, (row.peak_rss_mib, here)
    assert row.isolation == "worker"
    del ballast
    inline = cnnbench.open_run(
        SMOKE,
        {"epoch_mode": True, "max_batches": 2, "models": ["mnist_cnn"], "isolate": False},
        tmp_path / "inline",
    )
    assert scenarios.epochs(inline).iloc[0].isolation == "in_process"


def test_a_worker_that_dies_or_raises_is_a_row():
    from cnnbench.measure import worker

    crashed = worker.call_isolated(os._exit, 3, device=torch.device("cpu"))
    assert crashed == {
        "isolation": "worker",
        "status": "crashed",
        "error": "worker process exited with code 3 before returning a result",
    }
    failed = worker.call_isolated(int, "x", device=torch.device("cpu"))
    assert failed["status"] == "error" and "ValueError" in failed["error"]
    assert worker.call_isolated(dict, {"a": 1}, device=torch.device("cpu")) == {"a": 1, "isolation": "worker"}


def _start_method() -> dict:
    import multiprocessing

    return {"start_method": multiprocessing.get_start_method()}


def test_a_worker_starts_processes_as_its_caller_does():
    # 02's epochs timed each DataLoader's start-up at 2 s in a worker, 0.06 s in the caller: the worker had
    # inherited the forkserver method of the harness, so each loader started a server of its own (a fresh Python
    # importing torch) before its first batch, a cost no user's script pays
    import multiprocessing

    from cnnbench.measure import worker

    row = worker.call_isolated(_start_method, device=torch.device("cpu"))
    assert row["start_method"] == multiprocessing.get_start_method()


def test_epochs_rerun_with_another_image_cap_measures_new_rows(tmp_path):
    overrides = {"epoch_mode": True, "max_batches": 0, "models": ["mnist_cnn"], "epoch_images": 32}
    first = scenarios.epochs(cnnbench.open_run(SMOKE, overrides, tmp_path / "run"))
    assert first.train_images.tolist() == [32]
    again = scenarios.epochs(cnnbench.open_run(SMOKE, {**overrides, "epoch_images": 48}, tmp_path / "run"))
    assert again.train_images.tolist() == [48]  # the new cap is measured, not the old row reused
    assert len(pd.read_csv(tmp_path / "run" / "epochs.csv")) == 2  # both kept, each with its own key


class FakeLoader:
    """A DataLoader on a fake clock: starting it (workers) takes 2 s, each batch then waits 0.5 s."""

    def __init__(self, now, batches):
        self.now, self.batches = now, batches

    def __iter__(self):
        self.now[0] += 2.0
        for _ in range(self.batches):
            self.now[0] += 0.5
            yield torch.zeros(4, 1), torch.zeros(4)


def test_epoch_time_keeps_the_start_up_inside_and_measures_it_apart():
    now, synced = [0.0], []
    steps = iter([1.0, 0.1, 0.1])  # the first step is slow (allocation, kernel selection), the rest fast
    work = types.SimpleNamespace(
        backend=types.SimpleNamespace(synchronize=lambda: synced.append(None)),
        to_device=lambda x, y: (x, y),
        train_step=lambda batch: now.__setitem__(0, now[0] + next(steps)),
    )
    out = epochs._epoch(work, FakeLoader(now, 3), "train", 0, clock=lambda: now[0])
    assert out["images"] == 12
    assert out["loader_start_s"] == pytest.approx(2.5)  # iter(loader) and the first batch
    assert out["first_step_s"] == pytest.approx(1.0)
    assert out["epoch_s"] == pytest.approx(2.5 + 1.0 + 2 * (0.5 + 0.1))  # seed 000's semantics: all of it
    assert len(synced) == 3  # before the clock starts, after the first step, at the end
