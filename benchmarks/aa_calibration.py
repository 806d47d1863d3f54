#!/usr/bin/env python3
"""How often an A/A ratio's interval holds 1.0: the calibration a reader needs before trusting an A/B ratio.

Each run measures two identical variants of each configuration (``variants: [{}, {}]``: the second is its copy,
``replica`` 1) in the pipeline's protocol (a params file's: fresh processes, rounds in a shuffled order), then
divides them as the report does (:func:`cnnbench.analysis.compare.ratios`): the ratio's interval paired over the
rounds both copies were measured in, and beside it the interval of the two rates' difference (unpaired). Nothing
differs between the copies, so an honest 95% interval holds 1.0 about 95% of the time.

It also records whether a rate divided by the CPU's own speed in its round (the probe the runner takes before each
round) repeats better than the raw rate: the coefficient of variation over the rounds of each, per configuration.

    .venv/bin/python benchmarks/aa_calibration.py --runs 4
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from cnnbench import devices, envinfo, params, paths, results
from cnnbench.analysis import compare
from cnnbench.measure import engine, reproducibility, runner
from cnnbench.results.runs import Merged

CONFIGS = "mnist_cnn:train,squeezenet1_1:eval,resnet18:train"


def cv_pct(values: list[float]) -> float:
    return 100 * statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else float("nan")


def round_rates(windows: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """Per round (process) of one configuration: its rate and the probe taken before that round."""
    mine = windows[
        (windows.model == cfg["model"])
        & (windows.phase == cfg["phase"])
        & (windows.replica.astype(int) == int(cfg["replica"]))
    ]
    return mine.groupby("process").apply(
        lambda g: pd.Series({"rate": g.images.sum() / g.window_time_s.sum(), "probe": g.probe_img_s.mean()}),
        include_groups=False,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--params", default="params/local.yaml", help="the protocol measured (default: make report's)"
    )
    ap.add_argument("--configs", default=CONFIGS, help="model:phase,... at the params' batch size per model")
    ap.add_argument("--runs", type=int, default=2, help="independent A/A runs")
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "aa_calibration.csv"))
    args = ap.parse_args()
    p = params.load(paths.resolve(args.params), {"variants": [{}, {}]})
    device = devices.resolve(p.device)
    threads = devices.set_threads(p.threads)
    configs = [
        engine.config(p, m, ph, v, threads=threads)
        for m, ph in (c.split(":") for c in args.configs.split(","))
        for v in p.variants
    ]
    host = envinfo.host_fingerprint(envinfo.capture(device, p.to_dict()))
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    out = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            rows = runner.run_configs(
                configs, device, p, Path(tmp) / "aa.csv", isolate=p.isolate, desc=f"A/A {run}"
            )
            windows = results.frame(results.read_rows(Path(tmp) / "aa_windows.csv"))
            wall = time.perf_counter() - t0
        df = results.frame(rows).assign(run_name=f"run{run}", host_id="h", host=host["host"])
        ratios = compare.ratios(Merged([f"run{run}"], {f"run{run}": {"torch": ""}}, {"scenario_a": df}))
        for r in ratios.itertuples():
            a, b = (
                df[(df.model == r.model) & (df.phase == r.phase) & (df.replica == k)].iloc[0] for k in (0, 1)
            )
            _, ulow, uhigh = reproducibility.ratio(
                a.throughput_img_s, a.throughput_ci95_img_s, b.throughput_img_s, b.throughput_ci95_img_s
            )
            rounds = [
                round_rates(windows, {"model": r.model, "phase": r.phase, "replica": k}) for k in (0, 1)
            ]
            raw = [v for g in rounds for v in g.rate]
            per_probe = [v for g in rounds for v in (g.rate / g.probe) if v == v]
            out.append(
                {
                    "timestamp": stamp,
                    "host": host["host"],
                    "device_name": devices.device_name(device),
                    "threads": threads,
                    "params": args.params,
                    "run": run,
                    "model": r.model,
                    "phase": r.phase,
                    "ratio": r.ratio_b_over_a,
                    "paired_low": r.ratio_ci95_low,
                    "paired_high": r.ratio_ci95_high,
                    "paired_holds_1": bool(r.ratio_ci95_low <= 1 <= r.ratio_ci95_high),
                    "interval": r.interval,
                    "unpaired_low": ulow,
                    "unpaired_high": uhigh,
                    "unpaired_holds_1": bool(ulow <= 1 <= uhigh),
                    "rounds": len(rounds[0]),
                    "cv_raw_pct": cv_pct(raw),
                    "cv_per_probe_pct": cv_pct(per_probe),
                    "machine_a": a.machine_state,
                    "machine_b": b.machine_state,
                    "run_wall_s": wall,
                }
            )
    results.ResultsFile(args.out, ("timestamp", "run", "model", "phase")).extend(out)
    every = results.frame(results.read_rows(args.out))
    print(summary(every))


def summary(df: pd.DataFrame) -> str:
    """The calibration over every row of the CSV, in three lines."""
    n = len(df)
    paired = int(df.paired_holds_1.astype(str).str.lower().eq("true").sum())
    unpaired = int(df.unpaired_holds_1.astype(str).str.lower().eq("true").sum())
    raw, probe = df.cv_raw_pct.astype(float).median(), df.cv_per_probe_pct.astype(float).median()
    return (
        f"A/A ratios whose 95% interval holds 1.0: {paired} of {n} paired over rounds ({100 * paired / n:.0f}%), "
        f"{unpaired} of {n} from the two rates' intervals ({100 * unpaired / n:.0f}%)\n"
        f"median spread of a configuration's per-round rates: {raw:.1f}% raw, {probe:.1f}% divided by the "
        f"probe of its round: the probe-normalised rate repeats {'better' if probe < raw else 'no better'}"
    )


if __name__ == "__main__":
    main()
