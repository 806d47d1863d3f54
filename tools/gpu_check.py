#!/usr/bin/env python3
"""make gpu-check: the prepared check of a machine with a GPU, torch and no internet, in one command.

It uses the machine's own python3 (the one that has torch) and what `make gpu-wheels` prepared in .gpucheck/,
never a virtual environment, and runs, each step timed:

1. install: the wheels of .gpucheck/wheels whose packages this python lacks, with pip from that folder alone
   (``--no-index --find-links``, ``--no-deps``: what the machine has stays untouched), into its site-packages,
   or into .gpucheck/site on PYTHONPATH where those are read-only; then .gpucheck/requirements.txt must be met;
2. tests: the GPU-marked tests (``pytest -m gpu`` over tests/test_gpu*.py);
3. timm: benchmarks/timm_peer.py against .gpucheck/timm_benchmark.py, its rows in the run folder's check/;
4. pipeline: the whole workbook with the GPU protocol, sized for the check (``python -m cnnbench.pipeline --params
   params/gpu_check.yaml --run-name cuda-<gpu>``), last: the one step that resumes where a stop left it.

Everything goes to the console and to ``outputs/cuda-<gpu>/check/gpu_check.log``; where ``$OUT`` is set (a
borrowed machine's folder of files to bring back), the run folder as ``cuda-<gpu>.tar.gz`` and the log are
copied there (the log after each step too). With ``--budget-s``, a step still running when the budget is spent is
stopped (SIGTERM; the pipeline keeps what it finished and a second call resumes it) and the results are packed.

    make gpu-check                         # on the GPU machine, in the repository's root
    python3 tools/gpu_check.py --budget-s 540 --steps install,tests,timm,pipeline
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("install", "tests", "timm", "pipeline")
GPU_TESTS = (
    "tests/test_gpu*.py"  # where the GPU-marked tests live (collecting every test module costs seconds)
)
PACK_LIMIT_BYTES = 15 * 2**20  # a file brought back from a borrowed machine: at most 16 MiB
PACK_RESERVE_S = 20.0  # of --budget-s, kept for stopping the last step and packing
STOP_GRACE_S = 30.0  # after SIGTERM, before SIGKILL
# --estimate's figures for the steps around the pipeline on an H100, seconds (not yet measured on one): install as
# it took here (5.9 s, 59 packages); pytest's start and eight GPU tests of a model built and about a second of steps
# each; the peer's three passes (timm, the engine on timm's model, timm), each a process start of about 6 s (torch,
# CUDA, the model) and 50 training and 50 inference steps of ResNet-50 at batch 256 (about 0.1 and 0.03 s in bf16)
STEP_ESTIMATES_S = {"install": 10.0, "tests": 30.0, "timm": 45.0}
VENDOR_WORDS = {"nvidia", "tesla", "geforce", "quadro"}
SERIES_WORDS = {"rtx", "gtx", "titan"}


def gpu_short_name(name: str) -> str:
    """A GPU's name as a run name's part: "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA A100-SXM4-80GB" -> a100,
    "Tesla T4" -> t4, "NVIDIA GeForce RTX 4090" -> rtx4090 ("" for no name)."""
    words = [w for w in re.split(r"[\s_]+", name.lower()) if w and w not in VENDOR_WORDS]
    if not words:
        return ""
    first = words[0].split("-")[0]
    if first in SERIES_WORDS and len(words) > 1:
        first += words[1].split("-")[0]
    return re.sub(r"[^a-z0-9]", "", first)


def gpu_name() -> str:
    """The first GPU's name, from nvidia-smi (or torch where it is missing); "" where there is none."""
    smi = shutil.which("nvidia-smi")
    if smi:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0].strip()
    probe = "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


class Log:
    """Lines to the console and to the check's log file."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.file = path, open(path, "a", buffering=1)  # noqa: SIM115 - open for the whole check

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.file.write(line + "\n")


def run(cmd: list[str], log: Log, env: dict, deadline: float | None) -> tuple[int, str]:
    """Run ``cmd``, its output to the log line by line; stopped (SIGTERM, then SIGKILL) at ``deadline``
    (time.monotonic()). Returns (exit code, "" or how it was stopped)."""
    log("$ " + " ".join(cmd[:16]) + (f" ... ({len(cmd) - 16} more)" if len(cmd) > 16 else ""))
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    stopped = []

    def stop() -> None:
        stopped.append(f"stopped at the check's budget (SIGTERM, then SIGKILL after {STOP_GRACE_S:g} s)")
        proc.send_signal(signal.SIGTERM)  # the pipeline ends its notebook and records why
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

    timer = None
    if deadline is not None:
        timer = threading.Timer(max(deadline - time.monotonic(), 0.0), stop)
        timer.daemon = True
        timer.start()
    for line in proc.stdout:
        log(line.rstrip("\n"))
    code = proc.wait()
    if timer is not None:
        timer.cancel()
    return code, "".join(stopped)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(paths: list[str]) -> dict[str, str]:
    """{canonical name: version} of the distributions on ``paths``."""
    return {canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions(path=paths)}


def unmet(requirements: list[str], have: dict[str, str]) -> list[str]:
    """The requirements that ``have`` does not satisfy, each with what is there."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        from pip._vendor.packaging.requirements import Requirement

    out = []
    for line in requirements:
        req = Requirement(line)
        version = have.get(canonical(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            out.append(f"{line} ({'not installed' if version is None else f'{version} installed'})")
    return out


def search_paths(target: Path | None) -> dict[str, str]:
    """PYTHONPATH (the workbook's lib/, then the install folder) and, with an install folder, JUPYTER_PATH to
    its share/jupyter: the data files of its wheels (nbconvert's templates, which the report's HTML needs)."""

    def joined(*paths) -> str:
        return os.pathsep.join(str(p) for p in paths if p)

    out = {"PYTHONPATH": joined(ROOT / "lib", target, os.environ.get("PYTHONPATH"))}
    if target is not None:
        out["JUPYTER_PATH"] = joined(target / "share" / "jupyter", os.environ.get("JUPYTER_PATH"))
    return out


def install(gpucheck: Path, log: Log, env: dict, deadline, target: Path | None) -> int:
    """The prepared wheels whose packages this python lacks, with pip from the folder alone and --no-deps: no
    installed package is upgraded, replaced or downgraded (the folder's closure was resolved when it was
    prepared). Then each of requirements.txt must be met."""
    wheels, requirements = gpucheck / "wheels", gpucheck / "requirements.txt"
    if not requirements.is_file():
        log(f"no {requirements}: run `make gpu-wheels` where pip's index answers, and carry .gpucheck")
        return 2
    paths = [*([str(target)] if target else []), *sys.path]
    have = installed(paths)
    missing = sorted(w for w in wheels.glob("*.whl") if canonical(w.name.split("-")[0]) not in have)
    if missing:
        log(f"missing here: {len(missing)} packages: " + ", ".join(w.name.split("-")[0] for w in missing))
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps", "--no-index"]
        cmd += ["--find-links", str(wheels), "--disable-pip-version-check"]
        code, stopped = run(
            [*cmd, *(["--target", str(target)] if target else []), *map(str, missing)], log, env, deadline
        )
        if code or stopped:
            return code or 1
    else:
        log("every prepared package is installed here already")
    lines = [r.strip() for r in requirements.read_text().splitlines() if r.strip() and not r.startswith("#")]
    if problems := unmet(lines, installed(paths)):
        log("requirements not met: " + "; ".join(problems))
        return 1
    return 0


def pack(run_dir: Path, log: Log, out: Path) -> None:
    """The run folder as <run>.tar.gz and the log, copied to ``out``; files are left out, largest first, until
    the archive is under PACK_LIMIT_BYTES (the log names them)."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"{run_dir.name}.tar.gz"
    files = sorted(
        (p for p in run_dir.rglob("*") if p.is_file() and p != log.path), key=lambda p: p.stat().st_size
    )
    left_out: list[Path] = []
    while True:
        with tarfile.open(archive, "w:gz") as tar:
            for path in files:
                if path not in left_out:
                    tar.add(path, arcname=str(path.relative_to(run_dir.parent)))
            tar.add(log.path, arcname=str(log.path.relative_to(run_dir.parent)))
        if archive.stat().st_size <= PACK_LIMIT_BYTES or len(left_out) == len(files):
            break
        left_out.append(files[-1 - len(left_out)])
    if left_out:
        log(
            f"left out of {archive.name} (over {PACK_LIMIT_BYTES / 2**20:g} MiB): {', '.join(map(str, left_out))}"
        )
    shutil.copyfile(log.path, out / log.path.name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--steps", default=",".join(STEPS), help=f"which of {', '.join(STEPS)} (default: all, in order)"
    )
    ap.add_argument("--params", default="params/gpu_check.yaml", help="the pipeline's params file")
    ap.add_argument("--run-name", default="", help="default: cuda-<the GPU's short name>")
    ap.add_argument(
        "--budget-s", type=float, default=0.0, help="stop the step running at this many seconds; 0: none"
    )
    ap.add_argument("--gpucheck", default=str(ROOT / ".gpucheck"), help="what make gpu-wheels prepared")
    ap.add_argument(
        "--target", default="", help="install into this folder on PYTHONPATH (default: only where read-only)"
    )
    ap.add_argument("--timm-args", default="", help="more options for benchmarks/timm_peer.py")
    ap.add_argument(
        "--estimate", action="store_true", help="how long the check takes on an H100; runs nothing"
    )
    args = ap.parse_args(argv)
    if args.estimate:
        return estimate(args.params)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    if unknown := [s for s in steps if s not in STEPS]:
        ap.error(f"--steps: unknown {', '.join(unknown)}; steps: {', '.join(STEPS)}")
    start, started = time.monotonic(), dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    deadline = start + args.budget_s - PACK_RESERVE_S if args.budget_s else None
    name = gpu_name()
    run_name = args.run_name or (f"cuda-{gpu_short_name(name)}" if name else "")
    if not run_name:
        ap.error("no CUDA GPU here (nvidia-smi and torch name none): give --run-name to check without one")
    gpucheck, python = Path(args.gpucheck).resolve(), sys.executable
    run_dir = ROOT / "outputs" / run_name
    log = Log(run_dir / "check" / "gpu_check.log")
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    site = sysconfig.get_paths()["purelib"]
    target = Path(args.target).resolve() if args.target else None
    if target is None and not os.access(site, os.W_OK):
        target = gpucheck / "site"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **search_paths(target)}
    log(f"# gpu-check {started}: GPU {name or 'none'}")
    log(f"# python {python} {sys.version.split()[0]}; installs into {target or site}")
    log(
        f"# run folder {run_dir.relative_to(ROOT)}, steps {', '.join(steps)}, budget {args.budget_s or 'none'} s"
    )
    benchmark = gpucheck / "timm_benchmark.py"
    commands = {
        "tests": [python, "-m", "pytest", "-m", "gpu", "-n", "0", "-p", "no:cacheprovider", "-q", "-rs"]
        + sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(GPU_TESTS)),
        "timm": [
            python,
            "benchmarks/timm_peer.py",
            "--timm-benchmark",
            str(benchmark),
            "--engine-models",
            "timm",
        ]
        + ["--out", str(run_dir / "check" / "timm_peer.csv"), *args.timm_args.split()],
        "pipeline": [python, "-m", "cnnbench.pipeline", "--params", args.params, "--run-name", run_name],
    }
    results = []
    for step in steps:
        log(f"\n## {step}")
        t0 = time.monotonic()
        if deadline is not None and t0 >= deadline:
            code, note = None, "not started: the budget is spent"
        elif step == "install":
            code, note = install(gpucheck, log, env, deadline, target), ""
        elif step == "timm" and not benchmark.is_file():
            code, note = None, f"skipped: no {benchmark} (make gpu-wheels TIMM_BENCHMARK=...)"
        else:
            code, note = run(commands[step], log, env, deadline)
        seconds = time.monotonic() - t0
        status = "not run" if code is None else "ok" if code == 0 and not note else f"FAILED (exit {code})"
        results.append((step, status, seconds, note))
        log(f"## {step}: {status}, {seconds:.1f} s{'; ' + note if note else ''}")
        if out is not None:  # the log so far comes back even if the machine's own limit ends the check
            shutil.copyfile(log.path, out / log.path.name)
    log("\n# summary")
    for step, status, seconds, note in results:
        log(f"{step:9s} {status:18s} {seconds:7.1f} s  {note}")
    log(f"{'total':9s} {'':18s} {time.monotonic() - start:7.1f} s")
    peer = run_dir / "check" / "timm_peer.csv"
    for row in csv.DictReader(peer.open()) if "timm" in steps and peer.is_file() else []:
        if row["timestamp"] >= started:
            log(f"engine/timm {row['phase']:5s} ({row['engine_model']}'s model): {row['engine_over_timm']}")
    if out is not None:
        pack(run_dir, log, out)
        log(f"# copied to {out}: {run_name}.tar.gz, {log.path.name}")
    return 0 if all(s == "ok" for _, s, _, _ in results) else 1


def estimate(params: str) -> int:
    """The check's expected time on an H100: the pipeline's estimate for the committed H100 run's device
    (``cnnbench --estimate --device-kind cuda``) and STEP_ESTIMATES_S around it."""
    cmd = [
        sys.executable,
        "-m",
        "cnnbench.pipeline",
        "--params",
        params,
        "--estimate",
        "--device-kind",
        "cuda",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    print(done.stdout, end="", file=sys.stdout)
    total = re.search(r"^total\s+(?:(\d+)m)?(\d+)s", done.stdout, re.M)
    if done.returncode or not total:
        print(done.stderr, end="", file=sys.stderr)
        return done.returncode or 1
    pipeline_s = 60 * int(total.group(1) or 0) + int(total.group(2))
    for step, seconds in STEP_ESTIMATES_S.items():
        print(f"{step:16s}{int(seconds):>7d}s  the check's figure (not measured on a GPU)")
    whole = pipeline_s + sum(STEP_ESTIMATES_S.values())
    print(
        f"{'gpu-check':16s}{int(whole // 60):>4d}m{int(whole % 60):02d}s  install, tests, timm and the pipeline above"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
