"""The HTML report builder (not a family's tables: those are ``<family>/summary.py``). report.html: the executed
notebooks of a run in one page, code hidden: a one-screen summary first (:mod:`cnnbench.analysis.overview`), then
a contents list and the notebooks; the parameters and environment the numbers were measured under folded away."""

from __future__ import annotations

import datetime as dt
import html
import re
from pathlib import Path

import nbformat

from cnnbench import results
from cnnbench.results.runs import machine_label

COMBINED = "_combined"  # outputs/_combined/: the combined analysis, executed over every user run
SETUP = "00_setup"  # shows the environment and parameters: a run's report folds them into its header instead

# No table wider than the page: every cell may wrap, even inside a long name or number (overflow-wrap: anywhere
# lowers a cell's narrowest width, so the browser can always shrink the table to the page), and a table never
# takes more than the page's width. cnnbench.tables.fitted breaks headers after underscores first and gives
# long text columns their share.
TABLE_CSS = """<style id="cnnbench-tables">
.jp-RenderedHTMLCommon table { table-layout: auto; max-width: 100%; }
.jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td { overflow-wrap: anywhere; }
.jp-RenderedHTMLCommon table.cnnbench-words th, .jp-RenderedHTMLCommon table.cnnbench-words td { overflow-wrap: normal; }
</style>
<script id="cnnbench-words">
/* A table keeps its words whole (class cnnbench-words: 'phase', never 'phas e') wherever it then still fits its
   box; only a table too wide for that may break inside words. Decided in the page, at its width, again on resize. */
function cnnbenchWords() {
  for (const t of document.querySelectorAll(".jp-RenderedHTMLCommon table")) {
    t.classList.add("cnnbench-words");
    if (t.getBoundingClientRect().width > t.parentElement.getBoundingClientRect().width + 1) {
      t.classList.remove("cnnbench-words");
    }
  }
}
window.addEventListener("load", cnnbenchWords);
window.addEventListener("resize", cnnbenchWords);
</script>
"""
_HEADING = re.compile(r"^(#{1,2})\s+(.+?)\s*#*\s*$")


def _table(rows: dict) -> str:
    left = "style='text-align:left'"
    body = "".join(
        f"<tr><th {left}>{html.escape(str(k))}</th><td {left}>{html.escape(str(v))}</td></tr>"
        for k, v in rows.items()
    )
    return f"<table>{body}</table>"


def _anchor_headings(cell, prefix: str, contents: list[tuple[int, str, str]]) -> None:
    """Put an anchor before every H1/H2 of a markdown cell and list it in ``contents``."""
    lines = []
    for line in cell.source.splitlines():
        match = _HEADING.match(line)
        if match:
            anchor = f"{prefix}-{len(contents)}"
            contents.append((len(match.group(1)), match.group(2), anchor))
            lines.append(f'<a id="{anchor}"></a>\n')
        lines.append(line)
    cell.source = "\n".join(lines)


# What a report shows of an executed notebook (a run folder copied from anywhere may hold any of it): these
# output types, and in HTML and markdown these tags and attributes; any other tag is shown as text, any other
# attribute (onerror=...) or link scheme (javascript:) dropped: no script of a run folder runs in the report.
HIDDEN_TAGS = {"parameters", "injected-parameters", "colab-setup", "remove-cell"}  # cells left out whole
SHOWN_OUTPUTS = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg")
SAFE_TAGS = {
    *"a b i p br dd dl dt em h1 h2 h3 h4 h5 h6 hr li ol ul tr td th pre sub sup col div wbr tbody".split(),
    *"abbr blockquote caption code colgroup details small span strong summary table tfoot thead".split(),
}
SAFE_ATTRIBUTES = {
    "*": ["class", "id", "title", "style", "align", "valign", "halign", "colspan", "rowspan", "border"],
    "a": ["href", "name", "id"],
}
_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)  # markdown code: shown as text by markdown itself
_LINK = re.compile(r"(\]\(\s*<?|^\s*\[[^\]\n]+\]:\s*<?)([^\s)>]*)", re.M)  # a markdown link's target


def _link(match: re.Match) -> str:
    """A markdown link kept where its target is relative or http(s)/mailto, else made '#' (javascript:)."""
    target = re.sub(r"[\s\x00-\x1f]", "", html.unescape(match.group(2))).lower()
    scheme = target.split(":", 1)[0] if ":" in target.split("/", 1)[0] else ""
    return match.group(1) + (match.group(2) if scheme in ("", "http", "https", "mailto") else "#")


def safe(text: str, markdown: bool = False) -> str:
    """``text`` (HTML, or ``markdown`` outside its code spans) with only :data:`SAFE_TAGS` and their
    :data:`SAFE_ATTRIBUTES` live (bleach, as nbconvert's sanitizer uses) and no link that runs a script."""
    import bleach
    from bleach.css_sanitizer import CSSSanitizer

    def clean(part: str) -> str:
        out = bleach.clean(
            part,
            tags=SAFE_TAGS,
            attributes=SAFE_ATTRIBUTES,
            css_sanitizer=CSSSanitizer(),
            protocols={"http", "https", "mailto"},
            strip_comments=True,
        )
        return _LINK.sub(_link, out.replace("&gt;", ">").replace("&amp;", "&")) if markdown else out

    parts = _CODE.split(text) if markdown else [text]
    return "".join(p if i % 2 else clean(p) for i, p in enumerate(parts))


def _report_cells(nb, prefix: str, contents: list) -> list:
    cells = []
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "raw" or tags & HIDDEN_TAGS:
            continue
        if cell.cell_type == "markdown":
            # the Colab badge is for the notebook, not the report (an external image, broken offline)
            badge = [ln for ln in cell.source.splitlines() if "colab-badge" in ln]
            cell.source = safe("\n".join(ln for ln in cell.source.splitlines() if ln not in badge), True)
            _anchor_headings(cell, prefix, contents)
        elif cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("name") != "stderr"]
            for data in (o["data"] for o in cell.outputs if "data" in o):
                for mime in [m for m in data if m not in SHOWN_OUTPUTS]:
                    del data[mime]
                for mime in ("text/html", "text/markdown"):
                    if mime in data:
                        data[mime] = safe("".join(data[mime]), markdown=mime == "text/markdown")
            if not cell.outputs:
                continue
        cells.append(cell)
    return cells


def build(notebooks: list[Path], out: Path, title: str, header_md: str) -> Path:
    """Concatenate executed ``notebooks`` into ``out`` (HTML, code hidden) under ``header_md``."""
    from nbconvert import HTMLExporter

    contents: list[tuple[int, str, str]] = []
    body = []
    for i, path in enumerate(notebooks):
        for j, cell in enumerate(_report_cells(nbformat.read(path, as_version=4), f"s{i}", contents)):
            cell["id"] = f"s{i}-{j}"  # notebooks may share cell ids; in one page each must be unique
            body.append(cell)
    toc = "\n".join(f"{'    ' * (level - 1)}- [{text}](#{anchor})" for level, text, anchor in contents)
    head = nbformat.v4.new_markdown_cell(f"{header_md}\n\n## Contents\n\n{toc}\n")
    merged = nbformat.v4.new_notebook(cells=[head, *body], metadata={"title": title})
    merged.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    exporter = HTMLExporter(
        template_name="lab", exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True
    )
    page, _ = exporter.from_notebook_node(merged, resources={"metadata": {"name": title}})
    results.atomic_write_text(out, page.replace("</head>", f"{TABLE_CSS}</head>", 1))
    return out


def complexity_warning(run_dir: Path) -> str:
    """A red warning naming every model whose counts in complexity.csv disagree with torchvision's published
    figures (column ``matches_published``), for the top of the report; "" when all agree or none was checked."""
    rows = results.rows(run_dir, "complexity")
    bad = sorted({r["model"] for r in rows if r.get("matches_published", "True").strip().lower() == "false"})
    if not bad:
        return ""
    return (
        "<div style='border:3px solid #c00;background:#fee;padding:8px 12px'><b>WARNING: the FLOP counts of "
        f"{html.escape(', '.join(bad))} disagree with torchvision's published figures by more than 1%</b> "
        "(see 01 · Complexity); every FLOP-based figure of these models is suspect.</div>\n\n"
    )


def reproducibility_statement(run_dir: Path) -> str:
    """How quiet the machine was and whether the configurations measured twice agree, for the top of a run's
    report (pyperf's "the benchmark seems unstable"); a busy machine gets a red box with the figures."""
    from cnnbench import analysis
    from cnnbench.measure import reproducibility

    try:
        merged = analysis.load([run_dir], tables=reproducibility.TABLES)
    except Exception as err:  # noqa: BLE001 - the report still builds; it says why this part is missing
        return f"Reproducibility not assessed: {type(err).__name__}: {html.escape(str(err))}\n\n"
    state = analysis.machine(merged)
    pairs = analysis.repeated(merged)
    if state.empty and pairs.empty:
        return ""
    verdict = state.verdict.iloc[0] if len(state) else "No measurement recorded the machine's state."
    agree = html.escape(reproducibility.agreement_sentence(pairs))
    text = (
        f"**How quiet was the machine?** {html.escape(verdict)}\n\n**Do the numbers reproduce?** "
        f"{agree} Every interval spans several fresh processes.\n\n"
    )
    busy = len(state) and (state.busy.iloc[0] > 0 or not pairs.empty and not pairs.agree.all())
    if busy:
        return f"<div style='border:3px solid #c60;background:#fff4e5;padding:8px 12px'>\n\n{text}</div>\n\n"
    return text


PARTIAL = "report.partial.html"


def build_run_report(run_dir: Path, notebooks: list[Path], of: int | None = None) -> Path:
    """``run_dir/report.html`` over the executed ``notebooks``; with ``of`` (the run's number of notebooks), the
    partial report of a run still going (:data:`PARTIAL`), saying how far it was and when (it stays true if
    the run stops later)."""
    env = results.read_json(run_dir / "environment.json") if (run_dir / "environment.json").is_file() else {}
    prm = results.read_json(run_dir / "params.json") if (run_dir / "params.json").is_file() else {}
    params_rows = {k: v for k, v in prm.items() if k not in ("overrides",)}
    from cnnbench.analysis import overview

    machine = (
        f"{env.get('device_name', '?')} ({env.get('device_kind', '?')}), {env.get('cpu_model', '?')}, "
        f"{env.get('cpu_physical_cores', '?')} physical cores, torch using {env.get('torch_threads', '?')} "
        f"thread{'' if env.get('torch_threads') == 1 else 's'}, host {env.get('host', '?')}"
    )
    named = {**env, "name": run_dir.name, "params": Path(str(prm.get("params_file", "?"))).name}
    e = {k: html.escape(str(v)) for k, v in named.items()}  # a run folder's text, shown as text
    going = ""
    if of is not None:
        when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        going = (
            f"**Partial report: {len(notebooks)} of {of} notebooks done** when this page was written ({when}): "
            "report.html replaces it when the run ends; where the run stopped instead, FAILED.txt in its "
            "folder says why.\n\n"
        )
    header = (
        f"# cnnbench report: {e['name']}\n\n{going}{complexity_warning(run_dir)}"
        f"{overview.summary_html(run_dir, machine, reproducibility_statement(run_dir))}"
        f"This report speaks of run **{e['name']}** only, measured on **{e.get('device_name', '?')}** "
        f"({e.get('device_kind', '?')}) on host {e.get('host', e.get('cpu_model', '?'))}, "
        f"{e.get('captured_at', '')}, with {e['params']}, workbook commit "
        f"`{str(env.get('git_commit'))[:12]}`{' (with uncommitted changes)' if env.get('git_dirty') else ''}. "
        f"Every number below was measured or computed by the workbook's code on this machine; {_others(run_dir)}\n\n"
        f"<details><summary>Parameters (00 · Setup)</summary>\n\n{_table(params_rows)}\n\n</details>\n\n"
        f"<details><summary>Environment (00 · Setup: every item captured)</summary>\n\n"
        f"{_table({k: v for k, v in env.items() if k != 'params'})}\n\n</details>"
    )
    body = [nb for nb in notebooks if Path(nb).stem != SETUP]  # its environment and parameters: folded above
    out = run_dir / ("report.html" if of is None else PARTIAL)
    return build(body, out, f"cnnbench {run_dir.name}", header)


def _others(run_dir: Path) -> str:
    """Where this run meets the others: the combined report, which leaves smoke/test runs out."""
    from cnnbench.results import runs as results_runs

    if (reason := results_runs.test_run_reason(run_dir)) is not None:
        return f"this {reason.split(' (')[0]} is left out of the combined report (outputs/report.html)."
    return "other runs are compared in outputs/report.html."


def combined_runs(outputs: Path) -> tuple[list[Path], dict[str, str]]:
    """The user runs a combined report merges, and the folders it leaves out with the reason (smoke/test,
    failed and broken runs, the combined analysis itself, runs of another results schema)."""
    from cnnbench.results import runs as results_runs

    excluded: dict[str, str] = {}
    dirs = results_runs.discover(outputs, [results_runs.ALL_RUNS], excluded)
    merged = results_runs.load(dirs, excluded, tables=())  # another schema, a broken environment: left out
    return [d for d in dirs if d.name in merged.runs], merged.excluded


def build_combined_report(outputs: Path, analysis_notebook: Path) -> tuple[Path, int]:
    """outputs/report.html from the combined analysis (08 executed over every user run into _combined/),
    headed by the runs it merges, their hosts, and the runs it leaves out: counted as 08's merge counts them
    (runs of another schema version, smoke/test and failed runs left out, with the reason)."""
    from cnnbench import analysis

    merged = analysis.load(*combined_runs(outputs), tables=())  # the runs and their hosts: no table needed
    rows = {
        name: machine_label(env.get("device_name"), env.get("host", env.get("cpu_model")))
        for name, env in merged.environments.items()
    }
    runs = merged.runs
    left_out = {name: why for name, why in merged.excluded.items() if name != COMBINED}
    header = (
        f"# cnnbench: {len(runs)} runs compared\n\nThis report merges the {len(runs)} user runs below, each "
        "measured on the device and host named beside it; every run keeps its own report in its folder.\n\n"
        f"{_table(rows)}\n\n" + (f"Left out:\n\n{_table(left_out)}" if left_out else "No run was left out.")
    )
    return build([analysis_notebook], outputs / "report.html", "cnnbench: runs compared", header), len(runs)
