import json
import math

import pytest

import cnnbench
from cnnbench import knobs, results
from conftest import ROOT


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    results.atomic_write_text(path, "one")
    results.atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in path.parent.iterdir()] == ["a.txt"]


def test_rows_append_resume_and_replace_errors(tmp_path):
    f = results.ResultsFile(tmp_path / "r.csv", key=["model", "batch_size"])
    f.append({"model": "resnet18", "batch_size": 32, "status": "ok", "throughput_img_s": 12.5})
    f.append({"model": "resnet18", "batch_size": 64, "status": "error", "error": "boom"})
    f.append({"model": "resnet18", "batch_size": 128, "status": "oom", "throughput_img_s": math.nan})
    assert f.done({"model": "resnet18", "batch_size": 32})
    assert f.done({"model": "resnet18", "batch_size": 128})
    assert not f.done({"model": "resnet18", "batch_size": 64})  # errors are measured again
    f.append({"model": "resnet18", "batch_size": 64, "status": "ok", "throughput_img_s": 20.0})
    rows = f.rows()
    assert [(r["batch_size"], r["status"]) for r in rows] == [("32", "ok"), ("128", "oom"), ("64", "ok")]
    assert rows[1]["throughput_img_s"] == "" and rows[0]["schema_version"] == str(cnnbench.SCHEMA_VERSION)
    assert "error" in rows[0]  # union of columns


def test_json_round_trip_turns_nan_into_null(tmp_path):
    results.write_json(tmp_path / "e.json", {"a": 1, "b": float("nan")})
    assert results.read_json(tmp_path / "e.json") == {"a": 1, "b": None}


def test_numpy_scalars_are_written_as_plain_numbers(tmp_path):
    import numpy as np

    f = results.ResultsFile(tmp_path / "r.csv", key=["model"])
    f.append(
        {
            "model": "m",
            "status": "ok",
            "throughput_img_s": np.float64(394.125),
            "n": np.int64(3),
            "noisy": np.bool_(False),
            "ci": np.float64("nan"),
        }
    )
    text = (tmp_path / "r.csv").read_text()
    assert "np." not in text and "numpy" not in text
    (row,) = f.rows()
    assert (row["throughput_img_s"], row["n"], row["noisy"], row["ci"]) == ("394.125", "3", "False", "")
    import pandas as pd

    assert pd.read_csv(tmp_path / "r.csv").throughput_img_s.dtype == float


def test_a_corrupt_file_is_refused_with_one_line(tmp_path):
    import pytest

    bad = tmp_path / "r.csv"
    bad.write_text("model,throughput_img_s\nm,np.float64(394.13)\n")
    with pytest.raises(results.CorruptResults, match="throughput_img_s") as err:
        results.ResultsFile(bad, ["model"]).rows()
    # one line, saying what to do and what follows (a rerun measures the moved rows again)
    assert "\n" not in str(err.value) and str(err.value).endswith(
        "move it away, and a rerun measures its rows again"
    )
    bad.write_text("model,throughput_img_s\nm,1,2,3\n")
    with pytest.raises(results.CorruptResults, match="line 2"):
        results.read_rows(bad)
    bad.write_text("schema_version,model\n1,m\n")
    with pytest.raises(results.CorruptResults, match="schema 1"):
        results.ResultsFile(bad, ["model"]).done({"model": "m"})


def test_result_files_get_normal_permissions(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        results.ResultsFile(tmp_path / "r.csv", ["model"]).append({"model": "m", "status": "ok"})
        results.write_json(tmp_path / "p.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "r.csv").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "p.json").stat().st_mode & 0o777 == 0o644


def test_writing_a_file_never_changes_the_process_umask(tmp_path, monkeypatch):
    """Setting the umask to learn it races with every other thread creating a file: writers leave it alone."""
    import os

    from cnnbench import paths

    old = os.umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", lambda *a: pytest.fail("the process umask was changed"))
        with paths.replacing(tmp_path / "r.csv") as f:
            f.write(b"x")
        paths.open_own(tmp_path / "own.log").close()
    finally:
        monkeypatch.undo()
        os.umask(old)
    assert (tmp_path / "r.csv").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "own.log").stat().st_mode & 0o777 == 0o640


def test_extend_replaces_a_whole_group(tmp_path):
    f = results.ResultsFile(tmp_path / "s.csv", key=["model", "step"])
    f.extend([{"model": "a", "step": i} for i in range(3)] + [{"model": "b", "step": 0}], group=["model"])
    f.extend([{"model": "a", "step": 0}], group=["model"])
    assert sorted((r["model"], r["step"]) for r in f.rows()) == [("a", "0"), ("b", "0")]


# --- which rows are this run's: one rule, the results layer's (issue 21) ------------------------------------------


def test_only_the_latest_plan_of_each_writer_is_current(tmp_path):
    f = results.ResultsFile(tmp_path / "t.csv", ("model", "bs"))
    for row in ({"model": "a", "bs": 8}, {"model": "b", "bs": 8}, {"model": "a", "bs": 16}):
        f.append({**row, "status": "ok"})
    assert len(f.current()) == 3  # nothing planned: a file written whole, every row current
    f.plan([{"model": "a", "bs": 8}, {"model": "b", "bs": 8}], "first")
    f.plan([{"model": "a", "bs": 16}], "second")  # another writer of the same file keeps its own rows
    assert [(r["model"], r["bs"]) for r in f.current()] == [("a", "8"), ("b", "8"), ("a", "16")]
    f.plan([{"model": "b", "bs": 8}], "first")  # the first writer ran again with other params
    assert [(r["model"], r["bs"]) for r in f.current()] == [("b", "8"), ("a", "16")]
    assert len(f.rows()) == 3  # the old rows stay in the file, for a rerun with the old params to resume


def test_every_table_is_declared_once_with_its_notebook_and_key():
    assert results.table("scenario_a").notebook == "02_scenario_a"
    assert results.table("tuning").plan_columns and "row_kind" not in results.table("tuning").plan_columns
    with pytest.raises(KeyError, match="unknown results table 'nope'; known: complexity, scenario_a"):
        results.table("nope")


def test_a_rerun_with_other_models_and_size_shows_only_its_own_rows(tmp_path):
    """Issue 21: run 'pc' with smoke's two models, then again with image_size 48 and squeezenet only: 04's inputs
    and 08's merge showed mnist_cnn and squeezenet at 32 px as this run's (filtered on the protocol only)."""
    import cnnbench
    from cnnbench import analysis, roofline, scenarios
    from conftest import ROOT

    smoke, fast = (
        ROOT / "params" / "smoke.yaml",
        {"processes": 1, "max_processes": 1, "repeats": 1, "isolate": False},
    )
    first = cnnbench.open_run(smoke, {**fast, "phases": ["eval"]}, tmp_path / "pc")
    scenarios.measure(first, "scenario_a", scenarios.scenario_a_configs(first.params))
    again = cnnbench.open_run(
        smoke, {**fast, "phases": ["eval"], "image_size": 48, "models": ["squeezenet1_1"]}, tmp_path / "pc"
    )
    scenarios.measure(again, "scenario_a", scenarios.scenario_a_configs(again.params))
    assert len(results.read_rows(tmp_path / "pc" / "scenario_a.csv")) == 3  # the first invocation's rows stay
    shown = roofline.read_inputs(again)["scenario_a"]
    assert shown[["model", "image_size"]].values.tolist() == [["squeezenet1_1", 48]]
    (tmp_path / "pc" / "environment.json").write_text(json.dumps({"schema_version": cnnbench.SCHEMA_VERSION}))
    merged = analysis.load([tmp_path / "pc"])
    assert merged["scenario_a"][["model", "image_size"]].values.tolist() == [["squeezenet1_1", 48]]
    assert set(merged["telemetry"].image_size) <= {48}


def test_a_cpu_runs_machine_is_named_once_and_a_gpus_with_its_host():
    """The walk: compare's header read "AMD EPYC on AMD EPYC (2 cores, avx2)"."""
    from cnnbench.results.runs import machine_label

    assert machine_label("AMD EPYC", "AMD EPYC (2 cores, avx2)") == "AMD EPYC (2 cores, avx2)"
    assert machine_label("Tesla T4", "Intel Xeon (1 cores) + Tesla T4 15 GiB") == (
        "Tesla T4 on Intel Xeon (1 cores) + Tesla T4 15 GiB"
    )
    assert machine_label(None, None) == "?"


def test_runs_differing_in_any_protocol_key_say_so_beside_a_merge(tmp_path):
    """A 3-step GPU run beside one with windows of at least 0.25 s: the merge names min_window_s (its key list
    repeated the protocol's by hand and lacked it, window_s, max_processes and ci_target_pct)."""
    from cnnbench.results import runs, schema

    dirs = []
    for name, floor in (("a", 0.0), ("b", 0.25)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "params.json").write_text(json.dumps({"measured_steps": 3, "min_window_s": floor}))
        dirs.append(tmp_path / name)
    assert list(runs.config_differences(dirs).key) == ["min_window_s"]
    assert set(schema.PROTOCOL_KEYS) <= set(runs.RUN_CONFIG_KEYS)


def test_a_run_folder_copied_from_another_machine_resumes_nothing_measured_there(
    tmp_path, monkeypatch, capsys
):
    """Issue 44: a run folder copied from another machine resumed with "kept 12 of 12": the key held the device
    kind, not the machine. Its rows are kept in the file, never shown or resumed as this machine's."""
    import cnnbench
    from cnnbench import scenarios
    from cnnbench.results import files
    from conftest import ROOT

    fast = {"processes": 1, "max_processes": 1, "repeats": 1, "isolate": False, "phases": ["eval"]}
    run = cnnbench.open_run(
        ROOT / "params" / "smoke.yaml", {**fast, "models": ["mnist_cnn"]}, tmp_path / "pc"
    )
    monkeypatch.setattr(
        files, "host_id", lambda: "elsewhere"
    )  # measured on another machine, then copied here
    scenarios.measure(run, "scenario_a", scenarios.scenario_a_configs(run.params))
    monkeypatch.undo()
    here = files.host_id()
    assert here != "elsewhere" and results.read(run.dir, "scenario_a").host_id.tolist() == ["elsewhere"]
    capsys.readouterr()
    shown = scenarios.measure(run, "scenario_a", scenarios.scenario_a_configs(run.params))
    assert "kept 0 of 1" in capsys.readouterr().out  # was: kept 1 of 1
    assert shown.host_id.tolist() == [here] and len(results.read_rows(run.dir / "scenario_a.csv")) == 2


def test_a_row_of_a_file_written_before_its_key_held_the_machine_is_no_machines(tmp_path):
    f = results.file(tmp_path, "transfer")
    config = {k: "1" for k in f.key if k != results.files.HOST}
    results.write_rows(f.path, [{**config, "status": "ok"}])  # no host_id column
    assert not f.done(config)
    f.append({**config, "status": "ok"})
    assert f.done(config) and [r[results.files.HOST] for r in f.rows()] == ["", results.files.host_id()]


def test_a_key_holds_every_setting_that_changes_a_row():
    """Issue 44: isolate and telemetry_interval_s kept Scenario A's rows, synthetic_images (and the data folder,
    and isolate) the epochs' rows, transfer_epochs the grid's (3 -> 2 showed 3 epochs)."""
    import dataclasses

    import torch

    from cnnbench import params
    from cnnbench.measure import engine
    from cnnbench.results import schema

    p = params.validate({"models": ["mnist_cnn"]}, check_device=False)
    cfg, cpu = engine.config(p, "mnist_cnn", "train"), torch.device("cpu")
    for change in ({"isolate": False}, {"telemetry_interval_s": 0.5}):
        other = dataclasses.replace(p, **change)
        assert engine.config_key(cfg, cpu, p) != engine.config_key(cfg, cpu, other), change
    assert {"synthetic_images", "data_path", "isolate"} <= set(schema.epoch_keys())
    assert "epochs" in schema.TRANSFER_GRID_KEYS
    measured = [schema.config_keys(), schema.epoch_keys(), schema.phase_plan(), schema.profile_plan()]
    measured += [schema.layer_plan(), schema.search_keys(), schema.SCALING_PLAN, schema.SCRATCH_PLAN]
    assert all(results.files.HOST in keys for keys in [*measured, schema.TRANSFER_GRID_KEYS])


@pytest.mark.parametrize(
    "tamper, says",
    [
        ({"throughput_img_s": "-250.5"}, "line 3, column 'throughput_img_s' holds -250.5"),
        ({"throughput_ci95_img_s": "inf"}, "line 3, column 'throughput_ci95_img_s' holds inf"),
        ({"step_time_median_s": "nan"}, "line 3, column 'step_time_median_s' holds nan"),
        ({"batch_size": "8"}, "lines 2 and 3 hold the same configuration"),
    ],
)
def test_a_tampered_table_is_refused_in_one_line_naming_the_file_and_the_row(tmp_path, tamper, says):
    """Issue 44: a negative rate was shown in the report as measured, a duplicated row silently won, an inf rate
    failed 08 without naming the file and made compare print "infx [inf, inf]". The results layer refuses."""
    f = results.file(tmp_path, "scenario_a")
    for bs in (8, 16):
        f.append({"model": "m", "batch_size": bs, "status": "ok", "throughput_img_s": 100.0 + bs})
    rows = results.read_rows(f.path)
    results.write_rows(f.path, [rows[0], {**rows[1], **tamper}])
    for read in (lambda: results.read(tmp_path, "scenario_a"), f.current):
        with pytest.raises(results.CorruptResults) as err:
            read()
        assert str(err.value).startswith(f"{f.path}: {says}") and "\n" not in str(err.value), err.value


def test_a_table_far_larger_than_any_run_writes_is_refused_before_the_report_works(tmp_path, capsys):
    """Issue 44: a 30,000-row scenario_a.csv kept `cnnbench report` busy past 5 minutes against its 23 s
    estimate. A run writes one row per configuration (a few dozen): a file of more than the bound is refused."""
    from test_analysis import make_run

    from cnnbench import pipeline
    from cnnbench.results import schema

    run = make_run(tmp_path, "big", "cpu", "Intel Core", {("resnet18", "train"): 10.0})
    (row,) = results.read_rows(run / "scenario_a.csv")
    most = schema.TABLES["scenario_a"].most_rows
    results.write_rows(run / "scenario_a.csv", [{**row, "batch_size": bs} for bs in range(1, most + 2)])
    with pytest.raises(results.CorruptResults, match=f"{most + 1:,} rows, more than a run writes"):
        results.read(run, "scenario_a")
    assert pipeline.main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{most + 1:,} rows" in err and not (run / "notebooks").exists()


def test_reading_a_table_yields_every_declared_column_with_its_dtype(tmp_path):
    import pandas as pd

    declared = results.table("scenario_a").dtypes
    assert declared["status"] == "str" and declared["throughput_ci95_img_s"] == "float64"
    results.file(tmp_path, "scenario_a").append({"model": "m", "phase": "train", "status": "ok"})
    df = results.read(tmp_path, "scenario_a")  # a file lacking most declared columns
    for col, dtype in declared.items():
        assert df[col].dtype == dtype, col
    assert df.throughput_ci95_img_s.isna().all() and df.machine_state.isna().all()
    assert df.status.tolist() == ["ok"]
    for name, t in results.TABLES.items():  # an absent table: every declared column, no rows
        empty = results.read(tmp_path / "none", name)
        assert empty.empty and {c: empty[c].dtype for c in t.dtypes} == t.dtypes, name
    assert isinstance(empty, pd.DataFrame)


def test_a_merged_table_no_run_holds_has_its_declared_columns(tmp_path):
    from cnnbench.results.runs import Merged

    m = Merged([], {})
    assert {"run_name", "status", "throughput_img_s", "host_id"} <= set(m["scenario_a"].columns)
    assert m["scenario_a"].empty


def test_a_run_file_that_is_a_fifo_or_a_folder_is_refused_not_waited_on(tmp_path):
    """Reading a FIFO blocks until something writes to it: a current_rows.json (or params.json) that is one, or
    a folder, is one line naming it, at once."""
    import os
    import signal

    os.mkfifo(tmp_path / "current_rows.json")
    (tmp_path / "params.json").mkdir()

    def waited(*_):
        raise TimeoutError("read a FIFO")

    old = signal.signal(signal.SIGALRM, waited)
    signal.alarm(20)  # a wait fails the test instead of hanging the suite
    try:
        for name in ("current_rows.json", "params.json"):
            with pytest.raises(results.CorruptResults, match=f"^{name} is not a file"):
                results.files.read_object(tmp_path / name, {})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("knob", [k for k, v in knobs.KNOBS.items() if v.run_wide])
def test_runs_differing_in_any_run_wide_knob_say_so_beside_a_merge(tmp_path, knob):
    """Two runs differing only in workers (or pin_memory, cudnn_benchmark, host_heap) were merged with "no
    configuration differences": the merge's key list named three of the seven run-wide knobs by hand."""
    from cnnbench.results import runs

    dirs = []
    for name, value in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "params.json").write_text(json.dumps({knob: value}))
        dirs.append(tmp_path / name)
    assert list(runs.config_differences(dirs).key) == [knob]


@pytest.mark.parametrize("name", sorted(results.TABLES))
def test_a_table_read_where_its_file_is_absent_has_its_key_and_declared_columns(tmp_path, name):
    """02 selects its telemetry rows by ``source``, a key column of the table; where every configuration failed no
    telemetry.csv is written, and the read gave a frame without columns (KeyError: 'source'): the notebook
    stopped. An absent file now reads as no rows with every column the table declares, its key's included."""
    table = results.read(tmp_path, name)
    assert table.empty and {*results.table(name).key, *results.table(name).dtypes} <= set(table.columns)


def test_telemetrys_value_is_a_declared_column_not_part_of_a_samples_key(tmp_path):
    """'value' was added to telemetry's key instead of its columns: two readings of one sample (an edited file) were
    read as two rows instead of being refused in one line."""
    t = results.table("telemetry")
    assert "value" not in t.key and "value" in t.dtypes
    sample = {"model": "m", "phase": "train", "source": "scenario_a", "t_s": 0.5, "metric": "rss_mib"}
    results.write_rows(tmp_path / "telemetry.csv", [{**sample, "value": 100.0}, {**sample, "value": 900.0}])
    with pytest.raises(results.CorruptResults, match="hold the same configuration") as err:
        results.read(tmp_path, "telemetry")
    assert "\n" not in str(err.value)


def test_merging_the_example_run_says_nothing_about_pandas_internals():
    """`cnnbench report examples/example-cpu-2core` printed pandas' "DataFrame is highly fragmented" warning:
    results.runs.load stamped the run's identity on each table as read, many columns added one at a time,
    without taking a whole copy first."""
    import warnings

    import pandas as pd

    from cnnbench.results import runs

    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        merged = runs.load([ROOT / "examples" / "example-cpu-2core"])
    assert len(merged["scenario_a"])
