"""Merging runs from several machines: every number of the analysis computed from their CSVs, every row carrying
its run and host, every speedup between matched configurations."""

import math

import pandas as pd
import pytest

from cnnbench import SCHEMA_VERSION, analysis, envinfo, results


def make_run(
    outputs,
    name,
    device_kind,
    device_name,
    throughputs,
    ci=None,
    schema=SCHEMA_VERSION,
    batch_size=128,
    cpu_model="Intel Core",
    cores=8,
    compile_=False,
    params_file="params/local.yaml",
    extra=None,
):
    d = outputs / name
    results.write_json(
        d / "environment.json",
        {
            "schema_version": schema,
            "device_kind": device_kind,
            "device_name": device_name,
            "torch_threads": 2,
            "cpu_model": cpu_model,
            "cpu_physical_cores": cores,
            "gpu_name": device_name if device_kind == "cuda" else None,
        },
    )
    results.write_json(
        d / "params.json",
        {"models": ["resnet18", "resnet50"], "batch_size": batch_size, "params_file": params_file},
    )
    rows = []
    for (model, phase), t in throughputs.items():
        rows.append(
            {
                "schema_version": schema,
                "model": model,
                "phase": phase,
                "device_kind": device_kind,
                results.files.HOST: results.files.host_id(),  # as the results layer stamps a row
                "device_name": device_name,
                "precision": "fp32",
                "memory_format": "nchw",
                "status": "ok",
                "compile": compile_,
                "batch_size": batch_size,
                "image_size": 64,
                "num_classes": 200,
                "dataset": "synthetic",
                "data_mode": "device",
                "throughput_img_s": t,
                "throughput_ci95_img_s": (ci or {}).get((model, phase), 0.0),
                "achieved_gflops": t,
                "noisy": False,
                "error": "",
                **(extra or {}),
            }
        )
    results.write_rows(d / "scenario_a.csv", rows)
    return d


def add_rows(run_dir, rows):
    old = results.read_rows(run_dir / "scenario_a.csv")
    results.write_rows(run_dir / "scenario_a.csv", old + [{**old[0], **r} for r in rows])


@pytest.fixture
def outputs(tmp_path):
    make_run(
        tmp_path,
        "laptop",
        "cpu",
        "Intel Core",
        {
            ("resnet18", "train"): 10.0,
            ("resnet18", "eval"): 30.0,
            ("resnet50", "train"): 4.0,
            ("resnet50", "eval"): 10.0,
        },
        ci={("resnet18", "train"): 1.0},
    )
    make_run(
        tmp_path,
        "colab",
        "cuda",
        "Tesla T4",
        {
            ("resnet18", "train"): 300.0,
            ("resnet18", "eval"): 600.0,
            ("resnet50", "train"): 100.0,
            ("resnet50", "eval"): 300.0,
        },
        ci={("resnet18", "train"): 30.0},
    )
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
    env = {
        "cpu_model": "Xeon",
        "cpu_physical_cores": 4,
        "cpu_isa": envinfo.cpu_isa(flags),
        "gpu_name": "NVIDIA H100",
        "gpu_memory_gb": 79.1,
        "gpu_driver": "550.54",
    }
    fp = envinfo.host_fingerprint(env)
    assert "avx512f" in fp["host"] and "NVIDIA H100 79.1 GiB, driver 550.54" in fp["host"]
    assert envinfo.host_fingerprint({**env, "gpu_driver": "555.1"})["host_id"] != fp["host_id"]
    monkeypatch.setattr(envinfo.devices, "cpu_features", lambda: flags)
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
    # Fieller's interval of 300 +- 30 over 10 +- 1 (test_reproducibility): every rho with 300 - 10 rho inside its own
    assert (r.speedup_low, r.speedup_high) == (
        pytest.approx(26.0283, abs=1e-4),
        pytest.approx(34.5778, abs=1e-4),
    )
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
    assert not any("30.0x" in f for f in analysis.findings_table(m).finding)
    assert any("not divided" in f and "batch_size" in f for f in analysis.findings_table(m).finding)


def test_compile_on_and_off_does_not_break_findings_and_matches_only_like_with_like(tmp_path):
    a = make_run(
        tmp_path, "eager", "cpu", "Intel Core", {("resnet18", "train"): 10.0, ("resnet18", "eval"): 20.0}
    )
    add_rows(
        a,
        [
            {"compile": True, "throughput_img_s": 15.0, "phase": "train"},
            {"compile": True, "throughput_img_s": 25.0, "phase": "eval"},
        ],
    )
    b = make_run(
        tmp_path, "gpu", "cuda", "Tesla T4", {("resnet18", "train"): 100.0, ("resnet18", "eval"): 400.0}
    )
    add_rows(b, [{"compile": True, "throughput_img_s": 300.0, "phase": "train"}])
    m = analysis.load(analysis.discover(tmp_path))
    text = analysis.findings_table(m).finding  # raised TypeError: must be real number, not Series
    sp = analysis.speedups(m["scenario_a"])
    got = {(r.phase, r.compile != "off"): round(r.speedup, 2) for r in sp.itertuples()}
    assert got == {("train", False): 10.0, ("eval", False): 20.0, ("train", True): 20.0}
    assert any("compile=default makes resnet18 train 1.50x" in t for t in text)
    matrix = analysis.speedup_matrix(sp, "train")
    assert list(matrix.index.names) == ["model", "compile"] and matrix.shape == (2, 1)


def test_same_host_is_run_to_run_never_a_cross_device_speedup(tmp_path):
    make_run(tmp_path, "first", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    make_run(tmp_path, "second", "cpu", "Intel Core", {("resnet18", "train"): 11.0})
    m = analysis.load(analysis.discover(tmp_path))
    sp = analysis.speedups(m["scenario_a"])
    assert sp.comparison.tolist() == ["run-to-run"] and (sp.run_a.iloc[0], sp.run_b.iloc[0]) == (
        "second",
        "first",
    )
    text = " ".join(analysis.findings_table(m).finding)
    assert "run-to-run difference" in text and "cross-device" not in text


def test_findings_are_computed_per_run_from_the_data(outputs):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    text = "\n".join(analysis.findings_table(m).finding)
    assert "laptop: eval/train throughput ratio ranges 2.5-3.0x" in text
    assert "colab: eval/train throughput ratio ranges 2.0-3.0x" in text
    assert (
        "Largest cross-device speedup: resnet18 train at batch 128 (fp32 nchw), colab (Tesla T4) vs laptop "
        "(Intel Core): 30.00x" in text
    )
    assert (
        "colab: highest achieved rate among the 4 of 4 measurements precise to +-10%: resnet18 eval (fp32 "
        "nchw), 600.0 GFLOP/s" in text
    )


def test_batch_sweep_knees_are_per_run(tmp_path):
    for name, tput in (("fast", [100, 200, 205]), ("slow", [10, 11, 30])):
        make_run(
            tmp_path, name, "cpu", "AMD EPYC", {("resnet18", "train"): 1.0}, cores=2 if name == "slow" else 64
        )
        results.write_rows(
            tmp_path / name / "batch_sweep.csv",
            [
                {
                    "model": "squeezenet1_1",
                    "phase": "train",
                    "batch_size": bs,
                    "status": "ok",
                    "throughput_img_s": t,
                    "device_name": "AMD EPYC",
                }
                for bs, t in zip((32, 64, 128), tput, strict=True)
            ],
        )
    text = analysis.findings_table(analysis.load(analysis.discover(tmp_path))).finding
    assert any(
        t.startswith(
            "fast: squeezenet1_1 (train) is within 5% of its best throughput or not distinguishable from it, "
            "from batch 64 (best 205"
        )
        for t in text
    )
    assert any(
        t.startswith(
            "slow: squeezenet1_1 (train) is within 5% of its best throughput or not distinguishable from it, "
            "from batch 128 (best 30"
        )
        for t in text
    )


def test_speedups_and_findings_are_written_as_tidy_csvs(outputs, tmp_path):
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    paths = analysis.write_tables(m, tmp_path)
    sp = pd.read_csv(paths["speedups"])
    assert {
        "run_a",
        "run_b",
        "comparison",
        *analysis.match_keys(),
        "speedup",
        "speedup_low",
        "speedup_high",
    } <= set(sp.columns)
    f = pd.read_csv(paths["findings"])
    row = f[f.topic == "cross-device"].iloc[0]
    assert "30.00x" in row.finding and "throughput_a_img_s=300" in row.numbers


def test_published_numbers_appear_beside_every_run(outputs):
    make_run(outputs, "laptop2", "cpu", "Intel Core", {("resnet18", "train"): 12.0}, cores=4)
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab", "laptop2"]))
    table = analysis.beside("throughputs", m)
    t4 = table[(table.device_class == "t4") & (table.model == "resnet18")]
    assert set(t4.source) == {"published by 000", "published by 003"}
    row = t4[t4.source == "published by 000"].iloc[0]
    assert row.published_train_img_s == 315.74 and row.ours_train_img_s == 300.0
    assert "6,400 images" in row.differences
    cpu = table[
        (table.device_class == "cpu") & (table.model == "resnet18") & (table.source == "published by 000")
    ]
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
    assert (
        analysis.findings_table(empty).finding.tolist() == [] and analysis.summary(empty["scenario_a"]).empty
    )
    assert analysis.findings_table(empty).columns.tolist() == [
        "topic",
        "run_name",
        "finding",
        "numbers",
        "source",
    ]


def test_smoke_and_internal_runs_stay_out_of_the_combined_analysis(outputs):
    make_run(outputs, "smoke", "cpu", "Intel Core", {("mnist_cnn", "train"): 100.0})
    make_run(
        outputs,
        "quick",
        "cpu",
        "Intel Core",
        {("mnist_cnn", "train"): 100.0},
        params_file="/x/params/smoke.yaml",
    )
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
    results.write_rows(
        outputs / "laptop" / "backends.csv",
        [
            {
                "backend": "torch_cpu",
                "model": "mnist_cnn",
                "epoch": 1,
                "epoch_s": 3.0,
                "images": 60000,
                "throughput_img_s": 20000.0,
                "train_loss": 0.3,
                "test_accuracy": 0.97,
                "status": "ok",
            }
        ],
    )
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    assert "backends" in results.MERGED and m["backends"].run_name.tolist() == ["laptop"]


def test_best_configurations_of_07_per_run():
    def rows(run, speedup):
        return [
            {
                "run_name": run,
                "row_kind": "best",
                "model": "resnet50",
                "phase": "train",
                "status": "ok",
                "config": "fp32 channels_last bs128",
                "throughput_img_s": 70.0,
                "speedup_x": speedup,
            },
            {"run_name": run, "row_kind": "race", "model": "resnet50", "phase": "train", "status": "ok"},
        ]

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
    d = make_run(
        tmp_path,
        "laptop",
        "cpu",
        "Intel Core",
        {("resnet18", "train"): 10.0},
        extra={"measured_steps": 5, "lr": 0.01, "threads": 2},
    )
    add_rows(d, [{"throughput_img_s": 20.0, "measured_steps": 9, "lr": 0.01, "threads": 2}])  # the rerun
    add_rows(d, [{"throughput_img_s": 30.0, "measured_steps": 9, "lr": 0.01, "threads": 4}])  # other threads
    rerun = results.read_rows(d / "scenario_a.csv")[1]
    results.table("scenario_a").plan(d, [rerun], "scenario_a")  # what the rerun declared it measures
    m = analysis.load([d])
    assert m["scenario_a"].throughput_img_s.tolist() == [20.0]
    assert analysis.summary(m["scenario_a"]).train_throughput_img_s.tolist() == [20.0]


def test_configured_keeps_the_newest_row_of_a_configuration(tmp_path):
    d = make_run(tmp_path, "laptop", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    add_rows(d, [{"throughput_img_s": 20.0, "measured_steps": 9}])  # measured again with another protocol
    assert analysis.summary(analysis.load([d])["scenario_a"]).train_throughput_img_s.tolist() == [20.0]


@pytest.mark.parametrize(
    "env, prm",
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        ("\u00e9t\u00e9".encode("latin-1"), None),
        ("folder", None),
        (None, b"{not json"),
    ],
)
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
    table = analysis.beside("throughputs", analysis.load(analysis.discover(tmp_path)))
    rows = table[table.source == "published by 003"]
    assert set(rows.published_batch_size) == {32, 64, 128}  # each of the seed's batches, stated
    assert all("not stated" not in d and "224 px" in d for d in rows.differences)


def test_rows_of_another_schema_inside_a_run_leave_the_run_out_with_the_reason(outputs):
    """Issue 21: schema-1 rows inside a schema-2 run merged silently."""
    d = outputs / "laptop"
    add_rows(
        d, [{"schema_version": SCHEMA_VERSION - 1, "model": "resnet50", "phase": "train", "batch_size": 64}]
    )
    m = analysis.load(analysis.discover(outputs))
    assert "laptop" not in m.runs
    assert m.excluded["laptop"].startswith(
        f"broken run ({d / 'scenario_a.csv'}: line 6 is of results schema {SCHEMA_VERSION - 1}, this version "
        f"writes {SCHEMA_VERSION}"
    )


# --- issue 18: every seed item beside ours (analysis.seeds) ----------------------------------------------------
def _one_run(
    tmp_path, device_kind="cpu", device_name="Intel Core", extra=None, models=("resnet18", "resnet50")
):
    tput = {(m, ph): t for m in models for ph, t in (("train", 10.0), ("eval", 40.0))}
    return make_run(tmp_path, "laptop", device_kind, device_name, tput, extra=extra)


def _sweep_rows(run_dir, model, batches):
    base = results.read_rows(run_dir / "scenario_a.csv")[0]
    results.write_rows(
        run_dir / "batch_sweep.csv",
        [
            {
                **base,
                "model": model,
                "phase": "train",
                "batch_size": bs,
                "throughput_img_s": 5.0 * bs**0.5,
                "achieved_gflops": 50.0,
                "achieved_tflops": 0.05,
            }
            for bs in batches
        ],
    )


def test_seed_000_table_3_tflops_and_memory_beside_ours(tmp_path):
    from cnnbench import published

    _one_run(
        tmp_path,
        "cuda",
        "Tesla T4",
        extra={"achieved_tflops": 0.5, "peak_device_mem_mib": 900.0, "peak_rss_mib": 2000.0},
    )
    t = analysis.beside("performance_000", analysis.load(analysis.discover(tmp_path)))
    seed = published.THROUGHPUT_000.set_index(["model", "device_class"]).loc[("resnet18", "t4")]
    pub = t[(t.source == f"published by {published.SEED_000}") & (t.model == "resnet18") & (t.device == "t4")]
    assert (
        pub.train_tflops.iloc[0] == seed.train_tflops and pub.peak_gpu_mem_mb.iloc[0] == seed.peak_gpu_mem_mb
    )
    assert "224 px forward count" in pub.differences.iloc[0]
    ours = t[(t.source == "ours: laptop") & (t.model == "resnet18")].iloc[0]
    assert (ours.train_img_s, ours.eval_img_s, ours.train_tflops, ours.peak_device_mem_mib) == (
        10.0,
        40.0,
        0.5,
        900.0,
    )
    assert ours.differences.startswith("matched device class: t4") and "MiB" in ours.differences
    assert t.source.iloc[0].startswith("published by")  # the seed's rows first in every model's block


def test_a_run_measured_only_in_other_variants_is_said_so_beside_the_seeds(tmp_path):
    """A run whose 02 variants leave out fp32 NCHW eager (here tf32 and bf16 channels_last) was told "no run of
    this analysis wrote scenario_a.csv" beside the seeds, though it measured their models: it says where now."""
    run = _one_run(tmp_path, "cuda", "NVIDIA H200", extra={"precision": "tf32"})
    add_rows(run, [{"precision": "bf16", "memory_format": "channels_last"}])
    m = analysis.load(analysis.discover(tmp_path))
    said = "measured only in bf16 channels_last, tf32 nchw; the seeds ran fp32 nchw eager"
    for name in ("speedups_000", "performance_000", "achieved_003", "utilisation_000"):
        assert set(analysis.beside(name, m).note) == {said}, name
    inference = analysis.beside("inference_002", m).note.iloc[0]  # no densenet121 in any variant: as before
    assert inference.startswith("no run of this analysis wrote scenario_a.csv with densenet121")


def test_seed_000_table_8_in_a_single_run_is_this_machine_beside_each_seed_device_not_matched(tmp_path):
    from cnnbench import published

    _one_run(tmp_path)  # one CPU run: nothing of ours to divide, but the seed's devices are beside it
    t = analysis.beside("speedups_000", analysis.load(analysis.discover(tmp_path)))
    ours = t[(t.source == "ours: laptop") & (t.model == "resnet50") & (t.phase == "train")].set_index("b")
    seed = published.THROUGHPUT_000.set_index(["model", "device_class"]).train_img_s
    assert set(ours.index) == {"000's apple", "000's cpu", "000's t4"}
    assert ours.loc["000's t4", "speedup_x"] == pytest.approx(10.0 / seed[("resnet50", "t4")])
    assert set(ours.comparison) == {"not matched"}
    d = ours.loc["000's cpu", "differences"]
    assert (
        d.startswith("not matched")
        and "data: ours synthetic" in d
        and "resolution: ours 64 px vs 224 px" in d
    )
    assert f"{published.EPOCH_IMAGES_000:,}-image" in d
    pub = t[t.source.str.startswith("published")]
    assert len(pub) == 3 * len(published.SPEEDUPS_000)
    r18 = pub[(pub.model == "resnet18") & (pub.a == "t4") & (pub.b == "cpu")].speedup_x.iloc[0]
    assert r18 == published.SPEEDUPS_000.set_index("model").t4_over_cpu["resnet18"]


def test_seed_000_table_8_our_ratios_carry_our_interval_and_are_shown_to_its_precision(tmp_path):
    """The walk: our rows beside seed 000's Table 8 read 7.267 and 27.54, four significant digits and no interval
    (the seed's rate has none; ours does)."""
    from cnnbench import published, tables

    _one_run(tmp_path, extra={"throughput_ci95_img_s": 0.5})
    t = analysis.beside("speedups_000", analysis.load(analysis.discover(tmp_path)))
    ours = t[(t.source == "ours: laptop") & (t.model == "resnet50") & (t.phase == "train")].set_index("b")
    theirs = published.THROUGHPUT_000.set_index(["model", "device_class"]).train_img_s[("resnet50", "t4")]
    assert ours.loc["000's t4", "a_ci95_img_s"] == 0.5
    assert ours.loc["000's t4", "speedup_ci95_x"] == pytest.approx(0.5 / theirs)
    shown, _ = tables.trimmed(t)
    ratio = 10.0 / theirs
    row = shown[
        (t.source == "ours: laptop") & (t.model == "resnet50") & (t.phase == "train") & (t.b == "000's t4")
    ]
    ci = 0.5 / theirs
    assert row.speedup_x.iloc[0] == f"{tables.rounded(ratio, ci)}\u00a0±\u00a0{tables.rounded(ci, ci)}"


def test_seed_000_table_5_utilisation_beside_ours(tmp_path):
    from cnnbench import published

    _one_run(tmp_path, extra={"util_cpu_mean_pct": 80.0, "util_device_mean_pct": None})
    t = analysis.beside("utilisation_000", analysis.load(analysis.discover(tmp_path)))
    ours = t[t.source == "ours: laptop"]
    assert len(ours) == 2 and set(ours.cpu_util_pct) == {80.0}  # the training step of each model
    assert (
        "measured windows" in ours.differences.iloc[0]
        and "matched device class: cpu" in ours.differences.iloc[0]
    )
    pub = t[t.source.str.startswith("published") & (t.model == "resnet18")].set_index("device")
    u = published.UTILISATION_000.set_index(["model", "device_class"])
    assert pub.loc["cpu", "cpu_util_pct"] == u.cpu_util_pct[("resnet18", "cpu")]
    assert "when and how not stated" in pub.differences.iloc[0] and "our inference" in pub.differences.iloc[0]


def test_seed_000_table_6_sweep_beside_ours(tmp_path):
    from cnnbench import published

    d = _one_run(tmp_path)
    _sweep_rows(d, "squeezenet1_1", [32, 64, 128, 256])
    t = analysis.beside("sweep_000", analysis.load(analysis.discover(tmp_path)))
    pub = t[t.source.str.startswith("published")]
    assert pub.batch_size.tolist() == published.SWEEP_000.batch_size.tolist() and "unstable" in set(
        pub.status
    )
    ours = t[t.source == "ours: laptop"]
    assert ours.batch_size.tolist() == [32, 64, 128, 256] and set(ours.achieved_gflops) == {50.0}
    assert "synthetic data" in ours.differences.iloc[0]
    assert "no run of this analysis wrote" in analysis.beside("sweep_000").note.iloc[0]


def test_per_model_rooflines_draw_for_a_single_run(tmp_path):
    from cnnbench import plots

    d = _one_run(tmp_path)
    results.write_rows(
        d / "roofline.csv",
        [
            {
                "source": "scenario_a",
                "device_name": "Intel Core",
                "model": "resnet18",
                "phase": "train",
                "batch_size": 128,
                "intensity_flop_per_byte": 20.0,
                "achieved_gflops": 50.0,
            }
        ],
    )
    m = analysis.load(analysis.discover(tmp_path))
    figs = plots.per_model_rooflines(analysis.placed_points(m), m["device_peaks"], tmp_path, min_runs=1)
    assert set(figs) == {"resnet18"} and (tmp_path / "roofline_model_resnet18.png").is_file()


def _backends(run_dir, model, epochs=3, images=4096):
    results.write_rows(
        run_dir / "backends.csv",
        [
            {
                "backend": "torch_cpu",
                "model": model,
                "device_name": "Intel Core",
                "device_kind": "cpu",
                "threads": 2,
                "epoch": e + 1,
                "steps": 8,
                "batch_size": 512,
                "epoch_s": 2.0 if e == 0 else 1.0,
                "images": images,
                "throughput_img_s": images / (2.0 if e == 0 else 1.0),
                "train_loss": 0.5,
                "test_accuracy": 0.4,
                "jit_s": None,
                "status": "ok",
            }
            for e in range(epochs)
        ],
    )


def test_seed_001_total_time_process_ram_and_the_accuracy_gap_beside_ours(tmp_path):
    from cnnbench import published

    d = _one_run(tmp_path)
    _backends(d, "mnist_cnn")
    results.write_rows(
        d / "backend_memory.csv",
        [
            {
                "backend": "torch_cpu",
                "model": "mnist_cnn",
                "component": c,
                "computed_mib": None,
                "measured_mib": v,
                "status": "ok",
            }
            for c, v in (("process_rss_baseline", 900.0), ("process_rss_growth", 50.0))
        ],
    )
    m = analysis.load(analysis.discover(tmp_path))
    t = analysis.beside("backends_001", m)
    ours = t[t.source == "ours: laptop"].iloc[0]
    assert ours.total_s == 4.0 and ours.process_rss_mib == 950.0  # every epoch summed, the first included
    assert "3 epoch(s) of 4,096" in ours.differences and "not the seed's for that reason" in ours.differences
    pub = t[t.source.str.startswith("published")].set_index("backend")
    assert pub.total_s["torch_cpu"] == published.BACKENDS_001.set_index("backend").total_s["torch_cpu"]
    assert (
        pub.process_ram_mb["torch_cpu"]
        == published.BACKENDS_001.set_index("backend").process_ram_mb["torch_cpu"]
    )


def test_seed_002_inference_in_images_per_second_and_cpu_beside_ours(tmp_path):
    from cnnbench import published

    d = _one_run(tmp_path, models=("densenet121",), extra={"util_cpu_mean_pct": 90.0, "peak_rss_mib": 2000.0})
    results.write_rows(
        d / "transfer.csv",
        [
            {
                "model": "densenet121",
                "device_kind": "cpu",
                "device_name": "Intel Core",
                "lr": 0.003,
                "batch_size": 16,
                "image_size": 64,
                "epoch": 1,
                "status": "ok",
                "rss_mib": 1000.0,
            }
        ],
    )
    m = analysis.load(analysis.discover(tmp_path))
    inf = analysis.beside("inference_002", m)
    pub = inf[inf.source.str.startswith("published")].set_index("device")
    s_cpu = published.table("INFERENCE_002").set_index("device_class").s_per_image["cpu"]
    assert (
        pub.loc["cpu", "inference_img_s"] == pytest.approx(1 / s_cpu)
        and pub.loc["cpu", "s_per_image"] == s_cpu
    )
    ours = inf[inf.source == "ours: laptop"].iloc[0]
    assert ours.inference_img_s == 40.0 and ours.s_per_image == pytest.approx(0.025)
    assert "batched (not one image at a time)" in ours.differences
    cpu = analysis.beside("cpu_002", m)
    p = cpu[cpu.source.str.startswith("published")]
    assert p.cpu_util_pct.iloc[0] == published.CPU_002["cpu_util_during_gpu_pct"]
    assert p.cpu_memory_gb.iloc[1] == published.CPU_002["cpu_memory_gb"]
    mine = cpu[cpu.source == "ours: laptop"].set_index("what")
    assert mine.loc["06 fine-tuning on the CPU", "cpu_memory_gb"] == pytest.approx(1000 * 2**20 / 1e9)
    assert mine.loc["02 densenet121 training step", "cpu_util_pct"] == 90.0


def test_seed_003_achieved_rate_by_batch_names_the_batch_we_did_not_sample(tmp_path):
    from cnnbench import published

    d = _one_run(tmp_path, "cuda", "Tesla T4")
    _sweep_rows(d, "resnet50", [32, 128])  # no batch 64
    results.write_rows(
        d / "roofline.csv",
        [
            {
                "source": "batch_sweep",
                "device_name": "Tesla T4",
                "model": "resnet50",
                "phase": "train",
                "batch_size": 32,
                "precision": "fp32",
                "memory_format": "nchw",
                "intensity_flop_per_byte": 21.0,
                "achieved_gflops": 50.0,
                "efficiency": 0.4,
            }
        ],
    )
    m = analysis.load(analysis.discover(tmp_path))
    t = analysis.beside("achieved_003", m)
    pub = t[t.source.str.startswith("published") & (t.model == "resnet50") & (t.device == "t4")]
    assert pub.ai_flop_per_byte.tolist() == [published.AI_BY_BATCH_003[b] for b in (32, 64, 128)]
    ours = t[(t.source == "ours: laptop") & (t.model == "resnet50")].set_index("batch_size")
    assert ours.loc[32, "ai_flop_per_byte"] == 21.0 and ours.loc[
        32, "efficiency_vs_roof_pct"
    ] == pytest.approx(40.0)
    assert ours.loc[32, "achieved_tflops"] == 0.05 and ours.loc[32, "differences"].startswith(
        "matched device class: t4"
    )
    assert (
        ours.loc[64, "measured_in"] == "not sampled" and "batch 32, 128 only" in ours.loc[64, "differences"]
    )
    assert "lacks batch 64" in ours.loc[64, "differences"]


def test_seed_004_total_training_time_and_memory_in_its_mb_beside_ours(tmp_path):
    from cnnbench import published

    d = _one_run(tmp_path)
    _backends(d, "mlp", epochs=4)
    results.write_rows(
        d / "backend_memory.csv",
        [
            {
                "backend": "torch_cpu",
                "model": "mlp",
                "component": "parameters",
                "computed_mib": 1.0,
                "measured_mib": 2.0,
                "status": "ok",
                "method": "array sizes",
            }
        ],
    )
    m = analysis.load(analysis.discover(tmp_path))
    t = analysis.beside("times_004", m)
    pub = t[t.source.str.startswith("published")].set_index("backend")
    seed = published.TIMES_004.set_index("what")
    assert pub.loc["numpy", "total_training_s"] == pytest.approx(seed.cpu_ms["total_training"] / 1e3)
    assert pub.loc["cupy", "iteration_ms"] == seed.gpu_ms["iteration"]
    ours = t[t.source == "ours: laptop"].iloc[0]
    assert (
        ours.total_training_s == 5.0
        and ours.iterations == 32
        and ours.iteration_ms == pytest.approx(5000 / 32)
    )
    assert ours.at_its_iterations_s == pytest.approx(5.0 / 32 * published.setup("004")["iterations"])
    mem = analysis.beside("memory_004", m)
    p = mem[mem.source.str.startswith("published") & (mem.component == "parameters")].set_index("backend")
    assert p.loc["numpy", "published_mb"] == published.MEMORY_004.set_index("component").cpu_mb["parameters"]
    mine = mem[mem.source == "ours: laptop"].iloc[0]
    assert mine.measured_mib == 2.0 and mine.measured_mb == pytest.approx(2 * 2**20 / 1e6)
    assert "MiB x 1.048576 = MB" in mine.differences


def test_08_shows_every_beside_table():
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "08_analysis.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    from cnnbench.analysis import seeds

    for name in (
        *[f'analysis.beside("{key}", merged)' for key in seeds.BESIDE],
        "min_runs=1",
    ):
        assert f"analysis.{name}" in code or name in code, name


@pytest.mark.parametrize("field, value", [("host_id", [1, 2]), ("cpu_isa", 5), ("cpu_isa", {"a": 1})])
def test_a_sibling_whose_environment_has_wrong_field_types_is_left_out(outputs, field, value):
    """Issue 21 barrage: a sibling environment.json with host_id a list (or, without host_id, cpu_isa not text)
    made every later combined report fail ("Length of values (2) does not match length of index")."""
    d = make_run(outputs, "odd", "cpu", "Intel Core", {("resnet18", "train"): 5.0})
    env = results.read_json(d / "environment.json")
    env.pop("host_id", None)
    env[field] = value
    if field == "host_id":
        env["host"] = "x"
    results.write_json(d / "environment.json", env)
    m = analysis.load(analysis.discover(outputs))
    assert "odd" not in m.runs and m.excluded["odd"].startswith("broken run (environment.json")
    assert sorted(m.runs) == ["colab", "laptop"]


def test_the_machine_finding_names_only_files_the_run_has(tmp_path):
    """The re-walk: a run that skipped 03 had its machine finding cite <run>/batch_sweep.csv, which does not
    exist."""
    import importlib

    findings = importlib.import_module("cnnbench.analysis.findings")
    make_run(
        tmp_path,
        "only02",
        "cpu",
        "Intel Core",
        {("resnet18", "train"): 10.0},
        extra={"machine_state": "quiet", "cpu_steal_mean_pct": 0.0, "util_other_cpu_mean_pct": 1.0},
    )
    m = analysis.load(analysis.discover(tmp_path))
    rows = [f for f in findings._reproducibility_findings(m) if f["topic"] == "machine"]
    assert rows and rows[0]["source"] == "only02/scenario_a.csv"


def test_an_analysis_computes_its_findings_and_predictions_once_and_again_after_a_table_changes(
    tmp_path, monkeypatch
):
    """08 computed findings.csv three times (its cell, write_tables, the markdown) and the predictions four, 2 s of
    every 08; a merged table replaced since is a new analysis."""
    from cnnbench import predict

    make_run(tmp_path, "first", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    make_run(tmp_path, "second", "cpu", "Intel Core", {("resnet18", "train"): 11.0})
    m = analysis.load(analysis.discover(tmp_path))
    calls, real = [], predict.table
    monkeypatch.setattr(predict, "table", lambda merged: calls.append(1) or real(merged))
    first = analysis.findings_table(m)
    analysis.findings_markdown(m)
    written = analysis.write_tables(m, tmp_path)
    assert len(calls) == 1 and analysis.findings_table(m).finding.tolist() == first.finding.tolist()
    assert pd.read_csv(written["findings"]).finding.tolist() == first.finding.tolist()
    m.tables["scenario_a"] = m["scenario_a"].assign(throughput_img_s=20.0)
    assert analysis.findings_table(m).finding.tolist() != first.finding.tolist() and len(calls) == 2


def test_08s_table_3_shows_every_value_02s_shows(tmp_path):
    """Seed 000's Table 3 is built twice, for one run (02) and across runs (08); 08's listed its values by hand and
    left out the reserved device memory 02 shows (``train_peak_device_reserved_mib``)."""
    from cnnbench import tables

    d = make_run(
        tmp_path, "gpu", "cuda", "Tesla T4", {("resnet18", "train"): 100.0, ("resnet18", "eval"): 300.0}
    )
    memory = {"peak_device_mem_mib": 900.0, "peak_device_reserved_mib": 1200.0, "peak_rss_mib": 2000.0}
    rows = results.read_rows(d / "scenario_a.csv")
    results.write_rows(d / "scenario_a.csv", [{**r, **memory, "baseline_rss_mib": 500.0} for r in rows])
    a = analysis.load([d])["scenario_a"]
    ours, seeds_02 = analysis.summary(a), tables.performance_summary(a)
    values = [
        c for c in seeds_02 if c.startswith(("train_", "eval_")) and c != "eval_train_ratio"
    ]  # measured
    assert "train_peak_device_reserved_mib" in values and set(values) <= set(ours.columns), values


def test_the_highest_rate_finding_names_every_variant_knob_of_its_row():
    """It named precision and memory format only: a compiled bf16 row read 'resnet50 eval (bf16 channels_last)'."""
    import pandas as pd

    from cnnbench.analysis.findings import _run_findings

    row = {"model": "resnet50", "phase": "eval", "batch_size": 256, "status": "ok", "noisy": False}
    row |= {"precision": "bf16", "memory_format": "channels_last", "compile": "default"}
    row |= {"throughput_img_s": 1000.0, "throughput_ci95_img_s": 10.0, "achieved_gflops": 8000.0}
    ok = results.schema.declared(pd.DataFrame([row]), "scenario_a")
    (said,) = [f["finding"] for f in _run_findings("r", ok) if f["topic"] == "highest_rate"]
    assert "resnet50 eval (bf16 channels_last compile=default)" in said, said


def test_the_knee_finding_says_the_rule_that_placed_it():
    """03's knee is the smallest batch within 5% of the best or not distinguishable from it, yet 08 said "within
    5% of its best throughput from batch 32" of a batch 5.5% below the best (the CPU example's resnet50 eval)."""
    import pandas as pd

    from cnnbench.analysis.findings import _sweep_findings

    rows = [(32, 317.3, 19.5), (64, 300.0, 5.0), (128, 335.9, 23.5)]
    sw = pd.DataFrame(
        [
            {"run_name": "r", "model": "resnet50", "phase": "eval", "batch_size": b, "status": "ok"}
            | {"throughput_img_s": rate, "throughput_ci95_img_s": ci}
            for b, rate, ci in rows
        ]
    )
    (f,) = _sweep_findings(sw)
    assert f["numbers"].startswith("knee_batch_size=32") or "knee_batch_size=32" in f["numbers"]
    assert "within 5% of its best throughput or not distinguishable from it, from batch 32" in f["finding"]


def test_the_speedup_matrix_says_an_unbounded_interval_unbounded(outputs):
    """08's Table 8 shape printed a speedup whose interval has no upper bound as '[x, inf]'; it reads as
    cnnbench compare and the one-knob findings read it (compare.ratio_text)."""
    m = analysis.load(analysis.discover(outputs, ["laptop", "colab"]))
    sp = analysis.speedups(m["scenario_a"]).assign(speedup_high=math.inf)
    matrix = analysis.speedup_matrix(sp, "train")
    assert matrix.loc["resnet50", "colab / laptop (cross-device)"].endswith("x [95% interval unbounded]")
