"""Reports say what they compare; report tables hide nothing and carry units."""

import nbformat
import pandas as pd

from cnnbench import SCHEMA_VERSION, report, results, tables


def test_show_hides_no_row_or_column():
    df = pd.DataFrame({f"col_{i}_s": [float(r * i) for r in range(80)] for i in range(40)})
    page = tables.show(df, "80 rows x 40 columns (s)").data
    assert "..." not in page and "col_39_s" in page and page.count("<tr") == 81
    assert "<b>80 rows x 40 columns (s)</b>" in page
    tables.readable_display()
    assert "..." not in df.to_string() and pd.get_option("display.max_colwidth") is None


def test_utilisation_and_memory_columns_carry_their_units():
    row = {"run_name": "r", "device_name": "cpu", "model": "m", "phase": "train", "precision": "fp32",
           "memory_format": "nchw", "compile": False, "batch_size": 8, "status": "ok", "util_cpu_mean_pct": 50.0,
           "util_device_mean_pct": 90.0, "peak_rss_mib": 100.0, "peak_device_mem_mib": 10.0,
           "throughput_img_s": 5.0, "throughput_ci95_img_s": 0.1}
    util = tables.utilisation(pd.DataFrame([row]))
    assert {"util_cpu_mean_pct", "util_device_mean_pct"} <= set(util.columns)
    assert {"peak_rss_mib", "peak_device_mem_mib"} <= set(tables.measured(pd.DataFrame([row])).columns)
    assert "train_peak_rss_mib" in tables.performance_summary(pd.DataFrame([row])).columns


def _run(outputs, name, params_file="params/local.yaml", schema=SCHEMA_VERSION):
    d = outputs / name
    results.write_json(d / "environment.json", {"schema_version": schema, "device_kind": "cpu", "device_name": "AMD EPYC",
                                                "host": f"AMD EPYC ({len(name)} cores)", "host_id": name})
    results.write_json(d / "params.json", {"params_file": params_file, "run_name": name})
    return d


def test_per_run_report_speaks_of_its_run_only(tmp_path):
    d = _run(tmp_path, "laptop")
    page = report.build_run_report(d, []).read_text()
    assert "speaks of run <strong>laptop</strong> only" in page and "AMD EPYC (6 cores)" in page


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
    assert n == 2 and "2 runs compared" in page and "AMD EPYC on AMD EPYC (11 cores)" in page
    assert "Left out" in page and "quick" in page and "smoke.yaml" in page and "_combined" not in page


def test_combined_report_leaves_out_failed_and_other_schema_runs_and_counts_what_it_merges(tmp_path):
    _run(tmp_path, "laptop")
    _run(tmp_path, "workstation")
    (_run(tmp_path, "broken") / "FAILED.txt").write_text("This run did not finish: 02_scenario_a failed\nwhen: x\n")
    _run(tmp_path, "ancient", schema=SCHEMA_VERSION - 1)
    runs, excluded = report.combined_runs(tmp_path)
    assert [d.name for d in runs] == ["laptop", "workstation"]  # the pipeline starts a combined report on these
    assert excluded["ancient"] == f"schema version {SCHEMA_VERSION - 1} (this workbook reads {SCHEMA_VERSION})"
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
    assert excluded["garbled"].startswith("broken run (environment.json") and "broken run (params.json" in excluded["garbled2"]
    nb = tmp_path / "08.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 08 analysis")]), nb)
    path, n = report.build_combined_report(tmp_path, nb)
    assert n == 2 and "garbled" in path.read_text()
