"""Telemetry timelines of the transfer runs: the sampled series kept, tidy, and plotted over time.

Relies on one API of :class:`cnnbench.telemetry.Sampler`: ``with Sampler(device, interval_s) as s: ...`` then
``s.series()`` -> a list of dicts with ``t_s``, ``metric``, ``value``, ``device_index``. A sampler without
``series()`` yields no rows (the plot says so) rather than failing the run.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from cnnbench.results import ResultsFile

KEY = ("experiment", "configuration", "rank", "metric", "device_index", "t_s")
FILE = "transfer_telemetry.csv"


def series(sampler) -> list[dict]:
    """The sampled series of ``sampler`` (empty when the sampler keeps none)."""
    get = getattr(sampler, "series", None)
    return [dict(s) for s in get()] if callable(get) else []


def tidy(samples: list[dict], experiment: str, configuration: str, device_kind: str, rank: int = 0) -> list[dict]:
    """One row per sample, with what was running (experiment, configuration, rank) and the device kind."""
    return [{"experiment": experiment, "configuration": configuration, "rank": rank, "device_kind": device_kind,
             "t_s": float(s["t_s"]), "metric": s["metric"], "value": float(s["value"]),
             "device_index": "" if s.get("device_index") is None else s["device_index"]} for s in samples]


def record(path: str | Path, rows: list[dict]) -> None:
    """Add ``rows`` to the telemetry CSV at ``path`` in one atomic write."""
    if rows:
        ResultsFile(path, KEY).extend(rows)


def plot(df: pd.DataFrame, path: str | Path | None = None, title: str = ""):
    """Every metric against time, one panel per metric, one line per configuration and device index: an idle
    second GPU is a flat line beside the busy one."""
    if df is None or df.empty:
        print("no telemetry series recorded (the sampler keeps none in this version)")
        return None
    metrics = list(dict.fromkeys(df.metric))
    fig, axes = plt.subplots(len(metrics), 1, figsize=(10, 2.2 * len(metrics)), sharex=True, squeeze=False)
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        g = df[df.metric == metric]
        for (conf, rank, idx), line in g.groupby(["configuration", "rank", "device_index"], dropna=False):
            label = f"{conf} rank {rank}" + (f" dev {idx}" if str(idx) not in ("", "nan", "None") else "")
            ax.plot(line.t_s, line.value, lw=1, label=label)
        ax.set_ylabel(metric, fontsize=8)
    axes[-1, 0].set_xlabel("time since the sampler started (s)")
    if len(axes[0, 0].get_lines()) <= 12:
        axes[0, 0].legend(fontsize=7, ncol=2)
    fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    return fig
