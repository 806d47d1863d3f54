"""Reports say what they compare; report tables hide nothing and carry units."""

import json

import nbformat
import pandas as pd

from cnnbench import SCHEMA_VERSION, report, results, tables
from cnnbench.analysis import overview


def test_show_hides_no_row_or_column():
    df = pd.DataFrame({f"col_{i}_s": [float(r * i) for r in range(80)] for i in range(40)})
    page = tables.show(df, "80 rows x 40 columns (s)").data
    assert "..." not in page and "col_<wbr>39_<wbr>s" in page and page.count("<tr") == 81
    assert "<b>80 rows x 40 columns (s)</b>" in page
    tables.readable_display()
    assert "..." not in df.to_string() and pd.get_option("display.max_colwidth") is None


def test_utilisation_and_memory_columns_carry_their_units():
    row = {
        "run_name": "r",
        "device_name": "cpu",
        "model": "m",
        "phase": "train",
        "precision": "fp32",
        "memory_format": "nchw",
        "compile": False,
        "batch_size": 8,
        "status": "ok",
        "util_cpu_mean_pct": 50.0,
        "util_device_mean_pct": 90.0,
        "peak_rss_mib": 100.0,
        "peak_device_mem_mib": 10.0,
        "throughput_img_s": 5.0,
        "throughput_ci95_img_s": 0.1,
    }
    util = tables.utilisation(pd.DataFrame([row]))
    assert {"util_cpu_mean_pct", "util_device_mean_pct"} <= set(util.columns)
    assert {"peak_rss_mib", "peak_device_mem_mib"} <= set(tables.measured(pd.DataFrame([row])).columns)
    assert "train_peak_rss_mib" in tables.performance_summary(pd.DataFrame([row])).columns


def _run(outputs, name, params_file="params/local.yaml", schema=SCHEMA_VERSION):
    d = outputs / name
    results.write_json(
        d / "environment.json",
        {
            "schema_version": schema,
            "device_kind": "cpu",
            "device_name": "AMD EPYC",
            "host": f"AMD EPYC ({len(name)} cores)",
            "host_id": name,
        },
    )
    results.write_json(d / "params.json", {"params_file": params_file, "run_name": name})
    return d


def test_per_run_report_speaks_of_its_run_only(tmp_path):
    d = _run(tmp_path, "laptop")
    page = report.build_run_report(d, []).read_text()
    assert "speaks of run <strong>laptop</strong> only" in page and "AMD EPYC (6 cores)" in page


def test_a_smoke_runs_report_says_it_is_left_out_of_the_combined_report(tmp_path):
    """The walk: a smoke run's report pointed to outputs/report.html for the other runs, which leaves it out."""
    page = report.build_run_report(_run(tmp_path, "smoke-laptop"), []).read_text()
    assert "left out of the combined report" in page and "other runs are compared" not in page


def test_a_speedup_whose_interval_is_as_wide_as_itself_is_not_known_and_one_holding_1x_is_no_speedup():
    """The walk: a smoke run's summary read "speedup about 52 (not precise: +-39795%)x" (07's default measured while
    the VM was busy); the number means nothing and must not be shown as a speedup."""
    assert overview.speedup_text(52.0, 20693.0) == "not known (its 95% interval is ±39794%)"
    assert (
        overview.speedup_text(1.03, 0.05) == "1.030\u00a0±\u00a00.050x: not distinguishable from the default"
    )
    assert overview.speedup_text(1.24, 0.05) == "1.240\u00a0±\u00a00.050x"
    assert overview.speedup_text(float("nan"), 0.1) == "?"


def test_combined_report_names_runs_hosts_and_what_it_left_out(tmp_path):
    _run(tmp_path, "laptop")
    _run(tmp_path, "workstation")
    _run(tmp_path, "smoke")
    _run(tmp_path, "quick", params_file="params/smoke.yaml")
    _run(tmp_path, report.COMBINED)
    runs, excluded = report.combined_runs(tmp_path)
    assert [d.name for d in runs] == ["laptop", "workstation"]
    nb = tmp_path / "08.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 08 analysis")]), nb)
    path, n = report.build_combined_report(tmp_path, nb)
    page = path.read_text()
    assert n == 2 and "2 runs compared" in page and "AMD EPYC (11 cores)" in page
    assert "AMD EPYC on AMD EPYC" not in page  # a CPU run's machine named once (the walk)
    assert "Left out" in page and "quick" in page and "smoke.yaml" in page and "_combined" not in page


def test_combined_report_leaves_out_failed_and_other_schema_runs_and_counts_what_it_merges(tmp_path):
    _run(tmp_path, "laptop")
    _run(tmp_path, "workstation")
    (_run(tmp_path, "broken") / "FAILED.txt").write_text(
        "This run did not finish: 02_scenario_a failed\nwhen: x\n"
    )
    _run(tmp_path, "ancient", schema=SCHEMA_VERSION - 1)
    runs, excluded = report.combined_runs(tmp_path)
    assert [d.name for d in runs] == [
        "laptop",
        "workstation",
    ]  # the pipeline starts a combined report on these
    assert (
        excluded["ancient"] == f"schema version {SCHEMA_VERSION - 1} (this workbook reads {SCHEMA_VERSION})"
    )
    assert excluded["broken"] == "failed run (FAILED.txt: This run did not finish: 02_scenario_a failed)"
    nb = tmp_path / "08.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 08 analysis")]), nb)
    path, n = report.build_combined_report(tmp_path, nb)
    page = path.read_text()
    assert n == 2 and "2 runs compared" in page and "merges the 2 user runs" in page
    assert "02_scenario_a failed" in page and f"schema version {SCHEMA_VERSION - 1}" in page


def test_report_of_notebooks_sharing_cell_ids_has_unique_ids(tmp_path, recwarn):
    paths = []
    for name in ("a", "b"):
        cell = nbformat.v4.new_markdown_cell(f"# {name}")
        cell["id"] = "05-00"  # the same id in both notebooks, as hand-built notebooks can have
        nb = nbformat.v4.new_notebook(cells=[cell])
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        paths.append(tmp_path / f"{name}.ipynb")
    report.build(paths, tmp_path / "r.html", "t", "# head")
    assert not [w for w in recwarn if "DuplicateCellId" in type(w.message).__name__ + str(w.message)]


def test_combined_report_leaves_out_a_broken_run_folder_with_its_reason(tmp_path):
    """Issue 21: an environment.json that is not JSON (or params.json) made every later run's combined report
    end in a JSONDecodeError traceback (exit 1)."""
    _run(tmp_path, "laptop")
    _run(tmp_path, "workstation")
    (_run(tmp_path, "garbled") / "environment.json").write_text("{not json")
    (_run(tmp_path, "garbled2") / "params.json").write_text("[1, 2")
    runs, excluded = report.combined_runs(tmp_path)
    assert [d.name for d in runs] == ["laptop", "workstation"]
    assert (
        excluded["garbled"].startswith("broken run (environment.json")
        and "broken run (params.json" in excluded["garbled2"]
    )
    nb = tmp_path / "08.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 08 analysis")]), nb)
    path, n = report.build_combined_report(tmp_path, nb)
    assert n == 2 and "garbled" in path.read_text()


def test_a_run_report_opens_with_its_summary_read_from_the_runs_csvs(tmp_path):
    """Issue 20: the report had no story at its top (parameters and environment first, twice). Its first section
    is now the summary: machine, how quiet, each model's rate with its interval, the roof, 07's best, the seeds;
    parameters and environment folded away; every number matches the run's CSVs."""
    import re
    import shutil

    from conftest import ROOT

    run_dir = tmp_path / "example-cpu-2core"
    shutil.copytree(
        ROOT / "examples" / "example-cpu-2core",
        run_dir,
        ignore=shutil.ignore_patterns("notebooks", "figures", "report.html", "trace_*"),
    )
    page = report.build_run_report(run_dir, []).read_text()
    headings = re.findall(r"<h2[^>]*>(.*?)<", page)
    assert headings[0].startswith("Summary") and page.index('id="Summary"') < page.index('id="Contents"')
    assert "<details><summary>Parameters" in page and "<details><summary>Environment" in page
    assert "<details open>" not in page
    env = page[page.index("<details><summary>Environment") :]
    assert "cpu_isa" in env and "cpu_bf16_native" in env  # 00 is left out of the body: nothing of it is lost
    top = page[page.index('id="Summary"') : page.index('id="Contents"')]
    a = pd.read_csv(run_dir / "scenario_a.csv")
    r50 = a[
        (a.model == "resnet50")
        & (a.phase == "train")
        & (a.precision == "fp32")
        & (a.memory_format == "nchw")
        & a["compile"].astype(str).isin(("off", "False"))  # the compile mode; rows before it, a bool
    ].iloc[0]
    # the interval is rounded to two significant digits, the rate to the same decimal
    assert f"{r50.throughput_img_s:.1f}\u00a0±\u00a0{r50.throughput_ci95_img_s:.1f}" in top
    peaks = pd.read_csv(run_dir / "device_peaks.csv")
    fp32 = peaks[(peaks.kind == "measured") & (peaks.precision == "fp32")].iloc[0]
    assert f"{fp32.peak_gflops:,.1f} GFLOP/s" in top and f"{fp32.bandwidth_gbs:,.1f} GB/s" in top
    best = pd.read_csv(run_dir / "tuning.csv").query("row_kind == 'best'").iloc[0]
    assert best.config in top and overview.with_interval(best.speedup_x, best.speedup_ci95_x) + "x" in top
    assert "Beside the seeds" in top and "How quiet was the machine?" in top
    beside = top[top.index("Beside the seeds") :]  # our rate keeps its interval there too (the re-walk)
    r18 = a[
        (a.model == "resnet18")
        & (a.phase == "train")
        & (a.precision == "fp32")
        & (a.memory_format == "nchw")
        & a["compile"].astype(str).isin(("off", "False"))  # the compile mode; rows before it, a bool
    ].iloc[0]
    assert overview.with_interval(r18.throughput_img_s, r18.throughput_ci95_img_s) in beside
    env = json.loads((run_dir / "environment.json").read_text())
    assert env["cpu_model"] in top


def test_intervals_set_the_decimals_shown():
    from cnnbench.analysis import overview

    # on one line (no-break spaces): a value is never parted from its interval
    assert overview.with_interval(40.6003, 1.8042) == "40.6\u00a0±\u00a01.8"
    assert overview.with_interval(21950.2, 1781.0) == "22,000\u00a0±\u00a01,800"
    assert overview.with_interval(1.2104, 0.0981) == "1.210\u00a0±\u00a00.098"
    assert overview.with_interval(5.0, float("nan")) == "5"
    # the H200's 07 speedup, 2.37 ± 0.003927x: an interval of 4 decimals was taken for a missing one
    assert overview.with_interval(2.3700, 0.003927) == "2.3700\u00a0±\u00a00.0039"
    # an interval wider than the value (the walk: "2,100 ± 6,400", "1.9 ± 1.9x") reads as the console has it
    assert overview.with_interval(2133.0, 6400.0) == "about 2,100 (not precise: ±300%)"
    assert overview.with_interval(1.93, 1.93) == "about 1.9 (not precise: ±100%)"


def test_a_wide_table_moves_constant_columns_to_its_caption_rounds_to_its_interval_and_puts_verdicts_first():
    """Issue 20: 21 of 76 report tables were wider than the page."""
    df = pd.DataFrame(
        {
            "model": ["resnet50", "resnet18"],
            "device_name": ["AMD EPYC"] * 2,
            "precision": ["fp32"] * 2,
            "memory_format": ["nchw"] * 2,
            "image_size": [64, 64],
            "batch_size": [128, 64],
            "throughput_img_s": [40.60034, 21950.2],
            "throughput_ci95_img_s": [1.8042, 1781.0],
            "speedup_x": [1.2104, 0.99],
            "speedup_ci95_x": [0.0981, float("nan")],
            "status": ["ok", "oom"],
        }
    )
    out, caption = tables.trimmed(df)
    assert caption == "device_name=AMD EPYC; precision=fp32; memory_format=nchw; image_size=64"
    assert list(out.columns) == ["status", "model", "batch_size", "throughput_img_s", "speedup_x"]
    # each value with its interval in one cell, on one line (the walk: 3 columns of long names for one number)
    assert list(out.throughput_img_s) == ["40.6\u00a0±\u00a01.8", "22,000\u00a0±\u00a01,800"]
    assert list(out.speedup_x) == ["1.210\u00a0±\u00a00.098", "0.99"]
    page = tables.trimmed_html(df)
    assert "the same in every row: device_name=AMD EPYC" in page and page.index(">status<") < page.index(
        ">model<"
    )
    shown = tables.show(df, "rates (images/s)").data  # 08's tables too
    assert "<b>rates (images/s)</b>" in shown and "the same in every row: device_name=AMD EPYC" in shown
    assert ">22,000\u00a0±\u00a01,800<" in shown and ">precision<" not in shown
    assert "value ± its 95% interval" in shown and "value ± its 95% interval" in page
    narrow = df[["model", "batch_size"]]
    assert tables.trimmed_html(narrow) == narrow.to_html(max_rows=None, max_cols=None, na_rep="")


def test_notebooks_show_wide_tables_trimmed():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        tables.readable_display()
        wide = pd.DataFrame({f"c{i}": [1, 1] for i in range(9)} | {"status": ["ok", "oom"]})
        shown = shell.display_formatter.format(wide)[0]["text/html"]
        assert "the same in every row: c0=1" in shown
    finally:
        shell.display_formatter.formatters["text/html"].pop(pd.DataFrame, None)
        InteractiveShell.clear_instance()


def test_a_rate_wider_than_its_interval_is_never_rounded_to_zero():
    """The browser walk: 95 and 15 img/s measured at +-6,400 showed as 0 (rounded to the thousands the interval
    supports), 553 as 1,000. A value keeps at least two significant digits of its own."""
    from cnnbench import tables

    df = pd.DataFrame(
        {
            "throughput_img_s": [95.0, 15.0, 553.0, 1719.53],
            "throughput_ci95_img_s": [6400.0] * 3 + [12.0],
            **{f"c{i}": [i, i + 1, i, i] for i in range(8)},
        }
    )
    out, _ = tables.trimmed(df)
    assert [v.split("\u00a0")[0] for v in out.throughput_img_s] == ["95", "15", "550", "1,720"]


def _wide_tables():
    """The shapes of the walk's 9 tables wider than the page: 30 columns of long names and numbers, and the
    seeds' tables with a long ``differences`` text beside short columns."""
    numbers = pd.DataFrame(
        {f"train_throughput_process_{i}_img_s": [1719.5307 * (i + 1), 2726.9382] for i in range(30)}
    )
    seeds = pd.DataFrame(
        {
            "model": ["mobilenet_v2", "resnet18"],
            "source": ["published by 000", "published by 003"],
            "published_train_img_s": [11.71, 10.0],
            "ours_train_img_s": [151.3, 112.9],
            "differences": [
                "000: Tiny-ImageNet (64x64) from disk, 4 workers, 1 epoch of 6,400 images, images / epoch "
                "time, one run; ours: synthetic 64x64, batch 128, device data mode, synchronised windows"
            ]
            * 2,
        }
    )
    return numbers, seeds


def test_headers_may_break_after_underscores_and_long_text_columns_get_a_share_of_the_page():
    numbers, seeds = _wide_tables()
    page = tables.show(seeds, "seeds beside ours").data
    assert "<th>published_<wbr>train_<wbr>img_<wbr>s</th>" in page
    cols = page[page.index("<colgroup>") : page.index("</colgroup>")]
    assert cols.count("<col>") == 4 and cols.count('<col class="text"') == 1
    assert cols.index('class="text"') > cols.rindex("<col>")  # the 5th column: differences
    indexed = tables.show(seeds.set_index("model"), "").data
    assert (
        indexed[indexed.index("<colgroup>") : indexed.index("</colgroup>")].count("<col>") == 4
    )  # index + 3
    assert "<colgroup>" not in tables.show(numbers, "").data  # no long text: the CSS alone wraps it


def test_a_notebooks_wide_table_shows_numbers_to_four_figures_as_08s_do():
    """The example's 02 table printed 120.3333, 0.0118 and 1091.4922 in 16 columns: the notebooks' display
    formatter (trimmed_html) wrote pandas' six decimals where 08's tables (show) write four figures."""
    wide = pd.DataFrame(
        {
            "throughput_process_min_img_s": [120.33331, 377.5096],
            "step_time_std_s": [0.011812, 0.0065],
            "peak_rss_mib": [1091.4922, 662.2656],
            **{f"c{i}": [i, i + 1] for i in range(8)},
        }
    )
    page = tables.trimmed_html(wide)
    for shown in (">120.3<", ">377.5<", ">0.01181<", ">1,091<", ">662.3<"):
        assert shown in page, shown
    assert "120.3333" not in page and "1091.4922" not in page


def test_a_table_of_seed_numbers_names_the_file_that_published_them():
    """01's Table 1 headers said "published by 000", 04's intensity table had columns published_by_000_gflop_per_mb
    and published_by_003_flop_per_byte: a seed's number is shown only where its table names the seed's file."""
    from cnnbench import published, roofline
    from conftest import ROOT

    complexity = results.read(ROOT / "examples" / "example-cpu-2core", "complexity")
    headers = [c for c in tables.complexity_vs_seed(complexity).columns if "published" in c]
    assert headers and all(f"published by {published.SEED_000}" in c for c in headers), headers
    beside = roofline.compare_with_seeds(pd.DataFrame(), complexity)
    assert {"published_by_000_gflop_per_mb", "published_by_003_flop_per_byte"} <= set(
        beside.columns
    )  # as read
    wide = beside.assign(
        **{f"ours_{i}": [float(i)] * len(beside) for i in range(4)}
    )  # the H200's: 10 columns
    for shown in (tables.trimmed_html(beside), tables.show(beside).data, tables.trimmed_html(wide)):
        assert f"published_by_000: published by {published.SEED_000}" in shown
    assert f"published_by_003: published by {published.SEED_003}" in tables.trimmed_html(wide)


def _example_tables(tmp_path, example: str):
    """A copy of a committed example's 02, 03 and 07 tables (the summary's fastest configuration reads no other)."""
    import shutil

    from conftest import ROOT

    run_dir = tmp_path / example
    run_dir.mkdir()
    for name in ("tuning.csv", "scenario_a.csv", "batch_sweep.csv", "environment.json", "params.json"):
        shutil.copy(ROOT / "examples" / example / name, run_dir)
    return run_dir


def test_the_fastest_configuration_says_when_02_measured_a_faster_one_07_did_not_race(tmp_path):
    """The H200 example: 07's best is bf16 NCHW bs512 at 2,521 img/s, yet 02 measured bf16 channels_last at 4,722
    img/s in the same run, 1.87x it; 07's guard ran out of budget before bf16 channels_last. The summary says so
    beside its "fastest", from the run's rows; the CPU example's best is the fastest its run measured."""
    best = overview.fastest(_example_tables(tmp_path, "example-cuda-h200"))
    said = best[overview.FASTER].iloc[0]
    assert (
        said.startswith("02 measured bf16 channels_last bs256")
        and "faster: 4,722\u00a0±\u00a027 img/s (1.87x)" in said
    )
    assert (
        "07's search did not race bf16 channels_last off (not guarded: tune_guard_budget_s was spent" in said
    )
    assert "faster" in overview._best(best).split(":")[0]
    cpu = overview.fastest(_example_tables(tmp_path, "example-cpu-2core"))
    assert len(cpu) == 1 and overview.FASTER not in cpu and "faster" not in overview._best(cpu)


def test_07s_sentences_in_08_say_what_02_measured_faster_than_its_best(tmp_path):
    from cnnbench import analysis

    run_dir = _example_tables(tmp_path, "example-cuda-h200")
    said = analysis.tuning_findings_markdown(analysis.load([run_dir])).data
    assert said.count("\n") == 0 and "best bf16 nchw cudnn.benchmark=off bs512" in said
    assert "; 02 measured bf16 channels_last bs256" in said
    assert (
        "faster: 4,722\u00a0±\u00a027 img/s (1.87x): 07's search did not race bf16 channels_last off" in said
    )


def test_a_table_with_two_header_levels_shows_its_numbers_to_four_figures():
    """07's best configuration is shown transposed, its columns (model, phase): the formatter keyed by column label
    missed them, and its rates showed every digit (18994.421365)."""
    wide = pd.DataFrame({("resnet18", "train"): [18994.42136473299, 2.402025, "fp32"]}, dtype=object)
    page = tables.trimmed_html(wide)
    assert ">18,994<" in page and ">2.402<" in page and "18994.42" not in page


def test_07_itself_says_what_02_measured_faster_than_its_best(tmp_path):
    """The H200 example's 07 printed its best (bf16 NCHW bs512, 2,521 img/s) as "measured here" beside the published
    GPU figures, and said nothing of 02's 4,722 img/s in the same run; only the summary and 08 did. 07's
    sentences and its published table now carry the faster measurement, read from the run's own tables."""
    from cnnbench import tuning
    from cnnbench.run import Run

    run_dir = _example_tables(tmp_path, "example-cuda-h200")
    run = Run(params=None, params_file=None, dir=run_dir, device=None, threads=1)
    tuned = results.read(run_dir, "tuning")
    (said,) = tuning.findings(tuned, run.read)
    assert "; 02 measured bf16 channels_last bs256" in said and "(1.87x)" in said
    table = tuning.beside_published(tuned, read=run.read)
    ours = table[table.who.str.startswith("measured here")]
    assert list(ours.throughput_img_s.round()) == [2521, 4722], ours
    assert ours.who.iloc[1].startswith("measured here by 02: bf16 channels_last bs256")
    assert tuning.findings(tuned)[0] == said.split("; 02 measured")[0]  # without the run's tables: 07's own


def test_07_holds_its_best_only_against_a_02_rate_with_an_interval_on_its_device_and_survives_a_bad_table(
    tmp_path,
):
    """A review of 07's new comparison: a 02 row without an interval (one process) was called faster and printed
    "+-nan"; a row another device measured in the same folder was held against the best; and a 02 table that
    cannot be read stopped 07's cell. None of these is compared now."""
    from cnnbench import tuning
    from cnnbench.run import Run

    run_dir = _example_tables(tmp_path, "example-cuda-h200")
    run = Run(params=None, params_file=None, dir=run_dir, device=None, threads=1)
    tuned = results.read(run_dir, "tuning")
    (own,) = tuning.findings(tuned)
    rows = results.read_rows(run_dir / "scenario_a.csv")
    for change in ({"throughput_ci95_img_s": ""}, {"device_name": "NVIDIA H100 80GB HBM3"}):
        results.write_rows(run_dir / "scenario_a.csv", [{**r, **change} for r in rows])
        assert tuning.findings(tuned, run.read) == [own], change
        assert "nan" not in tuning.beside_published(tuned, read=run.read).who.str.cat()
    (run_dir / "scenario_a.csv").write_text("schema_version,model\n999,resnet50\n")
    assert tuning.findings(tuned, run.read) == [own]


def test_07s_best_without_an_interval_is_not_held_against_02(tmp_path):
    """A best confirmed in one process has no interval: it was compared as if its rate were exact."""
    from cnnbench import tuning

    run_dir = _example_tables(tmp_path, "example-cuda-h200")
    tuned = results.read(run_dir, "tuning")
    tuned.loc[tuned.row_kind == "best", "throughput_ci95_img_s"] = float("nan")
    assert tuning.faster_rows(tuned, lambda name: results.read(run_dir, name)) == {}


def _without_the_seeds_variant(tmp_path):
    """The H200 example as a run whose variants leave out fp32 NCHW eager: 02's and 04's fp32 NCHW rows dropped,
    03 swept in tf32 (03 sweeps the first variant)."""
    from conftest import ROOT

    run_dir = _example_tables(tmp_path, "example-cuda-h200")
    for name in ("roofline.csv", "device_peaks.csv"):
        (run_dir / name).write_text((ROOT / "examples" / "example-cuda-h200" / name).read_text())
    seeds = lambda r: r["precision"] == "fp32" and r["memory_format"] == "nchw"  # noqa: E731
    for name in ("scenario_a", "roofline"):
        rows = results.read_rows(run_dir / f"{name}.csv")
        results.write_rows(run_dir / f"{name}.csv", [r for r in rows if not seeds(r)])
    rows = results.read_rows(run_dir / "batch_sweep.csv")
    results.write_rows(run_dir / "batch_sweep.csv", [{**r, "precision": "tf32"} for r in rows])
    return run_dir


def test_a_run_without_the_seeds_variant_heads_with_its_first_variant_and_that_precisions_roof(tmp_path):
    """The summary of a run whose 02 variants left out fp32 NCHW eager had no "Headline rates" and said nothing,
    yet printed the fp32 roof, a roof none of its points is read against; it heads with the variant 02 measured
    first now (tf32 NCHW: train 2,218, eval 7,555 img/s), labelled, and states the tf32 roof."""
    run_dir = _without_the_seeds_variant(tmp_path)
    head = overview.headline(run_dir)
    assert list(head.variant) == ["tf32 nchw"] and head["train images/s"].iloc[0].startswith("2,218")
    assert head["eval: share of its roof"].iloc[0] == "57% of measured tf32 hbm roof (memory-bound)"
    text = overview.summary_html(run_dir, "M", "")
    assert "**Headline rates** (02: fp32 nchw eager, or where a run measured none, the variant 02" in text
    assert "**The roof** (measured, tf32): 354,534.9 GFLOP/s" in text and "(measured, fp32)" not in text
    (tmp_path / "x").mkdir()
    example = _example_tables(tmp_path / "x", "example-cuda-h200")
    assert "variant" not in overview.headline(example)  # a run with the seeds' variant: as before


def test_tables_of_failures_only_have_no_rows():
    """With every row 'oom', utilisation returned one NaN row per configuration labelled "fp32 nchw": the
    variant labels of every row were assigned to the empty frame of the ok ones."""
    from conftest import ROOT

    failed = results.read(ROOT / "examples" / "example-cuda-h200", "scenario_a").assign(status="oom")
    assert tables.utilisation(failed).empty
    assert tables.performance_summary(failed).empty and tables.variants_side_by_side(failed).empty


def test_the_seed_table_notes_say_per_image_and_compare_sizes_only_where_they_differ():
    """The H200 note read "trained at 224x224: forward 4.088 GMACs, 1.0x fewer than at 224"; the CPU note "a
    training step is 0.870 GFLOPs" of a per-image figure."""
    from conftest import ROOT

    for example, fewer in (("example-cuda-h200", False), ("example-cpu-2core", True)):
        notes = tables.complexity_vs_seed(results.read(ROOT / "examples" / example, "complexity")).note
        assert notes.str.contains("x fewer than at").all() == fewer, example
        assert notes.str.contains("a training step is [0-9.]+ GFLOPs per image", regex=True).all(), example


def test_the_fastest_configuration_is_placed_against_its_attainable_where_memory_bound(tmp_path):
    """The H200 example's best (intensity 62 FLOP/B against a bf16 ridge of 158) is memory-bound at 23% of its
    attainable; the first screen said only "9% of the bf16 roof", the yardstick of a compute-bound step."""
    best = overview.fastest(_example_tables(tmp_path, "example-cuda-h200"))
    assert (
        best["share of its compute roof"].iloc[0]
        == "memory-bound: 23% of the attainable (9% of the bf16 roof)"
    )


def _failed_search(run_dir):
    """The H200 example's search as if no confirmation had run: every confirm row an oom, the best row an error."""
    rows = results.read_rows(run_dir / "tuning.csv")
    oom = {"status": "oom", "error": "CUDA out of memory"}
    failed = {"status": "error", "error": "no configuration confirmed", "config": ""}
    change = {"confirm": oom, "best": failed}
    results.write_rows(run_dir / "tuning.csv", [{**r, **change.get(r["row_kind"], {})} for r in rows])
    return run_dir


def test_a_search_that_confirmed_nothing_says_why_once(tmp_path):
    """A best row with status=error showed only question marks on the first screen, and 07's sentence repeated
    itself: "no configuration confirmed (no configuration confirmed)"; the confirmations' own failure is the why."""
    from cnnbench import tuning

    run_dir = _failed_search(_example_tables(tmp_path, "example-cuda-h200"))
    cell = overview.fastest(run_dir).configuration.iloc[0]
    assert cell.startswith("none confirmed: ") and "CUDA out of memory" in cell, cell
    (said,) = tuning.findings(results.read(run_dir, "tuning"))
    assert said.count("no configuration confirmed") == 1 and "CUDA out of memory" in said, said


def test_07s_sentence_says_why_a_measured_roof_has_no_bound(tmp_path):
    """A roof measured, the step's intensity not counted: the sentence read "nan-bound, nan% of the attainable"
    and dropped the roof_note that says why."""
    from cnnbench import tuning

    run_dir = _example_tables(tmp_path, "example-cuda-h200")
    note = "intensity not counted: ValueError: no such layer"
    lost = {"bound": "", "attainable_gflops": "", "attainable_pct": "", "intensity_flop_per_byte": ""}
    rows = results.read_rows(run_dir / "tuning.csv")
    lost |= {"roof_note": note}
    results.write_rows(
        run_dir / "tuning.csv", [{**r, **lost} if r["row_kind"] == "best" else r for r in rows]
    )
    (said,) = tuning.findings(results.read(run_dir, "tuning"))
    assert "nan" not in said and f"bound not known ({note})" in said and "9% of the measured bf16" in said, (
        said
    )
