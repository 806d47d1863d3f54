#!/usr/bin/env python3
"""Issue 31's goals, recorded (never asserted): how long a fresh run of the default report takes, notebook by
notebook, when its first trusted number is printed, and how tight its intervals are.

Runs the pipeline of a checkout (``--repo``, this one by default; another commit's worktree for a back-to-back
comparison) into a temporary outputs folder, or, with ``--fresh-clone``, clones the checkout's HEAD and runs
``make report`` there, so the time includes creating the environment and installing. Reads the console as it
comes: the first trusted number is the first line that gives a training rate of ResNet-18 or ResNet-50 with a
95% interval within +-10% (counted from the line that starts the first notebook). Appends one row per run to
the CSV: each notebook's seconds (the run's own ``timings.csv``), the total wall time, the install time, the
first trusted number's time, and of 02's and 03's measured intervals (rows 03 copied from 02 counted once) how
many are within +-10%, and how many configurations found the machine busy.

    .venv/bin/python benchmarks/report_time.py --label new
    .venv/bin/python benchmarks/report_time.py --repo /tmp/old --label old   # a worktree of another commit
    .venv/bin/python benchmarks/report_time.py --fresh-clone --label fresh
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from cnnbench import paths, results  # noqa: E402

# "resnet18 train bs=128 fp32: 121.3 +- 1.9 img/s over 3 processes" (a row line) or "first trusted number: ..."
RATE = re.compile(r"(resnet18|resnet50) train bs=\d+\S*( \w+)?: ([\d,.]+) \+- ([\d,.]+) img/s")
GOAL_PCT = 10.0


def first_trusted(line: str) -> bool:
    m = RATE.search(line)
    if not m:
        return False
    rate, half = (float(g.replace(",", "")) for g in m.group(3, 4))
    return 100 * half / rate <= GOAL_PCT


def run(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, float, list[str]]:
    """Run ``cmd``, echoing its console; returns (wall s, s until the first notebook started, s from then until
    the first trusted number, the lines)."""
    t0 = time.perf_counter()
    started = trusted = float("nan")
    lines = []
    with subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as p:
        for line in p.stdout:
            now = time.perf_counter() - t0
            print(line, end="", flush=True)
            lines.append(line)
            if started != started and re.match(r"\[1/\d+\] ", line):
                started = now
            if trusted != trusted and started == started and first_trusted(line):
                trusted = now - started
    if p.returncode != 0:
        raise SystemExit(f"report_time: {' '.join(cmd)} exited {p.returncode}")
    return time.perf_counter() - t0, started, trusted, lines


def intervals(run_dir: Path) -> dict:
    """Of 02's and 03's ok rows measured in their own table: how many intervals are within +-GOAL_PCT, and the
    median of their probes (the CPU's own speed, img/s: runs on a slower VM take longer)."""
    frames = []
    for name in ("scenario_a", "batch_sweep"):
        df = results.frame(results.read_rows(run_dir / f"{name}.csv"))
        if df.empty:
            continue
        if "measured_in" in df:
            df = df[df.measured_in.isna() | (df.measured_in.astype(str) == "")]
        frames.append(df[df.status == "ok"])
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if df.empty:
        return {
            "intervals": 0,
            "within_10pct": 0,
            "busy_configs": 0,
            "median_ci_pct": float("nan"),
            "probe_img_s": float("nan"),
        }
    pct = 100 * df.throughput_ci95_img_s.astype(float) / df.throughput_img_s.astype(float)
    return {
        "intervals": len(df),
        "within_10pct": int((pct <= GOAL_PCT).sum()),
        "busy_configs": int((df.get("machine_state", pd.Series(dtype=str)).astype(str) == "busy").sum()),
        "median_ci_pct": float(pct.median()),
        "probe_img_s": float(
            pd.to_numeric(df.get("probe_img_s", pd.Series(dtype=float)), errors="coerce").median()
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=str(ROOT), help="the checkout whose pipeline runs (default: this one)")
    ap.add_argument("--params", default="params/local.yaml", help="relative to the checkout")
    ap.add_argument("--set", action="append", default=[], help="an override, as cnnbench --set takes it")
    ap.add_argument("--fresh-clone", action="store_true", help="clone HEAD and time `make report` there")
    ap.add_argument("--label", default="", help="what this run is (new, old, fresh, ...)")
    ap.add_argument("--keep", help="copy the run folder here (replacing it): a new committed example")
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "report_time.csv"))
    args = ap.parse_args()
    repo = Path(args.repo).resolve()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(repo / "lib")}
        if args.fresh_clone:
            clone = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
            env.pop("PYTHONPATH")
            sets = " ".join(f"--set {s!r}" for s in args.set)
            cmd = ["make", "report", f"PARAMS={args.params}", f"ARGS=--outputs {tmp}/out {sets}"]
            wall, started, trusted, _ = run(cmd, clone, env)
        else:
            cmd = [
                sys.executable,
                "-m",
                "cnnbench.pipeline",
                "--params",
                args.params,
                "--outputs",
                f"{tmp}/out",
            ]
            for s in args.set:
                cmd += ["--set", s]
            wall, started, trusted, _ = run(cmd, repo, env)
        (run_dir,) = [d for d in Path(tmp, "out").iterdir() if (d / "timings.csv").is_file()]
        timings = results.frame(results.read_rows(run_dir / "timings.csv"))
        env_json = results.read_json(run_dir / "environment.json")
        row = {
            "label": args.label,
            "commit": commit.stdout.strip(),
            "params": args.params,
            "overrides": " ".join(args.set),
            "fresh_clone": args.fresh_clone,
            "cpu_model": env_json.get("cpu_model", ""),
            "host": env_json.get("host", ""),
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "wall_s": round(wall, 1),
            "before_notebooks_s": round(started, 1),
            "notebooks_s": round(float(timings.duration_s.astype(float).sum()), 1),
            "first_trusted_s": round(trusted, 1),
            **{f"{r.notebook}_s": float(r.duration_s) for r in timings.itertuples()},
            **intervals(run_dir),
        }
        if args.keep:
            shutil.rmtree(args.keep, ignore_errors=True)
            shutil.copytree(run_dir, args.keep)
    out = Path(args.out)
    results.ResultsFile(out, ("label", "commit", "timestamp")).append(row)
    print(
        f"report_time: {row['wall_s']:.0f} s in all ({row['before_notebooks_s']:.0f} s before the first notebook), "
        f"first trusted number {row['first_trusted_s']:.0f} s after it; {row['within_10pct']} of "
        f"{row['intervals']} intervals of 02/03 within +-{GOAL_PCT:g}%; wrote {out}"
    )


if __name__ == "__main__":
    main()
