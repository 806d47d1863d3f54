#!/usr/bin/env python3
"""How much does the engine's measurement cost? Its train and eval throughput against a bare loop of the same
steps on the same data, interleaved round by round so drift hits both alike. Prints the ratio per phase and
appends the figures to a CSV; the goal is an overhead under 2%. A benchmark that records, not a test.

It also records one full measurement of the same configuration in a fresh worker process (the pipeline's
default, ``isolate: true``): its windows run the same code, and the worker's start-up stays outside them, so
``isolated_over_bare`` should be as close to 1 as ``engine_over_bare``; ``worker_wall_s`` is what the isolation
costs in wall time (start-up, model build, warm-up and windows).

    .venv/bin/python benchmarks/engine_overhead.py --model resnet18 --batch-size 32 --rounds 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time

import torch
from torch import nn

from cnnbench import devices, models, paths, results
from cnnbench.measure import engine, telemetry, timing, worker
from cnnbench.params import Params


def bare_window(model, opt, x, y, phase: str, steps: int, device) -> float:
    """The simplest honest loop: no per-step clock reads, one sync at each end."""
    loss_fn = nn.CrossEntropyLoss()
    devices.synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        if phase == "train":
            opt.zero_grad(set_to_none=True)
            loss_fn(models.logits(model(x)), y).backward()
            opt.step()
        else:
            with torch.inference_mode():
                model(x)
    devices.synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10, help="steps per window")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved bare/engine window pairs")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "engine_overhead.csv"))
    args = ap.parse_args()

    device = devices.resolve(args.device)
    threads = devices.set_threads(0)
    protocol = Params(warmup_steps=3, measured_steps=args.steps, repeats=1)
    for phase in ("train", "eval"):
        cfg = engine.Config.of(
            args.model,
            phase,
            args.image_size,
            200,
            models.spec(args.model).in_channels,
            batch_size=args.batch_size,
            threads=threads,
            workers=0,
        )
        work = engine.Workload(cfg, device, protocol).__enter__()  # left at the end of this phase's block
        x, y = work.next_batch()
        bare_model = models.build(args.model, num_classes=200).to(device).train(phase == "train")
        bare_opt = torch.optim.SGD(bare_model.parameters(), lr=0.01, momentum=0.9)
        for _ in range(3):
            work.step()
        bare_window(bare_model, bare_opt, x, y, phase, 3, device)
        timer = timing.StepTimer(device)
        bare, eng = [], []
        for _ in range(args.rounds):
            bare.append(
                args.batch_size
                * args.steps
                / bare_window(bare_model, bare_opt, x, y, phase, args.steps, device)
            )
            with telemetry.Sampler(device, 0.1):
                _, wall = timer.window(work.step, args.steps)
            eng.append(args.batch_size * args.steps / wall)
        ratio = statistics.median(e / b for e, b in zip(eng, bare, strict=True))
        t0 = time.perf_counter()
        work.__exit__(None, None, None)
        iso = worker.measure_isolated(
            cfg, device, Params(warmup_steps=3, measured_steps=args.steps, repeats=args.rounds)
        )
        worker_wall = time.perf_counter() - t0
        iso_ratio = iso.get("throughput_img_s", float("nan")) / statistics.median(bare)
        print(
            f"{phase:5s} {args.model} bs{args.batch_size} on {devices.device_name(device)}: bare "
            f"{statistics.median(bare):.1f} img/s, engine {statistics.median(eng):.1f} img/s, "
            f"engine/bare {ratio:.3f} (overhead {100 * (1 - ratio):+.1f}%), isolated worker/bare {iso_ratio:.3f} "
            f"({worker_wall:.1f} s wall, status {iso['status']})"
        )
        results.ResultsFile(args.out, ("timestamp", "phase")).append(
            {
                "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "phase": phase,
                "model": args.model,
                "batch_size": args.batch_size,
                "device_name": devices.device_name(device),
                "threads": threads,
                "rounds": args.rounds,
                "steps": args.steps,
                "bare_img_s_median": statistics.median(bare),
                "engine_img_s_median": statistics.median(eng),
                "engine_over_bare": ratio,
                "isolated_img_s": iso.get("throughput_img_s", float("nan")),
                "isolated_over_bare": iso_ratio,
                "worker_wall_s": worker_wall,
            }
        )


if __name__ == "__main__":
    main()
