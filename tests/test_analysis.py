"""Merging runs from several machines: every number of the analysis computed from their CSVs, every row carrying
its run and host, every speedup between matched configurations."""

import math

import pandas as pd
import pytest

from cnnbench import SCHEMA_VERSION, analysis, envinfo, results


def make_run(outputs, name, device_kind, device_name, throughputs, ci=None, schema=SCHEMA_VERSION, batch_size=128,
             cpu_model="Intel Core", cores=8, compile_=False, params_file="params/local.yaml", extra=None):
    d = outputs / name
    results.write_json(d / "environment.json", {"schema_version": schema, "device_kind": device_kind,
                                                "device_name": device_name, "torch_threads": 2,
                                                "cpu_model": cpu_model, "cpu_physical_cores": cores,
                                                "gpu_name": device_name if device_kind == "cuda" else None})
    results.write_json(d / "params.json", {"models": ["resnet18", "resnet50"], "batch_size": batch_size,
                                           "params_file": params_file})
    rows = []
    for (model, phase), t in throughputs.items():
        rows.append({"schema_version": schema, "model": model, "phase": phase, "device_kind": device_kind,
                     "device_name": device_name, "precision": "fp32", "memory_format": "nchw", "status": "ok",
                     "compile": compile_, "batch_size": batch_size, "image_size": 64, "num_classes": 200,
                     "dataset": "synthetic", "data_mode": "device", "throughput_img_s": t,
                     "throughput_ci95_img_s": (ci or {}).get((model, phase), 0.0), "achieved_gflops": t,
                     "noisy": False, "error": "", **(extra or {})})
    results.write_rows(d / "scenario_a.csv", rows)
    return d


def add_rows(run_dir, rows):
    old = results.read_rows(run_dir / "scenario_a.csv")
    results.write_rows(run_dir / "scenario_a.csv", old + [{**old[0], **r} for r in rows])


@pytest.fixture
def outputs(tmp_path):
    make_run(tmp_path, "laptop", "cpu", "Intel Core", {("resnet18", "train"): 10.0, ("resnet18", "eval"): 30.0,
                                                        ("resnet50", "train"): 4.0, ("resnet50", "eval"): 10.0},
             ci={("resnet18", "train"): 1.0})
    make_run(tmp_path, "colab", "cuda", "Tesla T4", {("resnet18", "train"): 300.0, ("resnet18", "eval"): 600.0,
                                                     ("resnet50", "train"): 100.0, ("resnet50", "eval"): 300.0},
             ci={("resnet18", "train"): 30.0})
    make_run(tmp_path, "old", "cpu", "Old CPU", {("resnet18", "train"): 1.0}, schema=0)
    (tmp_path / "not-a-run").mkdir()
    return tmp_path


def test_discover_and_exclude_other_schema_versions(outputs):
    dirs = analysis.discover(outputs)
    assert [d.name for d in dirs] == ["colab", "laptop", "old"]
    m = analysis.load(dirs)
    assert sorted(m.runs) == ["colab", "laptop"] and "schema version 0" in m.excluded["old"]
    assert set(m["scenario_a"].run_name) == {"colab", "laptop"}
    with pytest.raises(FileNotFoundError):
        analysis.discover(outputs, ["laptop", "nope"])


def test_every_merged_row_carries_run_name_and_host_fingerprint(tmp_path):
    # two machines that both call themselves "AMD EPYC" are told apart by their fingerprint
    make_run(tmp_path, "a", "cpu", "AMD EPYC", {("resnet18", "train"): 10.0}, cpu_model="AMD EPYC", cores=2)
    make_run(tmp_path, "b", "cpu", "AMD EPYC", {("resnet18", "train"): 40.0}, cpu_model="AMD EPYC", cores=32)
    sa = analysis.load(analysis.discover(tmp_path))["scenario_a"]
    assert {"run_name", "host_id", "host"} <= set(sa.columns)
    assert sa.host_id.nunique() == 2 and "2 cores" in sa[sa.run_name == "a"].host.iloc[0]
    sp = analysis.speedups(sa)
    assert sp.comparison.tolist() == ["cross-host"]  # same device model, other hardware: not run-to-run


def test_fingerprint_names_the_isa_and_the_gpu(monkeypatch):
    flags = frozenset({"sse4_2", "avx2", "avx512f", "avx512_bf16", "amx_tile", "fma"})
    assert envinfo.cpu_isa(flags) == "amx_tile avx2 avx512_bf16 avx512f fma"
    env = {"cpu_model": "Xeon", "cpu_physical_cores": 4, "cpu_isa": envinfo.cpu_isa(flags), "gpu_name": "NVIDIA H100",
           "gpu_memory_gb": 79.1, "gpu_driver": "550.54"}
    fp = envinfo.host_fingerprint(env)
    assert "avx512f" in fp["host"] and "NVIDIA H100 79.1 GiB, driver 550.54" in fp["host"]
    assert envinfo.host_fingerprint({**env, "gpu_driver": "555.1"})["host_id"] != fp["host_id"]
    monkeypatch.setattr(envinfo.devices, "cpu_flags", lambda: flags)
    import torch

    captured = envinfo.capture(torch.device("cpu"))
    assert "avx512f" in captured["cpu_isa"] and captured["host_id"] and captured["host"]


def test_speedups_with_propagated_intervals_each_pair_once(outputs):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    sp = analysis.speedups(m["scenario_a"])
    assert len(sp) == 2 * 2  # one pair of runs (A/B only) x models x phases
    r = sp[(sp.model == "resnet18") & (sp.phase == "train")].iloc[0]
    assert (r.run_a, r.run_b, r.comparison) == ("colab", "laptop", "cross-device")
    assert r.speedup == pytest.approx(30.0)
    rel = math.hypot(30 / 300, 1 / 10)
    assert (r.speedup_low, r.speedup_high) == (pytest.approx(30 * (1 - rel)), pytest.approx(30 * (1 + rel)))
    matrix = analysis.speedup_matrix(sp, "train")
    assert matrix.loc["resnet50", "colab / laptop (cross-device)"].startswith("25.00x")
    assert "train speedup" in matrix.columns.name and "images/s" in matrix.columns.name


def test_different_batch_sizes_are_not_divided_and_the_difference_is_named(tmp_path):
    make_run(tmp_path, "big", "cuda", "Tesla T4", {("resnet18", "train"): 300.0}, batch_size=256)
    make_run(tmp_path, "small", "cpu", "Intel Core", {("resnet18", "train"): 10.0}, batch_size=32)
    m = analysis.load(analysis.discover(tmp_path))
    assert analysis.speedups(m["scenario_a"]).empty
    um = analysis.unmatched(m["scenario_a"])
    assert um.differs_in.tolist() == ["batch_size 256 vs 32"]
    assert "nothing to divide" in analysis.speedup_matrix(analysis.speedups(m["scenario_a"])).note.iloc[0]
    assert not any("30.0x" in f for f in analysis.findings(m))
    assert any("not divided" in f and "batch_size" in f for f in analysis.findings(m))


def test_compile_on_and_off_does_not_break_findings_and_matches_only_like_with_like(tmp_path):
    a = make_run(tmp_path, "eager", "cpu", "Intel Core", {("resnet18", "train"): 10.0, ("resnet18", "eval"): 20.0})
    add_rows(a, [{"compile": True, "throughput_img_s": 15.0, "phase": "train"},
                 {"compile": True, "throughput_img_s": 25.0, "phase": "eval"}])
    b = make_run(tmp_path, "gpu", "cuda", "Tesla T4", {("resnet18", "train"): 100.0, ("resnet18", "eval"): 400.0})
    add_rows(b, [{"compile": True, "throughput_img_s": 300.0, "phase": "train"}])
    m = analysis.load(analysis.discover(tmp_path))
    text = analysis.findings(m)  # raised TypeError: must be real number, not Series
    sp = analysis.speedups(m["scenario_a"])
    got = {(r.phase, bool(r.compile)): round(r.speedup, 2) for r in sp.itertuples()}
    assert got == {("train", False): 10.0, ("eval", False): 20.0, ("train", True): 20.0}
    assert any("compile makes resnet18 train 1.50x" in t for t in text)
    matrix = analysis.speedup_matrix(sp, "train")
    assert list(matrix.index.names) == ["model", "compile"] and matrix.shape == (2, 1)


def test_same_host_is_run_to_run_never_a_cross_device_speedup(tmp_path):
    make_run(tmp_path, "first", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    make_run(tmp_path, "second", "cpu", "Intel Core", {("resnet18", "train"): 11.0})
    m = analysis.load(analysis.discover(tmp_path))
    sp = analysis.speedups(m["scenario_a"])
    assert sp.comparison.tolist() == ["run-to-run"] and (sp.run_a.iloc[0], sp.run_b.iloc[0]) == ("second", "first")
    text = " ".join(analysis.findings(m))
    assert "run-to-run difference" in text and "cross-device" not in text


def test_findings_are_computed_per_run_from_the_data(outputs):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    text = "\n".join(analysis.findings(m))
    assert "laptop: eval/train throughput ratio ranges 2.5-3.0x" in text
    assert "colab: eval/train throughput ratio ranges 2.0-3.0x" in text
    assert "Largest cross-device speedup: resnet18 train at batch 128 (fp32, nchw), colab (Tesla T4) vs laptop " \
           "(Intel Core): 30.00x" in text
    assert "colab: highest achieved rate among the 4 of 4 measurements precise to +-10%: resnet18 eval (fp32, " \
           "nchw), 600.0 GFLOP/s" in text


def test_batch_sweep_knees_are_per_run(tmp_path):
    for name, tput in (("fast", [100, 200, 205]), ("slow", [10, 11, 30])):
        make_run(tmp_path, name, "cpu", "AMD EPYC", {("resnet18", "train"): 1.0}, cores=2 if name == "slow" else 64)
        results.write_rows(tmp_path / name / "batch_sweep.csv", [
            {"model": "squeezenet1_1", "phase": "train", "batch_size": bs, "status": "ok", "throughput_img_s": t,
             "device_name": "AMD EPYC"} for bs, t in zip((32, 64, 128), tput, strict=True)])
    text = analysis.findings(analysis.load(analysis.discover(tmp_path)))
    assert any(t.startswith("fast: squeezenet1_1 (train) is within 5% of its best throughput from batch 64 "
                            "(best 205") for t in text)
    assert any(t.startswith("slow: squeezenet1_1 (train) is within 5% of its best throughput from batch 128 "
                            "(best 30") for t in text)


def test_speedups_and_findings_are_written_as_tidy_csvs(outputs, tmp_path):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    paths = analysis.write_tables(m, tmp_path)
    sp = pd.read_csv(paths["speedups"])
    assert {"run_a", "run_b", "comparison", *analysis.MATCH_KEYS, "speedup", "speedup_low", "speedup_high"} <= set(
        sp.columns)
    f = pd.read_csv(paths["findings"])
    row = f[f.topic == "cross-device"].iloc[0]
    assert "30.00x" in row.finding and "throughput_a_img_s=300" in row.numbers


def test_published_numbers_appear_beside_every_run(outputs):
    make_run(outputs, "laptop2", "cpu", "Intel Core", {("resnet18", "train"): 12.0}, cores=4)
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab", "laptop2"]))
    table = analysis.published_beside_ours(m["scenario_a"])
    t4 = table[(table.device_class == "t4") & (table.model == "resnet18")]
    assert set(t4.source) == {"published by 000", "published by 003"}
    row = t4[t4.source == "published by 000"].iloc[0]
    assert row.published_train_img_s == 315.74 and row.ours_train_img_s == 300.0
    assert "6,400 images" in row.differences
    cpu = table[(table.device_class == "cpu") & (table.model == "resnet18") & (table.source == "published by 000")]
    assert sorted(cpu.ours_run) == ["laptop", "laptop2"]  # aggfunc="first" kept only one run


def test_zip_run(outputs):
    archive = analysis.zip_run(outputs / "laptop")
    assert archive.name == "laptop.zip" and archive.stat().st_size > 0


def test_single_run_and_missing_tables_do_not_break_the_analysis(tmp_path):
    make_run(tmp_path, "only", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    m = analysis.load(analysis.discover(tmp_path))
    assert "nothing to divide" in analysis.speedup_matrix(analysis.speedups(m["scenario_a"])).note.iloc[0]
    assert m["batch_sweep"].empty and analysis.placed_points(m).empty
    empty = analysis.load([])
    assert analysis.findings(empty) == [] and analysis.summary(empty["scenario_a"]).empty
    assert analysis.findings_table(empty).columns.tolist() == ["topic", "run_name", "finding", "numbers"]


def test_smoke_and_internal_runs_stay_out_of_the_combined_analysis(outputs):
    make_run(outputs, "smoke", "cpu", "Intel Core", {("mnist_cnn", "train"): 100.0})
    make_run(outputs, "quick", "cpu", "Intel Core", {("mnist_cnn", "train"): 100.0}, params_file="/x/params/smoke.yaml")
    make_run(outputs, "_combined", "cpu", "Intel Core", {("mnist_cnn", "train"): 100.0})
    excluded = {}
    names = [d.name for d in analysis.discover(outputs, ["*"], excluded)]
    assert names == ["colab", "laptop", "old"]
    assert "smoke" in excluded["smoke"] and "smoke.yaml" in excluded["quick"] and "_combined" in excluded
    # a run's own analysis speaks of that run only; ["*"] merges every user run beside it
    assert [d.name for d in analysis.runs_for(outputs / "smoke", [])] == ["smoke"]
    assert [d.name for d in analysis.runs_for(outputs / "_combined", ["*"])] == ["colab", "laptop", "old"]
    m = analysis.load(analysis.runs_for(outputs / "_combined", ["*"], excluded), excluded)
    assert "merges 2 run(s) from 2 host(s): colab (Tesla T4" in analysis.merged_statement(m)
    table = analysis.runs_table(m).set_index("run_name")
    assert table.loc["smoke", "merged"].startswith("no: smoke") and table.loc["laptop", "merged"] == "yes"


def test_new_experiment_tables_merge_when_present(outputs):
    results.write_rows(outputs / "laptop" / "backends.csv", [
        {"backend": "torch_cpu", "model": "mnist_cnn", "epoch": 1, "epoch_s": 3.0, "images": 60000,
         "throughput_img_s": 20000.0, "train_loss": 0.3, "test_accuracy": 0.97, "status": "ok"}])
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    assert "backends" in results.MERGED and m["backends"].run_name.tolist() == ["laptop"]


def test_best_configurations_of_07_per_run():
    def rows(run, speedup):
        return [{"run_name": run, "row_kind": "best", "model": "resnet50", "phase": "train", "status": "ok",
                 "config": "fp32 channels_last bs128", "throughput_img_s": 70.0, "speedup_x": speedup},
                {"run_name": run, "row_kind": "race", "model": "resnet50", "phase": "train", "status": "ok"}]

    tuned = pd.DataFrame(rows("a", 1.4) + rows("b", 2.0))
    best = analysis.best_configurations(tuned)
    assert best.run_name.tolist() == ["a", "b"] and best["speedup (x)"].tolist() == [1.4, 2.0]
    assert analysis.best_configurations(pd.DataFrame()).empty


def test_same_host_runs_with_other_threads_are_not_divided_but_named(tmp_path):
    make_run(tmp_path, "t1", "cpu", "Intel Core", {("resnet18", "train"): 10.0}, extra={"threads": 1})
    make_run(tmp_path, "t2", "cpu", "Intel Core", {("resnet18", "train"): 19.0}, extra={"threads": 2})
    make_run(tmp_path, "gpu", "cuda", "Tesla T4", {("resnet18", "train"): 300.0}, extra={"threads": 8})
    sa = analysis.load(analysis.discover(tmp_path))["scenario_a"]
    sp = analysis.speedups(sa)
    assert "run-to-run" not in set(sp.comparison)  # threads 1 vs 2 on one host is not run-to-run noise
    assert set(sp.comparison) == {"cross-device"} and len(sp) == 2  # across devices threads may differ ...
    assert set(sp.threads_a.astype(int)) == {8} and set(sp.threads_b.astype(int)) == {1, 2}  # ... shown
    um = analysis.unmatched(sa)
    assert um.differs_in.tolist() == ["threads 1 vs 2"] and (um.run_a + um.run_b).tolist() == ["t1t2"]
    assert "threads 8 vs 1" in " ".join(analysis.speedup_matrix(sp).columns)


def test_a_rerun_with_changed_protocol_reads_only_its_current_rows(tmp_path):
    d = make_run(tmp_path, "laptop", "cpu", "Intel Core", {("resnet18", "train"): 10.0},
                 extra={"measured_steps": 5, "lr": 0.01, "threads": 2})
    add_rows(d, [{"throughput_img_s": 20.0, "measured_steps": 9, "lr": 0.01, "threads": 2}])  # the rerun
    add_rows(d, [{"throughput_img_s": 30.0, "measured_steps": 9, "lr": 0.01, "threads": 4}])  # other threads
    rerun = results.read_rows(d / "scenario_a.csv")[1]
    results.table("scenario_a").plan(d, [rerun], "scenario_a")  # what the rerun declared it measures
    m = analysis.load([d])
    assert m["scenario_a"].throughput_img_s.tolist() == [20.0]
    assert analysis.summary(m["scenario_a"]).train_throughput_img_s.tolist() == [20.0]


def test_configured_keeps_the_newest_row_of_a_configuration(tmp_path):
    d = make_run(tmp_path, "laptop", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    add_rows(d, [{"throughput_img_s": 20.0}])
    assert analysis.summary(analysis.load([d])["scenario_a"]).train_throughput_img_s.tolist() == [20.0]


@pytest.mark.parametrize("env, prm", [
    (b"{not json", None), (b"[1, 2]", None), ("\u00e9t\u00e9".encode("latin-1"), None), ("folder", None),
    (None, b"{not json"),
])
def test_a_broken_sibling_run_is_left_out_with_its_reason(outputs, env, prm):
    """Issue 21: one broken run folder made every later combined report fail with a JSONDecodeError traceback."""
    d = make_run(outputs, "broken", "cpu", "Intel Core", {("resnet18", "train"): 5.0})
    if env == "folder":
        (d / "environment.json").unlink()
        (d / "environment.json").mkdir()
    elif env is not None:
        (d / "environment.json").write_bytes(env)
    if prm is not None:
        (d / "params.json").write_bytes(prm)
    excluded = {}
    m = analysis.load(analysis.discover(outputs, None, excluded), excluded)
    assert sorted(m.runs) == ["colab", "laptop"]
    assert m.excluded["broken"].startswith("broken run (") and "\n" not in m.excluded["broken"]


def test_seed_003_beside_ours_states_its_resolution_not_that_it_is_unstated(tmp_path):
    """Issue 18: 08 said seed 003's resolution was 'not stated'; it ran PyTorch's ImageNet example (224 px)."""
    make_run(tmp_path, "laptop", "cuda", "NVIDIA GeForce RTX 4080 Laptop GPU", {("resnet50", "train"): 100.0})
    table = analysis.published_beside_ours(analysis.load(analysis.discover(tmp_path))["scenario_a"])
    rows = table[table.source == "published by 003"]
    assert set(rows.published_batch_size) == {32, 64, 128}  # each of the seed's batches, stated
    assert all("not stated" not in d and "224 px" in d for d in rows.differences)


def test_rows_of_another_schema_inside_a_run_leave_the_run_out_with_the_reason(outputs):
    """Issue 21: schema-1 rows inside a schema-2 run merged silently."""
    d = outputs / "laptop"
    add_rows(d, [{"schema_version": SCHEMA_VERSION - 1, "model": "resnet50", "phase": "train", "batch_size": 64}])
    m = analysis.load(analysis.discover(outputs))
    assert "laptop" not in m.runs
    assert m.excluded["laptop"] == (f"broken run (scenario_a.csv holds rows of schema version {SCHEMA_VERSION - 1} "
                                    f"(this workbook reads {SCHEMA_VERSION}))")
