#!/usr/bin/env python3
"""Issue 17's goal, recorded (never asserted): do the default protocol's intervals cover a second measurement?

Each run measures the same configurations twice, in two independent passes of :func:`cnnbench.measure.runner.run_configs`
(the pipeline's protocol from a params file: several fresh processes per configuration, interleaved rounds,
adaptive stopping), one pass after the other, as 02 and 03 of one pipeline run do. Per configuration it records
both rates and intervals, whether their difference lies inside the 95% interval of the difference (``agree``),
whether the second rate lies inside the first's own interval, and each interval's width in % of its rate. The
goal: at least 90% of the repeated measurements agree, while at least 80% of the intervals are within +-10%.
Appends one row per configuration and run to the CSV, prints the two fractions, and draws every row of the CSV
(each session of runs its own colour) into a PNG beside it: each pair's difference with the 95% interval of the
difference (a pair agrees where its bar crosses zero), and each interval's width against the +-10% goal.

    .venv/bin/python benchmarks/repeat_agreement.py --runs 2
    .venv/bin/python benchmarks/repeat_agreement.py --figure-only --out examples/benchmarks/repeat_agreement.csv

It also prints, over every row of the CSV, how many pairs agree where the CPU's own speed (the probe the runner
takes before each round) moved less than 5% between the two passes, and how many where it moved more.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from cnnbench import devices, envinfo, params, paths, plots, results
from cnnbench.analysis import compare
from cnnbench.measure import engine, reproducibility, runner
from cnnbench.results.runs import Merged

CONFIGS = "mnist_cnn:train,mnist_cnn:eval,squeezenet1_1:train,squeezenet1_1:eval,resnet18:train,resnet18:eval"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--params", default="params/local.yaml", help="the protocol measured (default: make report's)"
    )
    ap.add_argument("--configs", default=CONFIGS, help="model:phase,... at the params' batch size per model")
    ap.add_argument("--runs", type=int, default=2, help="independent runs, each of two passes")
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "repeat_agreement.csv"))
    ap.add_argument("--figure-only", action="store_true", help="only redraw the figure of the CSV's rows")
    args = ap.parse_args()
    if args.figure_only:
        every = results.frame(results.read_rows(args.out))
        print(f"{by_probe(every)}; wrote {figure(every, Path(args.out).with_suffix('.png'))}")
        return
    p = params.load(paths.resolve(args.params), {})
    device = devices.resolve(p.device)
    threads = devices.set_threads(p.threads)
    protocol = p
    configs = [
        engine.config(p, m, ph, p.variants[0], threads=threads)
        for m, ph in (c.split(":") for c in args.configs.split(","))
    ]
    host = envinfo.host_fingerprint(envinfo.capture(device, p.to_dict()))
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    out = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            first, second = (
                runner.run_configs(
                    configs,
                    device,
                    protocol,
                    Path(tmp) / f"{name}.csv",
                    source=name,
                    isolate=p.isolate,
                    desc=name,
                )
                for name in ("first", "second")
            )
            first, second = list(first), list(second)
            wall = time.perf_counter() - t0
        fa, fb = results.frame(first), results.frame(second)
        fa["run_name"] = fb["run_name"] = f"run{run}"
        fa["status"], fb["status"] = fa.status.astype(str), fb.status.astype(str)
        tables = Merged([f"run{run}"], {}, {"scenario_a": fa, "batch_sweep": fb})
        pairs = reproducibility.repeated(tables).assign(first="first pass", second="second pass")
        for r, a, b in zip(pairs.to_dict("records"), fa.itertuples(), fb.itertuples(), strict=False):
            out.append(
                {
                    "timestamp": stamp,
                    "host": host["host"],
                    "device_name": devices.device_name(device),
                    "threads": threads,
                    "params": args.params,
                    "run": run,
                    **r,
                    "ci95_first_pct": 100 * r["ci95_first_img_s"] / r["rate_first_img_s"],
                    "ci95_second_pct": 100 * r["ci95_second_img_s"] / r["rate_second_img_s"],
                    "processes_first": a.processes_measured,
                    "processes_second": b.processes_measured,
                    "machine_first": a.machine_state,
                    "machine_second": b.machine_state,
                    "host_heap": getattr(a, "host_heap", "system"),
                    "run_wall_s": wall,
                }
            )
        print(f"run {run}: {reproducibility.agreement_sentence(pairs)} ({wall:.0f} s)")
    rows = results.frame(out)
    agree = rows.agree.astype(str).str.lower().eq("true").mean()
    inside = rows.second_inside_first.astype(str).str.lower().eq("true").mean()
    widths = list(rows.ci95_first_pct) + list(rows.ci95_second_pct)
    narrow = sum(1 for w in widths if w <= 10) / len(widths)
    print(
        f"{agree:.0%} of {len(rows)} repeated measurements agree within the 95% interval of their difference "
        f"(goal >= 90%); {inside:.0%} fall inside the first's own interval; {narrow:.0%} of {len(widths)} "
        f"intervals are within +-10% (goal >= 80%)"
    )
    old = results.read_rows(args.out)
    results.write_rows(args.out, [*old, *out])
    every = results.frame([*old, *out])
    print(f"all {len(every)} rows of {args.out}: {by_probe(every)}")
    drawn = figure(every, Path(args.out).with_suffix(".png"))
    print(f"appended {len(out)} rows to {args.out}; figure {drawn}")


STILL_PCT = (
    5.0  # the CPU's own speed (the probe before each round) moved less than this between the two passes
)


def by_probe(rows) -> str:
    """How many pairs agree where the machine's own speed held still between the two passes, and where it moved:
    which disagreements the VM's speed explains."""
    moved = pd.to_numeric(rows.probe_change_pct, errors="coerce").abs()
    agree = rows.agree.astype(str).str.lower().eq("true")
    still, gone = moved < STILL_PCT, moved >= STILL_PCT
    return (
        f"where the probe moved less than {STILL_PCT:.0f}% between the passes, {int(agree[still].sum())} of "
        f"{int(still.sum())} pairs agree; where it moved more, {int(agree[gone].sum())} of {int(gone.sum())}"
    )


def figure(rows, path: Path) -> Path:
    """Left: every pair's difference (% of the first rate) with the 95% interval of the difference; right: every
    interval's half-width in % of its rate, against the +-10% goal. One colour per session (timestamp)."""
    rows = rows.assign(
        config=rows.model + " " + rows.phase,
        agree=rows.agree.astype(str).str.lower().eq("true"),
        host_heap=compare.system_heap_before_setting(rows.get("host_heap", pd.Series("", rows.index))),
    )
    configs = list(dict.fromkeys(rows.config))
    sessions = list(dict.fromkeys(rows.timestamp))
    fig, axes = plots.subplots(1, 3, figsize=(16, 0.45 * len(configs) + 2.2), width_ratios=(1, 1, 1.1))
    left, right, probe = axes
    right.sharey(left)
    n = len(rows.groupby(["timestamp", "run"]))
    for i, ((stamp, run), g) in enumerate(rows.groupby(["timestamp", "run"], sort=False)):
        y = [configs.index(c) + (i + 0.5) / n - 0.5 for c in g.config]
        colour = f"C{sessions.index(stamp)}"
        session = rows[rows.timestamp == stamp]
        busy = (
            session.groupby("run")[["machine_first", "machine_second"]]
            .agg(lambda s: s.astype(str).eq("busy").any())
            .any(axis=1)
        )
        label = (
            f"{stamp[:16]} UTC ({int(busy.sum())} of {len(busy)} runs busy, heap {g.host_heap.iloc[0]})"
            if int(run) == 0
            else None
        )
        left.errorbar(
            g.difference_pct.astype(float),
            y,
            xerr=g.difference_ci95_pct.astype(float),
            fmt="o",
            color=colour,
            ms=4,
            capsize=2,
            label=label,
        )
        right.plot(g.ci95_first_pct.astype(float), y, "o", color=colour, ms=4)
        right.plot(g.ci95_second_pct.astype(float), y, "s", color=colour, ms=4, mfc="none")
        for agreed, marker in ((True, "o"), (False, "x")):
            h = g[g.agree == agreed]
            probe.plot(
                h.probe_change_pct.astype(float),
                h.difference_pct.astype(float),
                marker,
                color=colour,
                ms=5,
                ls="none",
            )
    left.axvline(0, color="k", lw=0.8)
    right.axvline(10, color="k", lw=0.8, ls="--")
    left.set_yticks(range(len(configs)), configs)
    left.invert_yaxis()
    left.set_xlabel("second - first, % of first\n(bar: 95% interval of the difference)")
    right.set_xlabel("95% interval half-width, % of rate\n(filled: first, open: second; goal <= 10%)")
    right.tick_params(labelleft=False)
    for edge in (-STILL_PCT, STILL_PCT):
        probe.axvline(edge, color="grey", lw=0.8, ls=":")
    probe.axhline(0, color="k", lw=0.8)
    probe.set_xlabel(f"CPU's own speed (probe): change between the passes, %\n(dotted: +-{STILL_PCT:.0f}%)")
    probe.set_ylabel("second - first, % of first (o: agree, x: not)")
    moved = pd.to_numeric(rows.probe_change_pct, errors="coerce").abs() >= STILL_PCT
    probe.set_title(
        f"probe within +-{STILL_PCT:.0f}%: {rows.agree[~moved].sum()} of {(~moved).sum()} agree; "
        f"beyond: {rows.agree[moved].sum()} of {moved.sum()}",
        fontsize=10,
    )
    agree = rows.agree.mean()
    widths = pd.concat([rows.ci95_first_pct, rows.ci95_second_pct]).astype(float)
    fig.suptitle(
        y=1.04,
        t=f"Repeat agreement: {agree:.0%} of {len(rows)} pairs agree (goal >= 90%), "
        f"{(widths <= 10).mean():.0%} of {len(widths)} intervals within +-10% (goal >= 80%)",
    )
    fig.legend(
        loc="upper center",
        ncol=2,
        bbox_to_anchor=(0.5, -0.12),
        title="session (runs with a pass judged busy, host heap)",
    )
    plots.save(fig, path)
    return path


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
