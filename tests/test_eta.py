"""How long will this take: expected times and time left (cnnbench.eta) against a fake clock and fake budgets, and
the pipeline's console lines and timings record on the suite's real smoke run and a rerun of two notebooks."""

import dataclasses
import json
import re
import shutil

import pytest

from cnnbench import devices, eta, params, progress, results
from cnnbench import tuning as tuning_experiment
from conftest import ROOT, run_pipeline


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_expected_times_prefer_the_earlier_record_then_the_budgets():
    got = eta.expected_times(
        ["00_setup", "02_scenario_a", "04_roofline"],
        {"00_setup": 6.0},
        {"02_scenario_a": 300.0, "04_roofline": None},
    )
    assert got == {
        "00_setup": (6.0, eta.RECORD),
        "02_scenario_a": (300.0, eta.BUDGET),
        "04_roofline": (None, ""),
    }


def test_remaining_counts_down_for_the_notebook_and_the_run():
    clock = FakeClock()
    left = eta.Remaining({"a": (60.0, eta.RECORD), "b": (240.0, eta.BUDGET)}, clock)
    assert left.start("a") == "a: expected 1m00s (from earlier run); run: 5m00s left"
    clock.now += 20
    assert left.notebook_left() == 40.0 and left.run_left() == (280.0, True)
    assert left.line() == "a 20s elapsed, 40s left; run: 4m40s left"
    clock.now += 70  # a overruns its estimate: it says by how much; the run's 4 minutes are a lower bound
    assert left.line() == "a 1m30s elapsed, past its estimate by 30s; run: at least 4m00s left"
    assert left.finish("a") == 90.0
    left.start("b")
    clock.now += 60
    # a took 1.5x its estimate: b's is revised by that pace, and the line says so
    revised = "(revised: this run's work so far took 1.50x its estimates)"
    assert left.run_left() == (300.0, True)
    assert left.line() == f"b 1m00s elapsed, 5m00s left; run: 5m00s left {revised}"


def test_a_running_sweep_is_extrapolated_from_its_finished_processes():
    clock = FakeClock()
    left = eta.Remaining({"02": (None, ""), "04": (50.0, eta.RECORD)}, clock, planned={"02": 8})
    left.start("02")
    clock.now += 30
    left.seen(
        "    mnist_cnn train: 1,000.0 img/s over 2 processes (least)"
    )  # a configuration's line: no process
    assert left.notebook_left() is None and left.run_left() == (50.0, False)
    left.seen("    mnist_cnn train bs=16: process 1/2 1,000.0 img/s")
    assert left.notebook_left() == 210.0  # the first took 30 s (kernel start-up included), 7 to go
    clock.now += 10
    left.seen("    mnist_cnn eval bs=16: process 1/2 3,000.0 img/s")
    assert left.notebook_left() == 60.0  # 10 s a process since the first, 6 to go
    clock.now += 4
    assert left.notebook_left() == 56.0
    assert left.line() == "02 44s elapsed, 56s left (2/8 processes); run: 1m46s left"


def test_a_notebook_without_estimate_makes_the_run_figure_a_lower_bound():
    clock = FakeClock()
    left = eta.Remaining({"a": (None, ""), "b": (30.0, eta.BUDGET)}, clock)
    assert "no estimate" in left.start("a")
    clock.now += 5
    assert left.run_left() == (30.0, False) and left.line() == "a 5s elapsed, ? left; run: at least 30s left"


CPU = devices.backend_class("cpu").budget


def test_budgets_follow_the_protocol():
    p = params.load(
        ROOT / "params" / "local.yaml", {"models": ["resnet18", "mnist_cnn"], "measured_steps": 0}
    )
    configs = 2 * len(p.variants) * len(p.phases)
    assert eta.budget_model(p, "02_scenario_a") == (
        configs,
        p.processes * eta._process_s(p, CPU["step_s"], CPU["process_s"]),
        CPU["kernel_s"] + p.adapt_budget_s,
    )
    # time-budgeted windows: each process gives every configuration at least its repeats x window_s
    assert (
        eta.Budgets(p)["02_scenario_a"] >= configs * p.processes * p.repeats * p.window_s + p.adapt_budget_s
    )
    fixed = params.load(
        ROOT / "params" / "smoke.yaml"
    )  # windows of a fixed step count: steps x a nominal step
    assert eta.Budgets(fixed)["02_scenario_a"] > 0
    assert eta.Budgets(fixed, "cuda")["02_scenario_a"] < eta.Budgets(fixed, "cpu")["02_scenario_a"]
    floor = params.load(
        ROOT / "params" / "smoke.yaml", {"measured_steps": 3, "min_window_s": 0.5, "repeats": 2}
    )
    assert eta._process_s(floor, 0.005, 1.5) == pytest.approx(  # 3 steps of 5 ms: windows of min_window_s
        1.5 + floor.warmup_steps * 0.005 + 2 * 0.5  # no epochs: smoke.yaml sets epoch_mode false
    )
    tuned = eta.Budgets(p)["07_tuning"]
    assert tuned >= len(p.tune_models) * len(p.tune_phases) * p.tune_budget_s > 0
    assert eta.budget_model(p, "99_unknown") == (0, 0.0, devices.backend_class("cpu").budget["kernel_s"])


@pytest.mark.parametrize("params_file", ["local.yaml", "colab_t4.yaml", "smoke.yaml"])
def test_every_notebook_of_a_first_run_has_an_estimate_that_scales_with_its_configurations(params_file):
    """The walk: the very first run of a params file printed "no estimate" for 8 of 9 notebooks. Every notebook
    now has a model of time from the budgets, and it grows with the configurations it measures."""
    one = params.load(
        ROOT / "params" / params_file,
        {"models": ["mnist_cnn"], "sweep": {"mnist_cnn": [8]}, "scratch_models": ["mnist_cnn"]},
        check_device=False,
    )
    two = params.load(
        ROOT / "params" / params_file,
        {
            "models": ["mnist_cnn", "resnet18"],
            "sweep": {"mnist_cnn": [8, 24], "resnet18": [8, 24]},  # none of them 02's (03 takes those)
            "scratch_models": ["mnist_cnn", "mlp"],
        },
        check_device=False,
    )
    for name in one.notebooks:
        assert eta.Budgets(one)[name] > 0, name
    for name in ("01_complexity", "02_scenario_a", "03_batch_sweep", "04_roofline", "05_backends"):
        n1, each1, fixed1 = eta.budget_model(one, name)
        n2, each2, fixed2 = eta.budget_model(two, name)
        assert n2 > n1 > 0 and (each1, fixed1) == pytest.approx((each2, fixed2)), name
        assert eta.Budgets(two)[name] - fixed2 == pytest.approx(
            n2 / n1 * (eta.Budgets(one)[name] - fixed1)
        ), name
    assert eta.budget_model(two, "03_batch_sweep")[0] == 4 * eta.budget_model(one, "03_batch_sweep")[0]


def test_a_first_run_with_no_example_prints_an_expected_time_for_every_notebook(
    tmp_path, monkeypatch, capsys
):
    """A fresh outputs folder, no committed example (as a clone without examples/, or a --set models=... the
    example does not cover): each notebook's line still says how long it should take, from the budgets."""
    from cnnbench import pipeline

    monkeypatch.setattr(eta, "EXAMPLE_RUN", "no/such/example")
    ran = []

    def fake_notebook(source, target, **kw):  # no kernel: the notebook "runs" at once
        ran.append(source)
        import nbformat

        nbformat.write(nbformat.v4.new_notebook(), target)

    monkeypatch.setattr("papermill.execute_notebook", fake_notebook)
    rc = pipeline.main(
        [
            "--params",
            str(ROOT / "params" / "local.yaml"),
            "--outputs",
            str(tmp_path),
            "--set",
            "models=[mnist_cnn]",
            "--set",
            "device=cpu",
            "--no-report",
        ]
    )
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("[") and "] 0" in x and " done in " not in x]
    assert rc == 0 and len(ran) == 9 and len(lines) == 9, out
    for line in lines:
        assert ": expected " in line and f"(from {eta.BUDGET})" in line and "at least" not in line, line
    assert "no estimate" not in out


def test_durations_read_as_a_person_writes_them():
    assert [eta.duration(s) for s in (0, 12.4, 65, 3725, None)] == ["0s", "12s", "1m05s", "1h02m", "?"]


@pytest.mark.slow
def test_a_real_run_prints_expected_and_remaining_and_a_rerun_uses_its_record(smoke_run, tmp_path):
    """The suite's shared smoke run is a first run; 00 and 04 then run again in a copy of it."""
    run_dir, proc = smoke_run
    first, ran = proc.stdout, sorted(p.stem for p in (run_dir / "notebooks").glob("*.ipynb"))
    # a first run: every notebook estimated from the budgets (the walk: "no estimate" for 8 of 9), so no line of a
    # notebook's start or end gives the run's time as a lower bound ("at least"; the progress lines of a notebook
    # past its estimate on a loaded machine rightly do)
    for i, name in enumerate(ran, 1):
        assert f"[{i}/{len(ran)}] {name}: expected " in first, name
    assert f"(from {eta.BUDGET})" in first and "no estimate" not in first
    assert not [x for x in first.splitlines() if re.match(r"\[\d+/\d+\] ", x) and "at least" in x], first
    # 04 says what it measures while it runs (it printed nothing for minutes)
    assert "    roofline: memory bandwidth over" in first and "    roofline: fp32 compute roof" in first
    timings = results.read(run_dir, "timings")
    assert list(timings.notebook) == ran and (timings.duration_s > 0).all()
    shutil.copytree(run_dir, tmp_path / "smoke")
    proc = run_pipeline(
        "--params",
        "params/smoke.yaml",
        "--outputs",
        tmp_path,
        "--set",
        "notebooks=[00_setup, 04_roofline]",
        "--no-report",
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    second = proc.stdout  # the rerun's estimates are the first run's record
    took = dict(zip(timings.notebook, timings.duration_s, strict=True))
    total = took["00_setup"] + took["04_roofline"]
    # the run's time left is the record's total less the fraction of a second already spent, rounded: with a total
    # of 73.5 s, 74s, 73s or 72s (the two ends alone missed 73s)
    allowed = {f"run: {eta.duration(total - d / 10)} left" for d in range(11)}
    line = next(x for x in second.splitlines() if x.startswith("[1/2] 00_setup: expected"))
    assert line.startswith(
        f"[1/2] 00_setup: expected {eta.duration(took['00_setup'])} (from earlier run); "
    ), line
    assert any(line.endswith(a) for a in allowed), (line, allowed)
    assert f"[2/2] 04_roofline: expected {eta.duration(took['04_roofline'])} (from earlier run)" in second


def test_progress_notes_reach_the_pipelines_progress_file(tmp_path, monkeypatch, capsys):
    log = tmp_path / "progress.log"
    monkeypatch.setenv(progress.PROGRESS_ENV, str(log))
    progress.note("backends: mnist_cnn on numpy")
    progress.say("torchrun --nproc_per_node 2 (gloo, 1 threads per process)")
    assert log.read_text().splitlines() == [
        "backends: mnist_cnn on numpy",
        "torchrun --nproc_per_node 2 (gloo, 1 threads per process)",
    ]
    assert capsys.readouterr().out == "torchrun --nproc_per_node 2 (gloo, 1 threads per process)\n"


def test_each_row_of_the_configuration_search_is_a_console_line():
    row = {
        "row_kind": "race",
        "stage": "rung 1",
        "config": "bf16 channels_last bs=64",
        "throughput_img_s": 51.25,
    }
    assert tuning_experiment.search_line("resnet50", "train", row) == (
        "  tuning resnet50 train: race rung 1 bf16 channels_last bs=64 51.2 img/s"
    )
    assert tuning_experiment.search_line(
        "resnet50", "train", {"row_kind": "guard", "status": "error"}
    ).endswith("guard error")


def test_the_console_tail_prints_the_time_left_after_progress_lines(tmp_path):
    import time

    from cnnbench import pipeline

    path, printed, seen = tmp_path / "progress.log", [], []
    path.write_text("")
    tail = pipeline._Tail(
        path,
        lambda line, **kw: printed.append(line),
        interval_s=0.01,
        status=lambda: "LEFT",
        seen=seen.append,
        status_min_s=0.0,
    )
    with tail:
        path.write_text("  m train bs=8: process 1/2 10.0 img/s\n")
        time.sleep(0.2)
    assert printed == ["      m train bs=8: process 1/2 10.0 img/s", "  ~ LEFT"]
    assert seen == ["  m train bs=8: process 1/2 10.0 img/s"]


def test_a_fresh_run_repeating_the_committed_example_is_estimated_from_its_record():
    example = ROOT / eta.EXAMPLE_RUN
    local = params.load(ROOT / "params" / "local.yaml", check_device=False)
    took = eta.example_record(local, "cpu", example)
    recorded = {r["notebook"]: float(r["duration_s"]) for r in results.read_rows(example / "timings.csv")}
    # papermill's = ours, less the kernel's start that ours counts (0.2 s for 08 redrawn on 2026-11-28)
    assert set(took) == set(local.notebooks) and took == pytest.approx(recorded, abs=1.0)
    assert eta.example_record(local, "cuda", example) == {}  # another device: the CPU's times say nothing
    other = params.load(ROOT / "params" / "local.yaml", {"batch_size": 64}, check_device=False)
    assert eta.example_record(other, "cpu", example) == {}
    got = eta.expected_times(["02_scenario_a"], {}, {"02_scenario_a": 5.0}, took)
    assert got == {"02_scenario_a": (took["02_scenario_a"], eta.EXAMPLE)}
    assert eta.expected_times(["02_scenario_a"], {"02_scenario_a": 7.0}, {}, took)["02_scenario_a"] == (
        7.0,
        eta.RECORD,
    )


def test_a_new_run_name_is_estimated_from_the_latest_run_beside_it_with_the_same_params_file(tmp_path):
    """The browser walk: a second run name in the same outputs folder printed "no estimate" for 8 of 9 notebooks
    while its sibling's timings.csv held every one."""
    import json

    for name, took, params_file in (("walk1", 61.0, "smoke.yaml"), ("other", 999.0, "local.yaml")):
        d = tmp_path / name
        d.mkdir()
        (d / "params.json").write_text(
            json.dumps({"params_file": f"/x/params/{params_file}", "overrides": {}})
        )
        (d / "timings.csv").write_text(f"notebook,duration_s\n00_setup,5.0\n02_scenario_a,{took}\n")
    (tmp_path / "walk2").mkdir()
    name, times = eta.sibling_record(tmp_path / "walk2", "smoke.yaml")
    assert name == "walk1" and times == {"00_setup": 5.0, "02_scenario_a": 61.0}
    got = eta.expected_times(
        ["00_setup", "02_scenario_a", "07_tuning"],
        {"00_setup": 4.0},
        {"07_tuning": 30.0},
        sibling=(name, times),
    )
    assert got == {
        "00_setup": (4.0, eta.RECORD),
        "02_scenario_a": (61.0, "run 'walk1' beside it"),
        "07_tuning": (30.0, eta.BUDGET),
    }
    assert eta.sibling_record(tmp_path / "walk2", "apple_m.yaml") == ("", {})


def test_a_sweep_past_its_planned_processes_never_says_0s_left():
    """Issue 31: under load 03 printed "0s left (64/64 processes)" for more than 15 minutes while its
    processes kept running: once the planned processes were done, nothing of the notebook counted as left."""
    clock = FakeClock()
    left = eta.Remaining({"03": (100.0, eta.RECORD), "08": (20.0, eta.RECORD)}, clock, planned={"03": 4})
    left.start("03")
    for i in range(4):
        clock.now += 10
        left.seen(f"  resnet50 train bs=32: process {i + 1}/4 50.0 img/s")
    clock.now += 900  # its last cells (or more processes for wide intervals) still running, 15 minutes on
    line = left.line()
    assert " 0s left" not in line and "past its estimate by 14m50s (4/4 processes)" in line, line
    assert line.endswith("run: at least 20s left"), line


def test_a_late_process_makes_the_estimate_past_not_0s():
    clock = FakeClock()
    left = eta.Remaining({"02": (60.0, eta.RECORD)}, clock, planned={"02": 3})
    left.start("02")
    for i in range(2):
        clock.now += 10
        left.seen(f"  m train: process {i + 1}/3 5.0 img/s")
    clock.now += 4
    assert left.line() == "02 24s elapsed, 6s left (2/3 processes); run: 6s left"
    clock.now += 30  # the last process is slower than the pace so far: its time left is unknown, and not 0
    # the run's time is unknown beyond this notebook's (issue 44: `cnnbench report` printed "run: ? left")
    assert left.line() == "02 54s elapsed, past its estimate by 24s (2/3 processes)"


def test_processes_beyond_the_planned_ones_are_counted_within_the_adaptive_budget():
    clock = FakeClock()
    left = eta.Remaining({"03": (None, "")}, clock, planned={"03": (2, 60.0)})
    left.start("03")
    for i in range(2):
        clock.now += 10
        left.seen(f"  m train: process {i + 1}/2 5.0 img/s")
    assert left.notebook_left() == 70.0  # the budget for more processes, and one that may start at its end
    clock.now += 15
    left.seen("  m train: process 3/3 5.0 img/s")
    # the pace is now 12.5 s a process: 60 + 12.5 - 15 s left
    assert left.line() == "03 35s elapsed, 58s left (2/2 processes + 1 for wide intervals); run: 58s left"
    clock.now += 102.5
    assert left.line().endswith("past its estimate by 45s (2/2 processes + 1 for wide intervals)")


def test_the_estimates_are_revised_by_the_pace_of_this_run_and_say_so():
    clock = FakeClock()
    left = eta.Remaining({"a": (60.0, eta.RECORD), "b": (240.0, eta.EXAMPLE), "c": (10.0, eta.BUDGET)}, clock)
    left.start("a")
    clock.now += 90  # 1.5x its estimate: the run's other estimates are scaled by the same pace
    left.finish("a")
    revised = "(revised: this run's work so far took 1.50x its estimates)"
    assert left.run_text() == "6m15s"
    assert left.start("b") == (
        f"b: expected 6m00s (4m00s from {eta.EXAMPLE}, x1.50 at this run's pace); run: 6m15s left {revised}"
    )
    clock.now += 60
    assert left.line() == f"b 1m00s elapsed, 5m00s left; run: 5m15s left {revised}"


def test_a_pace_within_a_tenth_a_faster_one_or_one_of_a_few_seconds_revises_nothing():
    clock = FakeClock()
    left = eta.Remaining({"a": (5.0, eta.BUDGET), "b": (60.0, eta.RECORD), "c": (100.0, eta.RECORD)}, clock)
    left.start("a")
    clock.now += 15  # three times its estimate, but 5 expected seconds say little about the run
    left.finish("a")
    assert left.pace() == 1.0
    left.start("b")
    clock.now += 65  # 80 s for 65 expected: 1.23x, beyond a tenth
    left.finish("b")
    assert left.pace() == 80 / 65
    left.start("c")
    clock.now += 1  # resumed: rows kept in a second say nothing of the pace of work still to measure
    left.finish("c")
    assert left.pace() == 1.0


def test_a_second_left_is_never_printed_as_0s():
    clock = FakeClock()
    left = eta.Remaining({"a": (10.0, eta.RECORD)}, clock)
    left.start("a")
    clock.now += 9.6
    assert left.line() == "a 10s elapsed, 1s left; run: 1s left"
    left.finish("a")
    assert left.run_text() == "0s"


def test_a_gpu_or_mac_params_file_estimates_02_and_03_from_the_rates_predicted_for_its_device():
    """Issue 32: colab_t4.yaml and apple_m.yaml have no record on this machine; their budgets take each
    configuration's step time from cnnbench.predict for the params file's device (a faster device: a shorter
    estimate), and the source says which device it was predicted for."""
    from cnnbench import predict

    colab = params.load(ROOT / "params" / "colab_t4.yaml", check_device=False)
    assert eta.params_device(colab, "cuda", "", "colab_t4.yaml") == "Tesla T4"
    assert (
        eta.params_device(colab, "cuda", "NVIDIA H100 80GB HBM3", "colab_t4.yaml") == "NVIDIA H100 80GB HBM3"
    )
    assert eta.params_device(
        params.load(ROOT / "params" / "apple_m.yaml", check_device=False), "mps", "", "apple_m.yaml"
    )
    assert eta.params_device(colab, "cpu", "", "local.yaml") == ""  # the host CPU: the budgets' own step

    t4, h100 = eta.Budgets(colab, "cuda", "Tesla T4"), eta.Budgets(colab, "cuda", "NVIDIA H100 80GB HBM3")
    assert h100["02_scenario_a"] < t4["02_scenario_a"]
    configs = eta._configs(colab, "02_scenario_a")
    steps = predict.step_times(configs, "Tesla T4")
    assert len(steps) == len(configs) and all(0 < s < 5 for s in steps)  # seconds of a T4 step at 224 px
    n, each, fixed = eta.budget_model(colab, "02_scenario_a", "cuda", steps)
    assert t4["02_scenario_a"] == pytest.approx(n * each + fixed)
    # a CUDA round's configurations share one worker: its start is counted once per round, among the fixed costs
    assert n * each == pytest.approx(sum(colab.processes * eta._process_s(colab, s, 0.0) for s in steps))
    assert t4["02_scenario_a"] != pytest.approx(eta.Budgets(colab, "cuda")["02_scenario_a"])
    assert "Tesla T4" in t4.source("02_scenario_a") and t4.source("04_roofline") == eta.BUDGET
    got = eta.expected_times(["02_scenario_a", "99_unknown"], {}, t4)
    assert got["02_scenario_a"] == (t4["02_scenario_a"], t4.source("02_scenario_a"))
    assert got["99_unknown"] == (devices.backend_class("cuda").budget["kernel_s"], eta.BUDGET)  # its kernel


def test_estimate_prints_every_notebooks_expected_time_and_measures_nothing(tmp_path, capsys):
    """``cnnbench --params params/colab_t4.yaml --estimate``: one line per notebook and a total, from the rates
    predicted for a T4, on a machine without one; no run folder is made."""
    from cnnbench import pipeline

    outputs = tmp_path / "a" / "b"  # issue 44: --estimate made this folder chain
    rc = pipeline.main(
        ["--params", str(ROOT / "params" / "colab_t4.yaml"), "--outputs", str(outputs), "--estimate"]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    p = params.load(ROOT / "params" / "colab_t4.yaml", check_device=False)
    for name in p.notebooks:
        assert re.search(rf"^{name}\s+\d+(h\d\dm|m\d\ds|s)\s", out, re.M), out
    assert "Tesla T4" in out and re.search(r"^total\s+\d", out, re.M) and not any(tmp_path.iterdir())
    for name in (
        "colab_t4.yaml",
        "apple_m.yaml",
    ):  # their headers point at the command, no figures of their own
        header = (ROOT / "params" / name).read_text().split("\ndevice:")[0]
        assert f"--params params/{name} --estimate" in header and not re.search(r"\d+-\d+ min", header), name


def test_03_plans_no_process_for_the_batch_sizes_it_takes_from_02():
    """03 takes the configurations 02 measured (scenarios.measure's reuse), yet its line counted their processes
    as planned: "24/36 processes" in a fresh run of local.yaml whose 03 measured 8 configurations."""
    from cnnbench import params, scenarios

    p = params.load(ROOT / "params" / "local.yaml", check_device=False)
    sweep, shared = scenarios.sweep_configs(p), set(scenarios.scenario_a_configs(p))
    taken = [c for c in sweep if c in shared]
    assert len(taken) == 4 and len(sweep) == 12  # squeezenet1_1 at 64 and resnet50 at 128, train and eval
    assert eta.planned(p, "03_batch_sweep") == ((12 - 4) * p.processes, p.adapt_budget_s)
    alone = dataclasses.replace(p, notebooks=["03_batch_sweep"])  # without 02, 03 measures every one
    assert eta.planned(alone, "03_batch_sweep") == (12 * p.processes, p.adapt_budget_s)
    after = dataclasses.replace(p, notebooks=["03_batch_sweep", "02_scenario_a"])  # 02 after it: the same
    assert eta.planned(after, "03_batch_sweep") == (12 * p.processes, p.adapt_budget_s)


def test_07s_estimate_counts_every_round_of_its_confirmation_as_the_params_check_does():
    """`--estimate --set tune_confirm_window_s=60 --set processes=6 --set tune_confirm_top=2` printed 07 at 4m14s,
    below the 1,100 s the params' own check says its cell takes at least: the confirmation's ``processes``
    interleaved rounds were counted as one, and its warm-up not at all."""
    over = {"tune_confirm_window_s": 60, "processes": 6, "tune_confirm_top": 2}
    p = params.load(ROOT / "params" / "local.yaml", over, check_device=False)
    for kind in ("cpu", "cuda"):
        b = devices.backend_class(kind).budget
        assert eta.Budgets(p, kind)["07_tuning"] >= params.tuning_cell_s(p) + b["kernel_s"], kind
        confirm = (
            p.processes * 3 * (b["process_s"] + p.tune_confirm_warmup_steps * b["step_s"] + p.repeats * 60)
        )
        assert params.tuning_confirm_s(p, b["process_s"], b["step_s"]) == pytest.approx(confirm)
    searches = len(p.tune_models) * len(p.tune_phases)
    assert params.tuning_cell_s(p) == pytest.approx(searches * (p.tune_budget_s + params.tuning_confirm_s(p)))


def test_a_cuda_estimate_names_the_device_of_the_complete_example_not_the_failed_one():
    """`--device-kind cuda` named the H100 of examples/example-cuda-h100, a failed partial run (its FAILED.txt),
    first in sorted order, before the complete H200 example."""
    hw = eta.example_hardware("cuda")
    complete = [
        e.parent
        for e in (ROOT / "examples").glob("*/environment.json")
        if not (e.parent / "FAILED.txt").exists()
    ]
    names = {json.loads((d / "environment.json").read_text()).get("device_name") for d in complete}
    assert hw is not None and hw.name in names
