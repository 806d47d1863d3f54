#!/usr/bin/env python3
"""Issue 31's goal for contributors, recorded (never asserted): how long a fresh clone's ``make test`` takes.

Clones the checkout's HEAD into a temporary folder and runs CI's own command there (``bash .ci/run``, which is
``make test``: creating the environment, installing, lint, the notebook check and pytest), with torch.compile's
cache empty. Reads the console as
it comes and appends one row to the CSV: the total wall time, the seconds until the lint started (the install),
pytest's own seconds, and how many tests passed, failed and were skipped.

    .venv/bin/python benchmarks/test_time.py --label fresh
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from cnnbench import envinfo, paths, results  # noqa: E402
from cnnbench.devices import host  # noqa: E402

# pytest's last line: "== 1 failed, 1054 passed, 5 skipped, 9 warnings in 395.80s (0:06:35) =="
SUMMARY = re.compile(r"=+ (.*) in ([\d.]+)s")


def counts(summary: str) -> dict:
    """passed / failed / skipped / errors of pytest's summary line (0 where it names none)."""
    found = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    return {k: found.get(k, 0) for k in ("passed", "failed", "skipped", "errors")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", default="", help="what this run is (fresh, old, ...)")
    ap.add_argument("--out", default=str(paths.outputs_root() / "benchmarks" / "test_time.csv"))
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CNNBENCH_CACHE")}
    install = pytest_s = float("nan")
    summary = ""
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        # torch.compile's cache empty, as on a fresh machine
        env["TORCHINDUCTOR_CACHE_DIR"] = f"{tmp}/inductor"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        t0 = time.perf_counter()
        with subprocess.Popen(
            ["bash", ".ci/run"],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as p:
            for line in p.stdout:
                print(line, end="", flush=True)
                if install != install and "ruff check" in line:
                    install = time.perf_counter() - t0
                if m := SUMMARY.search(line):
                    summary, pytest_s = m.group(1), float(m.group(2))
        wall = time.perf_counter() - t0
    row = {
        "label": args.label,
        "commit": (envinfo.git_commit()["git_commit"] or "")[:7],
        "cpu_model": host.cpu_model(),
        "cpus": os.cpu_count(),
        "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "exit_status": p.returncode,
        "wall_s": round(wall, 1),
        "install_s": round(install, 1),
        "pytest_s": pytest_s,
        **counts(summary),
    }
    out = Path(args.out)
    results.ResultsFile(out, ("label", "commit", "timestamp")).append(row)
    print(
        f"test_time: {wall:.0f} s in all ({install:.0f} s installing, pytest {pytest_s:.0f} s): {summary}; "
        f"exit {p.returncode}; wrote {out}"
    )


if __name__ == "__main__":
    main()
