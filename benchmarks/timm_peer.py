#!/usr/bin/env python3
"""The workbook's engine against a peer on the same device: timm's own ``benchmark.py``, peer-engine-peer.

timm's ``benchmark.py`` (from timm's source repository, at the path ``--timm-benchmark`` gives; neither the PyPI
package nor this repository carries it) runs with the installed ``timm`` package, then the workbook's engine
(:func:`cnnbench.measure.engine.measure`, one window of the same steps after the same warm-up) on the same
configuration, then timm's again. Defaults: ResNet-50 at 224 px, batch 256, bf16 autocast (timm's ``--amp
--amp-dtype bfloat16``; fp16 on a GPU without bf16), channels_last, 10 warm-up and 40 timed steps (timm's own
defaults), train and inference. Appends one row per phase and engine model to a CSV: both timm rates and their mean, the engine's
rate, ``engine_over_timm`` (the engine over the mean of the two timm runs) and whether it lies within the goal
0.95-1.05 (recorded, never asserted), the device, torch, timm, the date and the commit.

The models. timm's ``benchmark.py`` builds ``timm.create_model(model)``: timm's ResNet class, for ResNet-50 the
same layers as torchvision's (bottlenecks [3, 4, 6, 3], the stride on the 3x3 convolution, 25.56 M parameters)
in timm's own modules. The engine measures two definitions (``--engine-models``): ``timm``, the same
``create_model`` call registered as a workbook model for this process (the like-for-like ratio), and
``torchvision``, the workbook's own ``resnet50`` (what its reports measure). Each row says which, with the
parameter counts of both sides.

What differs between the two loops, by design of each: timm's synchronises after every step and draws new
labels each step, the engine synchronises at the window's edges; timm's optimizer is SGD with Nesterov momentum
0.9 and lr 1e-4, the engine's plain SGD with momentum 0.9 and lr 0.01 (the same kernels); timm's fp16 (``--amp``)
trains without a loss scaler, the engine's with one; timm turns TF32 on for fp32, the engine's fp32 is IEEE
(TF32 off), which autocast's bf16 and fp16 convolutions do not use. timm's runs go without its optional FLOP
profilers (fvcore, deepspeed), which only run after its timed steps.

    python benchmarks/timm_peer.py --timm-benchmark ~/pytorch-image-models/benchmark.py            # a GPU
    python benchmarks/timm_peer.py --timm-benchmark PATH --device cpu --model resnet18 --batch-size 8 \\
        --image-size 64 --precision fp32 --warmup 2 --steps 5                                     # a CPU
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from cnnbench import devices, envinfo, knobs, models, results
from cnnbench.measure import engine
from cnnbench.params import Params

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "examples" / "benchmarks" / "timm_peer.csv"
GOAL = (0.95, 1.05)  # engine / timm, recorded, never asserted
# --precision -> (timm benchmark.py's flags, the engine's precision knob)
PRECISIONS = {
    "bf16": (["--amp", "--amp-dtype", "bfloat16"], "bf16"),
    "fp16": (["--amp"], "fp16"),
    "fp32": (["--precision", "float32"], "fp32"),
}
PHASES = {"train": "train", "eval": "infer"}  # the engine's phase -> timm's result prefix
# runs timm's benchmark.py unmodified as __main__, its optional FLOP profilers hidden (a failed import to it)
RUNNER = (
    "import runpy, sys; sys.modules.update(dict.fromkeys(['fvcore', 'deepspeed'])); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


class PeerError(RuntimeError):
    """timm's benchmark.py did not give the rates asked for."""


def parse_result(stdout: str) -> dict:
    """The results timm's benchmark.py prints last (``--result`` then a JSON object)."""
    head, sep, tail = stdout.rpartition("--result\n")
    if not sep:
        raise PeerError("no '--result' in its output")
    try:
        return json.loads(tail)
    except json.JSONDecodeError as err:
        raise PeerError(f"its result is not JSON ({err})") from None


def peer_command(args, device: torch.device) -> list[str]:
    return [
        args.python,
        "-c",
        RUNNER,
        args.timm_benchmark,
        "--model",
        args.model,
        "--bench",
        "both",
        "--batch-size",
        str(args.batch_size),
        "--img-size",
        str(args.image_size),
        "--num-warm-iter",
        str(args.warmup),
        "--num-bench-iter",
        str(args.steps),
        "--device",
        device.type,  # timm's autocast takes a device type; the index is the current device (cuda:0)
        "--no-retry",  # never a smaller batch than asked for
        *PRECISIONS[args.precision][0],
        *(["--channels-last"] if args.channels_last else []),
    ]


def run_peer(args, device: torch.device) -> dict:
    """One run of timm's benchmark.py: {phase: img/s}, its parameter count (M) and wall time; raises
    :class:`PeerError` where it failed or measured another batch or size than asked."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            peer_command(args, device), capture_output=True, text=True, timeout=args.peer_timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        raise PeerError(f"timm's benchmark.py ran past {args.peer_timeout} s") from None
    wall = time.perf_counter() - t0
    last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
    if proc.returncode != 0:
        raise PeerError(f"timm's benchmark.py exited with {proc.returncode}: {last[0][:300]}")
    result = parse_result(proc.stdout)
    if "error" in result:
        raise PeerError(f"timm's benchmark.py: {str(result['error'])[:300]}")
    out = {"timm_wall_s": wall, "timm_params_m": result.get("param_count", math.nan)}
    for phase, prefix in PHASES.items():
        got = (result.get(f"{prefix}_batch_size"), result.get(f"{prefix}_img_size"))
        if got != (args.batch_size, args.image_size):
            raise PeerError(
                f"timm's {prefix} ran batch {got[0]} at {got[1]} px, not {args.batch_size} at {args.image_size}"
            )
        out[phase] = float(result[f"{prefix}_samples_per_sec"])
    return out


def register_timm_model(model: str) -> str:
    """``timm.create_model(model)`` as a workbook model for this process (its name returned): the engine then
    builds the model timm's benchmark.py builds."""
    import timm

    name = f"timm_{model}"

    def build(num_classes: int, in_channels: int, image_size: int):
        return timm.create_model(model, num_classes=num_classes, in_chans=in_channels, drop_rate=0.0)

    models.LOCAL_MODELS[name] = models.ModelSpec(name, 3, 224, 1000, "imagenet", build)
    return name


def measure_engine(args, device: torch.device, model: str, phase: str, threads: int) -> dict:
    """The engine's row for ``model`` and ``phase``: timm's warm-up steps, then one window of its timed steps."""
    protocol = Params(warmup_steps=args.warmup, measured_steps=args.steps, min_window_s=0.0, repeats=1)
    cfg = engine.Config.of(
        model,
        phase,
        args.image_size,
        1000,
        3,
        precision=PRECISIONS[args.precision][1],
        memory_format="channels_last" if args.channels_last else "nchw",
        batch_size=args.batch_size,
        threads=threads,
        compile="off",
        data_mode="device",
    )
    params_m = models.count_params(models.build_meta(model)) / 1e6
    t0 = time.perf_counter()
    row = engine.measure(cfg, device, protocol)
    return {**row, "engine_wall_s": time.perf_counter() - t0, "engine_params_m": params_m}


def auto_precision(device: torch.device) -> str:
    """bf16 where ``device`` runs it, else fp16 on an accelerator (a T4), else fp32."""
    b = devices.backend(device)
    if not knobs.lacks("precision", "bf16", b.hardware()):
        return "bf16"
    return "fp16" if b.queued and not knobs.lacks("precision", "fp16", b.hardware()) else "fp32"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def rows(before: dict, measured: dict, after: dict, common: dict) -> list[dict]:
    """One row per phase and engine model: both timm rates, the engine's, their ratio."""
    out = []
    for (engine_model, phase), row in measured.items():
        timm = [r[phase] for r in (before, after) if phase in r]
        timm_mean = sum(timm) / len(timm) if len(timm) == 2 else math.nan
        ratio = row.get("throughput_img_s", math.nan) / timm_mean
        errors = [e for e in (before.get("error"), row.get("error"), after.get("error")) if e]
        out.append(
            {
                **common,
                "engine_model": engine_model,
                "phase": phase,
                "timm_before_img_s": before.get(phase, math.nan),
                "engine_img_s": row.get("throughput_img_s", math.nan),
                "timm_after_img_s": after.get(phase, math.nan),
                "timm_img_s": timm_mean,
                "engine_over_timm": ratio,
                "within_goal": GOAL[0] <= ratio <= GOAL[1],
                "timm_drift_pct": 100 * (timm[1] / timm[0] - 1) if len(timm) == 2 else math.nan,
                "engine_status": row.get("status", ""),
                "engine_params_m": row.get("engine_params_m", math.nan),
                "timm_params_m": before.get("timm_params_m", after.get("timm_params_m", math.nan)),
                "device_busy_pct": row.get("device_busy_pct", math.nan),
                "step_bound": row.get("step_bound", ""),
                "energy_j_per_image": row.get("energy_j_per_image", math.nan),
                "timm_wall_s": before.get("timm_wall_s", 0.0) + after.get("timm_wall_s", 0.0),
                "engine_wall_s": row.get("engine_wall_s", math.nan),
                "error": "; ".join(errors)[:500],
            }
        )
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--timm-benchmark",
        required=True,
        help="timm's benchmark.py, from its source repository (github.com/huggingface/pytorch-image-models)",
    )
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:0 | mps")
    ap.add_argument("--model", default="resnet50", help="a model timm and torchvision both name")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument(
        "--precision",
        choices=["auto", *sorted(PRECISIONS)],
        default="auto",
        help="auto: bf16 where the device runs it, else fp16 on a GPU, else fp32",
    )
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--warmup", type=int, default=10, help="warm-up steps (timm's --num-warm-iter)")
    ap.add_argument("--steps", type=int, default=40, help="timed steps (timm's --num-bench-iter)")
    ap.add_argument(
        "--engine-models",
        default="timm,torchvision",
        help="the engine's model definitions: timm (timm.create_model's) and/or torchvision (the workbook's)",
    )
    ap.add_argument("--python", default=sys.executable, help="the interpreter timm's benchmark.py runs in")
    ap.add_argument("--peer-timeout", type=float, default=600.0, help="seconds one timm run may take")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="the CSV the rows are appended to")
    args = ap.parse_args(argv)
    if not Path(args.timm_benchmark).is_file():
        ap.error(f"--timm-benchmark {args.timm_benchmark}: no such file (timm's benchmark.py)")
    wanted = [m.strip() for m in args.engine_models.split(",") if m.strip()]
    if not wanted or set(wanted) - {"timm", "torchvision"}:
        ap.error(f"--engine-models {args.engine_models!r}: timm and/or torchvision")
    args.engine_models = wanted
    for key in ("batch_size", "image_size"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')} must be at least 1")
    if args.steps < 5:
        ap.error(
            f"--steps {args.steps}: timm's benchmark.py logs every steps // 5 steps, so it needs 5 or more"
        )
    if "timm" in wanted and "timm" not in sys.modules and importlib.util.find_spec("timm") is None:
        ap.error(
            "--engine-models timm: timm is not installed here (pip install timm, or --engine-models torchvision)"
        )
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    device = devices.resolve(args.device)
    if device.index not in (None, 0):
        raise SystemExit(f"--device {args.device}: timm's benchmark.py runs on {device.type}:0 only")
    if args.precision == "auto":
        args.precision = auto_precision(device)
    threads = torch.get_num_threads()  # timm's process keeps torch's default: the engine takes the same
    names = {"torchvision": args.model}
    if "timm" in args.engine_models:
        names["timm"] = register_timm_model(args.model)
    common = {
        "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **envinfo.git_commit(),
        "device_kind": devices.backend(device).kind,
        "device_name": devices.device_name(device),
        "torch": torch.__version__,
        "timm": version("timm"),
        "python": platform.python_version(),
        "timm_benchmark_sha256": hashlib.sha256(Path(args.timm_benchmark).read_bytes()).hexdigest()[:12],
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "precision": args.precision,
        "memory_format": "channels_last" if args.channels_last else "nchw",
        "warmup_steps": args.warmup,
        "steps": args.steps,
        "threads": threads,
    }

    def peer() -> dict:
        try:
            return run_peer(args, device)
        except PeerError as err:
            return {"error": str(err)}

    before = peer()
    measured = {
        (m, phase): measure_engine(args, device, names[m], phase, threads)
        for m in args.engine_models
        for phase in PHASES
    }
    after = peer()
    out = rows(before, measured, after, common)
    for row in out:
        results.ResultsFile(args.out, ("timestamp", "engine_model", "phase")).append(row)
        print(
            f"{row['phase']:5s} {args.model} ({row['engine_model']}'s) bs{args.batch_size} {args.image_size}px "
            f"{args.precision} on {row['device_name']}: timm {row['timm_before_img_s']:.1f} / "
            f"{row['timm_after_img_s']:.1f} img/s, engine {row['engine_img_s']:.1f} img/s ({row['engine_status']}), "
            f"engine/timm {row['engine_over_timm']:.3f}{'' if row['within_goal'] else ' (outside 0.95-1.05)'}"
            + (f"; {row['error']}" if row["error"] else "")
        )
    print(f"appended {len(out)} rows to {args.out}")
    failed = "error" in before or "error" in after or any(r["engine_status"] != "ok" for r in out)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
