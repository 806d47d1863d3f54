"""Issue 44, what a reader sees: tables never squeezed below their words (they scroll instead), folds that hold
their own text, a page that loads nothing, a first screen that marks what is imprecise or busy and names its
roofs, a combined report with a summary, every run-folder value shown as text, no machine's path."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from bs4 import BeautifulSoup

from cnnbench import report, results, tables
from conftest import ROOT

EXAMPLE = ROOT / "examples" / "example-cpu-2core"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
BREAKS_WORDS = re.compile(
    r"overflow-wrap:\s*(anywhere|break-word)|word-wrap:\s*break-word|word-break:\s*break-(all|word)"
)


def _wide_tables():
    """The walk's unreadable tables: 30 columns of long names and numbers, a long text column beside short ones,
    and the predictions table: several columns of long text beside numbers (squeezed to one character)."""
    numbers = pd.DataFrame(
        {f"train_throughput_process_{i}_img_s": [1719.5307 * (i + 1), 11689512.0] for i in range(30)}
    )
    text = "its devices in its configuration: Tiny-ImageNet (64x64) from disk, 4 workers, one run, batch 128"
    seeds = pd.DataFrame(
        {"model": ["mobilenet_v2", "resnet18"], "batch_size": [128, 64], "differences": [text, text]}
    )
    predictions = pd.DataFrame(
        {
            "source": ["published by 000_6d833120f7fd5a11.txt"] * 2,
            "model": ["resnet18", "squeezenet1_1"],
            "params": [11689512, 1235496],
            "rate_img_s": [242.4, 805.0],
            **{f"reason_{i}": [text, text] for i in range(4)},
        }
    )
    return numbers, seeds, predictions


def _page_of(tmp_path, frames, header="# head"):
    nb = tmp_path / "08.ipynb"
    show = [tables.show(df, "wide").data for df in frames]
    outputs = [[nbformat.v4.new_output("display_data", data={"text/html": h})] for h in show]
    cells = [nbformat.v4.new_code_cell("", outputs=o) for o in outputs]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), nb)
    return report.build([nb], tmp_path / "report.html", "t", header)


def _css_rules(page: str) -> list[tuple[str, str]]:
    css = "".join(re.findall(r"<style[^>]*>(.*?)</style>", page, re.S))
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return [(sel.strip(), body) for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css)]


def test_no_table_is_squeezed_below_its_words_it_scrolls_sideways_instead(tmp_path):
    """The walk: the predictions table was squeezed into columns one character wide, and headers and values
    broke inside words and numbers ("batch_si|ze", "1168951|2", "resne|t18"): every cell could break anywhere
    (overflow-wrap: anywhere) so that each table fitted the page."""
    page = _page_of(tmp_path, _wide_tables()).read_text()
    rules = _css_rules(page)
    cells = [b for s, b in rules if re.search(r"(^|[\s,])(td|th|table)\b", s)]
    assert cells and not [b for b in cells if BREAKS_WORDS.search(b)], [
        b for b in cells if BREAKS_WORDS.search(b)
    ]
    ours = dict(rule for rule in rules if "jp-RenderedHTMLCommon t" in rule[0])  # the last rule of each wins
    table = " ".join(ours[".jp-RenderedHTMLCommon table"].split())
    for rule in ("display: block", "overflow-x: auto", "max-width: 100%", "width: max-content"):
        assert rule in table, table  # wider than the page: it scrolls in its own box
    cell = " ".join(ours[".jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td"].split())
    assert "overflow-wrap: normal" in cell and "word-break: normal" in cell
    soup = BeautifulSoup(page, "html.parser")
    assert all(" ± " not in td.get_text() for td in soup.find_all("td"))  # a value and its interval: one line


def test_a_runs_summary_keeps_each_value_and_its_interval_on_one_line(tmp_path):
    run = _example_copy(tmp_path / "r")
    soup = BeautifulSoup(report.build_run_report(run, []).read_text(), "html.parser")
    cells = [td.get_text() for td in soup.find_all("td") if "±" in td.get_text()]
    assert len(cells) > 12 and not [c for c in cells if " ±" in c or "± " in c], cells


def _in_chromium(page, script: str, width=1024):
    """``script``'s JSON result in headless Chromium over a copy of ``page`` (skipped where there is none)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("no chromium")
    probe = page.with_name("probe.html")
    probe.write_text(
        page.read_text().replace(
            "</body>",
            f"<pre id='probe'></pre><script>probe.textContent = JSON.stringify({script});</script></body>",
        )
    )
    flags = "--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update"
    done = subprocess.run(
        [chromium, *flags.split(), "--no-first-run", f"--user-data-dir={page.parent / 'chromium'}"]
        + [f"--window-size={width},800", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", done.stdout, re.S)
    assert found, done.stderr[-2000:]
    return json.loads(BeautifulSoup(found.group(1), "html.parser").get_text())


# Every word a cell had to break (a word wider than the room its cell has: a line may break after a hyphen, and a
# header after an underscore, where it has a <wbr>), and every table whose box is wider than the page.
_SEEN = """(() => {
  const split = [], page = document.documentElement.clientWidth, pen = document.createElement('canvas').getContext('2d');
  for (const c of document.querySelectorAll('th, td')) {
    const st = getComputedStyle(c);
    const room = c.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
    pen.font = st.font;
    let words = c.innerText.split(/\\s+/).filter(Boolean).flatMap(w => w.split(/(?<=-)/));
    if (c.tagName === 'TH') words = words.flatMap(w => w.split(/(?<=_)/));
    split.push(...words.filter(w => pen.measureText(w).width > room + 0.5));
  }
  const wider = [...document.querySelectorAll('table')].filter(t => t.getBoundingClientRect().right > page + 1);
  const scrolls = [...document.querySelectorAll('table')].filter(t => t.scrollWidth > t.clientWidth + 1);
  return {split: split, wider: wider.length, scrolls: scrolls.length, tables: document.querySelectorAll('table').length};
})()"""


def test_in_chromium_no_cell_breaks_a_word_and_wide_tables_scroll(tmp_path):
    seen = _in_chromium(_page_of(tmp_path, _wide_tables()), _SEEN)
    assert seen["tables"] == 3 and seen["split"] == [] and seen["wider"] == 0, seen
    assert seen["scrolls"] >= 1, seen  # the 30 columns: wider than the page, scrolled in its box


def _folds(text: str) -> list[str]:
    """The text of every <details> of a markdown source, as a reader reads it (no backticks, link targets)."""
    out = []
    for fold in re.findall(r"</summary>(.*?)</details>", text, re.S):
        fold = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", fold).replace("`", "").replace("**", "")
        out.append(" ".join(fold.split()))
    return out


def test_every_fold_holds_its_own_text_code_spans_and_all(tmp_path):
    """The walk: 7 of the 8 protocol folds and 08's "Which runs it reads" closed at their first code span
    (`(</p></details><code>`): the rest spilled out unfolded, mid-sentence, with raw backticks."""
    header = "# head\n\n<details><summary>Parameters</summary>\n\nset `x: [1, 2]` and **y**, then `z`.\n\n</details>"
    page = report.build(NOTEBOOKS, tmp_path / "report.html", "t", header).read_text()
    sources = [header] + [
        c.source
        for nb in NOTEBOOKS
        for c in nbformat.read(nb, as_version=4).cells
        if c.cell_type == "markdown"
    ]
    expected = [f for s in sources for f in _folds(s)]
    shown = [" ".join(d.get_text().split()) for d in BeautifulSoup(page, "html.parser").find_all("details")]
    assert len(expected) >= 9 and len(shown) == len(expected), (len(shown), len(expected))
    for want, got in zip(expected, shown, strict=True):
        assert "`" not in got and " ".join(want.split()[-4:]) in got, (want[-80:], got[-200:])
    assert "</details><code>" not in page


def test_the_report_loads_nothing_and_runs_no_script(tmp_path):
    """The walk: the report loaded require.js and MathJax from a CDN in 5 <script> tags: it did not render
    offline."""
    page = _page_of(tmp_path, _wide_tables()[:1]).read_text()
    assert "<script" not in page
    assert all(src.startswith("data:") for src in re.findall(r"\bsrc=[\"']([^\"']*)", page))
    assert not re.search(r"<link[^>]*href=[\"']?(https?:)?//", page) and "@import" not in page
    assert not re.search(r"url\(\s*[\"']?(https?:)?//", page) and "cdnjs" not in page


def _example_copy(target, name=None):
    run = target if name is None else target / name
    shutil.copytree(
        EXAMPLE, run, ignore=shutil.ignore_patterns("notebooks", "figures", "*.html", "trace_*", "ddp")
    )
    return run


def _rewrite(run, table, change):
    rows = results.read_rows(run / f"{table}.csv")
    results.write_rows(run / f"{table}.csv", [change(r) or r for r in rows])


def test_the_first_screen_marks_each_imprecise_or_busy_rate_names_the_busy_ones_and_the_roofs(tmp_path):
    """The walk: SqueezeNet train 1,000 +- 210 (+-21%) sat unmarked in the first screen's table, which said
    "6 of 20 configurations were busy" but not which; "of compute roof 44%" was against the bf16 roof, unsaid."""
    run = _example_copy(tmp_path / "r")

    def change(r):
        if r["model"] == "squeezenet1_1" and r["phase"] == "train":
            r["throughput_ci95_img_s"] = str(0.21 * float(r["throughput_img_s"]))
        if r["model"] == "mnist_cnn" and r["phase"] == "eval":
            r["machine_state"], r["machine_note"] = "busy", "other processes 95% of the CPUs"

    _rewrite(run, "scenario_a", change)
    page = report.build_run_report(run, []).read_text()
    top = BeautifulSoup(page[page.index('id="Summary"') : page.index('id="Contents"')], "html.parser")
    rows = {
        tr.find("td").get_text(): [td.get_text() for td in tr.find_all("td")]
        for tr in top.find_all("tr")[1:7]
    }
    assert any(re.search(r"\(imprecise: ±21%\)$", c) for c in rows["squeezenet1_1"]), rows["squeezenet1_1"]
    assert any(c.endswith("(busy)") for c in rows["mnist_cnn"]), rows["mnist_cnn"]
    assert not any(
        "(" in c and "roof" not in c for c in rows["resnet18"]
    )  # the precise, quiet rates: unmarked
    text = " ".join(top.get_text().split())
    assert (
        "busy during 1 of 20" in text
        and "Busy: mnist_cnn eval at batch 512 in 02 (other processes 95%" in text
    )
    assert "of measured fp32 dram roof (compute-bound)" in text  # the headline's share names its roof
    best = pd.read_csv(run / "tuning.csv").query("row_kind == 'best'").iloc[0]
    assert (
        f"{best.compute_roof_pct:.0f}% of the {best.roof_precision} roof" in text
        and best.roof_precision == "bf16"
    )


def test_the_combined_report_opens_with_a_summary_of_every_run(tmp_path):
    """The walk: the combined report of several runs had no summary screen, only the list of runs."""
    for name in ("laptop", "workstation"):
        _example_copy(tmp_path, name)
    nb = tmp_path / "08.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 08 analysis")]), nb)
    page = report.build_combined_report(tmp_path, nb)[0].read_text()
    top = page[page.index('id="Summary"') : page.index('id="Contents"')]
    text = " ".join(BeautifulSoup(top, "html.parser").get_text().split())
    assert text.count("The machine was quiet during all 20 measured configurations") == 2
    rows = [
        [td.get_text() for td in tr.find_all("td")] for tr in BeautifulSoup(top, "html.parser").find_all("tr")
    ]
    rates = [r for r in rows if len(r) > 4]
    assert {r[0] for r in rates} == {"laptop", "workstation"} and len(rates) == 12, rates
    assert "Headline rates" in text


HOSTILE = "a`<style>body{display:none}</style>`"


@pytest.mark.parametrize("fields", [("git_commit",), ("git_commit", "device_name", "host", "params_file")])
def test_a_run_folder_value_never_cuts_the_report(tmp_path, fields):
    """Barrage 4: environment.json's git_commit holding `<style>` was written unescaped into the header, and
    report.html fell from 4.1 MB to 0.28 MB with every notebook gone."""
    run = _example_copy(tmp_path / "r")
    env = results.read_json(run / "environment.json")
    results.write_json(run / "environment.json", {**env, **dict.fromkeys(fields, HOSTILE)})
    prm = results.read_json(run / "params.json")
    results.write_json(run / "params.json", {**prm, **dict.fromkeys(set(fields) & set(prm), HOSTILE)})
    nb = tmp_path / "02.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 02\n\nMARKER-AFTER")]), nb
    )
    page = report.build_run_report(run, [nb]).read_text()
    body = page[page.index("<body") :]
    assert "MARKER-AFTER" in body and "<style" not in body and "&lt;style&gt;" in body


def test_a_reports_title_is_its_runs_name_and_its_parameters_show_what_was_in_force(tmp_path):
    """The walk: the example was titled "cpu-vm" though made as example-cpu-2core; its parameters said
    pin_memory True where every row of 02 (a CPU: nothing to pin) recorded False."""
    run = _example_copy(tmp_path, "example-cpu-2core")
    page = report.build_run_report(run, []).read_text()
    assert "<title>cnnbench example-cpu-2core</title>" in page
    params = BeautifulSoup(page[page.index("<summary>Parameters") :], "html.parser").find("table")
    shown = {tr.find("th").get_text(): tr.find("td").get_text() for tr in params.find_all("tr")}
    assert shown["pin_memory"] == "True (in force: False, as every row of 02 records)", shown["pin_memory"]
    assert shown["workers"] == "2" and shown["threads"] == "0 (in force: 2, as every row of 02 records)"


def test_a_one_run_report_speaks_of_one_run(tmp_path):
    """The walk: a one-run report said "rate of cpu-vm / rate of cpu-vm" and "present in two runs"."""
    from cnnbench import analysis

    run = _example_copy(tmp_path, "cpu-vm")
    found = analysis.findings_table(analysis.load([run])).finding
    one_knob = [f for f in found if "batch_size" in f and "->" in f]
    assert one_knob and not [f for f in found if "rate of cpu-vm / rate of cpu-vm" in f], one_knob
    assert re.match(r"batch_size (\d+) -> (\d+) in cpu-vm, rate at \2 / rate at \1: ", one_knob[0]), one_knob
    code = "".join(c.source for c in nbformat.read(ROOT / "notebooks" / "08_analysis.ipynb", 4).cells)
    assert "present in two runs" not in code and "one run: no configurations of two runs to divide" in code


def test_a_run_folder_records_paths_relative_to_the_workbook_or_home(tmp_path, monkeypatch):
    """The walk: the example's report printed the temporary folder of the machine that made it (its params file,
    its trace, its zip), and the H100 example's FAILED.txt the absolute params path of the machine it ran on."""
    import cnnbench
    from cnnbench import params, paths, pipeline, run

    root, home = tmp_path / "clone", tmp_path / "home"
    for folder in (root / "params", root / "notebooks", home):
        folder.mkdir(parents=True)
    shutil.copy(ROOT / "params" / "smoke.yaml", root / "params" / "smoke.yaml")
    monkeypatch.setenv("CNNBENCH_ROOT", str(root))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    assert paths.shown(root / "params" / "smoke.yaml") == "params/smoke.yaml"
    assert paths.shown(home / "mine.yaml") == "~/mine.yaml" and paths.shown("/etc/x.yaml") == "/etc/x.yaml"
    p, folder = params.load(root / "params" / "smoke.yaml", check_device=False), tmp_path / "out" / "r"
    recorded = run.write_resolved(folder, p, root / "params" / "smoke.yaml", {})
    assert results.read_json(recorded)["params_file"] == "params/smoke.yaml"
    for why in ("", "killed"):  # the run starts; it did not finish
        pipeline._mark(folder, root / "params" / "smoke.yaml", {}, why)
        failed = (folder / "FAILED.txt").read_text()
        assert "params file: params/smoke.yaml\n" in failed and str(tmp_path) not in failed, failed
    opened = cnnbench.open_run(recorded, {}, folder)  # read back: the file it names, from the workbook's root
    assert opened.params_file == root / "params" / "smoke.yaml" and opened.params == p
    for nb in [
        nb for nb in NOTEBOOKS if nb.stem != report.SETUP
    ]:  # nor does the report print the run folder's
        # or its zip's absolute path (00, folded into the report's header, is not shown)
        code = "\n".join(c.source for c in nbformat.read(nb, 4).cells if c.cell_type == "code")
        assert not re.search(r"print\([^\n]*\brun\.dir\b", code) and "{archive}" not in code, nb.name


def test_the_first_screen_says_a_gpu_row_is_host_bound_with_its_busy_share(tmp_path):
    """Issue 41: a row whose GPU was busy under half its step says 'host-bound (launch overhead)' with the busy
    share, in 02's table and on 08's first screen."""
    run = _example_copy(tmp_path / "r")

    def change(r):
        r["step_bound"], r["device_busy_pct"] = (
            ("host-bound (launch overhead)", "23.0") if r["model"] == "resnet18" else ("device", "91.0")
        )

    _rewrite(run, "scenario_a", change)
    page = report.build_run_report(run, []).read_text()
    top = BeautifulSoup(page[page.index('id="Summary"') : page.index('id="Contents"')], "html.parser")
    text = " ".join(top.get_text().split())
    assert "host-bound: the device busy 23% of the step" in text and "*host-bound*" not in text
    assert "host-bound: the device was busy under half of each step" in text


def test_a_failure_mark_that_cannot_be_written_is_said_not_raised(tmp_path, monkeypatch):
    """A failed run's FAILED.txt that cannot be written is named in the run's one failure line: the check for the
    stale report ran outside the guard, so a folder that could not be read raised instead (exit 2, no line)."""
    from cnnbench import pipeline

    real = Path.is_file

    def is_file(path):
        if path.name == pipeline.STALE_REPORT:
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(Path, "is_file", is_file)
    said = pipeline._mark(tmp_path, tmp_path / "p.yaml", {}, "killed")
    assert said.startswith(" (FAILED.txt not written: Permission denied"), said
