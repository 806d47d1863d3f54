"""07's configuration searches across runs: the best configuration per run, model and phase, and 07's findings."""

from __future__ import annotations

import pandas as pd


def best_configurations(tuned: pd.DataFrame) -> pd.DataFrame:
    """07's best confirmed configuration per run, model and phase, against the seeds' default (empty: no search)."""
    if tuned.empty or "row_kind" not in tuned:
        return pd.DataFrame()
    from cnnbench import tuning

    best = {run: tuning.best(g) for run, g in tuned.groupby("run_name")}
    return pd.concat(best, names=["run_name"]).reset_index()


def tuning_findings_markdown(tuned: pd.DataFrame):
    """07's computed sentences (best configuration, speedup with interval, roofline, energy), per run."""
    from IPython.display import Markdown

    from cnnbench import tuning

    if tuned.empty or "row_kind" not in tuned:
        return Markdown("_No run searched configurations (07_tuning)._")
    return Markdown(
        "\n".join(f"- {run}: {line}" for run, g in tuned.groupby("run_name") for line in tuning.findings(g))
    )
