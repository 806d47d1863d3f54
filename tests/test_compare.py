"""Issue 20, "what did my change do?": one-knob ratios with their interval and a verdict, in the analysis and in
``cnnbench compare RUN_A RUN_B`` (and ``cnnbench compare RUN seeds``)."""

import json
import math

import pandas as pd
import pytest
from test_analysis import make_run

from cnnbench import analysis, pipeline, results
from cnnbench.analysis import compare
from cnnbench.measure import reproducibility
from conftest import ROOT

TRAIN, EVAL = ("resnet18", "train"), ("resnet18", "eval")


def _runs(tmp_path):
    """Three runs of one machine: threads 1 (a), threads 2 (b, train clearly faster, eval within the noise),
    threads 2 at batch 64 (c: two knobs from a)."""
    make_run(
        tmp_path,
        "a",
        "cpu",
        "Intel Core",
        {TRAIN: 100.0, EVAL: 300.0},
        ci={TRAIN: 3.0, EVAL: 15.0},
        extra={"threads": 1},
    )
    make_run(
        tmp_path,
        "b",
        "cpu",
        "Intel Core",
        {TRAIN: 180.0, EVAL: 306.0},
        ci={TRAIN: 4.0, EVAL: 15.0},
        extra={"threads": 2},
    )
    make_run(
        tmp_path,
        "c",
        "cpu",
        "Intel Core",
        {TRAIN: 150.0},
        ci={TRAIN: 4.0},
        batch_size=64,
        extra={"threads": 2},
    )
    return tmp_path


def test_ratio_and_verdict_significant_and_not():
    r, low, high = reproducibility.ratio(100.0, 3.0, 180.0, 4.0)
    assert r == pytest.approx(1.8) and low < 1.8 < high and low > 1
    assert reproducibility.change_verdict(100.0, 3.0, 180.0, 4.0) == "faster"
    assert reproducibility.change_verdict(180.0, 4.0, 100.0, 3.0) == "slower"
    # 2% inside the noise: not significant, never "1.02x faster"
    assert reproducibility.change_verdict(300.0, 15.0, 306.0, 15.0) == "not significant"
    r, low, high = reproducibility.ratio(300.0, 15.0, 306.0, 15.0)
    assert low < 1 < high
    assert reproducibility.change_verdict(300.0, float("nan"), 306.0, 15.0) == "no interval"
    # noise larger than the rates (a busy 2-core machine): the interval holds 1, as the verdict says
    r, low, high = reproducibility.ratio(1641.2, 4389.9, 32.9, 469.7)
    assert low == 0 and low < 1 < high
    assert reproducibility.change_verdict(1641.2, 4389.9, 32.9, 469.7) == "not significant"


def test_rows_differing_in_exactly_one_key_are_divided_and_labelled(tmp_path):
    m = analysis.load(analysis.discover(_runs(tmp_path)))
    t = compare.ratios(m)
    ab = t[(t.run_a == "a") & (t.run_b == "b")].set_index("phase")
    assert set(ab.knob) == {"threads"} and set(ab.value_a) == {"1"} and set(ab.value_b) == {"2"}
    assert ab.loc["train", "ratio_b_over_a"] == pytest.approx(1.8) and ab.loc["train", "verdict"] == "faster"
    assert ab.loc["eval", "verdict"] == "not significant"
    assert ab.loc["eval", "ratio_ci95_low"] < 1 < ab.loc["eval", "ratio_ci95_high"]
    # a and c differ in threads and batch size: not divided, both named
    ac = t[(t.run_a == "a") & (t.run_b == "c")].iloc[0]
    assert ac.verdict == "not divided" and pd_isna(ac.ratio_b_over_a)
    assert ac.differs_in == "batch_size 128 vs 64; threads 1 vs 2"
    # b and c differ in the batch size only: divided, labelled by it
    bc = t[(t.run_a == "b") & (t.run_b == "c")].iloc[0]
    assert bc.knob == "batch_size" and (bc.value_a, bc.value_b) == ("128", "64") and bc.verdict == "slower"
    # with the keys named, a -> c is divided by them
    named = compare.ratios(m, keys=("threads", "batch_size"))
    ac = named[(named.run_a == "a") & (named.run_b == "c")].iloc[0]
    assert ac.knob == "batch_size; threads" and ac.ratio_b_over_a == pytest.approx(1.5)
    # for reading: the verdict first, the columns constant over the table in the caption
    view, same = compare.ratio_table(t)
    assert list(view.columns[:4]) == ["verdict", "ratio_b_over_a", "ratio_ci95_low", "ratio_ci95_high"]
    assert "image_size" not in view and "table" not in view and "run_b" in view
    assert "table scenario_a" in same and "image_size 64" in same


def pd_isna(x):
    import pandas as pd

    return pd.isna(x)


def _compare(capsys, *args):
    rc = pipeline.main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_prints_each_configuration_and_writes_compare_csv(tmp_path, capsys):
    outputs = _runs(tmp_path / "outputs")
    rc, out, err = _compare(capsys, "a", "b", "--outputs", outputs)
    assert rc == 0, err
    assert (
        "resnet18 train (scenario_a, batch 128) [threads 1 -> 2]: 100.0 +- 3.0 img/s -> 180.0 +- 4.0 img/s: "
        "1.80x [1.73, 1.87] faster"
    ) in out
    assert (
        "resnet18 eval (scenario_a, batch 128) [threads 1 -> 2]: 300.0 +- 15.0 img/s -> 306.0 +- 15.0 img/s: "
        "1.02x [0.95, 1.09] not significant" in out
    )
    assert "1.02x faster" not in out
    rows = results.read_rows(outputs / "compare.csv")
    assert {r["verdict"] for r in rows} == {"faster", "not significant"}
    assert {r["run_a"] for r in rows} == {"a"} and all(r["host_id_a"] and r["rate_a_img_s"] for r in rows)
    # --out puts it elsewhere; a run given as a folder path works too
    rc, _, _ = _compare(
        capsys,
        outputs / "a",
        "c",
        "--outputs",
        outputs,
        "--keys",
        "threads,batch_size",
        "--out",
        tmp_path / "elsewhere",
    )
    assert rc == 0 and (tmp_path / "elsewhere" / "compare.csv").is_file()


def _refused(rc, out, err, text):
    assert rc == 2 and not out, out
    assert err.count("\n") == 1 and err.startswith("cnnbench compare: ") and text in err, err


def test_cli_refuses_unknown_broken_and_incompatible_runs_in_one_line(tmp_path, capsys):
    outputs = _runs(tmp_path)
    _refused(*_compare(capsys, "a", "nope", "--outputs", outputs), "unknown run 'nope'")
    _refused(*_compare(capsys, "a", "b.zip", "--outputs", outputs), "unzip it into")  # a shared run's zip
    _refused(*_compare(capsys, "a", "c", "--outputs", outputs), "differs in more than one key")
    _refused(
        *_compare(capsys, "a", "c", "--outputs", outputs, "--keys", "threads"),
        "differs in keys other than --keys (batch_size; threads)",
    )
    make_run(outputs, "other", "cpu", "Intel Core", {("resnet50", "train"): 5.0}, extra={"threads": 1})
    rc, out, err = _compare(capsys, "a", "other", "--outputs", outputs)
    _refused(rc, out, err, "no model and phase in common")
    assert "'other' measured resnet50 train" in err, err  # what each run has: what to measure to compare them
    make_run(outputs, "odd", "cpu", "Intel Core", {("alexnet", "train"): 5.0})
    _refused(
        *_compare(capsys, "odd", "seeds", "--outputs", outputs),
        "in the seeds' variant (fp32, NCHW, eager) of a model seed 000 measured (mobilenet_v2, resnet18",
    )
    (outputs / "b" / "environment.json").write_text("[1, 2]")
    _refused(*_compare(capsys, "a", "b", "--outputs", outputs), "b: broken run (")
    _refused(*_compare(capsys, "a", "a", "--outputs", outputs, "--keys", "colour"), "--keys 'colour'")
    # one run with no two variants one knob apart: it is alone, and a second run is what to give
    rc, out, err = _compare(capsys, "a", "--outputs", outputs)
    _refused(rc, out, err, "nothing comparable in 'a' alone: ")
    assert "'a' and 'a'" not in err and "give a second run" in err, err
    assert not (outputs / "compare.csv").exists()


def test_compare_csv_keeps_every_comparison_and_replaces_only_the_same_runs(tmp_path, capsys):
    """The browser walk: every ``cnnbench compare`` overwrote compare.csv (three compares left the last one)."""
    outputs = _runs(tmp_path / "outputs")
    for args in (("a", "b"), ("a", "c", "--keys", "threads,batch_size"), ("a", "seeds")):
        rc, out, err = _compare(capsys, *args, "--outputs", outputs)
        assert rc == 0, err
    rows = results.read_rows(outputs / "compare.csv")
    sets = [r["compared"] for r in rows]
    assert list(dict.fromkeys(sets)) == ["a b", "a c", "a seeds"]
    assert {(r["run_a"], r["run_b"]) for r in rows} == {("a", "b"), ("a", "c"), ("a", "seeds")}
    before = [r for r in rows if r["compared"] != "a b"]
    assert out.splitlines()[-1] == (
        f"cnnbench compare: {sets.count('a seeds')} row(s) comparing a and seeds -> {outputs / 'compare.csv'} (added to the 2 "
        "other comparison(s) there; a compare of the same runs replaces its rows)"
    )
    # the same set of runs again, in the other order: its rows replaced, the other two comparisons untouched
    rc, _, err = _compare(capsys, "b", "a", "--outputs", outputs)
    assert rc == 0, err
    rows = results.read_rows(outputs / "compare.csv")
    assert [r for r in rows if r["compared"] != "a b"] == before
    ab = [r for r in rows if r["compared"] == "a b"]
    assert len(ab) == sets.count("a b") and {(r["run_a"], r["run_b"]) for r in ab} == {("b", "a")}
    # a refused compare writes nothing
    _refused(*_compare(capsys, "a", "nosuch", "--outputs", outputs), "unknown run 'nosuch'")
    assert results.read_rows(outputs / "compare.csv") == rows
    # rows an earlier version wrote (no 'compared') count as the comparison of their two runs
    results.write_rows(
        outputs / "compare.csv", [{k: v for k, v in r.items() if k != "compared"} for r in rows]
    )
    rc, out, err = _compare(capsys, "a", "c", "--keys", "threads,batch_size", "--outputs", outputs)
    assert rc == 0, err
    assert sorted({r["compared"] for r in results.read_rows(outputs / "compare.csv")}) == [
        "a b",
        "a c",
        "a seeds",
    ]
    assert "(added to the 2 other comparison(s) there;" in out


@pytest.mark.parametrize(
    "text, says",
    [
        ("schema_version,compared,run_a\n3,a b,a\n3,a b,", "its last line is cut short"),
        ("schema_version,compared,run_a\n2,a b,a\n", "results schema 2"),
    ],
)
def test_a_cut_or_older_compare_csv_is_refused_in_one_line_before_any_work(tmp_path, capsys, text, says):
    """Issue 44: a cut or older-schema compare.csv gave a traceback after the comparison was computed."""
    outputs = _runs(tmp_path)
    (outputs / "compare.csv").write_text(text)
    _refused(*_compare(capsys, "a", "b", "--outputs", outputs), says)
    assert (outputs / "compare.csv").read_text() == text


def test_a_run_with_an_impossible_rate_is_refused_naming_the_file_and_the_row(tmp_path, capsys):
    """Issue 44: an inf rate made compare print "infx [inf, inf]"."""
    outputs = _runs(tmp_path)
    rows = results.read_rows(outputs / "b" / "scenario_a.csv")
    results.write_rows(outputs / "b" / "scenario_a.csv", [{**rows[0], "throughput_img_s": "inf"}, *rows[1:]])
    rc, out, err = _compare(capsys, "a", "b", "--outputs", outputs)
    _refused(
        rc, out, err, f"b: broken run ({outputs / 'b' / 'scenario_a.csv'}: line 2, column 'throughput_img_s'"
    )


def test_cli_seeds_pseudo_run_is_not_matched_and_has_no_verdict(tmp_path, capsys):
    from cnnbench import published

    outputs = _runs(tmp_path)
    rc, out, err = _compare(capsys, "a", "seeds", "--outputs", outputs)
    assert rc == 0, err
    rows = results.read_rows(outputs / "compare.csv")
    devices = {r["device_b"] for r in rows if r["model"] == "resnet18" and r["phase"] == "train"}
    assert devices == {"000's apple", "000's cpu", "000's t4"}
    assert {r["verdict"] for r in rows} == {"not matched"}
    assert all(r["differs_in"].startswith("not matched") for r in rows)
    assert not any(r.get("ratio_ci95_low") for r in rows)  # a published number has no interval
    t4 = published.THROUGHPUT_000.set_index(["model", "device_class"]).train_img_s[("resnet18", "t4")]
    line = next(x for x in out.splitlines() if x.startswith("resnet18 train") and "000's t4" in x)
    assert (
        f"100.0 +- 3.0 img/s -> {t4:,.1f} img/s (published, no interval): {t4 / 100:.2f}x; not matched "
        "(other machine: 000's t4)" in line
    )  # our interval kept beside a number that has none
    assert "faster" not in out and "slower" not in out and "significant" not in out
    _refused(*_compare(capsys, "seeds", "a", "--outputs", outputs), "the first run is the reference")


def test_08_shows_the_one_knob_ratios():
    nb = json.loads((ROOT / "notebooks" / "08_analysis.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "analysis.ratio_table(divided)" in code


def test_cnnbench_help_names_compare_and_compare_has_its_own_help(capsys):
    for argv in (["--help"], ["compare", "--help"]):
        with pytest.raises(SystemExit) as done:
            pipeline.main(argv)
        assert done.value.code == 0
        assert "cnnbench compare" in capsys.readouterr().out


def test_the_changed_knob_reads_as_its_change_in_the_table_and_caption(tmp_path):
    """The browser walk: a table of threads 1 -> 2 ratios said "threads 1" in its caption, run A's value of the
    very knob that changed."""
    m = analysis.load(analysis.discover(_runs(tmp_path)))
    t = compare.ratios(m)
    ab = t[(t.run_a == "a") & (t.run_b == "b")]
    assert set(ab.threads.astype(str)) == {"1 -> 2"}
    _, same = compare.ratio_table(ab)
    assert "threads 1 -> 2" in same and "threads 1;" not in same + ";"


def test_pairs_the_ratio_table_divides_are_not_also_listed_as_not_divided(tmp_path):
    """The browser walk: the combined report listed threads 1 vs 2 under "Not divided" and its findings counted
    them as not divided, then divided exactly those pairs in the ratio table below."""
    from cnnbench.analysis.findings import findings_table

    m = analysis.load(analysis.discover(_runs(tmp_path)))
    left = compare.unmatched(m["scenario_a"], compare.ratios(m))
    assert set(zip(left.run_a, left.run_b, strict=True)) == {
        ("a", "c")
    }  # a -> b (threads) and b -> c (batch) are divided
    unmatched = findings_table(m).query("topic == 'unmatched'")
    assert list(unmatched.finding.str.extract(r"^(\d+) model/phase pairs")[0]) == [str(len(left))]


def test_compare_says_how_far_the_machines_own_speed_moved_between_the_runs(tmp_path, capsys):
    """Issue 17: two runs of one configuration on one kind of VM, a session apart, differed by 8% and neither
    report said that the machine itself was faster. Every row measured its CPU's own speed (the probe,
    telemetry.speed_probe); compare sets the two probes beside each other and says how far the machine moved."""
    outputs = tmp_path / "outputs"
    make_run(
        outputs, "monday", "cpu", "AMD EPYC", {TRAIN: 100.0}, ci={TRAIN: 2.0}, extra={"probe_img_s": 800.0}
    )
    make_run(
        outputs, "tuesday", "cpu", "AMD EPYC", {TRAIN: 110.0}, ci={TRAIN: 2.0}, extra={"probe_img_s": 880.0}
    )
    rc, out, err = _compare(capsys, "monday", "tuesday", "--outputs", outputs)
    assert rc == 0, err
    assert "the CPU's own speed (probe) moved +10% from monday to tuesday" in out
    row = results.read_rows(outputs / "compare.csv")[0]
    assert float(row["probe_change_pct"]) == pytest.approx(10.0)
    assert "faster (CPU's own speed +10%)" in out
    # a parameter changed between the runs is named beside the ratios it may explain (the protocol's too)
    prm = results.read_json(outputs / "tuesday" / "params.json")
    results.write_json(outputs / "tuesday" / "params.json", {**prm, "min_window_s": 0.25})
    rc, out, _ = _compare(capsys, "monday", "tuesday", "--outputs", outputs)
    assert rc == 0 and "parameters that differ: min_window_s None -> 0.25" in out
    assert results.read_rows(outputs / "compare.csv")[0]["params_differ"] == "min_window_s None -> 0.25"
    # runs without a probe (a GPU, an old run) say nothing about it
    make_run(outputs, "old", "cpu", "AMD EPYC", {TRAIN: 100.0}, ci={TRAIN: 2.0})
    rc, out, _ = _compare(capsys, "old", "tuesday", "--outputs", outputs)
    assert rc == 0 and "probe" not in out


def test_knob_and_match_keys_are_derived_from_the_knob_declarations():
    """KNOB_KEYS spelled MATCH_KEYS out again, and cudnn_benchmark was in a result's key but not in compare's: two
    CUDA runs differing only in it were called the same configuration. Both come from cnnbench.knobs now."""
    from cnnbench import knobs

    assert "cudnn_benchmark" in compare.match_keys() and "cudnn_benchmark" in compare.knob_keys()
    assert set(knobs.keyed()) <= set(compare.knob_keys())
    assert set(compare.match_keys()) - {"model", "phase"} <= set(compare.knob_keys())
    assert (
        "threads" in compare.knob_keys() and "threads" not in compare.match_keys()
    )  # matched on one machine


def test_the_one_knob_ratios_are_saved_and_every_finding_names_the_file_of_its_numbers(tmp_path):
    """The browser walk: the combined report's findings said "the speedups are in speedups.csv", but with runs
    differing in one knob speedups.csv was empty, no file under _combined/ held the ratios and no finding named
    them."""
    outputs = _runs(tmp_path / "outputs")
    m = analysis.load(analysis.discover(outputs))
    written = analysis.write_tables(m, outputs / "_combined")
    assert written["ratios"] == outputs / "_combined" / "ratios.csv"
    ratios = results.read(outputs / "_combined", "ratios")
    ab = ratios[(ratios.run_a == "a") & (ratios.run_b == "b")].set_index("phase")
    assert set(ab.knob) == {"threads"} and set(ab.comparison) == {"one knob"}
    assert ab.loc["train", "ratio_b_over_a"] == pytest.approx(1.8) and ab.loc["train", "verdict"] == "faster"
    assert ab.loc["train", "rate_a_img_s"] == 100 and ab.loc["train", "rate_b_img_s"] == 180
    assert {"host_id_a", "host_id_b", "device_a", "device_b", "rate_a_ci95_img_s"} <= set(ratios.columns)
    # speedups.csv keeps its header when no two runs share a configuration
    assert "speedup" in (outputs / "_combined" / "speedups.csv").read_text().splitlines()[0]
    f = results.read(outputs / "_combined", "findings")
    one = f[f.topic == "one_knob"].set_index("run_name")
    assert one.loc["a / b", "finding"] == (
        "threads 1 -> 2 (a -> b), rate of b / rate of a: resnet18 train 1.80x [1.73, 1.87] faster; "
        "resnet18 eval 1.02x [0.95, 1.09] not significant."
    )
    assert one.loc["a / b", "source"] == "ratios.csv" and "faster=1" in one.loc["a / b", "numbers"]
    assert one.loc["b / c", "finding"].startswith("batch_size 128 -> 64 (b -> c)")
    # every finding points to files that exist: a run's own as <run>/<table>.csv, this analysis's beside it
    assert f.source.notna().all()
    for source in f.source:
        for name in source.split(", "):
            assert (outputs / name if "/" in name else outputs / "_combined" / name).is_file(), name
    md = analysis.findings_markdown(m).data
    assert "(`ratios.csv`)" in md and "(`a/scenario_a.csv`)" in md


def test_a_probe_taken_with_other_threads_or_another_torch_says_nothing_about_the_machine(tmp_path, capsys):
    """The probe runs in the measuring process, with its threads and torch: threads 1 -> 2 moved it +55% on the
    README's example, which compare then blamed on the machine."""
    outputs = tmp_path / "outputs"
    make_run(
        outputs,
        "t1",
        "cpu",
        "AMD EPYC",
        {TRAIN: 63.0},
        ci={TRAIN: 0.4},
        extra={"threads": 1, "probe_img_s": 500.0},
    )
    make_run(
        outputs,
        "t2",
        "cpu",
        "AMD EPYC",
        {TRAIN: 112.6},
        ci={TRAIN: 4.6},
        extra={"threads": 2, "probe_img_s": 775.0},
    )
    rc, out, err = _compare(capsys, "t1", "t2", "--outputs", outputs)
    assert rc == 0, err
    assert "[threads 1 -> 2]" in out and "(probe)" not in out and "own speed" not in out
    assert pd_isna(float(results.read_rows(outputs / "compare.csv")[0]["probe_change_pct"] or "nan"))


def test_compare_piped_into_head_ends_without_a_traceback(tmp_path):
    """`cnnbench compare A B | head -3` raised BrokenPipeError with a traceback once head had exited."""
    import subprocess
    import sys

    outputs = _runs(tmp_path / "outputs")
    for i in range(40):  # enough rows that the pipe's buffer is full before compare has printed them all
        make_run(
            outputs,
            f"r{i}",
            "cpu",
            "Intel Core",
            {TRAIN: 100.0 + i, EVAL: 300.0},
            ci={TRAIN: 3.0, EVAL: 15.0},
            extra={"threads": 1},
        )
    code = "from cnnbench import pipeline; raise SystemExit(pipeline.main(__import__('sys').argv[1:]))"
    done = subprocess.run(
        f'{sys.executable} -c "{code}" compare a {" ".join(f"r{i}" for i in range(40))} --outputs {outputs} '
        "| head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.count("\n") == 1 and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert (outputs / "compare.csv").is_file()  # written before the console was read


def test_compare_says_when_a_run_was_measured_on_a_busy_machine(tmp_path, capsys):
    """The re-walk: threads 1 -> 2 read "0.01x [0.00, 0.19] slower" on every row while the second run's own
    report said "busy during 4 of 4 measured configurations" (48% load from other processes); compare said
    nothing of it (the probe is skipped for a threads knob by design)."""
    outputs = tmp_path / "outputs"
    quiet = {"machine_state": "quiet", "cpu_steal_mean_pct": 0.0, "util_other_cpu_mean_pct": 1.0}
    busy = {"machine_state": "busy", "cpu_steal_mean_pct": 0.0, "util_other_cpu_mean_pct": 48.0}
    make_run(outputs, "u1", "cpu", "AMD EPYC", {TRAIN: 100.0}, ci={TRAIN: 2.0}, extra={"threads": 1, **quiet})
    make_run(outputs, "u2", "cpu", "AMD EPYC", {TRAIN: 1.0}, ci={TRAIN: 0.5}, extra={"threads": 2, **busy})
    rc, out, err = _compare(capsys, "u1", "u2", "--outputs", outputs)
    assert rc == 0, err
    assert "u2: the machine was busy during 1 of 1 measured configurations" in out
    assert "u1: the machine was busy" not in out
    row = results.read_rows(outputs / "compare.csv")[0]
    assert row["busy_b"] == "1 of 1" and row["busy_a"] == "0 of 1"


def test_the_ratio_table_shows_ratios_to_the_precision_their_interval_supports():
    """The walk: the combined ratio table printed 0.0129, 0.02412 and 0.007811 beside intervals [0.00, 0.19]."""
    t = pd.DataFrame(
        {
            "verdict": ["not significant", "faster"],
            "ratio_b_over_a": [0.02412, 1.81234],
            "ratio_ci95_low": [0.0, 1.70311],
            "ratio_ci95_high": [0.19, 1.92157],
            "model": ["resnet18", "resnet50"],
            "phase": ["train", "eval"],
            "knob": ["threads", "threads"],
        }
    )
    view, _ = compare.ratio_table(t)
    assert list(view.ratio_b_over_a) == ["0.024", "1.81"]
    assert list(view.ratio_ci95_low) == ["0.000", "1.70"] and list(view.ratio_ci95_high) == ["0.190", "1.92"]
    none = compare.ratio_table(
        t.assign(
            ratio_b_over_a=[float("nan"), 2.0], ratio_ci95_low=float("nan"), ratio_ci95_high=float("nan")
        )
    )[0]
    assert list(none.ratio_b_over_a) == ["", "2"]  # not divided: blank; no interval: 4 significant digits


def test_the_ratio_table_has_one_caption_of_what_every_row_shares(tmp_path):
    """The walk: 08's ratio table had two captions, "same in every row: ..." (bold, from ratio_table) and "the same
    in every row: verdict=slower; knob=threads" (italic, from show's trimming of the columns ratio_table kept)."""
    from cnnbench import tables

    m = analysis.load(analysis.discover(_runs(tmp_path)))
    t = compare.ratios(m)
    view, same = compare.ratio_table(t[(t.run_a == "a") & (t.run_b == "b")])
    assert "knob threads" in same and "knob" not in view
    shown = tables.show(view, f"Ratio B / A; {same}").data
    assert shown.count("same in every row") == 1


def test_report_piped_into_a_reader_that_has_gone_ends_without_a_traceback(tmp_path):
    """`cnnbench report | head` had no test through a real pipe (only compare had). ``head -n 0`` exits before
    reading anything, so every line report prints meets a closed pipe."""
    import subprocess
    import sys

    outputs = tmp_path / "outputs"
    outputs.mkdir()
    code = "from cnnbench import pipeline; raise SystemExit(pipeline.main(__import__('sys').argv[1:]))"
    done = subprocess.run(
        f'{sys.executable} -c "{code}" report --outputs {outputs} | head -n 0; '
        'echo "status ${PIPESTATUS[0]}" >&2',
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout == "" and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, (
        done.stderr
    )
    assert "status 0" in done.stderr  # nothing to rebuild, and nothing failed


def test_the_seeds_pseudo_run_shows_the_interval_and_batch_of_the_row_it_divides(tmp_path, capsys):
    """The rate divided is the run's fp32 NCHW eager row; its interval and batch size were read from the run's
    first row of that model and phase, whatever its variant: a bf16 row written first lent them its own."""
    outputs = _runs(tmp_path)
    path = outputs / "a" / "scenario_a.csv"
    rows = results.read_rows(path)
    bf16 = {**rows[0], "precision": "bf16", "throughput_img_s": "150.0", "throughput_ci95_img_s": "40.0"}
    results.write_rows(path, [{**bf16, "batch_size": "32"}, *rows])
    rc, out, err = _compare(capsys, "a", "seeds", "--outputs", outputs)
    assert rc == 0, err
    mine = [r for r in results.read_rows(outputs / "compare.csv") if (r["model"], r["phase"]) == TRAIN]
    assert {r["rate_a_ci95_img_s"] for r in mine} == {"3.0"} and {r["batch_size"] for r in mine} == {"128"}


def test_two_runs_whose_folders_share_a_name_are_refused_before_any_work(tmp_path, capsys):
    """The hunt: two copies of one run, c1/cpu-vm and c2/cpu-vm, were merged by name into one run compared with
    itself (within-run ratios only, exit 0); compare.csv keys its rows by the run's name."""
    for copy in ("c1", "c2"):
        make_run(tmp_path / copy, "cpu-vm", "cpu", "Intel Core", {TRAIN: 100.0}, ci={TRAIN: 3.0})
    rc, out, err = _compare(capsys, tmp_path / "c1" / "cpu-vm", tmp_path / "c2" / "cpu-vm", "--out", tmp_path)
    _refused(rc, out, err, "share the name 'cpu-vm'")
    assert "rename or copy one" in err and not (tmp_path / "compare.csv").exists()
    # one folder given by its name and by its path is one run, not a clash
    outputs = _runs(tmp_path / "outputs")
    rc, _, err = _compare(capsys, "a", outputs / "b", "b", "--outputs", outputs)
    assert rc == 0, err


def _printed_ratios(line: str) -> list[float]:
    """The ratio and the bounds a console line prints (``0.00316x [0.00305, 0.00327]``)."""
    import re

    found = re.search(r": ([\d.,]+)x(?: \[([\d.,]+), ([\d.,]+)\])?", line)
    return [float(v.replace(",", "")) for v in found.groups() if v is not None]


def test_compare_prints_ratios_below_a_tenth_to_three_significant_figures(tmp_path, capsys):
    """The hunt: seed 000's CPU against the H200 printed "0.00x" (3.37 / 1064.9 = 0.0032)."""
    from cnnbench import published

    outputs = tmp_path / "outputs"
    make_run(outputs, "fast", "cpu", "Intel Core", {TRAIN: 30000.0}, ci={TRAIN: 30.0}, extra={"threads": 1})
    make_run(outputs, "slow", "cpu", "Intel Core", {TRAIN: 95.0}, ci={TRAIN: 2.0}, extra={"threads": 2})
    rc, out, err = _compare(capsys, "fast", "slow", "seeds", "--outputs", outputs)
    assert rc == 0, err
    line = next(x for x in out.splitlines() if "[threads 1 -> 2]" in x)
    r, low, high = reproducibility.ratio(30000.0, 30.0, 95.0, 2.0)
    assert _printed_ratios(line) == [pytest.approx(v, rel=5e-3) for v in (r, low, high)], line
    cpu = published.THROUGHPUT_000.set_index(["model", "device_class"]).train_img_s[("resnet18", "cpu")]
    line = next(x for x in out.splitlines() if x.startswith("resnet18 train") and "000's cpu" in x)
    assert _printed_ratios(line) == [pytest.approx(cpu / 30000.0, rel=5e-3)], line


def test_rows_divided_across_several_keys_are_not_labelled_one_knob(tmp_path):
    """The hunt: with --keys machine,image_size,batch_size,threads,torch, rows differing in five keys were
    labelled comparison=one knob in compare.csv."""
    m = analysis.load(analysis.discover(_runs(tmp_path)))
    named = compare.ratios(m, keys=("threads", "batch_size"))
    ac = named[(named.run_a == "a") & (named.run_b == "c")].iloc[0]
    assert ac.knob == "batch_size; threads" and ac.comparison == "2 keys differ"
    ab = named[(named.run_a == "a") & (named.run_b == "b")]
    assert set(ab.comparison) == {"one knob"}


def test_one_run_alone_says_nothing_of_the_cpus_speed_moving_between_runs(tmp_path, capsys):
    """The hunt: a one-run compare printed "the CPU's own speed (probe) moved +0% from X to X ... a ratio near that
    is the machine, not the change", meaningless for ratios within one run."""
    outputs = tmp_path / "outputs"
    run = make_run(
        outputs, "one", "cpu", "AMD EPYC", {TRAIN: 100.0}, ci={TRAIN: 2.0}, extra={"probe_img_s": 800.0}
    )
    rows = results.read_rows(run / "scenario_a.csv")
    bf16 = {**rows[0], "precision": "bf16", "throughput_img_s": "150.0", "probe_img_s": "880.0"}
    results.write_rows(run / "scenario_a.csv", [*rows, bf16])
    rc, out, err = _compare(capsys, "one", "--outputs", outputs)
    assert rc == 0, err
    assert "[precision fp32 -> bf16]" in out and "(probe) moved" not in out


def test_an_unbounded_ratio_interval_is_said_unbounded_as_07_and_the_summary_say_it():
    """The walk (rerun with image_size changed): a rate known to +-107% gave '1.12x [0.00, inf] not significant',
    where 07 and the report's summary say "unbounded"."""
    from cnnbench.analysis import cli

    row = {
        **dict(model="mnist_cnn", phase="train", table="batch_sweep", batch_size=8, comparison="one knob"),
        **dict(knob="", value_a="", value_b="", verdict="not significant", probe_change_pct=math.nan),
        **dict(rate_a_img_s=4274.0, rate_a_ci95_img_s=4573.0, rate_b_img_s=4803.4, rate_b_ci95_img_s=262.7),
        **dict(ratio_b_over_a=1.12, ratio_ci95_low=0.0, ratio_ci95_high=math.inf),
    }
    assert "1.12x [95% interval unbounded] not significant" in cli._line(row), cli._line(row)
    assert "1.12x [0.90, 1.40]" in cli._line({**row, "ratio_ci95_low": 0.9, "ratio_ci95_high": 1.4})


def test_08s_one_knob_finding_prints_its_ratios_as_the_console_does():
    """08's one-knob finding printed a ratio to two decimals and an unbounded interval as '[0.00, inf]', where
    `cnnbench compare` prints 0.00316 and 'unbounded': one formatting for both (compare.ratio_text)."""
    from cnnbench.analysis import findings

    row = dict(
        run_a="a", run_b="b", knob="image_size", value_a=32, value_b=48, table="scenario_a", batch_size=8
    )
    rows = [
        {**row, "model": "m", "phase": "train", "verdict": "not significant"}
        | dict(ratio_b_over_a=1.12, ratio_ci95_low=0.0, ratio_ci95_high=math.inf),
        {**row, "model": "m", "phase": "eval", "verdict": "slower"}
        | dict(ratio_b_over_a=0.00316, ratio_ci95_low=0.00301, ratio_ci95_high=0.00331),
    ]
    divided = pd.DataFrame(rows).assign(comparison="one knob")
    (finding,) = findings._one_knob_findings(divided)
    assert "m train 1.12x [95% interval unbounded] not significant" in finding["finding"], finding
    assert "m eval 0.00316x [0.00301, 0.00331] slower" in finding["finding"], finding
