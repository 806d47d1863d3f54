import pandas as pd
import pytest
import torch
import worker_hook
from fakes import using

from cnnbench import devices, results
from cnnbench.measure import engine, runner
from cnnbench.params import Params

CPU = torch.device("cpu")
FAST = Params(
    warmup_steps=1,
    measured_steps=2,
    repeats=2,
    synthetic_images=32,
    processes=2,
    max_processes=2,
    adapt_budget_s=0,
)


def cfg(**kw):
    base = dict(
        model="mnist_cnn",
        phase="train",
        batch_size=8,
        image_size=28,
        num_classes=10,
        in_channels=1,
        workers=0,
    )
    return engine.Config.of(**{**base, **kw})


def test_train_and_eval_rows_carry_every_column():
    for phase in ("train", "eval"):
        row = engine.measure(cfg(phase=phase), CPU, FAST)
        assert row["status"] == "ok", row["error"]
        for col in (
            "model",
            "device_kind",
            "device_name",
            "phase",
            "data_mode",
            "batch_size",
            "image_size",
            "precision",
            "memory_format",
            "compile",
            "threads",
            "status",
            "n_steps",
            "throughput_img_s",
            "throughput_ci95_img_s",
            "step_time_median_s",
            "step_time_std_s",
            "achieved_tflops",
            "peak_device_mem_mib",
            "peak_rss_mib",
            "baseline_rss_mib",
            "util_cpu_mean_pct",
            "util_device_mean_pct",
            "noisy",
            "warmup_steps",
            "lr",
            "seed",
            "repeats",
            "isolation",
        ):
            assert col in row, col
        assert row["n_steps"] == 4 and len(row["step_times_s"]) == 4
        flops = row["gflops_per_image"] * 1e9
        assert row["achieved_gflops"] == pytest.approx(row["throughput_img_s"] * flops / 1e9)
    assert row["gflops_per_image"] < engine.measure(cfg(), CPU, FAST)["gflops_per_image"]  # eval < train


def test_variants_and_loader_mode():
    """bf16 where this CPU runs it natively (an AVX2-only CPU gives an unavailable row: test_knobs holds that)."""
    precision = "bf16" if devices.native_bf16() else "fp32"
    row = engine.measure(
        cfg(precision=precision, memory_format="channels_last", data_mode="loader"), CPU, FAST
    )
    assert row["status"] == "ok", row["error"]
    assert (row["precision"], row["memory_format"], row["data_mode"]) == (
        precision,
        "channels_last",
        "loader",
    )


def test_out_of_memory_is_a_row(monkeypatch):
    def oom(self):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(engine.Workload, "train_step", oom)
    row = engine.measure(cfg(), CPU, FAST)
    assert row["status"] == "oom" and "out of memory" in row["error"]


def test_nan_loss_is_unstable(monkeypatch):
    build = engine.Workload._build

    def nan_loss(self, *a, **k):
        build(self, *a, **k)
        self.loss_fn = lambda out, y: out.sum() * float("nan")

    monkeypatch.setattr(engine.Workload, "_build", nan_loss)
    row = engine.measure(cfg(), CPU, FAST)
    assert row["status"] == "unstable" and "nan" in row["error"]


def test_other_failures_are_rows_and_the_run_goes_on(tmp_path, monkeypatch):
    real = engine.measure
    calls = []

    def flaky(c, *a, **k):
        calls.append(c.batch_size)
        if c.batch_size == 8:
            return {**real(c, *a, **k), "status": "error", "error": "ValueError: boom"}
        return real(c, *a, **k)

    monkeypatch.setattr(engine, "measure", flaky)
    rows = runner.run_configs(
        [cfg(batch_size=8), cfg(batch_size=16)], CPU, FAST, tmp_path / "r.csv", tmp_path / "s.csv"
    )
    assert [r["status"] for r in rows] == ["error", "ok"]
    steps = pd.read_csv(tmp_path / "s.csv")
    assert len(steps) == 8 and set(steps.batch_size) == {
        16
    }  # 2 processes x 2 windows x 2 steps; a failure keeps none


def test_interrupted_run_resumes_without_redoing_finished_configs(tmp_path, monkeypatch, capsys):
    real = engine.measure
    calls = []

    def interrupt_second(c, *a, **k):
        calls.append(c.batch_size)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(c, *a, **k)

    monkeypatch.setattr(engine, "measure", interrupt_second)
    configs = [cfg(batch_size=8), cfg(batch_size=16), cfg(batch_size=4)]
    with pytest.raises(KeyboardInterrupt):
        runner.run_configs(configs, CPU, FAST, tmp_path / "r.csv")
    first, stopped = calls
    windows = pd.read_csv(tmp_path / "r_windows.csv")  # the finished process is on disk, window by window
    assert set(windows.batch_size) == {first} and set(windows.process) == {1} and len(windows) == FAST.repeats
    capsys.readouterr()
    runner.run_configs(configs, CPU, FAST, tmp_path / "r.csv")
    # the finished process was not measured again: two in all for every configuration, plus the one interrupted
    assert {bs: calls.count(bs) for bs in (8, 16, 4)} == {bs: 2 + (bs == stopped) for bs in (8, 16, 4)}
    rows = pd.read_csv(tmp_path / "r.csv")
    assert sorted(rows.batch_size) == [4, 8, 16] and set(rows.processes_measured) == {2}
    # 02 and 03 say what they kept (issue 20: on an identical rerun only 06 did); a half-done one is measured
    assert "kept 0 of 3 configurations from r.csv; measured 3" in capsys.readouterr().out
    runner.run_configs(configs, CPU, FAST, tmp_path / "r.csv")
    assert len(calls) == 7 and "kept 3 of 3 configurations from r.csv; measured 0" in capsys.readouterr().out


def test_compile_time_is_recorded_and_kept_out_of_the_window():
    row = engine.measure(cfg(compile=True), CPU, FAST)
    assert row["status"] == "ok", row["error"]
    # compilation happened (8x a step with inductor's cache warm from an earlier test), outside the window
    assert row["compile_s"] > 5 * row["step_time_median_s"]
    assert row["window_time_s"] < row["first_step_s"]


def test_window_length_chooses_the_step_count():
    auto = Params(measured_steps=0, window_s=3.0)
    assert engine.steps_for_window([0.3, 0.1, 0.1], auto) == 30  # paced by the steady (later) steps
    assert engine.steps_for_window([10.0], auto) == 5  # never fewer than 5
    assert engine.steps_for_window([0.1], Params(measured_steps=7)) == 7
    row = engine.measure(cfg(), CPU, Params(warmup_steps=3, measured_steps=0, window_s=0.05, repeats=2))
    assert (
        row["status"] == "ok"
        and row["steps_per_window"] >= 5
        and row["n_steps"] == 2 * row["steps_per_window"]
    )
    assert row["measured_steps"] == 0  # the protocol's value (part of the key), not the steps it chose


def test_a_window_of_set_steps_is_filled_toward_min_window_s():
    """measured_steps is the least a window holds: on an H100, local.yaml's 3 steps lasted 1.2 ms to 0.26 s, and the
    first of them was still slower than the others (by a median 1.19x, up to 4x), so steps are added at the
    warm-up's pace to fill min_window_s. 0, the default: exactly measured_steps (a seed's protocol)."""
    p = Params(measured_steps=3, min_window_s=0.5)
    assert engine.steps_for_window([0.005], p) == 100  # a GPU's step
    assert engine.steps_for_window([0.6], p) == 3  # a CPU's: the steps set already last longer
    assert engine.steps_for_window([0.005], Params(measured_steps=3)) == 3
    row = engine.measure(cfg(), CPU, Params(warmup_steps=1, measured_steps=1, min_window_s=0.05))
    assert row["status"] == "ok" and row["steps_per_window"] > 1 and row["window_time_s"] >= 0.05


def test_the_window_is_paced_by_the_steady_warm_up_steps_not_the_first():
    """Issue 41: a GPU's first warm-up steps are slow (allocator, cuDNN's algorithm search, clocks rising): the pace
    is the median of the later half of the warm-up."""
    p = Params(measured_steps=3, min_window_s=1.0)
    assert engine.steps_for_window([0.5, 0.4, 0.3, 0.2, 0.01, 0.01, 0.01], p) == 100


def test_device_mode_keeps_a_real_batch_on_the_device():
    from torch.utils.data import TensorDataset

    real = TensorDataset(torch.zeros(32, 1, 28, 28), torch.full((32,), 3))
    with engine.Workload(cfg(data_mode="device"), CPU, FAST, dataset=real) as work:
        x, y = work.next_batch()
        assert x.shape == (8, 1, 28, 28) and bool((x == 0).all()) and bool((y == 3).all())
        assert work.next_batch()[0] is x  # made once, reused every step


# --- isolation, crashes, memory of its own (issue 8) -------------------------------------------------------------


def test_each_configuration_in_a_fresh_worker_has_its_own_memory(tmp_path, monkeypatch):
    """A big configuration first, then mnist_cnn: mnist_cnn does not inherit the big one's RSS peak."""
    monkeypatch.setenv("CNNBENCH_TEST_WORKER_HOOK", worker_hook.env({"squeezenet1_1": "ballast:600"}))
    big = cfg(model="squeezenet1_1", image_size=32, in_channels=3)
    rows = runner.run_configs([big, cfg()], CPU, FAST, tmp_path / "r.csv", isolate=True)
    by_model = {r["model"]: r for r in rows}
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    assert {r["isolation"] for r in rows} == {"worker"}
    big_peak, small_peak = (
        float(by_model["squeezenet1_1"]["peak_rss_mib"]),
        float(by_model["mnist_cnn"]["peak_rss_mib"]),
    )
    assert big_peak > 600 and small_peak < big_peak - 400
    small_base = float(by_model["mnist_cnn"]["baseline_rss_mib"])
    assert 0 < small_base <= small_peak


def test_in_process_peak_rss_is_reset_per_configuration():
    from cnnbench import devices

    if not devices.reset_peak_rss():
        pytest.skip("no /proc/self/clear_refs here")
    block = bytearray(400 * 2**20)
    block[::4096] = b"\1" * len(block[::4096])
    del block
    row = engine.measure(cfg(), CPU, FAST)
    assert row["isolation"] == "in_process"
    assert row["peak_rss_mib"] < devices.rss_mib() + 300  # not the 400 MiB touched (and freed) before


@pytest.mark.parametrize("action, expect", [("segfault", "SIGSEGV"), ("exit:3", "code 3")])
def test_a_worker_that_dies_is_a_crashed_row_and_the_run_goes_on(tmp_path, monkeypatch, action, expect):
    monkeypatch.setenv("CNNBENCH_TEST_WORKER_HOOK", worker_hook.env({"squeezenet1_1": action}))
    configs = [cfg(model="squeezenet1_1", image_size=32, in_channels=3), cfg()]
    rows = runner.run_configs(configs, CPU, FAST, tmp_path / "r.csv", tmp_path / "s.csv", isolate=True)
    assert [r["status"] for r in rows] == ["crashed", "ok"]
    assert expect in rows[0]["error"] and rows[0]["model"] == "squeezenet1_1"
    assert set(pd.read_csv(tmp_path / "s.csv").model) == {"mnist_cnn"}


# --- the configuration key covers every parameter that changes a measurement (issue 9) ---------------------------


@pytest.mark.parametrize(
    "change",
    [{"seed": 1}, {"repeats": 3}, {"lr": 0.1}, {"warmup_steps": 2}, {"momentum": 0.5}, {"window_s": 1.0}],
)
def test_a_rerun_with_other_protocol_parameters_measures_new_rows(tmp_path, change):
    import dataclasses

    first = runner.run_configs([cfg()], CPU, FAST, tmp_path / "r.csv")
    again = runner.run_configs([cfg()], CPU, dataclasses.replace(FAST, **change), tmp_path / "r.csv")
    key, value = next(iter(change.items()))
    assert len(first) == len(again) == 1 and str(again[0][key]) == str(value)
    assert len(pd.read_csv(tmp_path / "r.csv")) == 2  # the old row is kept, the new one measured


@pytest.mark.parametrize(
    "change", [{"num_classes": 5}, {"dataset": "mnist"}, {"image_size": 32}, {"workers": 1}]
)
def test_a_rerun_with_another_configuration_returns_only_its_own_rows(tmp_path, change):
    runner.run_configs([cfg(), cfg(phase="eval")], CPU, FAST, tmp_path / "r.csv")
    rows = runner.run_configs([cfg(**change), cfg(phase="eval", **change)], CPU, FAST, tmp_path / "r.csv")
    assert len(rows) == 2 and {str(r[k]) for r in rows for k in change} == {str(v) for v in change.values()}


def test_a_rerun_with_other_threads_measures_new_rows(tmp_path):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        runner.run_configs([cfg()], CPU, FAST, tmp_path / "r.csv")
        torch.set_num_threads(2)
        (row,) = runner.run_configs([cfg()], CPU, FAST, tmp_path / "r.csv")
    finally:
        torch.set_num_threads(before)
    assert row["threads"] == "2" and len(pd.read_csv(tmp_path / "r.csv")) == 2


def test_repeats_one_writes_plain_numbers(tmp_path):
    import dataclasses

    runner.run_configs([cfg()], CPU, dataclasses.replace(FAST, repeats=1), tmp_path / "r.csv")
    text = (tmp_path / "r.csv").read_text()
    assert "np." not in text
    assert pd.read_csv(tmp_path / "r.csv").throughput_img_s.dtype == float


# --- telemetry series into telemetry.csv (issue 11) ---------------------------------------------------------------


def test_the_telemetry_series_of_every_configuration_is_written(tmp_path):
    import dataclasses

    # a process's CPU share needs two samples: windows of a few milliseconds (the heap kept, issue 17) are sampled
    # every 10 ms, not every 100
    fast = dataclasses.replace(FAST, telemetry_interval_s=0.01, measured_steps=20)
    runner.run_configs(
        [cfg(), cfg(phase="eval")],
        CPU,
        fast,
        tmp_path / "r.csv",
        telemetry_path=tmp_path / "telemetry.csv",
        source="scenario_a",
    )
    df = results.read(tmp_path, "telemetry")
    assert set(df.source) == {"scenario_a"} and set(df.phase) == {"train", "eval"}
    assert {"util_cpu_pct", "util_cpu_core_pct", "util_process_cpu_pct", "rss_mib"} <= set(df.metric)
    cores = df[df.metric == "util_cpu_core_pct"].device_index
    assert cores.notna().all() and cores.nunique() == __import__("psutil").cpu_count()
    for col in results.config_keys():
        assert col in df.columns, col


# --- notebooks whose every configuration fails still complete (issue 9) ------------------------------------------


@pytest.mark.parametrize("notebook", ["02_scenario_a", "03_batch_sweep"])
def test_a_notebook_whose_every_configuration_fails_completes_and_shows_them(tmp_path, monkeypatch, notebook):
    import papermill

    from conftest import ROOT

    monkeypatch.setenv(
        "CNNBENCH_TEST_WORKER_HOOK", worker_hook.env({"mnist_cnn": "raise", "squeezenet1_1": "raise"})
    )
    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(ROOT / "notebooks" / f"{notebook}.ipynb"),
        str(out),
        kernel_name="python3",
        parameters={
            "params_file": str(ROOT / "params" / "smoke.yaml"),
            "overrides": {},
            "run_dir": str(tmp_path / "run"),
        },
        progress_bar=False,
    )
    name = "scenario_a" if notebook.startswith("02") else "batch_sweep"
    df = pd.read_csv(tmp_path / "run" / f"{name}.csv")
    assert len(df) and set(df.status) == {"error"} and df.error.str.contains("test hook").all()
    assert "test hook" in out.read_text()  # the failure rows are shown


def test_scenario_tables_and_plots_of_failures_only(tmp_path, monkeypatch):
    import cnnbench
    from cnnbench import plots, scenarios, tables
    from conftest import ROOT

    def fail(c, device, protocol, *a, **k):
        return {**engine.base_row(c, device, protocol), "status": "oom", "error": "out of memory"}

    monkeypatch.setattr(engine, "measure", fail)
    run = cnnbench.open_run(ROOT / "params" / "smoke.yaml", {"isolate": False}, tmp_path / "run")
    sweep = scenarios.measure(run, "batch_sweep", scenarios.sweep_configs(run.params))
    assert set(sweep.status) == {"oom"} and sweep.throughput_img_s.isna().all()
    tables.measured(sweep)
    tables.performance_summary(sweep)
    plots.batch_sweep(sweep, scenarios.diminishing_returns(sweep))
    plots.throughput(sweep)


def test_a_rerun_with_another_image_size_shows_only_its_own_rows(tmp_path):
    import cnnbench
    from cnnbench import plots, scenarios
    from conftest import ROOT

    fast = {"isolate": False, "models": ["squeezenet1_1"], "phases": ["eval"], "measured_steps": 2}
    for size in (32, 48):
        run = cnnbench.open_run(
            ROOT / "params" / "smoke.yaml", {**fast, "image_size": size}, tmp_path / "run"
        )
        df = scenarios.measure(run, "scenario_a", scenarios.scenario_a_configs(run.params))
        assert df.image_size.tolist() == [size]
        plots.throughput(df)  # no "duplicate labels"
    assert sorted(pd.read_csv(tmp_path / "run" / "scenario_a.csv").image_size) == [32, 48]


# --- issue 41: how much of a step the GPU is busy, measured over steps, not one NVML sample ------------------------


@pytest.mark.parametrize("busy_s, bound", [(1e-9, "host-bound (launch overhead)"), (10.0, "device")])
def test_a_gpu_busy_less_than_half_its_step_is_host_bound(fake_gpu, busy_s, bound):
    """The busy share is the device's work per step over the windows' wall time per step."""
    fake_gpu.busy_share = busy_s
    row = engine.measure(cfg(), CPU, FAST)
    assert row["status"] == "ok", row["error"]
    per_step = row["window_time_s"] / row["n_steps"]
    assert row["device_busy_pct"] == pytest.approx(100 * busy_s / per_step) and row["step_bound"] == bound


def test_the_busy_share_is_profiled_once_per_configuration_and_merged(fake_gpu, tmp_path):
    fake_gpu.busy_share = 1e-9
    calls = []
    busy = fake_gpu.busy_s
    fake_gpu.busy_s = lambda self, step, n: calls.append(n) or busy(self, step, n)
    (row,) = runner.run_configs([cfg()], CPU, FAST, tmp_path / "r.csv")
    assert len(calls) == 1 and row["step_bound"] == "host-bound (launch overhead)"
    assert 0 < float(row["device_busy_pct"]) < 50  # as the results file holds it


def test_a_host_device_has_no_busy_share():
    row = engine.measure(cfg(), CPU, FAST)
    assert "device_busy_pct" not in row or row["device_busy_pct"] != row["device_busy_pct"]


# --- issue 41: a GPU's round measured in one fresh worker (its processes take seconds to start) --------------------


class _SharedWorkers(devices.backend_class("cpu")):
    """The CPU, marked as a kind whose round's configurations share one fresh worker (as CUDA's do)."""

    round_worker = True


def test_a_round_shares_one_fresh_worker_where_the_device_kind_says_so(tmp_path, monkeypatch):
    from cnnbench.measure import worker

    started = []
    real = worker._in_worker
    monkeypatch.setattr(worker, "_in_worker", lambda *a, **k: started.append(a[0]) or real(*a, **k))
    configs = [cfg(), cfg(batch_size=16), cfg(phase="eval")]
    with using(_SharedWorkers):
        rows = runner.run_configs(configs, CPU, FAST, tmp_path / "r.csv", isolate=True)
    assert [r["status"] for r in rows] == ["ok"] * 3 and {r["isolation"] for r in rows} == {"round_worker"}
    assert len(started) == FAST.processes and all(len(round_cfgs) == 3 for round_cfgs in started)
    assert all(int(float(r["processes_measured"])) == FAST.processes for r in rows)


def test_a_shared_worker_that_dies_crashes_its_configuration_and_the_round_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("CNNBENCH_TEST_WORKER_HOOK", worker_hook.env({"squeezenet1_1": "segfault"}))
    configs = [cfg(model="squeezenet1_1", image_size=32, in_channels=3), cfg(), cfg(phase="eval")]
    with using(_SharedWorkers):
        rows = runner.run_configs(configs, CPU, FAST, tmp_path / "r.csv", isolate=True)
    by_model = {(r["model"], r["phase"]): r for r in rows}
    assert by_model["squeezenet1_1", "train"]["status"] == "crashed"
    assert "SIGSEGV" in by_model["squeezenet1_1", "train"]["error"]
    assert [by_model["mnist_cnn", ph]["status"] for ph in ("train", "eval")] == ["ok", "ok"]


def test_peak_rss_is_the_processs_high_water_mark_not_only_its_largest_sample(monkeypatch):
    """peak_rss_mib is the high-water mark (docs/measurement.md); the sampler's largest 0.1 s sample once
    overwrote it, so a peak between samples or in the warm-up went unreported."""
    monkeypatch.setattr(devices, "peak_rss_mib", lambda: 1e6)
    row = engine.measure(cfg(), CPU, FAST)
    assert row["status"] == "ok" and row["peak_rss_mib"] == 1e6


def test_the_knee_is_the_smallest_batch_within_5pct_of_the_best_or_not_distinguishable_from_it():
    """The CPU example's resnet50 eval runs 317.3 +- 19.5 img/s at batch 32 against the best 335.9 +- 23.5 at
    128 (5.5% below, but inside the intervals): its knee is 32, not 128; resnet50 train (73.6 +- 4.0 against
    83.8 +- 4.3) is told apart and stays at 128."""
    from cnnbench import plots, scenarios
    from conftest import ROOT

    sweep = pd.read_csv(ROOT / "examples" / "example-cpu-2core" / "batch_sweep.csv")
    knees = scenarios.diminishing_returns(sweep).set_index(["model", "phase"]).knee_batch_size.to_dict()
    assert knees == {
        ("resnet50", "eval"): 32,
        ("resnet50", "train"): 128,
        ("squeezenet1_1", "eval"): 64,
        ("squeezenet1_1", "train"): 128,
    }
    title = plots.batch_sweep(sweep, scenarios.diminishing_returns(sweep)).axes[0].get_title()
    assert "not distinguishable" in title
    one_process = sweep.assign(throughput_ci95_img_s=float("nan"))  # no interval: within 5% only
    assert scenarios.diminishing_returns(one_process).knee_batch_size.tolist() == [128, 128, 128, 128]
