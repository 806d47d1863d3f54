"""Behaviour that issue 43's cuts changed without a test first, pinned: each failed on the code before the change."""

import shutil
import sys

import pandas as pd
import pytest
from test_data import make_tiny_imagenet

from cnnbench import data, roofline
from conftest import ROOT


def test_a_tiny_imagenet_class_with_no_training_image_is_refused_in_one_line(tmp_path):
    root = make_tiny_imagenet(tmp_path / "tiny-imagenet-200")
    for image in (root / "train" / "n01629819" / "images").glob("*.JPEG"):
        image.unlink()
    with pytest.raises(
        data.DataError, match=r"train/n01629819/images/ in '.*' is missing or holds no \.JPEG"
    ):
        data.TinyImageNet(root, "train")


def test_a_tiny_imagenet_val_label_outside_wnids_is_refused_in_one_line(tmp_path):
    root = make_tiny_imagenet(tmp_path / "tiny-imagenet-200")
    annotations = root / "val" / "val_annotations.txt"
    annotations.write_text(annotations.read_text() + "val_0.JPEG\tn99999999\t0\t0\t8\t8\n")
    with pytest.raises(
        data.DataError, match=r"val_annotations.txt' line 5: class 'n99999999' is not in wnids.txt"
    ):
        data.TinyImageNet(root, "val")


def test_a_point_above_the_roof_of_a_peaks_table_without_levels_is_placed_against_dram():
    peaks = pd.DataFrame(
        [
            {
                "device_name": "cpu0",
                "precision": "fp32",
                "kind": "measured",
                "peak_gflops": 100.0,
                "bandwidth_gbs": 10.0,
            }
        ]
    )
    config = {"model": "m", "phase": "train", "batch_size": 8, "image_size": 32, "precision": "fp32"}
    measured = pd.DataFrame(
        [
            {
                **config,
                "status": "ok",
                "device_name": "cpu0",
                "device_kind": "cpu",
                "memory_format": "nchw",
                "achieved_gflops": 50.0,
            }
        ]
    )
    intensity = pd.DataFrame(
        [{**config, "intensity_flop_per_byte": 1.0, "gbytes": float("nan")}]
    )  # no level known
    (point,) = roofline.place(measured, intensity, peaks, "scenario_a").to_dict("records")
    assert point["level"] == "dram" and point["attainable_gflops"] == 10.0
    assert point["above_roof"] and "above the dram roof 10 GB/s" in point["above_roof_reason"]


def test_redraw_figures_draws_with_the_notebooks_own_calls(tmp_path):
    """tools/redraw_figures.py reads each figure's drawing call from the notebook cell that draws it."""
    sys.path.insert(0, str(ROOT / "tools"))
    import redraw_figures

    found = redraw_figures.calls()
    assert found["complexity.png"] == ("counts", "plot", False)
    assert found["scaling_telemetry.png"] == ("scaling", "telemetry", True)
    run = tmp_path / "run"
    shutil.copytree(
        ROOT / "examples" / "example-cpu-2core", run, ignore=shutil.ignore_patterns("notebooks", "ddp")
    )
    before = {f: (run / "figures" / f).read_bytes() for f in redraw_figures.TABLES}
    drawn = redraw_figures.redraw(run)
    assert sorted(p.name for p in drawn) == sorted(redraw_figures.TABLES)
    assert all((run / "figures" / f).stat().st_size > 10_000 for f in before)
