#!/usr/bin/env python3
"""Issues 32's and 42's goals, recorded (not asserted): how wrong ``cnnbench predict`` is, out of sample (each
model's rows predicted from a fit on the other models' rows of its device kind, its range from the other models'
out-of-sample errors), per source of rows:

- this machine's 02 rows (by default the committed examples/example-cpu-2core), from its measured roofs (04):
  median absolute error <= 15%;
- an accelerator's 02 and 03 rows (by default the committed examples/example-cuda-h100 and -h200), device efficiencies
  fitted on other devices' rows where its own are host-bound, its host's cost measured by 04 or, where that run has
  none, from its other models' steps: <= 25%;
- the published rows where the device was the bound (verdict "device" in predictions.csv): <= 25%;
- each with at least 80% of its rows inside their own range.

    .venv/bin/python benchmarks/predict_error.py [--run outputs/<run> ...]

Measures nothing. Prints the goal figures, the accelerator's and the published device-bound rows with their
errors, and writes the whole predictions table to outputs/benchmarks/predict_error.csv.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pandas as pd

from cnnbench import analysis, paths, predict, results

GOALS = {
    "measured by 02 on a CPU, out of sample": 15.0,
    "measured by 02 and 03 on an accelerator, out of sample": 25.0,
    "published, device-bound": 25.0,
}
INSIDE_GOAL_PCT = 80.0
EXAMPLES = ("example-cpu-2core", "example-cuda-h100", "example-cuda-h200")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", nargs="+", default=[str(paths.repo_root() / "examples" / e) for e in EXAMPLES])
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "predict_error.csv"))
    args = ap.parse_args()
    t = predict.table(analysis.load([Path(r) for r in args.run]))
    goals = predict.goals(t).assign(
        goal_pct=lambda g: g.rows.map(GOALS),
        inside_goal_pct=INSIDE_GOAL_PCT,
        date=dt.date.today().isoformat(),
    )
    shown = ["source", "device", "model", "phase", "batch_size", "rate_img_s", "predicted_img_s", "low_img_s",
             "high_img_s", "error_pct", "verdict"]  # fmt: skip
    queued = t.device_kind.map(predict._queued).astype(bool)
    listed = (t.source.str.startswith("published") & (t.verdict == "device")) | (
        queued & t.source.str.endswith(")")
    )
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(t[listed][shown].round(1).to_string(index=False))
        print(goals.round(1).to_string(index=False))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results.atomic_write_text(out, t.to_csv(index=False))
    print(f"-> {out}")


if __name__ == "__main__":
    main()
