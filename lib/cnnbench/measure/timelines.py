"""06's telemetry timelines: :meth:`cnnbench.measure.telemetry.Sampler.series` kept tidy and plotted over time."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from cnnbench import plots, results

FILE = "transfer_telemetry.csv"


def tidy(samples: list[dict], experiment: str, configuration: str, device_kind: str, device_name="", rank=0):
    """One row per sample, with what was running (experiment, configuration, rank) and on which device."""
    where = dict(experiment=experiment, configuration=configuration, rank=rank, device_kind=device_kind)
    where["device_name"] = device_name
    return [
        {**where, "t_s": float(s["t_s"]), "metric": s["metric"], "value": float(s["value"])}
        | {"device_index": "" if s.get("device_index") is None else s["device_index"]}
        for s in samples
    ]


def record(path: str | Path, rows: list[dict]) -> None:
    """Add ``rows`` to the telemetry CSV at ``path`` in one atomic write."""
    if rows:
        results.ResultsFile(path, results.table("transfer_telemetry").key).extend(rows)


def end_to_end(df: pd.DataFrame, gap_s: float = 0.5) -> pd.DataFrame:
    """``t_run_s``: each configuration's ``t_s`` shifted to start ``gap_s`` after the previous one ended."""
    offsets, start = {}, 0.0
    for conf, g in df.groupby("configuration", sort=False):
        offsets[conf] = start
        start += float(g.t_s.max()) + gap_s
    return df.assign(t_run_s=df.t_s + df.configuration.map(offsets))


LINE_STYLES = ("-", "--", ":", "-.")  # rank 0 (index 0, index 1+), a later rank (index 0, index 1+)


def plot(df: pd.DataFrame, path: str | Path | None = None, title: str = ""):
    """One panel per metric over time, configurations end to end, a line per configuration, rank and device index."""
    if df.empty:
        print("no telemetry series recorded (the sampler keeps none in this version)")
        return None
    df = end_to_end(df)
    metrics = list(dict.fromkeys(df.metric))
    fig, axes = plt.subplots(len(metrics), 1, figsize=(11, 2.2 * len(metrics)), sharex=True, squeeze=False)
    colours = {c: f"C{i % 10}" for i, c in enumerate(dict.fromkeys(df.configuration))}
    # rank 0 solid, its device index 1+ dashed; a later rank dotted (dash-dot): world=2's two ranks told apart
    later_rank = pd.to_numeric(df["rank"], errors="coerce").fillna(0) > 0
    later_index = pd.to_numeric(df.device_index, errors="coerce").fillna(0) > 0
    # one legend entry per colour and line style; a host-wide metric shares its first device's
    df = df.assign(
        style=(2 * later_rank + later_index).map(dict(enumerate(LINE_STYLES))),
        colour=df.configuration.map(colours),
        legend=[
            c + (f" rank {int(float(r))}" if lr else "") + (", core or GPU 1+" if li else "")
            for c, r, lr, li in zip(df.configuration, df["rank"], later_rank, later_index, strict=True)
        ],
    )
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        g = df[df.metric == metric]
        for _, line in g.groupby(["configuration", "rank", "device_index"], dropna=False, sort=False):
            first = line.iloc[0]
            ax.plot(line.t_run_s, line.value, lw=1, color=first.colour, label=first.legend, ls=first["style"])
        ax.set_ylabel(plots.axis_label(metric, wrap=True), fontsize=8)
    axes[-1, 0].set_xlabel("time, configurations end to end (s)")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))  # the title's 0.4 inch over no panel
    legend = {}  # one legend below the panels, never over data: every line of every panel, once
    for ax in axes[:, 0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    handles, labels = list(legend.values()), list(legend)
    if len(labels) <= 24:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=7)
    return plots.save(fig, path, dpi=110)


def read(run) -> pd.DataFrame:
    """The series sampled during 06's fine-tuning and scaling (transfer_telemetry.csv; empty if none were kept)."""
    return results.read(run.dir, "transfer_telemetry")


def plot_experiment(df: pd.DataFrame, experiment: str, path=None):
    """The series of one experiment (transfer | scaling) over time, one panel per metric."""
    return plot(df[df.experiment == experiment], path, title=f"telemetry during {experiment}")
