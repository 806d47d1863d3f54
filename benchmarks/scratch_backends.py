#!/usr/bin/env python3
"""Issue 10's speed goals for the from-scratch backends, recorded (never asserted): on the MNIST CNN at batch 512
with full backprop, numba_cpu >= 0.5x and numpy >= 0.2x torch_cpu's training throughput; on seed 004's MLP
(full batch of 59,000 images), the numpy step within 1.5x of torch_cpu's. Backends run from the same weights
on the same learnable synthetic batches, in windows interleaved round by round so drift hits all alike;
each window is timed between two device synchronisations. Appends one row per model and backend to the CSV.

    .venv/bin/python benchmarks/scratch_backends.py --rounds 5 --steps 10
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
import time

import pandas as pd

from cnnbench import devices, paths, results
from cnnbench.measure.timing import t95
from cnnbench.scratch import BackendUnavailable, experiment, make, torch_weights
from cnnbench.scratch.summary import speed_goals


def window(b, x, y, steps: int) -> float:
    b.sync()
    start = time.perf_counter()
    for _ in range(steps):
        b.train_step(x, y)
    b.sync()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default="numpy,numba_cpu,torch_cpu,cupy,numba_cuda,torch_cuda,torch_mps")
    ap.add_argument("--batch-size", type=int, default=512, help="CNN batch (seed 001: 512)")
    ap.add_argument("--mlp-images", type=int, default=59000, help="MLP full batch (seed 004: 59,000)")
    ap.add_argument("--steps", type=int, default=10, help="CNN steps per window (MLP: steps // 2)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved windows per backend")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0 = physical cores)")
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "scratch_backends.csv"))
    args = ap.parse_args()

    threads = devices.set_threads(args.threads)
    experiment.set_threads(threads)
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    out = results.ResultsFile(args.out, ("timestamp", "model", "backend"))
    for model, n, steps in [
        ("mnist_cnn", args.batch_size, args.steps),
        ("mlp", args.mlp_images, max(1, args.steps // 2)),
    ]:
        data = experiment.synthetic_mnist(n, 1, seed=0)
        if model == "mlp":
            data = experiment.unit_scale(data)
        weights = torch_weights(model, seed=0)
        lr, momentum = (0.01, 0.9) if model == "mnist_cnn" else (0.1, 0.0)
        live, rows = {}, {}
        for name in args.backends.split(","):
            ident = {
                "timestamp": stamp,
                **experiment.identity(name, model, threads),
                "batch_size": n,
                "steps_per_window": steps,
                "rounds": args.rounds,
            }
            try:
                b = make(name, model, lr, momentum)
                b.init(weights)
                window(b, data.x_train, data.y_train, 2)  # warm-up: first calls, allocator, caches
                live[name] = (b, [])
                rows[name] = {**ident, "jit_s": getattr(b, "jit_s", float("nan")), "status": "ok"}
            except Exception as err:  # noqa: BLE001 - recorded as a row
                rows[name] = {**ident, **experiment.failure(ident, err)}
                status = "unavailable" if isinstance(err, BackendUnavailable) else "error"
                print(f"{model} {name}: {status} ({err})")
        for _ in range(args.rounds):
            for b, times in live.values():
                times.append(window(b, data.x_train, data.y_train, steps))
        for name, (_, times) in live.items():
            per = [n * steps / t for t in times]
            half = (
                t95(len(per) - 1) * statistics.stdev(per) / math.sqrt(len(per))
                if len(per) > 1
                else float("nan")
            )
            rows[name].update(
                throughput_img_s=n * steps * len(times) / sum(times),
                throughput_ci95_img_s=half,
                step_s=sum(times) / (steps * len(times)),
            )
        ok = pd.DataFrame([r for r in rows.values() if r["status"] == "ok"])
        goals = (
            speed_goals(ok) if len(ok) else pd.DataFrame(columns=["backend"])
        )  # 05's verdict, interval and all
        for name, row in rows.items():
            for g in goals[goals.backend == name].to_dict("records"):
                goal = float(g["goal"].split()[-1])
                row.update(versus=g["versus"], goal_measure=g["measure"], goal=goal, ratio=g["ratio"])
                row.update(
                    ratio_ci95_low=g["ratio_ci95_low"],
                    ratio_ci95_high=g["ratio_ci95_high"],
                    goal_met=g["met"],
                )
            out.append(row)
            if row["status"] == "ok":
                extra = (
                    f", {row['goal_measure']} ratio {row['ratio']:.2f} [{row['ratio_ci95_low']:.2f}, "
                    f"{row['ratio_ci95_high']:.2f}] (goal {row['goal']}: {row['goal_met']})"
                    if "ratio" in row
                    else ""
                )
                print(
                    f"{model} {name}: {row['throughput_img_s']:.0f} img/s, step {row['step_s'] * 1e3:.1f} ms{extra}"
                )


if __name__ == "__main__":
    main()
