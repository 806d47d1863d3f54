#!/usr/bin/env python3
"""Issue 32's goals, recorded (not asserted): how wrong ``cnnbench predict`` is, out of sample (each model's rows
predicted from a fit on the other models' rows of its device kind).

- this machine's 02 rows (a run of it, by default the committed examples/example-cpu-2core), from its measured
  roofs (04): median absolute error <= 15%;
- the published rows where the device was the bound (verdict "device" in predictions.csv): <= 25%.

    .venv/bin/python benchmarks/predict_error.py [--run outputs/<run>]

Measures nothing. Prints both figures with the rows each covers, every published device-bound row with its
error, and writes the whole predictions table to outputs/benchmarks/predict_error.csv.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pandas as pd

from cnnbench import analysis, paths, predict, results

GOALS = {"measured by 02, out of sample": 15.0, "published, device-bound": 25.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default=str(paths.repo_root() / "examples" / "example-cpu-2core"))
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "predict_error.csv"))
    args = ap.parse_args()
    t = predict.table(analysis.load([Path(args.run)]))
    goals = predict.goals(t).assign(goal_pct=lambda g: g.rows.map(GOALS), date=dt.date.today().isoformat())
    shown = ["source", "device", "model", "phase", "batch_size", "rate_img_s", "predicted_img_s", "error_pct"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(
            t[t.source.str.startswith("published") & (t.verdict == "device")][shown]
            .round(1)
            .to_string(index=False)
        )
        print(goals.round(1).to_string(index=False))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results.atomic_write_text(out, t.to_csv(index=False))
    print(f"-> {out}")


if __name__ == "__main__":
    main()
