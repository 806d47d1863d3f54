"""Configurations measured twice set side by side, the machine judged, and claims only where intervals support
them (issue 17)."""

import math
import random

import pandas as pd
import pytest

from cnnbench import progress, results
from cnnbench.analysis.findings import _run_findings
from cnnbench.measure import reproducibility
from cnnbench.results.runs import Merged


def merged(**tables) -> Merged:
    """The runs' tables as the analysis reads them: every declared column, a table not given without rows."""
    return Merged(["r"], {}, tables)


def rows(source_rates, **extra):
    return pd.DataFrame(
        [
            {
                "run_name": "r",
                "model": m,
                "phase": "train",
                "batch_size": bs,
                "image_size": 64,
                "num_classes": 200,
                "precision": "fp32",
                "memory_format": "nchw",
                "dataset": "synthetic",
                "data_mode": "device",
                "compile": False,
                "status": "ok",
                "throughput_img_s": rate,
                "throughput_ci95_img_s": ci,
                **extra,
            }
            for m, bs, rate, ci in source_rates
        ]
    )


def test_the_committed_examples_gap_is_flagged_as_a_disagreement():
    """squeezenet1_1 train at batch 64: 325.5 +- 0.8 in 02 and 466.7 +- 15.0 in 03 (examples/, before)."""
    a = rows([("squeezenet1_1", 64, 325.5, 0.8), ("resnet50", 128, 41.2, 8.0)])
    b = rows(
        [("squeezenet1_1", 64, 466.7, 15.0), ("squeezenet1_1", 32, 419.4, 52.3), ("resnet50", 128, 43.4, 2.8)]
    )
    pairs = reproducibility.repeated(merged(scenario_a=a, batch_sweep=b))
    assert len(pairs) == 2  # batch 32 was measured once
    sq = pairs[pairs.model == "squeezenet1_1"].iloc[0]
    assert not sq.agree and round(sq.difference_pct, 1) == 43.4
    rn = pairs[pairs.model == "resnet50"].iloc[0]
    assert rn.agree and rn.second_inside_first
    text = reproducibility.agreement_sentence(pairs)
    assert (
        text.startswith("1 of 2 configurations measured twice agree")
        and "squeezenet1_1 train at batch 64" in text
    )


def test_tuning_default_confirmation_is_compared_with_scenario_a():
    a = rows([("resnet50", 128, 41.2, 8.0)])
    tuning = rows([("resnet50", 128, 48.6, 5.9)], stage="confirm", role="default")
    tuning = pd.concat([tuning, rows([("resnet50", 64, 58.2, 0.3)], stage="confirm", role="candidate")])
    pairs = reproducibility.repeated(merged(scenario_a=a, tuning=tuning))
    assert list(pairs.second) == ["tuning (default)"] and bool(pairs.agree.iloc[0])


def test_machine_summary_says_busy_with_figures():
    sa = rows([("resnet18", 128, 100.0, 3.0), ("resnet18", 64, 90.0, 3.0)])
    sa["machine_state"] = ["busy", "quiet"]
    sa["cpu_steal_mean_pct"] = [12.0, 0.0]
    sa["util_other_cpu_mean_pct"] = [45.0, 2.0]
    sa["throughput_process_cv_pct"] = [3.0, 2.0]
    out = reproducibility.machine_summary(sa)
    assert out.busy.iloc[0] == 1
    assert "busy during 1 of 2" in out.verdict.iloc[0] and "steal up to 12.0%" in out.verdict.iloc[0]
    sa["machine_state"] = "quiet"
    sa["throughput_process_cv_pct"] = 25.0
    assert "seems unstable" in reproducibility.machine_summary(sa).verdict.iloc[0]


def test_a_rate_wider_than_itself_is_not_printed_as_a_figure():
    assert reproducibility.rate_text(1852.1, 8490.5).startswith("about 1,852 img/s (not precise")
    assert reproducibility.rate_text(100.0, 3.0) == "100.0 +- 3.0 img/s"
    line = progress.row_line(
        {
            "model": "m",
            "phase": "train",
            "batch_size": 8,
            "status": "ok",
            "throughput_img_s": 1852.1,
            "throughput_ci95_img_s": 8490.5,
        }
    )
    assert "+- 8,490.5" not in line and "not precise" in line


def test_findings_headline_only_precise_rates_and_distinguishable_variants():
    sa = rows([("resnet18", 128, 239.5, 131.8), ("mobilenet_v2", 128, 150.0, 3.0)])
    sa["phase"] = ["eval", "train"]
    sa["achieved_gflops"] = [71.0, 20.0]
    variant = rows([("mobilenet_v2", 128, 153.0, 4.0)])
    variant["precision"] = "bf16"
    variant["achieved_gflops"] = 20.4
    found = _run_findings(
        "r", results.schema.declared(pd.concat([sa, variant], ignore_index=True), "scenario_a")
    )
    best = next(f for f in found if f["topic"] == "highest_rate")["finding"]
    assert "resnet18" not in best and "mobilenet_v2" in best
    gain = next(f for f in found if f["topic"] == "variant_gain")["finding"]
    assert "no variant is distinguishable" in gain


def test_a_disagreement_names_how_far_the_cpus_own_speed_moved():
    a = rows([("squeezenet1_1", 64, 385.7, 34.2)], probe_img_s=400.0)
    b = rows([("squeezenet1_1", 64, 287.4, 30.0)], probe_img_s=300.0)
    pairs = reproducibility.repeated(merged(scenario_a=a, batch_sweep=b))
    assert not pairs.agree.iloc[0] and round(pairs.probe_change_pct.iloc[0]) == -25
    assert "probe) moved -25.0% between the two" in reproducibility.agreement_sentence(pairs)
    sa = pd.concat([a, b], ignore_index=True).assign(machine_state="quiet", throughput_process_cv_pct=5.0)
    verdict = reproducibility.machine_summary(sa).verdict.iloc[0]
    assert verdict.startswith("The benchmark seems unstable") and "moved up to 29%" in verdict


def test_06s_unsplit_step_is_compared_with_the_same_configuration_measured_elsewhere():
    """06's step phases time the unsplit training step too (from a DataLoader): where 02 or 03 measured the same
    configuration with data_mode loader, the two are set side by side; a device-mode row is another pipeline."""
    base = {
        "run_name": "r",
        "model": "resnet18",
        "batch_size": 16,
        "image_size": 64,
        "num_classes": 200,
        "precision": "fp32",
        "memory_format": "nchw",
        "dataset": "synthetic",
        "status": "ok",
        "step_time_s": 0.16,
        "step_time_ci95_s": 0.004,
    }
    phases = pd.DataFrame([{**base, "step_phase": ph} for ph in ("data", "forward", "backward", "optimizer")])
    sweep = pd.concat(
        [rows([("resnet18", 16, 98.0, 3.0)], data_mode="loader"), rows([("resnet18", 16, 130.0, 3.0)])]
    )  # device mode: not the same pipeline
    pairs = reproducibility.repeated(merged(batch_sweep=sweep, step_phases=phases))
    assert len(pairs) == 1
    p = pairs.iloc[0]
    assert p.second == "step phases (unsplit step)" and p.rate_first_img_s == 98.0
    assert round(p.rate_second_img_s, 1) == 100.0 and round(p.ci95_second_img_s, 1) == 2.5 and p.agree


def test_a_ratio_of_two_rates_has_fiellers_interval_wherever_it_is_taken():
    """ratio() took the difference's interval relative to a: right at 1x, too narrow above it (100 +- 5 to 200 +-
    10 gave [1.888, 2.112]) and too wide below; 08's speedups and 07's speedup propagated relative errors instead
    (100 +- 45 to 150 +- 5: [0.82, 2.18], holding 1 for two distinguishable rates). One interval now: Fieller's,
    every ratio rho with b - rho a inside its 95% half-width, which holds 1 exactly when the rates are not
    distinguishable."""
    from cnnbench.analysis import compare
    from cnnbench.tuning import search

    assert reproducibility.ratio(100, 5, 200, 10) == (
        2,
        pytest.approx(1.86333, abs=1e-5),
        pytest.approx(2.14670),
    )
    assert reproducibility.ratio(100, 45, 150, 5)[1:] == (
        pytest.approx(1.03263, abs=1e-5),
        pytest.approx(2.72912),
    )
    assert reproducibility.ratio(10, 12, 20, 1)[1:] == (0.0, math.inf)  # a's interval holds 0: no upper bound
    rng = random.Random(0)
    for _ in range(2000):
        a, b = rng.uniform(1, 100), rng.uniform(1, 100)
        ca, cb = rng.uniform(0, a * 0.9), rng.uniform(0, b)
        _, low, high = reproducibility.ratio(a, ca, b, cb)
        assert (low > 1 or high < 1) == reproducibility.distinguishable(a, ca, b, cb), (a, ca, b, cb)
    rates = pd.DataFrame({"throughput_img_s": [100.0, 200.0], "throughput_ci95_img_s": [5.0, 10.0]})
    two = pd.concat([rates.iloc[[0]].assign(run_name="slow"), rates.iloc[[1]].assign(run_name="fast")])
    two = two.assign(model="resnet18", phase="train", status="ok", device_name="cpu", host="h", host_id="h")
    sp = compare.speedups(results.schema.declared(two.reset_index(drop=True), "scenario_a")).iloc[0]
    assert (sp.speedup_low, sp.speedup_high) == (pytest.approx(1.86333, abs=1e-5), pytest.approx(2.14670))
    tuned = search.speedup(rates.iloc[1].to_dict(), rates.iloc[0].to_dict())
    assert tuned["speedup_ci95_x"] == pytest.approx(2 - 1.86333, abs=1e-5)  # the side facing 1x


def test_a_ratio_whose_denominator_is_imprecise_keeps_the_bound_fieller_gives():
    """1000 +- 10 over 100 +- 150: the two rates are distinguishable, and Fieller's set of ratios above 0 is [4,
    inf); the interval read [0, inf), "not significant" beside distinguishable()'s True."""
    r, low, high = reproducibility.ratio(100, 150, 1000, 10)
    assert (r, high) == (10, math.inf) and low == pytest.approx(3.9997, abs=1e-4)
    assert reproducibility.change_verdict(100, 150, 1000, 10) == "faster"
    assert reproducibility.ratio(100, 150, 120, 10)[1:] == (0.0, math.inf)  # not distinguishable: holds 1


def test_a_speedup_said_with_one_half_width_agrees_with_its_verdict():
    """07 stored the wider side of the speedup's interval and the summary read it as +-: a best of 120 +- 3 over a
    default of 100 +- 15 (Fieller [1.041, 1.414], distinguishable) was said to be "not distinguishable from the
    default". The half-width stored is the side facing 1x, so "r +- half" holds 1 exactly when the interval
    does; an unbounded one is "not known"."""
    from cnnbench.analysis import overview
    from cnnbench.tuning import search

    rate = lambda r, ci: {"throughput_img_s": r, "throughput_ci95_img_s": ci}  # noqa: E731
    out = search.speedup(rate(120, 3), rate(100, 15))
    assert out["distinguishable_from_default"] and "not distinguishable" not in overview.speedup_text(
        out["speedup_x"], out["speedup_ci95_x"]
    )
    slower = search.speedup(rate(80, 3), rate(100, 15))
    assert slower["speedup_ci95_x"] == pytest.approx(reproducibility.ratio(100, 15, 80, 3)[2] - 0.8)
    assert overview.speedup_text(0.5, math.inf).startswith("not known")


def test_fiellers_bound_is_exact_where_the_slower_rates_interval_reaches_zero():
    """A second review: at a == ca exactly the interval read [0, inf) for distinguishable rates (100 +- 100 to 1000
    +- 10: 'not significant'), and near it (a - b) / d lost its digits (a low bound of 32 above the ratio 30.3). The
    smaller root is computed as (b^2 - cb^2) / (ab + s), its exact equal without the cancellation."""
    assert reproducibility.ratio(100, 100, 1000, 10)[1] == pytest.approx(4.9995, abs=1e-4)
    _, low, _ = reproducibility.ratio(
        273.24434705774024, 273.2443470577403, 8272.011872940966, 7829.53492356954
    )
    assert low == pytest.approx(1.576, abs=1e-3)
    rng = random.Random(1)
    for _ in range(20000):
        a, b = rng.uniform(1, 100), rng.uniform(1, 100)
        ca, cb = a * rng.choice([1.0, 1 + 1e-12, 1 - 1e-12, rng.uniform(0, 2)]), rng.uniform(0, b)
        _, low, high = reproducibility.ratio(a, ca, b, cb)
        assert (low > 1 or high < 1) == reproducibility.distinguishable(a, ca, b, cb), (a, ca, b, cb)


def test_a_speedup_whose_interval_has_no_upper_bound_is_not_said_as_plus_minus():
    """1000 +- 10 over a default of 100 +- 150: Fieller's interval is [4.0, inf), yet 07 and the summary printed
    "10.0 +- 6.0x"."""
    from cnnbench.analysis import overview
    from cnnbench.tuning import search

    out = search.speedup(
        {"throughput_img_s": 1000, "throughput_ci95_img_s": 10},
        {"throughput_img_s": 100, "throughput_ci95_img_s": 150},
    )
    assert out["speedup_ci95_x"] == math.inf and out["distinguishable_from_default"]
    assert (
        overview.speedup_text(out["speedup_x"], out["speedup_ci95_x"])
        == "not known (its 95% interval is unbounded)"
    )
