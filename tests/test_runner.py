"""The runner: several processes per configuration in interleaved rounds, an interval over processes, adaptive
stopping, and the machine's state judged (issue 17). A fake ``engine.measure`` gives each process a chosen rate."""

import dataclasses
import json
import math

import pandas as pd
import pytest
import torch

from cnnbench.measure import engine, runner, telemetry
from cnnbench.params import Params

CPU = torch.device("cpu")
PROTO = Params(
    warmup_steps=1,
    measured_steps=4,
    repeats=3,
    processes=3,
    max_processes=6,
    ci_target_pct=5.0,
    adapt_budget_s=60.0,
)


def cfg(bs=8, phase="train"):
    return engine.Config.of("mnist_cnn", phase, 28, 10, 1, batch_size=bs, workers=0)


def fake_measure(rates, calls, busy=False):
    """engine.measure whose k-th process of batch size bs runs at rates[bs][k] img/s, every window alike."""

    def measure(c, device, protocol, dataset=None, **kw):
        k = sum(1 for b in calls if b == c.batch_size)
        calls.append(c.batch_size)
        rate = rates[c.batch_size][min(k, len(rates[c.batch_size]) - 1)]
        n = protocol.measured_steps
        step = c.batch_size / rate
        walls = [n * step * f for f in (0.999, 1.0, 1.001)][: protocol.repeats]
        spans = [(i * 1.0, i * 1.0 + 0.5) for i in range(protocol.repeats)]
        series = [
            {"t_s": i + 0.25, "metric": m, "value": v, "device_index": None}
            for i in range(protocol.repeats)
            for m, v in (("cpu_steal_pct", 20.0 if busy else 0.0), ("util_other_cpu_pct", 1.0))
        ]
        summary = engine.timing.summarize(
            [w / n for w in walls for _ in range(n)], walls, [n] * len(walls), c.batch_size
        )
        return {
            **engine.config_key(c, device, protocol),
            "status": "ok",
            "error": "",
            "steps_per_window": n,
            "peak_rss_mib": 100.0 + k,
            "baseline_rss_mib": 50.0 + k,
            "cpu_steal_mean_pct": 20.0 if busy else 0.0,
            "util_other_cpu_mean_pct": 1.0,
            **summary,
            "step_times_s": [w / n for w in walls for _ in range(n)],
            "window_times_s": walls,
            "window_spans_s": spans,
            "telemetry_series": series,
        }

    return measure


def test_the_interval_spans_processes_and_covers_each_of_them(tmp_path, monkeypatch):
    """Three processes at 100, 130 and 115 img/s, each with windows within 0.1%: the interval of one process is
    tiny, the reported one covers all three processes' rates."""
    calls = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0, 130.0, 115.0]}, calls))
    proto = dataclasses.replace(PROTO, max_processes=3)
    (row,) = runner.run_configs([cfg()], CPU, proto, tmp_path / "r.csv", tmp_path / "s.csv")
    rate, half = float(row["throughput_img_s"]), float(row["throughput_ci95_img_s"])
    assert int(row["processes_measured"]) == 3
    assert float(row["throughput_process_min_img_s"]) == pytest.approx(100, rel=1e-3)
    assert float(row["throughput_process_max_img_s"]) == pytest.approx(130, rel=1e-3)
    assert half > 10 * float(row["throughput_ci95_within_img_s"])
    assert rate - half < 100 and rate + half > 130
    windows = pd.read_csv(tmp_path / "r_windows.csv")
    assert len(windows) == 9 and sorted(set(windows.process)) == [1, 2, 3]
    assert set(pd.read_csv(tmp_path / "s.csv").process) == {1, 2, 3}
    assert float(row["peak_rss_mib"]) == 102.0 and float(row["baseline_rss_mib"]) == 50.0


def test_configurations_are_measured_in_interleaved_rounds(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0], 16: [200.0], 32: [300.0]}, calls))
    runner.run_configs([cfg(8), cfg(16), cfg(32)], CPU, PROTO, tmp_path / "r.csv")
    rounds = [calls[i : i + 3] for i in range(0, 9, 3)]
    assert all(
        sorted(r) == [8, 16, 32] for r in rounds
    )  # every configuration once a round: drift falls on all
    assert (
        len({tuple(r) for r in rounds}) > 1
    )  # in an order drawn anew each round (seeded): none always first
    again = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0], 16: [200.0], 32: [300.0]}, again))
    runner.run_configs([cfg(8), cfg(16), cfg(32)], CPU, PROTO, tmp_path / "again.csv")
    assert again == calls  # the same seed, the same order


def test_rows_carry_each_rounds_rate_and_variants_one_knob_apart_are_divided_round_by_round(
    tmp_path, monkeypatch
):
    from cnnbench.measure import reproducibility

    calls = []
    monkeypatch.setattr(
        engine, "measure", fake_measure({8: [100.0, 90.0, 110.0], 16: [200.0, 180.0, 220.0]}, calls)
    )
    rows = runner.run_configs(
        [cfg(8), cfg(16)], CPU, dataclasses.replace(PROTO, max_processes=3), tmp_path / "r.csv"
    )
    rates = {
        int(r["batch_size"]): {int(k): v for k, v in json.loads(r["process_rates_img_s"]).items()}
        for r in rows
    }
    assert rates[8] == pytest.approx({1: 100.0, 2: 90.0, 3: 110.0})
    ratio, low, high, n = reproducibility.paired_ratio(rates[8], rates[16])
    # the machine moved 20% between rounds, and both with it: round by round the ratio is exactly 2
    assert n == 3 and ratio == pytest.approx(2.0) and low == pytest.approx(2.0) and high == pytest.approx(2.0)


def test_a_wide_interval_gets_more_processes_until_the_target_or_the_ceiling(tmp_path, monkeypatch):
    calls = []
    rates = {8: [100.0, 101.0, 100.5], 16: [100.0, 150.0, 80.0, 140.0, 90.0, 130.0, 95.0]}
    monkeypatch.setattr(engine, "measure", fake_measure(rates, calls))
    rows = runner.run_configs([cfg(8), cfg(16)], CPU, PROTO, tmp_path / "r.csv")
    by_bs = {int(r["batch_size"]): r for r in rows}
    assert by_bs[8]["stop_reason"] == "processes" and int(by_bs[8]["processes_measured"]) == 3
    assert by_bs[16]["stop_reason"] == "max_processes" and int(by_bs[16]["processes_measured"]) == 6
    assert calls.count(8) == 3 and calls.count(16) == 6


def test_no_budget_no_extra_processes_and_the_row_says_so(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0, 150.0, 80.0]}, calls))
    (row,) = runner.run_configs(
        [cfg()], CPU, dataclasses.replace(PROTO, adapt_budget_s=0), tmp_path / "r.csv"
    )
    assert row["stop_reason"] == "budget" and len(calls) == 3


def test_a_busy_machine_is_judged_busy_with_its_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0, 101.0, 100.0]}, [], busy=True))
    (row,) = runner.run_configs([cfg()], CPU, PROTO, tmp_path / "r.csv")
    assert row["machine_state"] == "busy" and "steal 20.0%" in row["machine_note"]
    windows = pd.read_csv(tmp_path / "r_windows.csv")
    assert (windows.cpu_steal_mean_pct == 20.0).all()
    assert int(row["busy_windows"]) == 9


def test_judge():
    assert telemetry.judge({"cpu_steal_mean_pct": 0.1, "util_other_cpu_mean_pct": 3.0})[0] == "quiet"
    state, note = telemetry.judge({"cpu_steal_mean_pct": 0.0, "util_other_cpu_mean_pct": 40.0})
    assert state == "busy" and "other processes 40%" in note
    state, note = telemetry.judge({"cpu_freq_mhz_min": 1800.0, "cpu_freq_mhz_max": 3000.0})
    assert state == "busy" and "1800-3000 MHz" in note
    assert telemetry.judge({"gpu_throttle_reasons": "sw_thermal"})[0] == "busy"
    assert telemetry.judge({})[0] == "unknown"


def test_process_cpu_never_exceeds_the_cores(monkeypatch):
    """CPU time is counted in ticks: a 0.1 s sample could read 218% on 2 cores. The reading is bounded, and the
    mean comes from the whole span's CPU time."""
    ticks = iter([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    cpu = iter([0.3, 0.5, 0.7, 0.9, 1.1, 1.3])  # 0.3 CPU s in the first 0.1 s: 300% on 2 cores
    s = telemetry.Sampler(CPU, 10.0, clock=lambda: next(ticks))
    monkeypatch.setattr(s, "_process_cpu_seconds", lambda: next(cpu))
    monkeypatch.setattr(s, "_cores", 2)
    s._enter_cpu = s._last_cpu = (0.0, 0.0)
    assert s._process_cpu_pct() == 200.0
    assert s._process_cpu_pct() == pytest.approx(200.0)


def test_a_failed_process_ends_its_configuration_as_a_failure_row(tmp_path, monkeypatch):
    calls = []
    ok = fake_measure({8: [100.0], 16: [100.0]}, calls)

    def oom_on_second(c, *a, **k):
        if c.batch_size == 16 and calls.count(16) == 1:
            calls.append(16)
            return {**engine.config_key(c, CPU, PROTO), "status": "oom", "error": "OutOfMemoryError: x"}
        return ok(c, *a, **k)

    monkeypatch.setattr(engine, "measure", oom_on_second)
    rows = runner.run_configs([cfg(8), cfg(16)], CPU, PROTO, tmp_path / "r.csv")
    by_bs = {int(r["batch_size"]): r for r in rows}
    assert by_bs[16]["status"] == "oom" and by_bs[8]["status"] == "ok"
    assert calls.count(16) == 2  # no third process after the failure
    assert math.isclose(float(by_bs[8]["throughput_img_s"]), 100.0, rel_tol=1e-2)


def test_the_cpus_own_speed_is_probed_before_every_round_and_judged(tmp_path, monkeypatch):
    """Steal and other processes' load were 0% and 1% while SqueezeNet ran 30% slower ten minutes later: the
    runner probes the CPU's own speed before each round, keeps it beside every window and judges its spread."""
    speeds = iter([100.0, 100.0, 70.0, 70.0, 70.0, 70.0])
    monkeypatch.setattr(telemetry, "speed_probe", lambda: next(speeds))
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0, 101.0, 70.0]}, []))
    (row,) = runner.run_configs(
        [cfg()], CPU, dataclasses.replace(PROTO, adapt_budget_s=0), tmp_path / "r.csv"
    )
    windows = pd.read_csv(tmp_path / "r_windows.csv")
    assert list(windows.groupby("process").probe_img_s.first()) == [100.0, 100.0, 70.0]
    assert float(row["probe_spread_pct"]) == pytest.approx(100 * 30 / 90)
    assert row["machine_state"] == "busy" and "probe) moved 33%" in row["machine_note"]


def test_speed_probe_runs_at_least_three_steps_for_its_time():
    ticks = iter(range(1000))
    rate = telemetry.speed_probe(seconds=2.5, clock=lambda: float(next(ticks)))
    assert rate == pytest.approx(8 * 3 / 5)  # 3 steps (the loop reads the clock at 1..4), read again at 5


def test_the_summary_names_its_percent_columns_as_judge_reads_them():
    """The sampler wrote cpu_steal_mean (no _pct) while judge() read cpu_steal_mean_pct: steal never counted."""
    s = telemetry.Sampler(CPU, 10.0)
    for t, v in ((0.1, 30.0), (0.2, 10.0)):
        s._add(t, "cpu_steal_pct", v)
        s._add(t, "util_other_cpu_pct", 1.0)
    out = s.summary()
    assert out["cpu_steal_mean_pct"] == 20.0 and out["cpu_steal_max_pct"] == 30.0
    assert telemetry.judge(out)[0] == "busy"


def test_a_sample_moments_after_the_last_reads_no_process_cpu(monkeypatch):
    """The sample taken as a window ends came a few ms after the loop's last one: no CPU tick had passed, so the
    process read 0% and 'other processes' 100% (spikes at every window's end in the example's timeline)."""
    ticks = iter([0.0, 0.1, 0.103])
    cpu = iter([0.2, 0.2])
    s = telemetry.Sampler(CPU, 10.0, clock=lambda: next(ticks))
    monkeypatch.setattr(s, "_process_cpu_seconds", lambda: next(cpu))
    monkeypatch.setattr(s, "_cores", 2)
    s._enter_cpu = s._last_cpu = (0.0, 0.0)
    assert s._process_cpu_pct() == 200.0
    assert s._process_cpu_pct() is None


def test_energy_read_in_some_processes_only_is_none_for_the_configuration(tmp_path, monkeypatch):
    """Windows on both sides of NVML's 1 s: the mean of the processes that read a number would be theirs alone,
    under the note of whichever process came last; the configuration gets none, with the reason."""
    calls = []
    base = fake_measure({8: [100.0, 110.0, 105.0]}, calls)

    def measure(c, device, protocol, dataset=None, **kw):
        row = base(c, device, protocol, dataset, **kw)
        short = len(calls) == 2  # the second process's windows were under 1 s
        note = "window 0.90 s is shorter than 1 s: NVML's counter updates every 20-100 ms" if short else ""
        energy = {k: math.nan if short else v for k, v in (("energy_j", 10.0), ("energy_j_per_image", 0.1))}
        return {**row, **energy, "avg_power_w": math.nan if short else 200.0, "energy_note": note}

    monkeypatch.setattr(engine, "measure", measure)
    proto = dataclasses.replace(PROTO, max_processes=3)
    (row,) = runner.run_configs([cfg()], CPU, proto, tmp_path / "r.csv")
    assert all(row[k] in ("", None) for k in ("energy_j", "energy_j_per_image", "avg_power_w"))  # NaN
    assert "shorter than 1 s" in row["energy_note"]


def test_a_pass_that_reuses_rows_labels_its_telemetry_with_its_own_source(tmp_path, monkeypatch):
    """run_configs(reuse=...) once rebound ``source`` to the reused file, so 03's telemetry rows were labelled
    '<cnnbench.results.files.ResultsFile object at 0x...>' instead of batch_sweep."""
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0], 16: [200.0]}, []))
    proto, tele = dataclasses.replace(PROTO, max_processes=3), tmp_path / "telemetry.csv"
    runner.run_configs([cfg(8)], CPU, proto, tmp_path / "a.csv", telemetry_path=tele, source="scenario_a")
    again = dict(telemetry_path=tele, source="batch_sweep", reuse=tmp_path / "a.csv")
    runner.run_configs([cfg(8), cfg(16)], CPU, proto, tmp_path / "b.csv", **again)
    assert set(pd.read_csv(tele).source) == {"scenario_a", "batch_sweep"}


def test_the_engine_refuses_a_table_larger_than_a_run_writes_before_measuring(tmp_path, monkeypatch):
    """The engine opened its tables without the schema's row bound, so an oversized scenario_a.csv was measured
    into and refused only when 04 or 08 read it. It is refused (one line) before any process runs."""
    from cnnbench import results

    calls = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0]}, calls))
    most = results.table("scenario_a").most_rows
    results.write_rows(
        tmp_path / "scenario_a.csv", [{"model": "m", "batch_size": bs} for bs in range(most + 1)]
    )
    with pytest.raises(results.CorruptResults, match=f"{most + 1:,} rows, more than a run writes") as err:
        runner.run_configs([cfg(8)], CPU, PROTO, tmp_path / "scenario_a.csv")
    assert "\n" not in str(err.value) and calls == []


@pytest.mark.parametrize("table", ["telemetry", "scenario_a_steps"])
def test_an_oversized_steps_or_telemetry_file_is_refused_before_measuring(tmp_path, monkeypatch, table):
    """The steps and telemetry files were first read after a process had measured, so one over its row bound
    stopped the run mid-way and lost that measurement. Every file the engine writes is checked before work."""
    from cnnbench import results

    calls = []
    monkeypatch.setattr(engine, "measure", fake_measure({8: [100.0]}, calls))
    monkeypatch.setitem(results.TABLES, table, dataclasses.replace(results.TABLES[table], most_rows=3))
    results.write_rows(tmp_path / f"{table}.csv", [{"model": "m", "t_s": t} for t in range(4)])
    paths = {"steps_path": tmp_path / "scenario_a_steps.csv", "telemetry_path": tmp_path / "telemetry.csv"}
    with pytest.raises(results.CorruptResults, match="4 rows, more than a run writes"):
        runner.run_configs([cfg(8)], CPU, PROTO, tmp_path / "scenario_a.csv", **paths)
    assert calls == []
