"""report.html: a run's executed notebooks in one page, code hidden, its one-screen summary first
(:mod:`cnnbench.analysis.overview`), its parameters and environment folded away."""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat

from cnnbench import params, paths, results
from cnnbench.results import runs as results_runs

COMBINED = "_combined"  # outputs/_combined/: the combined analysis, executed over every user run
SETUP = params.NUMBERED["00"]  # shows the environment and parameters: folded into a run's report's header

# A table is never squeezed below its words: no cell breaks inside a word or a number (each column is at least
# as wide as its longest word; cnnbench.tables.fitted lets a header break after an underscore), and a table wider
# than the page scrolls sideways in its own box. The page loads nothing (no MathJax, require.js or mermaid): it
# renders offline, and no script of any kind is in it.
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{% block html_head_js %}{% endblock %}{% block html_head_js_mathjax %}{% endblock %}
{% block html_head_js_mermaidjs %}{% endblock %}
{% block html_head_css %}<style id="cnnbench-tables">
.jp-RenderedHTMLCommon table { display: block; width: max-content; max-width: 100%; overflow-x: auto; }
.jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td { overflow-wrap: normal; word-break: normal; hyphens: manual; }
</style>{% endblock %}
"""
_HEADING = re.compile(r"^(#{1,2})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _table(rows: dict) -> str:
    left = "style='text-align:left'"
    body = "".join(
        f"<tr><th {left}>{html.escape(str(k))}</th><td {left}>{html.escape(str(v))}</td></tr>"
        for k, v in rows.items()
    )
    return f"<table>{body}</table>"


# What a report shows of an executed notebook (a run folder copied from anywhere may hold any of it): these
# output types, and in HTML and rendered markdown these tags and attributes; any other tag is shown as text, any
# other attribute (onerror=...) or link scheme (javascript:) dropped: no script of a run folder runs in the report.
HIDDEN_TAGS = {"parameters", "injected-parameters", "colab-setup", "remove-cell"}  # cells left out whole
SHOWN_OUTPUTS = ("text/plain", "text/html", "text/markdown", "image/png", "image/jpeg")
SAFE_TAGS = {
    *"a b i p br dd dl dt em h1 h2 h3 h4 h5 h6 hr li ol ul tr td th pre sub sup col div wbr tbody".split(),
    *"abbr blockquote caption code colgroup details small span strong summary table tfoot thead".split(),
}
SAFE_ATTRIBUTES = {
    "*": ["class", "id", "title", "style", "align", "valign", "halign", "colspan", "rowspan", "border"],
    "a": ["href", "name", "id"],
}


def safe(text: str) -> str:
    """HTML (every markdown cell and output once rendered: nbconvert's ``clean_html``) with only
    :data:`SAFE_TAGS` and their :data:`SAFE_ATTRIBUTES` live (bleach, as nbconvert's sanitizer uses)."""
    import bleach
    from bleach.css_sanitizer import ALLOWED_CSS_PROPERTIES, CSSSanitizer

    box = CSSSanitizer(allowed_css_properties={*ALLOWED_CSS_PROPERTIES, "border", "background", "padding"})
    protocols = {"http", "https", "mailto"}
    return bleach.clean(text, SAFE_TAGS, SAFE_ATTRIBUTES, protocols, strip_comments=True, css_sanitizer=box)


def _report_cells(nb, prefix: str, contents: list[tuple[int, str, str]]) -> list:
    """The cells of ``nb`` a report shows; an anchor before every H1/H2 of markdown, listed in ``contents``."""

    def anchor(match: re.Match) -> str:
        contents.append((len(match.group(1)), match.group(2), f"{prefix}-{len(contents)}"))
        return f'<a id="{contents[-1][2]}"></a>\n\n{match.group(0)}'

    cells = []
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "raw" or tags & HIDDEN_TAGS:
            continue
        if cell.cell_type == "markdown":
            # the Colab badge is for the notebook, not the report (an external image, broken offline)
            badge_free = "\n".join(ln for ln in cell.source.splitlines() if "colab-badge" not in ln)
            cell.source = _HEADING.sub(anchor, badge_free)
        elif cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("name") != "stderr"]
            for data in (o["data"] for o in cell.outputs if "data" in o):
                for mime in [m for m in data if m not in SHOWN_OUTPUTS]:
                    del data[mime]
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
    shown = {"sanitize_html": True, "filters": {"clean_html": safe}}  # every cell and output, once rendered
    hidden = dict.fromkeys(("exclude_input", "exclude_input_prompt", "exclude_output_prompt"), True)
    exporter = HTMLExporter(template_name="lab", raw_template=OFFLINE_TEMPLATE, **shown, **hidden)
    page, _ = exporter.from_notebook_node(merged, resources={"metadata": {"name": title}})
    results.atomic_write_text(out, page)
    return out


def complexity_warning(run_dir: Path) -> str:
    """01's warning (:func:`.flops.off_published`) of the run's complexity.csv, for the top of the report; "" when
    every count agrees or none was checked."""
    from cnnbench.measure import flops

    warning = flops.off_published(results.read(run_dir, "complexity"))
    return f"{warning}\n\n" if warning else ""


def _text(value) -> str:
    """A run folder's value as text in the report's markdown: HTML escaped, no markdown syntax in it live."""
    return html.escape(str(value)).translate({ord(c): f"&#{ord(c)};" for c in "`*_[]\\"})


def reproducibility_statement(run_dir: Path) -> str:
    """For the top of a run's report: how quiet the machine was (its busy configurations named) and whether those
    measured twice agree (pyperf's "the benchmark seems unstable"), in a red box when busy or they disagree."""
    from cnnbench import analysis
    from cnnbench.measure import reproducibility

    try:
        merged = analysis.load([run_dir], tables=reproducibility.TABLES)
    except Exception as err:  # noqa: BLE001 - the report still builds; it says why this part is missing
        return f"Reproducibility not assessed: {type(err).__name__}: {_text(err)}\n\n"
    state, pairs = analysis.machine(merged), analysis.repeated(merged)
    if state.empty and pairs.empty:
        return ""
    verdict = state.verdict.iloc[0] if len(state) else "No measurement recorded the machine's state."
    busy = "; ".join(
        f"{r.model} {r.phase} at batch {r.batch_size} in {notebook} ({r.machine_note})"
        for table, notebook in results.RATES.items()
        for r in reproducibility.measured_here(merged[table]).itertuples()
        if r.machine_state == "busy"
    )
    text = (
        f"**How quiet was the machine?** {_text(verdict + (f' Busy: {busy}.' if busy else ''))}\n\n"
        "**Do the numbers reproduce?** "
        f"{_text(reproducibility.agreement_sentence(pairs))} Every interval spans several fresh processes.\n\n"
    )
    if len(state) and (state.busy.iloc[0] > 0 or not pairs.empty and not pairs.agree.all()):
        return f"<div style='border:3px solid #c60;background:#fff4e5;padding:8px 12px'>\n\n{text}</div>\n\n"
    return text


REPORT, PARTIAL = "report.html", "report.partial.html"


def build_run_report(run_dir: Path, notebooks: list[Path], of: int | None = None) -> Path:
    """``run_dir/report.html`` over the executed ``notebooks``; with ``of`` (the run's number of notebooks) the
    partial report (:data:`PARTIAL`) of a run still going (report.html removes it), saying how far and when;
    run-folder values as text."""
    env = results.read_json(run_dir / paths.ENVIRONMENT) if (run_dir / paths.ENVIRONMENT).is_file() else {}
    prm = results.read_json(run_dir / paths.RESOLVED) if (run_dir / paths.RESOLVED).is_file() else {}
    from cnnbench.analysis import overview
    from cnnbench.measure.engine import now

    named = {**env, "name": run_dir.name, "params": Path(str(prm.get("params_file", "?"))).name}
    named["git_commit"] = str(env.get("git_commit", "?"))[:12]
    e = {k: _text(v) for k, v in named.items()}  # a run folder's text, shown as text
    params_rows = {k: v for k, v in prm.items() if k != "overrides"}
    # a key whose value in force the device changed (a CPU pins nothing)
    a = results.read(run_dir, "scenario_a")
    for k in [k for k in params_rows if k in a and a[k].notna().all() and a[k].astype(str).nunique() == 1]:
        if str(a[k].iloc[0]) != str(params_rows[k]):
            params_rows[k] = f"{params_rows[k]} (in force: {a[k].iloc[0]}, as every row of 02 records)"
    reason = results_runs.test_run_reason(run_dir)  # the combined report leaves smoke/test runs out
    others = f"this {_text(reason.split(' (')[0])} is left out of" if reason else "other runs are compared in"
    machine = (
        f"{e.get('device_name', '?')} ({e.get('device_kind', '?')}), {e.get('cpu_model', '?')}, "
        f"{e.get('cpu_physical_cores', '?')} physical cores, torch using {e.get('torch_threads', '?')} "
        f"thread{'' if env.get('torch_threads') == 1 else 's'}, host {e.get('host', '?')}"
    )
    going = ""
    if of is not None:
        going = (
            f"**Partial report: {len(notebooks)} of {of} notebooks done** when this page was written ({now()}): "
            f"{REPORT} replaces it when the run ends; where the run stopped instead, {paths.FAILED} in its "
            "folder says why.\n\n"
        )
    header = (
        f"# cnnbench report: {e['name']}\n\n{going}{complexity_warning(run_dir)}"
        f"{overview.summary_html(run_dir, machine, reproducibility_statement(run_dir))}"
        f"This report speaks of run **{e['name']}** only, measured on **{e.get('device_name', '?')}** "
        f"({e.get('device_kind', '?')}) on host {e.get('host', e.get('cpu_model', '?'))}, "
        f"{e.get('captured_at', '')}, with {e['params']}, workbook commit {e['git_commit']}"
        f"{' (with uncommitted changes)' if env.get('git_dirty') else ''}. Every number "
        f"below was measured or computed by the workbook's code on this machine; {others} the combined report, "
        f"outputs/{REPORT}.\n\n"
        f"<details><summary>Parameters (00 · Setup)</summary>\n\n{_table(params_rows)}\n\n</details>\n\n"
        f"<details><summary>Environment (00 · Setup: every item captured)</summary>\n\n"
        f"{_table({k: v for k, v in env.items() if k != 'params'})}\n\n</details>"
    )
    body = [nb for nb in notebooks if Path(nb).stem != SETUP]  # its environment and parameters: folded above
    out = run_dir / (REPORT if of is None else PARTIAL)
    build(body, out, f"cnnbench {run_dir.name}", header)
    if of is None:
        (run_dir / PARTIAL).unlink(missing_ok=True)
    return out


def combined_runs(outputs: Path) -> tuple[list[Path], dict[str, str]]:
    """The user runs a combined report merges, and the folders it leaves out with the reason (smoke/test,
    failed and broken runs, the combined analysis itself, runs of another results schema)."""
    excluded: dict[str, str] = {}
    dirs = results_runs.discover(outputs, [results_runs.ALL_RUNS], excluded)
    merged = results_runs.load(dirs, excluded, tables=())  # another schema, a broken environment: left out
    return [d for d in dirs if d.name in merged.runs], merged.excluded


def build_combined_report(outputs: Path, analysis_notebook: Path) -> tuple[Path, int]:
    """outputs/report.html from ``analysis_notebook`` (08 executed over every user run), headed by the runs it
    merges (host, how quiet, headline rates) and those 08's merge leaves out, with the reason."""
    from cnnbench import analysis
    from cnnbench.analysis import overview
    from cnnbench.measure import reproducibility

    dirs, excluded = combined_runs(outputs)
    merged = analysis.load(dirs, excluded, tables=reproducibility.TABLES)
    quiet = analysis.machine(merged).set_index("run_name").verdict
    rows = {
        name: f"{results_runs.machine_label(env.get('device_name'), env.get('host', env.get('cpu_model')))}. "
        + quiet.get(name, "No measurement recorded the machine's state.")
        for name, env in merged.environments.items()
    }
    runs = merged.runs
    left_out = {name: why for name, why in merged.excluded.items() if name != COMBINED}
    header = (
        f"# cnnbench: {len(runs)} runs compared\n\n## Summary\n\nThis report merges the {len(runs)} user runs "
        "below, each measured on the device and host named beside it, with how quiet its machine was; every run "
        f"keeps its own report in its folder.\n\n{_table(rows)}\n\n{overview.combined_rates(dirs)}"
        + (f"Left out:\n\n{_table(left_out)}" if left_out else "No run was left out.")
    )
    return build([analysis_notebook], outputs / REPORT, "cnnbench: runs compared", header), len(runs)
