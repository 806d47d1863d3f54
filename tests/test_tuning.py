"""The search of one model with fake evaluations (no model runs), the guard, the params, and one real tiny run."""

import importlib.util
import math

import pandas as pd
import pytest
import torch

import cnnbench
from cnnbench import knobs, params
from cnnbench import tuning as experiment
from cnnbench.devices import Hardware
from cnnbench.knobs import Setting
from cnnbench.measure import engine
from cnnbench.params import Params
from cnnbench.tuning import search
from cnnbench.tuning import search as guard
from cnnbench.tuning.search import Outcome
from conftest import ROOT

AVX2 = frozenset({"avx", "avx2", "fma"})
BASE = engine.Config.of("resnet50", "train", 64, 200, batch_size=128)
SEARCH = dict(
    tune_precisions=["fp32", "bf16"],
    tune_compile_modes=["off"],
    tune_min_batch_size=32,
    tune_max_batch_size=256,
    tune_budget_s=30,
    tune_confirm_top=2,
)
REFERENCE = ("fp32", "nchw", "off")


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


OOM_ABOVE = {"bs": 150}


def speed_of(c: Setting) -> float:
    """channels_last is 1.4x, threads 2 is 2x threads 1, batches above 150 run out of memory, bigger is faster."""
    if c.batch_size > OOM_ABOVE["bs"]:
        return "oom"
    return (
        50.0
        * (1.4 if c.memory_format == "channels_last" else 1)
        * (c.threads / 2)
        * (1 + c.batch_size / 1000)
    )


def make_search(losses=None, hw=None, settings=None, clock=None, probe=None):
    hw = hw or Hardware("cpu", "AMD EPYC", cores=2, isa=AVX2)
    p = Params(**{**SEARCH, **(settings or {})})
    sp = knobs.space(hw, Setting(batch_size=128, threads=2, pin_memory=False), p)
    clock = clock or FakeClock()
    rows, evaluated, confirmed = [], [], []
    losses = losses or {}

    def evaluate(c, window_s):
        evaluated.append(c)
        clock.t += max(window_s, 0.5)
        s = speed_of(c)
        return (
            Outcome("oom", error="out of memory")
            if s == "oom"
            else Outcome("ok", s, 1.0, extra={"step_time_median_s": c.batch_size / s})
        )

    def confirm(c, steps):
        confirmed.append((c, steps))
        return {
            "status": "ok",
            "throughput_img_s": speed_of(c),
            "throughput_ci95_img_s": 2.0,
            "achieved_gflops": speed_of(c) * 2,
            "energy_j_per_image": math.nan,
        }

    s = search.Search(
        BASE,
        sp,
        p,
        {"model": "resnet50", "phase": "train"},
        evaluate,
        lambda n: (5.0, losses.get(n, 4.0)),
        confirm,
        rows.append,
        clock,
        explain=lambda c, row: {"compute_roof_pct": 50.0},
        probe=probe,
    )
    return s, rows, evaluated, confirmed


def test_search_finds_the_best_and_records_every_trial():
    s, rows, evaluated, confirmed = make_search()
    best = s.run()
    assert best["config"] == "fp32 channels_last bs128 threads2"
    df = pd.DataFrame(rows)
    race = df[df.row_kind == "race"]
    assert set(race.stage) == {"numerics", "batch_size", "host"}
    assert {"rung", "fate", "throughput_img_s", "status", "guard_ok"} <= set(race.columns)
    # batch 256 ran out of memory: backed off as timm does (256 -> 192, also too big -> 128 fits)
    oom = race[race.status == "oom"]
    assert sorted(oom.batch_size) == [192, 256] and (oom.fate == "failed").all()
    assert best["batch_size_limit"] == 128 and "out of memory at 256, 192" in best["batch_size_limit_note"]
    # pruned candidates are recorded with the rung they fell at; the row says how many were tried and pruned
    assert best["pruned"] == (race.fate == "pruned").sum() > 0
    assert best["configs_tried"] == len(set(race.config)) and best["evaluations"] == len(evaluated)
    assert "rung 0" in best["pruned_by_rung"] and "numerics" in best["pruned_by_stage"]
    # the default and the best two of the race confirmed with the full protocol, steps from the race's pace
    assert confirmed[0][0] == s.space.default and len(confirmed) == 3 * s.p.processes
    assert all(n >= 1 for _, n in confirmed)
    assert best["speedup_x"] == pytest.approx(speed_of(s.ranked()[0]) / speed_of(s.space.default))
    assert best["speedup_ci95_x"] >= 0 and best["compute_roof_pct"] == 50.0  # the fake rounds agree exactly
    assert "bf16: AVX2-only CPU" in best["skipped_knobs"]
    assert df.row_kind.iloc[-1] == "best"


def test_the_largest_batch_that_fits_is_raced_even_off_the_powers_of_two(monkeypatch):
    monkeypatch.setitem(OOM_ABOVE, "bs", 200)
    s, rows, evaluated, _ = make_search()
    best = s.run()
    assert best["batch_size_limit"] == 192 and best["batch_size"] == 192
    assert "out of memory at 256; largest that fits 192" == best["batch_size_limit_note"]


class FakeWork:
    def __init__(self, *args):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def step(self):
        pass

    def check_loss(self):
        pass


class FakeStepTimer:
    """Records the number of steps of each window; the steps take 0.4, 0.5, 0.6, 0.4, ... s."""

    windows: list = []

    def __init__(self, device):
        pass

    def window(self, step, n):
        FakeStepTimer.windows.append(n)
        times = [(0.4, 0.5, 0.6)[i % 3] for i in range(n)]
        return times, sum(times)


class FakeMeter:
    def __init__(self, counter):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def summary(self, images):
        return {}


@pytest.mark.parametrize(
    "window_s, steps, timed",
    [
        (5.0, 10, [4.0, 0.5, 0.5]),
        (1.0, 3, [4.0, 0.5, 0.5]),
        # issue 41: reduce-overhead (CUDA graphs) records, warms and replays: the pace settles after several steps
        (5.0, 50, [30.0, 3.0, 0.8, 0.1, 0.1]),
    ],
)
def test_race_windows_are_sized_from_a_settled_pace_and_hold_at_least_three(
    monkeypatch, window_s, steps, timed
):
    first, timed = (
        timed[0],
        iter(timed),
    )  # the first step (allocation, kernel selection, cuDNN autotuning) is slow
    monkeypatch.setattr(search.engine, "Workload", FakeWork)
    monkeypatch.setattr(search, "_timed", lambda work, device: next(timed))
    monkeypatch.setattr(search.timing, "StepTimer", FakeStepTimer)
    monkeypatch.setattr(search.energy, "Meter", FakeMeter)
    FakeStepTimer.windows = []
    out = search.window(BASE, Setting(batch_size=8, threads=1), torch.device("cpu"), Params(), window_s)
    assert FakeStepTimer.windows == [steps]  # paced once two steps agree, never fewer than 3 steps
    assert out.status == "ok" and out.extra["measured_steps"] == steps and out.extra["first_step_s"] == first
    assert out.throughput_ci95_img_s > 0  # a window of one step would give a zero bootstrap interval


def test_guard_rejects_a_configuration_whose_loss_departs():
    hw = Hardware("cpu", "Xeon", cores=2, isa=frozenset({"avx512f", "avx512_bf16"}))
    losses = {("bf16", "nchw", "off"): 4.2}  # 20% of fp32 eager's progress (5 -> 4) away: rejected
    s, rows, evaluated, _ = make_search(losses=losses, hw=hw)
    best = s.run()
    assert all(c.precision != "bf16" or c.memory_format != "nchw" for c in evaluated)
    assert any(c.precision == "bf16" and c.memory_format == "channels_last" for c in evaluated)
    g = pd.DataFrame(rows).query("row_kind == 'guard'").set_index("config")
    assert (
        not g.loc["bf16 nchw off", "guard_ok"]
        and "20.0% of fp32 eager's progress apart" in g.loc["bf16 nchw off", "guard_reason"]
    )
    assert g.loc["bf16 nchw off", "status"] == "skipped" and g.loc["fp32 nchw off", "guard_ok"]
    assert "bf16 nchw off" in best["guard_rejected"]


def _guarded(settings: dict) -> pd.DataFrame:
    """The guard rows, by config, of a search on a Hopper GPU whose every guard takes 6 s of a fake clock."""
    hw = Hardware("cuda", "NVIDIA H100", cores=16, capability=(9, 0), triton=True, sms=132)
    clock = FakeClock()
    s, rows, _, _ = make_search(hw=hw, settings=settings, clock=clock)

    def slow_guard(numerics):
        clock.t += 6.0
        return 5.0, 4.0

    s.guard_loss = slow_guard
    s.run_guard()
    return pd.DataFrame(rows).set_index("config")


def test_the_guard_checks_one_changed_knob_before_two():
    """On an H100 local.yaml's 20 s of tune_budget_s went to fp32 and tf32 in both memory formats, 5 s each, and
    bf16 and fp16 were never guarded: each combination changing one knob from fp32 NCHW comes first, a compile
    mode last among them (here, the guard's own budget runs out)."""
    settings = {
        "tune_precisions": ["fp32", "tf32", "bf16", "fp16"],
        "tune_compile_modes": ["off", "default"],  # a compile, the dearest to guard, after the other knobs
        "tune_guard_budget_s": 20,
    }
    g = _guarded(settings)
    assert list(g.index[g.status == "ok"]) == [
        "fp32 nchw off",
        "fp32 channels_last off",
        "tf32 nchw off",
        "bf16 nchw off",
    ]
    assert (
        g.loc["tf32 channels_last off", "status"] == "skipped"
        and g.loc["fp32 nchw default", "status"] == "skipped"
    )
    assert list(g.index[:8]) == [  # the order guarded: one knob changed (compile last), then two
        "fp32 nchw off",
        "fp32 channels_last off",
        "tf32 nchw off",
        "bf16 nchw off",
        "fp16 nchw off",
        "fp32 nchw default",
        "tf32 channels_last off",
        "bf16 channels_last off",
    ]


def test_the_guard_checks_the_runs_own_variants_first():
    """On the H200 (2026-11-28) the guard's 20 s went to fp32 and tf32 in both formats and bf16 NCHW: bf16
    channels_last, the variant 02 measured at 4,722 img/s, was never raced, and 07 called 2,521 img/s its best.
    The numerics of the run's own variants are guarded first, then one changed knob before two."""
    variants = [{"precision": "fp32"}, {"precision": "bf16", "memory_format": "channels_last"}]
    settings = {"tune_precisions": ["fp32", "tf32", "bf16"], "tune_guard_budget_s": 10, "variants": variants}
    g = _guarded(settings)
    assert list(g.index[g.status == "ok"]) == ["fp32 nchw off", "bf16 channels_last off"]


def test_the_guard_has_a_budget_of_its_own_and_the_race_keeps_tune_budget_s():
    """Issue 41: the guard spent the H100's whole tune_budget_s (bf16 and fp16 'skipped', no race row). With its
    own budget every combination is guarded, compile modes too, and the race still gets tune_budget_s."""
    hw = Hardware("cuda", "NVIDIA H100", cores=16, capability=(9, 0), triton=True, sms=132)
    clock = FakeClock()
    settings = {
        "tune_precisions": ["fp32", "tf32", "bf16", "fp16"],
        "tune_compile_modes": ["off", "default", "reduce-overhead"],
        "tune_budget_s": 20,
        "tune_guard_budget_s": 600,
    }
    s, rows, evaluated, _ = make_search(hw=hw, settings=settings, clock=clock)

    def slow_guard(numerics):
        clock.t += 6.0
        return 5.0, 4.0

    s.guard_loss = slow_guard
    best = s.run()
    g = pd.DataFrame(rows).query("row_kind == 'guard'")
    assert len(g) == 4 * 2 * 3 and g.guard_ok.all()
    race = pd.DataFrame(rows).query("row_kind == 'race'")
    assert {"bf16", "fp16"} <= set(race.precision) and {"default", "reduce-overhead"} <= set(race.compile)
    assert best["status"] != "error" and best["search_s"] >= 20


def test_guard_judge_and_failures():
    assert guard.judge(4.1, 4.0, 0.05).ok and not guard.judge(float("nan"), 4.0, 0.05).ok
    # against the progress fp32 eager made (5.6 -> 0.3): ResNet-50's channels-last 0.387 is 1.7% away, accepted;
    # a configuration that did not train (still 5.6) is 100% away
    assert guard.judge(0.387, 0.2994, 0.10, reference_start=5.578).ok
    assert not guard.judge(5.5, 0.2994, 0.10, reference_start=5.578).ok
    assert not guard.judge(0.387, 0.2994, 0.10).ok  # a plain relative difference would reject it (29%)
    verdicts = guard.check(
        [("fp16", "nchw", "off")], lambda n: 1 / 0 if n[0] == "fp16" else (4.0, 3.0), 0.05, REFERENCE
    )
    assert (
        not verdicts[("fp16", "nchw", "off")].ok
        and "ZeroDivisionError" in verdicts[("fp16", "nchw", "off")].reason
    )


def test_budget_is_shared_and_exhaustion_is_recorded():
    clock = FakeClock()
    s, rows, evaluated, _ = make_search(settings={"tune_budget_s": 1.0, "tune_confirm_top": 1}, clock=clock)
    best = s.run()
    assert best["status"] == "ok" and best["budget_exhausted_in"]
    assert best["search_s"] >= 1.0


def test_speedup_interval():
    out = search.speedup(
        {"throughput_img_s": 150, "throughput_ci95_img_s": 3},
        {"throughput_img_s": 100, "throughput_ci95_img_s": 4},
    )
    assert out["speedup_x"] == pytest.approx(1.5)
    assert out["speedup_ci95_x"] == pytest.approx(0.064775, abs=1e-6)  # Fieller's side facing 1x
    assert math.isnan(search.speedup({"throughput_img_s": 1.0}, {})["speedup_x"])


def test_roof_columns_with_and_without_measured_roofs():
    c = Setting(batch_size=8)
    cfg = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=8)
    none = experiment.roof_columns(None, cfg, c, 10.0)
    assert math.isnan(none["compute_roof_pct"]) and "04_roofline did not run" in none["roof_note"]
    peaks = pd.DataFrame(
        [
            {
                "kind": "measured",
                "precision": "fp32",
                "peak_gflops": 200.0,
                "bandwidth_gbs": 40.0,
                "ridge_flop_per_byte": 5.0,
            }
        ]
    )
    out = experiment.roof_columns(peaks, cfg, c, 10.0)
    assert out["compute_roof_pct"] == pytest.approx(5.0) and out["roof_precision"] == "fp32"
    assert out["bound"] in ("memory", "compute") and out["attainable_gflops"] <= 200.0
    bf = experiment.roof_columns(peaks, cfg, c.with_(precision="bf16"), 10.0)
    assert "no measured bf16 roof" in bf["roof_note"]


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("tune_models", ["nope"], "unknown model 'nope'"),
        ("tune_precisions", ["fp8"], "tune_precisions"),
        ("tune_compile_modes", ["fast"], "tune_compile_modes"),
        ("tune_eta", 1, "tune_eta"),
        ("tune_min_batch_size", 1024, "exceeds tune_max_batch_size"),
        ("tune_budget_s", 0, "tune_budget_s"),
        ("tune_phases", ["backward"], "tune_phases"),
    ],
)
def test_bad_tuning_params_stop_with_one_line(key, value, says):
    with pytest.raises(params.ParamsError) as err:
        params.validate({key: value}, check_device=False)
    assert says in str(err.value) and key.split("_")[0] in str(err.value) and "\n" not in str(err.value)


def test_tiny_real_search_writes_tuning_csv(tmp_path):
    over = {
        "tune_models": ["mnist_cnn"],
        "tune_budget_s": 2.0,
        "tune_min_batch_size": 8,
        "tune_max_batch_size": 16,
        "tune_compile_modes": ["off"],
        "tune_confirm_window_s": 0.1,
        "tune_confirm_top": 1,
        "tune_guard_steps": 2,
        "repeats": 2,
    }
    run = cnnbench.open_run(ROOT / "params" / "smoke.yaml", over, tmp_path / "run")
    pd.DataFrame(
        [
            {
                "device_name": run.device_name,
                "kind": "measured",
                "precision": "fp32",
                "peak_gflops": 100.0,
                "bandwidth_gbs": 20.0,
                "ridge_flop_per_byte": 5.0,
            }
        ]
    ).to_csv(run.path("device_peaks.csv"), index=False)
    df = cnnbench.tuning.tune(run)
    best = df[df.row_kind == "best"].iloc[0]
    assert best.status == "ok" and best.speedup_x > 0 and best.configs_tried >= 2
    assert {"energy_j", "energy_j_per_image", "avg_power_w", "energy_source"} <= set(df.columns)
    conf = df[df.row_kind == "confirm"]
    space_df = pd.read_csv(run.path("tuning_space.csv"))
    assert {"knob", "value", "searched", "reason"} <= set(space_df.columns)
    # the default is fp32; a candidate may be any precision this CPU searched (bf16 won on a loaded AMX Xeon)
    searched = set(space_df[(space_df.knob == "precision") & space_df.searched].value)
    assert set(conf[conf.role == "default"].precision) == {"fp32"} and set(conf.precision) <= searched | {
        "fp32"
    }
    assert torch.get_num_threads() == run.threads
    assert "np." not in run.path("tuning.csv").read_text()  # numpy scalars written as plain numbers
    assert best.compute_roof_pct > 0 and best.bound in ("compute", "memory")  # placed on the run's roofline
    assert any(cnnbench.tuning.findings(df))
    n = len(df)
    assert len(cnnbench.tuning.tune(run)) == n  # a rerun resumes: nothing measured again


class FakeSearch:
    """Search of tune_one without a model: records its identity and writes a 'best' row as the real one does."""

    searched: list = []

    def __init__(self, base, sp, p, identity, **injected):
        self.identity, self.sink = identity, injected["sink"]

    def run(self):
        FakeSearch.searched.append(dict(self.identity))
        row = {
            **self.identity,
            "row_kind": "best",
            "stage": "best",
            "rung": "",
            "config": "fp32 nchw",
            "status": "ok",
            "throughput_img_s": 100.0 + len(FakeSearch.searched),
        }
        self.sink(row)
        return row


def test_a_rerun_with_other_search_params_searches_again(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "Search", FakeSearch)
    FakeSearch.searched = []
    base = {"tune_models": ["resnet18"], "tune_budget_s": 2.0}
    before = torch.get_num_threads()

    def tune(**over):
        return cnnbench.tuning.tune(
            cnnbench.open_run(ROOT / "params" / "smoke.yaml", {**base, **over}, tmp_path / "run")
        )

    try:
        tune()
        tune()
        assert len(FakeSearch.searched) == 1  # the same search resumes
        for over in (
            {"tune_budget_s": 3.0},
            {"image_size": 48},
            {"num_classes": 5},
            {"tune_precisions": ["fp32"]},
            {"tune_max_batch_size": 64},
            {"threads": 2},
        ):
            n = len(FakeSearch.searched)
            df = tune(**over)
            assert len(FakeSearch.searched) == n + 1, f"{over}: the old search was reused"
            best = df[df.row_kind == "best"]
            assert (
                len(best) == 1 and best.throughput_img_s.iloc[0] == 100.0 + n + 1
            )  # this search's rows only
    finally:
        torch.set_num_threads(before)


def test_a_rerun_after_an_interruption_reads_no_row_of_the_interrupted_attempt(tmp_path, monkeypatch):
    attempts = []

    class Interrupted(FakeSearch):
        """Races fp32 nchw to rung 1 and is interrupted the first time; the rerun's race (its noise ranked
        otherwise) holds channels_last alone."""

        def run(self):
            attempts.append(fmt := "channels_last" if attempts else "nchw")
            for rung in range(2 if fmt == "nchw" else 1):
                row = dict(row_kind="race", stage="numerics", rung=rung, config=f"fp32 {fmt}", status="ok")
                self.sink({**self.identity, **row})
            if fmt == "nchw":
                raise KeyboardInterrupt
            return super().run()

    monkeypatch.setattr(search, "Search", Interrupted)
    before = torch.get_num_threads()
    try:
        run = cnnbench.open_run(
            ROOT / "params" / "smoke.yaml", {"tune_models": ["resnet18"]}, tmp_path / "run"
        )
        with pytest.raises(KeyboardInterrupt):
            cnnbench.tuning.tune(run)
        assert list(experiment.race(cnnbench.tuning.tune(run)).config) == ["fp32 channels_last"]
    finally:
        torch.set_num_threads(before)


def test_guard_loss_is_reproducible_and_channels_last_trains_the_same_network():
    cpu = torch.device("cpu")
    cfg = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=8, threads=1)
    p = Params()
    start, ref = guard.loss_after(cfg, cpu, p, 4)
    assert guard.loss_after(cfg, cpu, p, 4)[1] == pytest.approx(ref, rel=1e-6)
    cl = guard.loss_after(cfg.replace(memory_format="channels_last"), cpu, p, 4)[1]
    assert guard.judge(cl, ref, 0.05, start).ok
    untrained = guard.loss_after(cfg, cpu, p, 1)[1]
    assert untrained == pytest.approx(start) and not guard.judge(untrained, ref, 0.05, start).ok
    ev = guard.loss_after(cfg.replace(phase="eval"), cpu, p, 4)
    assert ev[0] == ev[1] and math.isfinite(ev[0])


def load_tuning_goal():
    spec = importlib.util.spec_from_file_location("tuning_goal", ROOT / "benchmarks" / "tuning_goal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "device_name, figure",
    [
        ("NVIDIA H100 80GB HBM3", 2790.0),  # the H100 SXM the published figure was measured on
        ("nvidia  h100 80gb hbm3", 2790.0),  # case, spacing and the NVIDIA prefix do not matter
        ("NVIDIA H200", 3080.0),
        ("NVIDIA GH200 480GB", None),  # contains "H200" but is another device
        ("NVIDIA H100 PCIe", None),  # another variant than the published SXM
        ("NVIDIA H200 NVL", None),
        ("NVIDIA L40", None),
    ],
)
def test_tuning_goal_compares_only_with_the_exact_published_device(device_name, figure):
    published = load_tuning_goal().published_for(device_name)
    assert (published[0] if published else None) == figure


def test_confirmation_is_interleaved_in_rounds_and_its_interval_spans_them():
    """Issue 17: the default and the top candidates are confirmed in turn, round after round, so drift falls on
    all alike; the interval is over the rounds, not one round's windows."""
    s, rows, _, confirmed = make_search(settings={"tune_confirm_top": 2, "processes": 3})
    s.run()
    order = [c for c, _ in confirmed]
    assert len(order) == 9 and order[:3] == order[3:6] == order[6:]
    assert order[0] == s.space.default


def test_the_confirmation_probes_the_cpu_before_each_round_and_the_repeat_check_uses_it():
    """Issue 17: the example's 07 default read 20-25% above 02 and 03, and the report could not say whether the
    CPU's own speed had moved: 07 took no probe. It now probes before every round, as 02 and 03 do."""
    from cnnbench.measure import reproducibility
    from cnnbench.results.runs import Merged

    speeds = iter([300.0, 320.0, 340.0])
    s, rows, _, _ = make_search(settings={"tune_confirm_top": 1, "processes": 3}, probe=lambda: next(speeds))
    s.run()
    confirm = pd.DataFrame([r for r in rows if r["row_kind"] == "confirm"])
    assert set(confirm.probe_img_s) == {320.0}
    default = confirm[confirm.role == "default"].assign(
        stage="confirm", status="ok", model="resnet50", run_name="r", batch_size=128, phase="train"
    )
    sa = default.assign(probe_img_s=256.0, throughput_img_s=100.0)
    pairs = reproducibility.repeated(Merged(["r"], {}, {"scenario_a": sa, "tuning": default}))
    assert pairs.probe_change_pct.round(1).tolist() == [25.0]


def test_combine_rounds_interval_spans_the_rounds():
    rounds = [
        {"status": "ok", "throughput_img_s": r, "throughput_ci95_img_s": 0.5, "window_time_s": 2.0}
        for r in (100.0, 120.0, 110.0)
    ]
    row = search.combine_rounds(rounds)
    assert row["throughput_img_s"] == pytest.approx(110.0) and row["confirm_rounds"] == 3
    assert row["throughput_ci95_img_s"] > 20 * row["throughput_ci95_within_img_s"]
    assert search.combine_rounds([*rounds, {"status": "oom", "error": "x"}])["status"] == "oom"


def test_a_winner_inside_the_defaults_interval_is_not_called_faster():
    """The committed example: winner 36.3 and default 32.8 with overlapping intervals."""
    out = search.speedup(
        {"throughput_img_s": 36.3, "throughput_ci95_img_s": 3.0},
        {"throughput_img_s": 32.8, "throughput_ci95_img_s": 2.5},
    )
    assert out["distinguishable_from_default"] is False
    row = {
        "row_kind": "best",
        "status": "ok",
        "model": "resnet50",
        "phase": "train",
        "config": "c",
        "throughput_img_s": 36.3,
        "throughput_ci95_img_s": 3.0,
        "default_throughput_img_s": 32.8,
        "default_throughput_ci95_img_s": 2.5,
        "configs_tried": 5,
        "pruned": 1,
        "compute_roof_pct": float("nan"),
        "roof_note": "n",
        "energy_j_per_image": float("nan"),
        "energy_note": "e",
        **out,
    }
    from cnnbench import tuning

    (text,) = tuning.findings(pd.DataFrame([row]))
    assert "not distinguishable from the seeds' default" in text and "x the seeds' default" not in text
    spent = "bf16 channels_last off: not guarded: tune_guard_budget_s was spent (the guard's steps count)"
    (text,) = tuning.findings(pd.DataFrame([{**row, "guard_rejected": f"{spent}; {spent}"}]))
    assert "2 numerics never raced: the guard's budget (tune_guard_budget_s) ran out" in text  # the H200's 07


def test_windows_of_the_same_shape_reuse_compiled_graphs(monkeypatch):
    """Issue 19: dynamo was reset before every compiled window, so every rung recompiled every candidate. Now
    a shape seen since the last reset reuses its graphs; a new mode, an unknown shape, or more shapes than
    SHAPES_PER_RESET reset."""
    import torch._dynamo as dynamo

    resets = []
    monkeypatch.setattr(dynamo, "reset", lambda: resets.append(1))
    monkeypatch.setattr(knobs, "_compiled", {"mode": None, "shapes": set()})

    def window(mode, shape):
        with knobs.compiling(mode, shape):
            pass
        return len(resets)

    assert window("default", "A") == 1  # the first compile starts clean
    assert [window("default", s) for s in ("A", "B", "A", "B")] == [1, 1, 1, 1]  # rungs again: reused
    assert window("off", "A") == 1  # eager touches nothing
    assert (
        window("reduce-overhead", "A") == 2
    )  # another mode: dynamo's cache does not key on Inductor's options
    assert window("reduce-overhead", None) == 3  # unknown shape: reset as before
    for s in "CDEF":
        window("default", s)
    assert len(resets) == 4 and window("default", "G") == 5  # a fifth shape past SHAPES_PER_RESET


def test_windows_of_one_candidate_compile_under_one_shape(monkeypatch):
    """A workload hands its configuration to the compile knob as the shape, so every rung's window of one
    candidate reuses the graphs compiled for it and a change of batch size is a new shape."""
    shapes = []
    monkeypatch.setattr(
        knobs,
        "compiling",
        lambda mode, shape=None: shapes.append(shape) or __import__("contextlib").nullcontext(),
    )
    c = Setting(batch_size=8, threads=1, compile="default", workers=0)
    base = engine.Config.of("mnist_cnn", "train", 28, 10, 1)
    monkeypatch.setattr(torch, "compile", lambda model, **k: model)
    for setting in (c, c.with_(), c.with_(batch_size=16)):
        with engine.Workload(base.replace(**setting), torch.device("cpu"), Params()):
            pass
    assert shapes[0] == shapes[1] != shapes[2] and shapes[0].batch_size == 8


def test_07_opened_alone_searches_and_says_in_one_line_to_run_04_first(tmp_path):
    """Issue 19: on Colab each notebook gets a fresh VM; 07 without 04's device_peaks.csv completes its search
    and says which notebook gives it the roofline."""
    import papermill

    out = tmp_path / "07.ipynb"
    papermill.execute_notebook(
        str(ROOT / "notebooks" / "07_tuning.ipynb"),
        str(out),
        kernel_name="python3",
        parameters={
            "params_file": str(ROOT / "params" / "smoke.yaml"),
            "overrides": {},
            "run_dir": str(tmp_path / "run"),
        },
        progress_bar=False,
    )
    df = pd.read_csv(tmp_path / "run" / "tuning.csv")
    assert (df.row_kind == "best").any() and "04_roofline did not run" in df.roof_note.iloc[-1]
    assert "No device_peaks.csv in this run" in out.read_text() and "run 04_roofline first" in out.read_text()
    assert not (tmp_path / "run" / "device_peaks.csv").exists()


def test_reused_graphs_are_real_dynamo_graphs_static_per_batch_size():
    """With real dynamo (its eager backend, no Inductor codegen): windows of one shape on fresh model instances
    compile once; each further batch size compiles its own static graph (not a dynamic-shape one that later
    sizes would measure) and the first size's graph still serves."""
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    from cnnbench import models

    dynamo.reset()
    counters.clear()
    knobs._compiled.update(mode=None, shapes=set())
    for bs in (4, 4, 8, 4, 16):
        with knobs.compiling("default", ("mnist_cnn", bs)):
            net = torch.compile(models.build("mnist_cnn", 10), backend="eager")
            net(torch.randn(bs, 1, 28, 28)).sum().backward()
    assert (
        counters["stats"]["unique_graphs"] == 3
    )  # 4, 8 and 16: a dynamic graph from 8 on would have served 16
    dynamo.reset()


def test_a_search_line_says_a_row_kind_once_where_its_stage_has_the_same_name():
    """The walk: 07's console read "guard guard fp32 ...", "confirm confirm ...", "best best ..."."""
    from cnnbench.tuning import search_line

    line = search_line(
        "resnet18",
        "train",
        {"row_kind": "guard", "stage": "guard", "config": "fp32 nchw", "throughput_img_s": 12.0},
    )
    assert line == "  tuning resnet18 train: guard fp32 nchw 12.0 img/s"
    race = search_line("resnet18", "train", {"row_kind": "race", "stage": "numerics", "config": "bf16 nchw"})
    assert race.startswith("  tuning resnet18 train: race numerics bf16 nchw")


def test_the_out_of_memory_back_off_stays_inside_the_memory_this_machine_has(tmp_path, monkeypatch):
    """Issue 30: tune_max_batch_size 2**30 on a CPU: the back-off reached a batch whose allocation succeeded and
    whose step then overcommitted; the OOM killer took the kernel at 21.5 GB. A batch whose footprint, estimated
    from the workbook's own counts (cnnbench.measure.flops: activations saved per image), exceeds the memory
    available is never tried."""
    import types

    import psutil

    from cnnbench.measure import flops

    cpu = torch.device("cpu")
    base = engine.config(params.load(ROOT / "params" / "smoke.yaml"), "mnist_cnn", "train")
    cx = flops.complexity("mnist_cnn", base.image_size, base.num_classes, with_fvcore=False)
    room = (64.5 * cx.activation_mib + 4 * cx.param_mib) * 2**20  # a machine with room for a batch of 64
    real = psutil.virtual_memory()
    monkeypatch.setattr(
        psutil, "virtual_memory", lambda: types.SimpleNamespace(available=room, total=real.total)
    )
    out = experiment.beyond_memory(base, Setting(batch_size=1024), cpu)
    assert out.status == "oom" and "not tried" in out.error and "GiB" in out.error
    assert experiment.beyond_memory(base, Setting(batch_size=16), cpu) is None
    tried = []

    def window(base, c, device, protocol, window_s):
        tried.append(c.batch_size)
        return Outcome("ok", 1000.0 * c.batch_size, 1.0, extra={"measured_steps": 3})

    monkeypatch.setattr(search, "window", window)
    over = {
        "tune_models": ["mnist_cnn"],
        "tune_budget_s": 1.0,
        "tune_min_batch_size": 8,
        "tune_max_batch_size": 1024,
        "tune_compile_modes": ["off"],
        "tune_confirm_window_s": 0.05,
        "tune_confirm_top": 1,
        "tune_guard_steps": 2,
        "repeats": 1,
    }
    run = cnnbench.open_run(ROOT / "params" / "smoke.yaml", over, tmp_path / "run")
    best = cnnbench.tuning.tune(run).query("row_kind == 'best'").iloc[0]
    assert tried and max(tried) <= 64 and best.batch_size_limit <= 64, (tried, best.batch_size_limit_note)
    assert "out of memory at 1024" in best.batch_size_limit_note


def test_the_best_resnet50_224_training_rate_stands_beside_the_published_gpu_figures():
    """Issue 41: printed beside NVIDIA's, Lambda's and MLPerf's ResNet-50 figures, each 'published by' its source
    with its software stack; the same GPU family marked."""
    from cnnbench import tuning

    best = {"row_kind": "best", "model": "resnet50", "phase": "train", "status": "ok", "image_size": 224,
            "device_name": "NVIDIA H100 80GB HBM3", "config": "bf16 channels_last bs256", "precision": "bf16",
            "batch_size": 256, "throughput_img_s": 2900.0, "throughput_ci95_img_s": 40.0}  # fmt: skip
    table = tuning.beside_published(pd.DataFrame([best, {**best, "image_size": 64, "throughput_img_s": 9e3}]))
    assert table.throughput_img_s.iloc[0] == 2900.0 and table.who.iloc[0].startswith("measured here")
    theirs = table.iloc[1:]
    assert (
        len(theirs) >= 4
        and theirs.who.str.startswith("published by ").all()
        and theirs["stack"].str.len().gt(0).all()
    )
    assert set(theirs[theirs.same_gpu].device) == {"NVIDIA H100 SXM"}
    assert tuning.beside_published(pd.DataFrame([{**best, "model": "resnet18"}])).empty


def test_a_speedups_nonzero_interval_is_never_printed_as_zero():
    """The H200's 07 said "2.37 ± 0.00x" where the interval is ±0.003927: each value is shown to its interval."""
    from cnnbench import tuning

    row = {
        "row_kind": "best",
        "status": "ok",
        "model": "resnet50",
        "phase": "train",
        "config": "bf16 nchw bs512",
        "throughput_img_s": 2521.309669,
        "throughput_ci95_img_s": 2.268237,
        "default_throughput_img_s": 1063.680257,
        "default_throughput_ci95_img_s": 1.479952,
        "speedup_x": 2.370364,
        "speedup_ci95_x": 0.003927,
        "distinguishable_from_default": True,
        "configs_tried": 11,
        "pruned": 6,
        "compute_roof_pct": float("nan"),
        "roof_note": "n",
        "energy_j_per_image": float("nan"),
        "energy_note": "e",
    }
    (text,) = tuning.findings(pd.DataFrame([row]))
    assert "2.3704\u00a0±\u00a00.0039x the seeds' default" in text and "2,521.3\u00a0±\u00a02.3 img/s" in text
    unbounded = {**row, "speedup_x": 10.0, "speedup_ci95_x": float("inf")}  # the default's interval holds 0
    (text,) = tuning.findings(pd.DataFrame([unbounded]))
    assert "10x the seeds' default, its 95% interval unbounded" in text


def test_the_race_keeps_its_budget_and_a_stage_without_time_keeps_the_winner_before_it():
    """The H200 example's race took 102 s of its 15 (its batch-size and host stages raced after the budget was
    spent, 0 s windows): the search ends within the budget and one evaluation (0.5 s here), and a stage left
    without time races nothing and says so."""
    clock = FakeClock()
    s, rows, evaluated, _ = make_search(settings={"tune_budget_s": 1.0, "tune_confirm_top": 1}, clock=clock)
    best = s.run()
    assert best["status"] == "ok" and 1.0 <= best["search_s"] <= 1.0 + 0.5
    race = pd.DataFrame(rows).query("row_kind == 'race'")
    assert "host" not in set(race.stage) and "host (not raced" in best["budget_exhausted_in"]
    assert best["configs_tried"] == race[race.status != "skipped"].config.nunique()
    # its batch-size back-off stopped after 256 was out of memory: the numerics winner's 128 stands
    assert best["batch_size_limit_note"] == "out of memory at 256; the budget ran out before one fitted"
    assert best["batch_size"] == 128


def test_the_guard_cannot_judge_against_a_reference_that_is_not_finite_or_failed():
    """judge(2.0, nan, ...) said ok: every finite loss passed a guard whose fp32 eager loss was nan. And a reference
    that fails to run (a batch of 1 in BatchNorm) raised out of check(): 07 died with no best row."""
    v = guard.judge(2.0, float("nan"), 0.1, 2.3)
    assert not v.ok and "cannot judge" in v.reason
    fail = guard.check([REFERENCE, ("bf16", "nchw", "off")], lambda n: 1 / 0, 0.05, REFERENCE)
    assert not any(v.ok for v in fail.values()) and "ZeroDivisionError" in fail[REFERENCE].reason
    assert "cannot judge" in fail[("bf16", "nchw", "off")].reason
