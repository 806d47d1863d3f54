"""The seeds' numbers: transcribed, each beside ours, their own inconsistencies computed; seed 000's epochs."""

import pandas as pd
import pytest

import cnnbench
from cnnbench import analysis, params, published, scenarios
from conftest import ROOT

SMOKE = ROOT / "params" / "smoke.yaml"


def test_seed_003_resnet50_intensity_is_its_batch_128_value():
    assert published.AI_003["resnet50"] == 238.0 and published.AI_BY_BATCH_003[64] == 234.0


def test_every_seed_has_its_tables_transcribed():
    assert set(published.EPOCHS_000.model) == set(published.COMPLEXITY_000.model)
    assert len(published.EPOCHS_000) == len(published.UTILISATION_000) == 12
    assert (
        published.THROUGHPUT_000.set_index(["model", "device_class"]).peak_gpu_mem_mb[("resnet50", "t4")]
        == 11345
    )
    assert len(published.ACHIEVED_003) == 8 and set(published.PEAKS_003.device_class) == {
        "rtx4080",
        "cpu",
        "t4",
    }
    assert published.BACKENDS_001.set_index("backend").throughput_img_s["numba_cuda"] == 71758
    assert published.TELEMETRY_002.gpu_util_pct.max() == 69
    assert published.MEMORY_004.set_index("component").gpu_mb["total"] == 274.1


def test_the_seeds_inconsistencies_are_computed_from_their_own_numbers():
    rows = published.inconsistencies()
    text = " | ".join(rows.computed_from_its_own_numbers)
    assert "6,400 images in 22 of 24 cases; SqueezeNet on T4: 3,199" in text
    assert "resnet18 40.8" in text  # 0.0408 GFLOP/MB
    assert "resnet50 t4_over_apple: printed 1.93, Table 3 gives 1.95" in text and "35.6x" in text
    assert "71,758" not in text  # 001's average throughput is its mean of per-epoch rates: nothing to check
    assert "10.3% of memory" in text  # 002's 69% is GPU-Util
    assert "1107 img/s x 5.46 G = 6.04" in text and "1.7-3.2x" in text
    assert "0.064 MB" in text and "370 MB" in text


def test_seed_001_samples_are_its_padded_epoch_and_seed_004_prints_no_parameter_count():
    rows = published.inconsistencies()
    text = " | ".join(rows.computed_from_its_own_numbers)
    assert "epochs padded to 60,416" in published.BACKENDS_001.configuration.iloc[0]
    assert "numba_cuda" not in set(published.corrections().device)  # issue 42: its definition explains it
    claims = " | ".join(rows.published)
    assert "7,950" not in claims and "parameters take 7.9 MB" in claims
    assert "7,960 parameters x 8 bytes (float64) = 0.064 MB" in text
    assert set(rows.seed.str[:3]) == {"000", "001", "002", "003", "004"}


def test_seed_002_cpu_run_states_no_batch_size_and_its_accuracy_is_99_in_section_d():
    t = published.TIMES_002
    cpu = t[t.device_class == "cpu"].iloc[0]
    assert pd.isna(cpu.batch_size) and cpu.train_20_epochs_h == 13  # "around 13 hours", no batch size stated
    acc = t.set_index(t.batch_size.fillna(0)).test_accuracy_pct
    assert acc[0] == acc[64] == 99  # section D: "The test accuracy seems to be 99% in both cases"
    assert pd.isna(acc[128])  # batch 128: "without hampering the accuracy", no figure
    assert "98-99%" in cpu.configuration and "CPU batch size not stated" in cpu.configuration
    assert t.inference_s_per_image.tolist()[:2] == [5, 2.5] and "'2-3 s'" in cpu.configuration


def test_seed_003_cpu_row_ran_50_measured_iterations_at_the_examples_resolution():
    t = published.THROUGHPUT_003.set_index("device_class")
    assert "10 warm-up + 50 measured iterations" in t.configuration["cpu"]
    assert all("10 warm-up + 100 measured iterations" in c for c in t.configuration[["rtx4080", "t4"]])
    assert all("224 px crops, a 1000-class head" in c and "not stated" not in c for c in t.configuration)


def test_seed_000_throughput_rows_carry_the_batch_size_its_section_2_3_states():
    b = published.THROUGHPUT_000.groupby("model").batch_size.unique()
    assert b["squeezenet1_1"].tolist() == [64] and b["resnet50"].tolist() == [128]
    assert "text says 128, 256, 512, table 32, 64, 128" in published.SWEEP_000.configuration.iloc[0]


def test_seed_tables_exist_once_and_05s_names_are_the_same_objects():
    from cnnbench import scratch

    assert scratch.published is published  # 05's name for the seeds' numbers is the one module, no alias
    assert "gradient" in set(
        published.OPS_004.operation
    )  # cnnbench.scratch's op kind, so beside_seed_004 joins
    assert published.TIMES_004.set_index("what").cpu_ms["total_training"] == pytest.approx(42.3e3)


def test_the_seeds_errors_not_surfaced_before_are_computed_from_the_stored_numbers():
    rows = published.inconsistencies()
    text = " | ".join(rows.computed_from_its_own_numbers)
    notes = " | ".join(rows.note)
    # seed 003: the desktop RTX 4080's peak for a laptop GPU; our spec table's laptop row moves 11.4% to 16.2%
    assert "resnet18 bs128: 5.5 / 33.9 = 16.2% (printed 11.4%)" in text and "desktop RTX 4080" in notes
    # seed 004: its per-op times are its whole iteration
    assert "CPU: operations sum to 84.6 ms, Table 3's iteration 84.6 ms" in text
    assert "GPU: operations sum to 30.2 ms, Table 3's iteration 30.2 ms" in text and "exactly" in notes
    # seed 004: Kaggle's digit-recognizer cannot give its split
    assert "59,000 + 1,000 = 60,000 labelled images; the Kaggle file's train.csv has 42,000" in text
    # seed 000: its text and Table 6 disagree on the batches of the sweep
    assert "its Table 6 (lines 240-242) has batch sizes 32, 64, 128" in text
    assert "batch sizes 128, 256, 512" in " | ".join(rows.published)


def test_published_tables_shown_alone_and_labelled_without_our_csv():
    alone = analysis.beside("times_002", {"transfer": pd.DataFrame()})
    assert alone.source.unique().tolist() == [f"published by {published.SEED_002}"]
    assert "no run of this analysis wrote transfer.csv" in alone.note.iloc[0]
    ours = pd.DataFrame(
        [
            {
                "run_name": "laptop",
                "device_class": "cpu",
                "epoch_s": 3.0,
                "throughput_img_s": 2e4,
                "status": "ok",
            }
        ]
    )
    both = analysis.beside("times_002", {"transfer": ours})
    assert both.source.tolist()[-1] == "ours: laptop" and both.epoch_s.tolist()[-1] == 3.0


def test_epochs_beside_published_label_the_6400_image_epoch():
    t = analysis.beside("epochs_000")
    assert set(t.images) == {6400, 3200}
    assert t[(t.model == "squeezenet1_1") & (t.device == "t4")].images.iloc[0] == 3200


def test_epochs_beside_ours_shows_no_stray_index():
    # 08 showed the rows' positions before sorting as an index column (show() prints a non-range index)
    ours = pd.DataFrame(
        [
            {"run_name": "laptop", "model": m, "device_name": "cpu", "train_images": 64, "status": "ok"}
            | {"train_epoch_s": 2.0, "val_epoch_s": 1.0}
            for m in ("squeezenet1_1", "resnet50")
        ]
    )
    t = analysis.beside("epochs_000", {"epochs": ours})
    assert isinstance(t.index, pd.RangeIndex) and (t.source == "ours: laptop").sum() == 2
    assert t.model.is_monotonic_increasing


def test_epoch_images_caps_every_epoch(tmp_path):
    run = cnnbench.open_run(
        SMOKE, {"epoch_mode": True, "epoch_images": 24, "models": ["mnist_cnn"]}, tmp_path / "r"
    )
    row = scenarios.epochs(run).iloc[0]  # batch 16: the epoch stops at the batch that reaches 24 images
    assert row.status == "ok" and row.train_images == 32 and row.val_images == 32 and row.epoch_images == 24
    run = cnnbench.open_run(
        SMOKE,
        {
            "epoch_mode": True,
            "epoch_images": 24,
            "epoch_images_per_model": {"mnist_cnn": 16},
            "models": ["mnist_cnn"],
        },
        tmp_path / "s",
    )
    assert scenarios.epochs(run).iloc[0].train_images == 16


def test_seeds_full_reproduces_seed_000s_epoch_and_keys_are_validated():
    assert (
        params.load(ROOT / "params" / "seeds_full.yaml", {"download": True}, check_device=False).epoch_images
        == 6400
    )
    with pytest.raises(params.ParamsError, match="epoch_images"):
        params.load(SMOKE, {"epoch_images": -1}, check_device=False)
    with pytest.raises(params.ParamsError, match="epoch_images_per_model"):
        params.load(SMOKE, {"epoch_images_per_model": {"nope": 5}}, check_device=False)


def test_seed_004_ops_beside_our_ms_per_op_kind_per_run():
    ops = pd.DataFrame(
        [
            {
                "run_name": run,
                "model": "mlp",
                "op_kind": kind,
                "op": f"{kind}_{i}",
                "backend": backend,
                "median_ms": ms * (2 if run == "b" else 1),
                "mean_ms": ms,
                "status": "ok",
                "phase": "forward",
            }
            for run in ("a", "b")
            for kind, ms in (("matmul", 1.0), ("relu", 0.25))
            for backend in ("numpy", "torch_cpu")
            for i in range(2)
        ]
    )
    t = analysis.beside("ops_004", {"backend_ops": ops}).set_index(["run_name", "op_kind"])
    assert (
        t.loc[("a", "matmul"), "ours_ms: numpy"] == 2.0 and t.loc[("b", "relu"), "ours_ms: torch_cpu"] == 1.0
    )
    assert t.loc[("b", "matmul"), f"published by {published.SEED_004}: numpy_ms"] == 42.3
    alone = analysis.beside("ops_004")
    assert "no run of this analysis wrote backend_ops.csv" in alone.note.iloc[0]


def test_seed_002_snapshots_beside_our_telemetry_summarised_per_run_configuration_and_gpu():
    rows = [
        {
            "run_name": "gpu",
            "device_name": "T4",
            "source": "scenario_a",
            "model": model,
            "phase": "train",
            "batch_size": 64,
            "t_s": t / 10,
            "metric": metric,
            "value": value + gpu * 100 + t % 2,
            "device_index": gpu if metric != "util_cpu_pct" else pd.NA,
        }
        for model in ("resnet18", "resnet50")
        for t in range(500)
        for gpu in (0, 1)
        for metric, value in (
            ("util_device_pct", 50.0),
            ("gpu_power_w", 70.0),
            ("gpu_temp_c", 60.0),
            ("gpu_mem_used_mib", 3000.0),
            ("util_cpu_pct", 20.0),
        )
    ]
    t = analysis.beside("telemetry_002", {"telemetry": pd.DataFrame(rows)})
    assert len(t) == len(published.TELEMETRY_002) + 4  # 2 configurations x 2 GPUs, not one row per sample
    ours = t[t.source == "ours: gpu"].set_index(["model", "gpu"])
    assert (
        ours.loc[("resnet18", 1), "gpu_util_mean_pct"] == 150.5
        and ours.loc[("resnet18", 1), "gpu_util_max_pct"] == 151
    )
    assert (
        ours.loc[("resnet50", 0), "gpu_power_w_mean"] == 70.5
        and ours.loc[("resnet50", 0), "gpu_temp_c_max"] == 61
    )
    assert ours.loc[("resnet50", 0), "gpu_mem_used_max_mib"] == 3001 and (ours.samples == 500).all()
    assert "metric" not in t and "value" not in t
    cpu_only = pd.DataFrame(rows)[lambda d: d.metric == "util_cpu_pct"]
    assert (
        "no run of this analysis sampled a GPU"
        in analysis.beside("telemetry_002", {"telemetry": cpu_only}).note.iloc[0]
    )


def _backend_rows(model, backend, rates, run="laptop"):
    return [
        {
            "run_name": run,
            "backend": backend,
            "model": model,
            "device_name": "cpu",
            "threads": 2,
            "epoch": i + 1,
            "steps": 10,
            "images": 1000,
            "epoch_s": 1000 / r,
            "train_loss": 0.5,
            "test_accuracy": 0.9,
            "jit_s": None,
            "status": "ok",
        }
        for i, r in enumerate(rates)
    ]


def test_seed_001_is_beside_our_cnn_only_with_a_model_column():
    # issue 17: 08's table stacked the MLP's rows (numpy 1,404,098 img/s) with seed 001's CNN, no model column
    ours = pd.DataFrame(
        _backend_rows("mnist_cnn", "numpy", [4000, 5000, 6000])
        + _backend_rows("mlp", "numpy", [1.4e6, 1.4e6])
    )
    t = analysis.beside("backends_001", {"backends": ours})
    assert "model" in t.columns and set(t.model) == {"mnist_cnn"}
    mine = t[t.source == "ours: laptop"]
    assert mine.backend.tolist() == ["numpy"]
    assert mine.throughput_img_s.iloc[0] == pytest.approx(2000 / (1000 / 5000 + 1000 / 6000))  # epochs 2-3
    assert t.throughput_img_s.max() < 1e6
    alone = analysis.beside(
        "backends_001", {"backends": pd.DataFrame(_backend_rows("mlp", "numpy", [1.4e6]))}
    )
    assert "no run of this analysis wrote backends.csv" in alone.note.iloc[0] and set(alone.model) == {
        "mnist_cnn"
    }


def test_seed_004_memory_blocks_are_labelled_and_the_mlp_only():
    rows = [
        {
            "run_name": "laptop",
            "backend": b,
            "model": m,
            "component": c,
            "computed_mib": 1.0,
            "measured_mib": 2.0,
            "status": "ok",
        }
        for m in ("mnist_cnn", "mlp")
        for b in ("numpy", "torch_cpu")
        for c in ("parameters", "step_total")
    ]
    t = analysis.beside("memory_004", {"backend_memory": pd.DataFrame(rows)})
    assert t[["source", "backend", "model", "component"]].notna().all().all()
    blocks = list(dict.fromkeys(zip(t.source, t.backend, t.model, strict=True)))
    assert len(blocks) == 2 + 2 and blocks[0][1:] == ("numpy", "mlp") and blocks[1][1:] == ("cupy", "mlp")
    assert set(t.model) == {"mlp"}  # seed 004's network only
    pub = t[(t.backend == "numpy") & (t.component == "parameters") & t.source.str.startswith("published")]
    assert pub.published_mb.iloc[0] == published.MEMORY_004.set_index("component").cpu_mb["parameters"]
    assert t[t.source == "ours: laptop"].measured_mb.iloc[0] == pytest.approx(2 * 2**20 / 1e6)


def test_seeds_full_reproduces_each_seeds_configuration_with_the_real_validation():
    """Issue 18: params/seeds_full.yaml, loaded by cnnbench.params.load, holds each seed's keys where one file can."""
    p = params.load(ROOT / "params" / "seeds_full.yaml", {"download": True}, check_device=False)
    s000, s001, s003, s004 = (published.setup(s) for s in ("000", "001", "003", "004"))
    assert (
        p.max_batches * p.batch_size == published.EPOCH_IMAGES_000 == p.epoch_images
    )  # 000's 6,400-image epoch
    assert (p.dataset, p.image_size, p.num_classes, p.workers) == (
        "tiny_imagenet",
        s000["image_px"],
        s000["classes"],
        s000["workers"],
    )
    assert p.batch_size_for("squeezenet1_1") == s000["batch_size_squeezenet1_1"]
    assert (p.warmup_steps, p.measured_steps) == (s003["warmup_iterations"], s003["measured_iterations"])
    assert p.sweep["resnet50"] == sorted(published.AI_BY_BATCH_003)  # 003's batches, 64 included
    assert (p.scratch_epochs, p.scratch_batch_size, p.scratch_lr) == (
        s001["epochs"],
        s001["batch_size"],
        s001["lr"],
    )
    assert (p.scratch_mlp_steps, p.scratch_mlp_lr, p.scratch_dataset) == (
        s004["iterations"],
        s004["lr"],
        "mnist",
    )
    assert p.profile_models == ["densenet121"] and p.profile_batch_size in set(
        published.TELEMETRY_002.batch_size
    )
    assert sorted(p.transfer_batch_sizes) == sorted(published.TELEMETRY_002.batch_size.unique())
    assert p.transfer_epochs == published.setup("002")["epochs"] and p.optimizer == "adam"
    text = (ROOT / "params" / "seeds_full.yaml").read_text()
    keys = [ln for ln in text.splitlines() if ln and not ln.startswith((" ", "#"))]
    assert len(keys) >= 50 and [ln for ln in keys if "  # " not in ln] == []  # every key says which seed line
    assert "What one file cannot reproduce" in text and "--set dataset=imagenette" in text


def test_every_published_table_is_shown_without_a_row_number_column():
    """The fifth round's one groupby over the seeds' stated figures kept each row's number in the whole list
    (161, 162, ...), and 08 showed it as a column of its own beside the seed's figures."""
    for name, table in published.tables().items():
        assert table.index.equals(pd.RangeIndex(len(table))), name


def test_seed_004s_parameter_memory_is_off_by_the_factor_its_numbers_give():
    """The note said "off by about 100x" of 7.9 MB against 7,960 float64 parameters' 0.064 MB: 124x, computed."""
    mem = published.table("MEMORY_004").set_index("component").cpu_mb["parameters"]
    sh = published.SHAPE_004
    n = sh["features"] * sh["hidden"] + sh["hidden"] + sh["hidden"] * sh["classes"] + sh["classes"]
    (note,) = published.inconsistencies()[lambda d: d.published.str.contains("parameters take")].note
    assert f"{mem / (n * 8 / 1e6):.0f}x" in note and "about 100x" not in note, note
