"""Data-parallel scaling (06): ``run(run)`` -> scaling.csv (throughput, efficiency, the loss check against one
process), its table and plot: torchrun launches :mod:`.ddp` over 1..N processes (gloo: CPU cores; NCCL: a GPU
each). Every rank imports this package: the plotting stack is imported only to plot."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from cnnbench import devices, heap, paths, progress, results
from cnnbench.measure import engine
from cnnbench.measure.reproducibility import ratio
from cnnbench.results.files import HOST


def run(run) -> pd.DataFrame:
    """DistributedDataParallel over 1..N processes launched by torchrun -> scaling.csv (current rows)."""
    run_all(run)
    rows = results.read(run.dir, "scaling").to_dict("records")
    efficiency(rows)  # rows kept from a pass measured before the intervals were written get them too
    return pd.DataFrame(rows)


def table(df: pd.DataFrame) -> pd.DataFrame:
    cols = (
        "world_size backend per_device_batch global_batch throughput_img_s throughput_ci95_img_s speedup "
        "speedup_ci95_low speedup_ci95_high scaling_efficiency_pct scaling_efficiency_ci95_low_pct "
        "scaling_efficiency_ci95_high_pct loss_first loss_vs_one_process_max_abs_diff loss_matches_one_process "
        "status error"
    ).split()
    return df[[c for c in cols if c in df]]


def plot(df: pd.DataFrame, path: str | Path | None = None):
    """Throughput and scaling efficiency (each with its 95% interval) against the number of processes/devices."""
    import matplotlib.pyplot as plt

    from cnnbench.plots import save

    rows = df[df.status == "ok"].to_dict("records")
    efficiency(rows)  # the intervals from the rates plotted
    ok = pd.DataFrame(rows)
    if ok.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
    axes[0].errorbar(ok.world_size, ok.throughput_img_s, yerr=ok.throughput_ci95_img_s, marker="o", capsize=3)
    axes[0].set(xlabel="devices (processes)", ylabel="throughput (images/s)", ylim=(0, None))
    axes[0].set_xticks(sorted(int(w) for w in ok.world_size.unique()))  # whole devices, never 1.2 of one
    eff = ok.scaling_efficiency_pct
    spread = [eff - ok.scaling_efficiency_ci95_low_pct, ok.scaling_efficiency_ci95_high_pct - eff]
    axes[1].bar(ok.world_size.astype(str), eff, yerr=spread, capsize=3)
    axes[1].axhline(100, ls="--", color="grey", lw=1)
    axes[1].set(xlabel="devices (processes)", ylabel="scaling efficiency (%)")
    fig.tight_layout()
    return save(fig, path, dpi=110)


def telemetry(run, path=None):
    """The series every rank sampled during scaling (transfer_telemetry.csv), over time, one panel per metric."""
    from cnnbench.plots import experiment_timeline

    return experiment_timeline(results.read(run.dir, "transfer_telemetry"), "scaling", path)


LOSS_RTOL = 1e-4


class LaunchFailed(RuntimeError):
    """torchrun exited with an error: the message is the last line the processes wrote."""


def command(world: int, job: dict) -> list[str]:
    """The torchrun command line of ``world`` ranks running ``job`` (written to job.json in its folder)."""
    path = Path(job["out"], "job.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(job, default=str))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world)]
    return [*torchrun, "-m", "cnnbench.scaling.ddp", str(path)]


def launch(cmd: list[str], out: Path, timeout_s: float = 900) -> dict:
    """Run ``cmd``; return rank 0's result and every rank's telemetry. Raises :class:`LaunchFailed`."""
    from cnnbench.scaling import ddp  # not at the top: a rank runs it as __main__

    out.mkdir(parents=True, exist_ok=True)
    result_file, ranks = out / ddp.RESULT, ddp.RANK_TELEMETRY.format("*")
    for stale in (result_file, *out.glob(ranks)):  # a rerun must not read old files
        stale.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    dies_with_us = paths.die_with_parent if os.name == "posix" else None
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout_s, env=env, preexec_fn=dies_with_us
    )
    if proc.returncode != 0 or not result_file.is_file():
        lines = [
            re.sub(r"^\[rank\d+\]:\s*", "", ln).strip()
            for ln in (proc.stderr + proc.stdout).splitlines()
            if ln.strip() and "USDT" not in ln
        ]
        errors = [
            ln for ln in lines if re.match(r"^[\w.]+(Error|Exception): ", ln) and "ChildFailedError" not in ln
        ]
        raise LaunchFailed((errors or lines or [f"exit status {proc.returncode}"])[0][:300])
    result = json.loads(result_file.read_text())
    result["ranks"] = [json.loads(p.read_text()) for p in sorted(out.glob(ranks))]
    return result


def loss_check(losses: list[float], reference: list[float]) -> tuple[float, bool]:
    """(largest absolute difference, equal within LOSS_RTOL) of two loss sequences."""
    if not losses or len(losses) != len(reference):
        return math.nan, False
    pairs = list(zip(losses, reference, strict=True))
    diff = max(abs(a - b) for a, b in pairs)
    return diff, all(math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=1e-6) for a, b in pairs)


PER_PROCESS = ("util_process_cpu_pct", "rss_mib")


def own_ranks(ranks: list[dict], cores: int) -> list[dict]:
    """The ranks' telemetry with "other processes' CPU" less the run's other ranks' own CPU (they are this run,
    not other processes): each rank's summary mean, and each sample less the others' samples nearest in time.
    Series: rank 0's whole, the other ranks' only their own process's (the rest is rank 0's too)."""
    own = {
        r["rank"]: [(s["t_s"], s["value"]) for s in r["series"] if s["metric"] == PER_PROCESS[0]]
        for r in ranks
    }
    out, key = [], "util_other_cpu_mean_pct"
    for rank in ranks:
        others = [own[r["rank"]] for r in ranks if r is not rank and own[r["rank"]]]
        near = [sum(min(o, key=lambda p: abs(p[0] - s["t_s"]))[1] for o in others) for s in rank["series"]]
        series = [
            {**s, "value": max(s["value"] - cpu / cores, 0.0)} if s["metric"] == "util_other_cpu_pct" else s
            for s, cpu in zip(rank["series"], near, strict=True)
        ]
        mean = sum(r["summary"].get("util_process_cpu_mean_pct", 0.0) for r in ranks if r is not rank) / cores
        summary = rank["summary"] | (
            {key: max(rank["summary"][key] - mean, 0.0)} if key in rank["summary"] else {}
        )
        series = [s for s in series if s["metric"] in PER_PROCESS] if rank["rank"] else series
        out.append({**rank, "series": series, "summary": summary})
    return out


def rank_summary(rank: int, summary: dict) -> dict:
    """Per-device telemetry columns of one rank: its mean utilisation (%) and GPU power (W)."""
    out = {}
    for key, value in summary.items():
        if key.startswith("util_") and "_mean" in key:
            out[f"rank{rank}_{key}" + ("" if key.endswith("_pct") else "_pct")] = value
        elif key.startswith("gpu_power_w_mean"):
            out[f"rank{rank}_{key}"] = value
    return out


def efficiency(rows: list[dict]) -> None:
    """Add speedup and scaling efficiency against the world-size-1 row with their 95% interval (in place)."""
    one = next((r for r in rows if r["world_size"] == 1 and r["status"] == "ok"), None)
    for r in rows:
        ok = one is not None and r["status"] == "ok"
        rates = [x[k] for x in (one, r) for k in ("throughput_img_s", "throughput_ci95_img_s")] if ok else []
        speedup = (1.0,) * 3 if r is one else ratio(*rates) if ok else (math.nan,) * 3  # Fieller's interval
        for name, value in zip(("", "_ci95_low", "_ci95_high"), speedup, strict=True):
            r[f"speedup{name}"] = value
            r[f"scaling_efficiency{name}_pct"] = 100 * value / r["world_size"]


def run_all(run, launcher=launch, log=progress.say) -> list[dict]:
    """Every world size of the params (1 among them: params refuses a list without it); the one-process launch
    also runs the loss check at each global batch N x b of the others."""
    from cnnbench.measure import telemetry
    from cnnbench.scaling import ddp  # not at the top: a rank runs it as __main__

    p, b = run.params, devices.backend(run.device)
    backend = b.ddp_backend if p.scaling_backend == "auto" else p.scaling_backend
    worlds = sorted(set(p.scaling_world_sizes))
    threads = max(1, run.threads // worlds[-1]) if backend == "gloo" else 0
    cfg = engine.config(p, p.scaling_model, "train", batch_size=p.scaling_batch_size, threads=threads)
    rows, tmp = [], Path(run.path("ddp"))  # each launch's raw result.json and per-rank telemetry stay here
    table = results.table("scaling")
    own = dict(model=cfg.model, backend=backend, per_device_batch=cfg.batch_size, image_size=cfg.image_size)
    own |= dict(threads_per_process=threads, repeats=p.scaling_repeats, host_heap=heap.effective(p.host_heap))
    # the pass's key (the table's): the settings above, the rest the param of its name
    settings = {k: own[k] if k in own else getattr(p, k) for k in table.key if k not in (HOST, "world_size")}
    planned = [{**settings, "world_size": w} for w in worlds]
    final = (*results.DONE_STATUSES, "unavailable")  # a world larger than the GPUs here stays so
    # the same pass measured before: kept
    if all(table.file(run.dir).finished(c, table.key, final) for c in planned):
        log(progress.kept_line(len(planned), len(planned), table.file(run.dir).path.name, "world sizes"))
        table.plan(run.dir, planned, "scaling")
        return results.rows(run.dir, "scaling")

    # the single-device reference: one process at each global batch N x b, from the same initial weights
    refs, reference = tuple(n * cfg.batch_size for n in worlds if n > 1), {}
    for plan in planned:
        world = plan["world_size"]
        row = {**plan, "global_batch": world * cfg.batch_size, "status": "ok", "error": ""}
        gpus = devices.backend_class("cuda").count()  # NCCL (RCCL) runs one process per GPU
        if backend == "nccl" and world > gpus:
            rows.append({**row, "status": "unavailable", "error": f"{gpus} CUDA device(s) here"})
            continue
        try:
            log(f"torchrun --nproc_per_node {world} ({backend}, {threads or 'default'} threads per process)")
            out = tmp / f"n{world}"
            res = launcher(command(world, ddp.job(p, cfg, backend, out, refs if world == 1 else ())), out)
            losses, batch = res["check_losses"], str(row["global_batch"])  # ddp.CHECK_STEPS losses
            reference = res["reference_losses"] if world == 1 else reference
            diff, same = loss_check(losses, losses if world == 1 else reference.get(batch, []))
            kept = "device_kind device_name throughput_img_s throughput_ci95_img_s step_time_mean_s loss_last".split()
            row |= {k: res[k] for k in kept} | dict(loss_check_steps=len(losses), loss_first=losses[0])
            row |= dict(loss_vs_one_process_max_abs_diff=diff, loss_matches_one_process=same)
            row["measured_steps"] = p.scaling_steps
            for rank in own_ranks(res["ranks"], os.cpu_count() or 1):
                row.update(rank_summary(rank["rank"], rank["summary"]))
                where = (f"{backend} world={world}", res["device_kind"], res["device_name"], rank["rank"])
                telemetry.record(run.dir, rank["series"], "scaling", *where)
        except Exception as err:  # noqa: BLE001 - a failed launch is a row, the run goes on
            row.update(engine.failure(err, b))
        rows.append(row)
    efficiency(rows)
    for r in rows:
        r.setdefault("device_name", b.name())
        r.setdefault("device_kind", devices.backend("cuda" if backend == "nccl" else "cpu").kind)
    table.plan(run.dir, rows, "scaling")
    table.file(run.dir).extend(rows)
    log(progress.kept_line(0, len(planned), table.file(run.dir).path.name, "world sizes"))
    return rows
