"""Merging runs from several machines: every number of the analysis computed from their CSVs."""

import math

import pytest

from cnnbench import SCHEMA_VERSION, analysis, results


def make_run(outputs, name, device_kind, device_name, throughputs, ci=None, schema=SCHEMA_VERSION, batch_size=128):
    d = outputs / name
    results.write_json(d / "environment.json", {"schema_version": schema, "device_kind": device_kind,
                                                "device_name": device_name, "torch_threads": 2})
    results.write_json(d / "params.json", {"models": ["resnet18", "resnet50"], "batch_size": batch_size})
    rows = []
    for (model, phase), t in throughputs.items():
        rows.append({"schema_version": schema, "model": model, "phase": phase, "device_kind": device_kind,
                     "device_name": device_name, "precision": "fp32", "memory_format": "nchw", "status": "ok",
                     "batch_size": batch_size, "image_size": 64, "data_mode": "device", "throughput_img_s": t,
                     "throughput_ci95_img_s": (ci or {}).get((model, phase), 0.0), "achieved_tflops": t / 1e3,
                     "noisy": False, "error": ""})
    results.write_rows(d / "scenario_a.csv", rows)
    return d


@pytest.fixture
def outputs(tmp_path):
    make_run(tmp_path, "laptop", "cpu", "Intel Core", {("resnet18", "train"): 10.0, ("resnet18", "eval"): 30.0,
                                                        ("resnet50", "train"): 4.0, ("resnet50", "eval"): 10.0},
             ci={("resnet18", "train"): 1.0})
    make_run(tmp_path, "colab", "cuda", "Tesla T4", {("resnet18", "train"): 300.0, ("resnet18", "eval"): 600.0,
                                                     ("resnet50", "train"): 100.0, ("resnet50", "eval"): 300.0},
             ci={("resnet18", "train"): 30.0}, batch_size=64)
    make_run(tmp_path, "old", "cpu", "Old CPU", {("resnet18", "train"): 1.0}, schema=0)
    (tmp_path / "not-a-run").mkdir()
    return tmp_path


def test_discover_and_exclude_other_schema_versions(outputs):
    dirs = analysis.discover(outputs)
    assert [d.name for d in dirs] == ["colab", "laptop", "old"]
    m = analysis.load(dirs)
    assert sorted(m.runs) == ["colab", "laptop"] and "schema version 0" in m.excluded["old"]
    assert set(m["scenario_a"].run) == {"colab", "laptop"}
    assert m.config_differences.set_index("key").loc["batch_size"].to_dict() == {"colab": "64", "laptop": "128"}
    with pytest.raises(FileNotFoundError):
        analysis.discover(outputs, ["laptop", "nope"])


def test_speedups_with_propagated_intervals(outputs):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    sp = analysis.speedups(m["scenario_a"])
    r = sp[(sp.model == "resnet18") & (sp.phase == "train") & sp.device_a.str.startswith("colab")].iloc[0]
    assert r.speedup == pytest.approx(30.0)
    rel = math.hypot(30 / 300, 1 / 10)
    assert (r.speedup_lo, r.speedup_hi) == (pytest.approx(30 * (1 - rel)), pytest.approx(30 * (1 + rel)))
    assert len(sp) == 2 * 2 * 2  # ordered pairs x models x phases
    matrix = analysis.speedup_matrix(sp, "train")
    assert matrix.loc["resnet50", "colab (Tesla T4) / laptop (Intel Core)"].startswith("25.00x")


def test_findings_are_computed_from_the_data(outputs):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    text = "\n".join(analysis.findings(m))
    assert "Eval/train throughput ratio ranges 2.0-3.0x" in text
    assert "Largest speedup: resnet18 train on colab (Tesla T4) vs laptop (Intel Core), 30.0x" in text
    assert "Highest achieved rate: resnet18 eval (fp32, nchw) on Tesla T4, 600.0 GFLOP/s" in text


def test_published_numbers_appear_beside_ours_with_differences(outputs):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    table = analysis.published_beside_ours(m["scenario_a"])
    t4 = table[(table.device_class == "t4") & (table.model == "resnet18")]
    assert set(t4.source) == {"published by 000", "published by 003"}
    row = t4[t4.source == "published by 000"].iloc[0]
    assert row.published_train_img_s == 315.74 and row.ours_train_img_s == 300.0
    assert "batch 64" in row.differences
    assert set(table.device_class) == {"t4", "cpu"}


def test_zip_run(outputs):
    archive = analysis.zip_run(outputs / "laptop")
    assert archive.name == "laptop.zip" and archive.stat().st_size > 0


def test_single_run_and_missing_tables_do_not_break_the_analysis(tmp_path):
    make_run(tmp_path, "only", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    m = analysis.load(analysis.discover(tmp_path))
    assert "one run only" in analysis.speedup_matrix(analysis.speedups(m["scenario_a"])).note.iloc[0]
    assert m["batch_sweep"].empty and analysis.placed_points(m).empty
    empty = analysis.load([])
    assert analysis.findings(empty) == [] and analysis.summary(empty["scenario_a"]).empty
