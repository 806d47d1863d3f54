"""The widget explorer (live and static) and seed 000's epoch mode."""

import pandas as pd

import cnnbench
from cnnbench import interactive, scenarios
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


def test_explorer_is_static_under_papermill(tmp_path, monkeypatch):
    monkeypatch.setenv("CNNBENCH_HEADLESS", "1")
    run = cnnbench.open_run(SMOKE, {}, tmp_path / "run")
    assert interactive.explorer(run) is None
    explored = pd.read_csv(tmp_path / "run" / "explore.csv")
    assert explored.model.tolist() == [run.params.models[0]]


def test_epoch_mode_times_train_and_validation_epochs(tmp_path):
    run = cnnbench.open_run(SMOKE, {"epoch_mode": True, "max_batches": 2, "models": ["mnist_cnn"]}, tmp_path / "run")
    first = scenarios.epochs(run)
    row = first.iloc[0]
    assert row.status == "ok" and row.train_images == 2 * 16 and row.val_images == 2 * 16
    assert row.train_epoch_s > 0 and row.train_throughput_img_s == row.train_images / row.train_epoch_s
    assert scenarios.epochs(run).train_epoch_s.tolist() == first.train_epoch_s.tolist()  # resumed, not redone


def test_epochs_rerun_with_another_image_cap_measures_new_rows(tmp_path):
    overrides = {"epoch_mode": True, "max_batches": 0, "models": ["mnist_cnn"], "epoch_images": 32}
    first = scenarios.epochs(cnnbench.open_run(SMOKE, overrides, tmp_path / "run"))
    assert first.train_images.tolist() == [32]
    again = scenarios.epochs(cnnbench.open_run(SMOKE, {**overrides, "epoch_images": 48}, tmp_path / "run"))
    assert again.train_images.tolist() == [48]  # the new cap is measured, not the old row reused
    assert len(pd.read_csv(tmp_path / "run" / "epochs.csv")) == 2  # both kept, each with its own key
