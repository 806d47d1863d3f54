"""Issue 31: a first trusted number early, and no configuration measured twice for nothing. 03 takes the batch sizes
02 measured from 02's rows (marked ``measured_in``) instead of measuring them again; 02 measures its headline
configurations (the first model's training step) to the end before the others."""

import dataclasses
import functools

import pandas as pd
from test_runner import CPU, PROTO, cfg, fake_measure

from cnnbench import results
from cnnbench.measure import engine, reproducibility, runner
from cnnbench.results.runs import Merged

FIXED = dataclasses.replace(PROTO, max_processes=3)


def test_a_sweep_takes_the_batch_sizes_02_measured_from_02s_rows(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0] * 9, 16: [150.0] * 9}, calls))
    (a,) = runner.run_configs([cfg(8)], CPU, FIXED, tmp_path / "scenario_a.csv")
    calls.clear()
    rows = runner.run_configs(
        [cfg(8), cfg(16)], CPU, FIXED, tmp_path / "batch_sweep.csv", reuse=tmp_path / "scenario_a.csv"
    )
    assert calls == [16, 16, 16]  # batch 8 was not measured again
    by_bs = {r["batch_size"]: r for r in rows}
    assert by_bs["8"]["measured_in"] == "scenario_a" and by_bs["16"]["measured_in"] == ""
    assert by_bs["8"]["throughput_img_s"] == a["throughput_img_s"]
    tables = {"scenario_a": results.frame([a]), "batch_sweep": results.frame(rows)}
    pairs = reproducibility.repeated(Merged(["r"], {}, tables))
    assert pairs.empty  # a copy is not a second measurement


def test_a_sweeps_first_run_and_its_rerun_say_the_same_total(tmp_path, monkeypatch, capsys):
    """03's first run said "kept 0 of 1 configurations from batch_sweep.csv; measured 1" for a sweep of 2 (1 taken
    from 02's rows), its rerun "kept 2 of 2": the line's total is the notebook's configurations, and those taken
    from 02 are named in it."""
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0] * 9, 16: [150.0] * 9}, []))
    runner.run_configs([cfg(8)], CPU, FIXED, tmp_path / "scenario_a.csv")
    sweep = dict(path=tmp_path / "batch_sweep.csv", reuse=tmp_path / "scenario_a.csv")
    capsys.readouterr()
    runner.run_configs([cfg(8), cfg(16)], CPU, FIXED, **sweep)
    said = capsys.readouterr().out
    assert "kept 0 of 2 configurations from batch_sweep.csv, 1 taken from scenario_a.csv; measured 1" in said
    runner.run_configs([cfg(8), cfg(16)], CPU, FIXED, **sweep)
    assert "kept 2 of 2 configurations from batch_sweep.csv; measured 0" in capsys.readouterr().out


def test_a_sweep_measures_a_batch_size_02_has_no_finished_row_for(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0] * 9}, calls))
    runner.run_configs([cfg(8)], CPU, FIXED, tmp_path / "batch_sweep.csv", reuse=tmp_path / "absent.csv")
    assert calls == [8, 8, 8]


def test_the_headline_is_measured_to_the_end_before_the_others_and_kept(tmp_path, monkeypatch):
    calls = []
    rates = {8: [100.0] * 9, 16: [150.0] * 9}
    monkeypatch.setattr(engine, "measure", fake_measure(rates, calls))
    configs, path = [cfg(8), cfg(16)], tmp_path / "scenario_a.csv"
    first = runner.run_configs(configs, CPU, FIXED, path, only=configs[:1])
    assert calls == [8, 8, 8] and [r["batch_size"] for r in first] == ["8"]
    rows = runner.run_configs(configs, CPU, FIXED, path)
    assert calls == [8, 8, 8, 16, 16, 16]
    assert sorted(r["batch_size"] for r in rows) == ["16", "8"]
    assert len(results.frame(results.ResultsFile(path, results.config_keys()).current())) == 2


def test_a_fresh_run_that_measured_its_headline_first_says_it_kept_nothing(tmp_path, monkeypatch, capsys):
    """The CI failure of b6dacf7: after the headline pass, 02 said "kept 1 of 2 configurations" on a fresh run;
    what this process measured itself is not kept from an earlier run, and the headline pass says no total."""
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0] * 9, 16: [150.0] * 9}, []))
    configs, path = [cfg(8), cfg(16)], tmp_path / "scenario_a.csv"
    runner.run_configs(configs, CPU, FIXED, path, only=configs[:1])
    runner.run_configs(configs, CPU, FIXED, path)
    said = capsys.readouterr().out
    assert said.count("kept ") == 1 and "kept 0 of 2 configurations from scenario_a.csv; measured 2" in said
    runner.run_configs(configs, CPU, FIXED, path, only=configs[:1])
    # a rerun in another kernel would keep both, as this one does
    runner.run_configs(configs, CPU, FIXED, path)
    assert "kept 2 of 2 configurations from scenario_a.csv; measured 0" in capsys.readouterr().out


def test_the_headline_is_the_first_models_training_step_in_every_variant():
    from cnnbench import params, scenarios

    p = params.validate(
        {"models": ["resnet18", "resnet50"], "variants": [{}, {"memory_format": "channels_last"}]}
    )
    heads = scenarios.headline(scenarios.scenario_a_configs(p))
    assert {(c.model, c.phase) for c in heads} == {("resnet18", "train")} and len(heads) == 2


def test_a_first_number_line_says_whether_it_is_precise():
    from cnnbench import scenarios

    row = {"model": "resnet18", "phase": "train", "batch_size": 128, "status": "ok"}
    tight = pd.DataFrame([{**row, "throughput_img_s": 100.0, "throughput_ci95_img_s": 2.0}])
    wide = pd.DataFrame([{**row, "throughput_img_s": 100.0, "throughput_ci95_img_s": 30.0}])
    assert "first trusted number" in scenarios.first_number(tight)
    assert "not yet precise" in scenarios.first_number(wide)


def test_a_partial_report_is_built_between_notebooks_after_a_long_one_and_goes_with_the_report(tmp_path):
    """A build beside 02's measurement (nice 19 in the background) still moved the CPU's probe 120% and showed as
    other processes' load: it is built between notebooks, while nothing measures, after those that took a minute
    or more (a short notebook adds little to read)."""
    from cnnbench import pipeline, report

    (tmp_path / "environment.json").write_text('{"device_name": "cpu", "device_kind": "cpu"}')
    builds = functools.partial(pipeline._partial_report, tmp_path, 9)
    builds([], took_s=5.0)
    assert not (tmp_path / report.PARTIAL).exists()
    builds([], took_s=pipeline.PARTIAL_AFTER_S)  # returns once built
    page = (tmp_path / report.PARTIAL).read_text()
    # true after a stop too: the H100 example's page, built before the run was stopped, said "the run goes on"
    assert (
        "Partial report: 0 of 9 notebooks done</strong> when this page was written (20" in page
        and "the run goes on" not in page
    )
    assert "FAILED.txt" in page
    assert not (tmp_path / "report.html").exists()
    report.build_run_report(tmp_path, [])
    assert not (tmp_path / report.PARTIAL).exists()


def test_a_headline_that_failed_is_not_measured_again_nor_counted_as_kept(tmp_path, monkeypatch, capsys):
    """Issue 44: a headline configuration that ended in an error row was measured again by the full pass, which
    then said "kept -1 of 1 configurations"."""
    calls = []
    ok = fake_measure({16: [150.0] * 9}, calls)

    def fails_at_8(c, *a, **k):
        if c.batch_size == 8:
            calls.append(8)
            return {**engine.config_key(c, CPU, FIXED), "status": "error", "error": "RuntimeError: x"}
        return ok(c, *a, **k)

    monkeypatch.setattr(engine, "measure", fails_at_8)
    configs, path = [cfg(8), cfg(16)], tmp_path / "scenario_a.csv"
    runner.run_configs(configs, CPU, FIXED, path, only=configs[:1])
    rows = runner.run_configs(configs, CPU, FIXED, path)
    assert calls.count(8) == 1 and {r["batch_size"]: r["status"] for r in rows} == {"8": "error", "16": "ok"}
    assert "kept 0 of 2 configurations from scenario_a.csv; measured 2" in capsys.readouterr().out


def test_a_first_number_line_names_its_variant_and_an_interval_only_where_there_is_one():
    """The H200 example's three lines all read "resnet50 train bs=256" (fp32, tf32, bf16 channels_last); one
    process read "... (one process: no interval) (95% interval)"."""
    from cnnbench import scenarios

    row = {"model": "resnet50", "phase": "train", "batch_size": 256, "status": "ok"}
    rates = [(1064.9, 1.1, "fp32", "nchw"), (4722.3, 27.4, "bf16", "channels_last")]
    rows = pd.DataFrame(
        [
            {**row, "throughput_img_s": r, "throughput_ci95_img_s": c, "precision": p, "memory_format": f}
            for r, c, p, f in rates
        ]
    )
    lines = scenarios.first_number(rows).splitlines()
    assert "resnet50 fp32 nchw train bs=256" in lines[0] and "(95% interval)" in lines[0]
    assert "resnet50 bf16 channels_last train bs=256" in lines[1]
    one = rows.iloc[:1].assign(throughput_ci95_img_s=float("nan"))
    text = scenarios.first_number(one)
    assert "no interval" in text and "95% interval" not in text
