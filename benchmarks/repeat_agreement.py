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
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from cnnbench import devices, envinfo, params, paths, plots, results, scenarios
from cnnbench.analysis import compare
from cnnbench.measure import reproducibility, runner
from cnnbench.measure.engine import Protocol

CONFIGS = "mnist_cnn:train,mnist_cnn:eval,squeezenet1_1:train,squeezenet1_1:eval,resnet18:train,resnet18:eval"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/local.yaml", help="the protocol measured (default: make report's)")
    ap.add_argument("--configs", default=CONFIGS, help="model:phase,... at the params' batch size per model")
    ap.add_argument("--runs", type=int, default=2, help="independent runs, each of two passes")
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "repeat_agreement.csv"))
    ap.add_argument("--figure-only", action="store_true", help="only redraw the figure of the CSV's rows")
    args = ap.parse_args()
    if args.figure_only:
        print(f"wrote {figure(results.frame(results.read_rows(args.out)), Path(args.out).with_suffix('.png'))}")
        return
    p = params.load(paths.resolve(args.params), {})
    device = devices.resolve(p.device)
    threads = devices.set_threads(p.threads)
    protocol = Protocol.from_params(p)
    configs = [scenarios._config(p, m, ph, p.batch_size_for(m), p.variants[0])
               for m, ph in (c.split(":") for c in args.configs.split(","))]
    host = envinfo.host_fingerprint(envinfo.capture(device, p.to_dict()))
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    out = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            first, second = (runner.run_configs(configs, device, protocol, Path(tmp) / f"{name}.csv", source=name,
                                                isolate=p.isolate, desc=name) for name in ("first", "second"))
            first, second = list(first), list(second)
            wall = time.perf_counter() - t0
        fa, fb = results.frame(first), results.frame(second)
        fa["run_name"] = fb["run_name"] = f"run{run}"
        fa["status"], fb["status"] = fa.status.astype(str), fb.status.astype(str)
        pairs = reproducibility.repeated(fa, fb)
        for r, a, b in zip(pairs.to_dict("records"), fa.itertuples(), fb.itertuples(), strict=False):
            out.append({"timestamp": stamp, "host": host["host"], "device_name": devices.device_name(device),
                        "threads": threads, "params": args.params, "run": run, **r,
                        "ci95_first_pct": 100 * r["ci95_first_img_s"] / r["rate_first_img_s"],
                        "ci95_second_pct": 100 * r["ci95_second_img_s"] / r["rate_second_img_s"],
                        "processes_first": a.processes_measured, "processes_second": b.processes_measured,
                        "machine_first": a.machine_state, "machine_second": b.machine_state,
                        "host_heap": getattr(a, "host_heap", "system"),
                        "run_wall_s": wall})
        print(f"run {run}: {reproducibility.agreement_sentence(pairs)} ({wall:.0f} s)")
    rows = results.frame(out)
    agree = rows.agree.astype(str).str.lower().eq("true").mean()
    inside = rows.second_inside_first.astype(str).str.lower().eq("true").mean()
    widths = list(rows.ci95_first_pct) + list(rows.ci95_second_pct)
    narrow = sum(1 for w in widths if w <= 10) / len(widths)
    print(f"{agree:.0%} of {len(rows)} repeated measurements agree within the 95% interval of their difference "
          f"(goal >= 90%); {inside:.0%} fall inside the first's own interval; {narrow:.0%} of {len(widths)} "
          f"intervals are within +-10% (goal >= 80%)")
    old = results.read_rows(args.out)
    results.write_rows(args.out, [*old, *out])
    drawn = figure(results.frame([*old, *out]), Path(args.out).with_suffix(".png"))
    print(f"appended {len(out)} rows to {args.out}; figure {drawn}")


def figure(rows, path: Path) -> Path:
    """Left: every pair's difference (% of the first rate) with the 95% interval of the difference; right: every
    interval's half-width in % of its rate, against the +-10% goal. One colour per session (timestamp)."""
    rows = rows.assign(config=rows.model + " " + rows.phase, agree=rows.agree.astype(str).str.lower().eq("true"),
                       host_heap=compare.system_heap_before_setting(rows.get("host_heap", pd.Series("", rows.index))))
    configs = list(dict.fromkeys(rows.config))
    sessions = list(dict.fromkeys(rows.timestamp))
    fig, (left, right) = plots.subplots(1, 2, figsize=(11, 0.45 * len(configs) + 2.2), sharey=True)
    n = len(rows.groupby(["timestamp", "run"]))
    for i, ((stamp, run), g) in enumerate(rows.groupby(["timestamp", "run"], sort=False)):
        y = [configs.index(c) + (i + 0.5) / n - 0.5 for c in g.config]
        colour = f"C{sessions.index(stamp)}"
        state = "busy" if g.machine_first.astype(str).eq("busy").any() else "quiet"
        label = f"{stamp[:16]} UTC ({state}, heap {g.host_heap.iloc[0]})" if int(run) == 0 else None
        left.errorbar(g.difference_pct.astype(float), y, xerr=g.difference_ci95_pct.astype(float), fmt="o",
                      color=colour, ms=4, capsize=2, label=label)
        right.plot(g.ci95_first_pct.astype(float), y, "o", color=colour, ms=4)
        right.plot(g.ci95_second_pct.astype(float), y, "s", color=colour, ms=4, mfc="none")
    left.axvline(0, color="k", lw=0.8)
    right.axvline(10, color="k", lw=0.8, ls="--")
    left.set_yticks(range(len(configs)), configs)
    left.invert_yaxis()
    left.set_xlabel("second - first, % of first\n(bar: 95% interval of the difference)")
    right.set_xlabel("95% interval half-width, % of rate\n(filled: first, open: second; goal <= 10%)")
    agree = rows.agree.mean()
    widths = pd.concat([rows.ci95_first_pct, rows.ci95_second_pct]).astype(float)
    fig.suptitle(f"Repeat agreement: {agree:.0%} of {len(rows)} pairs agree (goal >= 90%), "
                 f"{(widths <= 10).mean():.0%} of {len(widths)} intervals within +-10% (goal >= 80%)")
    fig.legend(loc="lower center", ncol=3, bbox_to_anchor=(0.5, -0.16), title="session (machine state, host heap)")
    plots.save(fig, path)
    return path


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
