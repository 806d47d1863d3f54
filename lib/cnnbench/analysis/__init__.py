"""08's one entry point: the merged runs (:mod:`cnnbench.results.runs`), comparisons (:mod:`.compare`),
findings, the seeds beside ours (:mod:`.seeds`), 07's searches and 08's figures; no layer below imports it."""
# ruff: noqa: F401 (every name imported is re-exported for 08)

from __future__ import annotations

import pandas as pd

from cnnbench import params, predict, published
from cnnbench.analysis.compare import (
    machine,
    match_keys,
    ratio_table,
    ratios,
    repeated,
    speedup_matrix,
    speedups,
    summary,
    unmatched,
)
from cnnbench.analysis.findings import findings_markdown, findings_table, placed_points, write_tables
from cnnbench.analysis.seeds import beside
from cnnbench.interactive import explorer
from cnnbench.plots import batch_sweep, per_model_rooflines, throughput
from cnnbench.results.runs import ALL_RUNS, Merged, discover, load, machine_label, runs_for, zip_run
from cnnbench.tables import readable_display, show, utilisation


def runs_table(m: Merged) -> pd.DataFrame:
    """Which runs, from which hosts, this analysis merges (and which it left out, with the reason)."""
    said = "device_kind device_name host host_id threads torch captured_at".split()  # threads: torch_threads
    rows = [
        {"run_name": r, "merged": "yes", **{k: e.get("torch_threads" if k == "threads" else k) for k in said}}
        for r, e in m.environments.items()
    ]
    rows += [{"run_name": r, "merged": f"no: {why}"} for r, why in m.excluded.items()]
    return pd.DataFrame(rows)


def merged_statement(m: Merged) -> str:
    """One sentence: how many runs, which, from how many hosts."""
    if not m.runs:
        return "This analysis merges no run."
    hosts = {e.get("host_id") for e in m.environments.values()}
    names = ", ".join(
        f"{r} ({machine_label(e.get('device_name'), e.get('host'))})" for r, e in m.environments.items()
    )
    return f"This analysis merges {len(m.runs)} run(s) from {len(hosts)} host(s): {names}."


def best_configurations(tuned: pd.DataFrame) -> pd.DataFrame:
    """07's best confirmed configuration per run, model and phase, against the seeds' default (empty: no search)."""
    if tuned.empty:
        return pd.DataFrame()
    from cnnbench import tuning

    best = {run: tuning.best(g) for run, g in tuned.groupby("run_name")}
    return pd.concat(best, names=["run_name"]).reset_index()


def tuning_findings_markdown(m: Merged):
    """07's computed sentences (best configuration, speedup with interval, roofline, energy), per run, each with
    what the run's 02 or 03 measured faster (:func:`.tuning.faster_measured`)."""
    from IPython.display import Markdown

    from cnnbench import tuning

    lines = []
    for run, g in m["tuning"].groupby("run_name"):
        lines += [
            f"- {run}: {line}"
            for line in tuning.findings(g, lambda name, run=run: m[name][m[name].run_name == run])
        ]
    return Markdown("\n".join(lines) or f"_No run searched configurations ({params.NUMBERED['07']})._")
