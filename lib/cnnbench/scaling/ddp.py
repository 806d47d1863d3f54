"""One DistributedDataParallel rank, launched by torchrun as ``-m cnnbench.scaling.ddp JOB`` (:func:`job`: the
run's params, the :class:`~cnnbench.measure.engine.Config` and the windows): the configuration's ``Workload``
(every knob, as in 02) on its slice of deterministic global batches; the rank-averaged loss of the first
:data:`CHECK_STEPS` steps (eval mode), then windows timed as the slowest rank's. Rank 0 writes result.json."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from cnnbench import devices, params, paths
from cnnbench.measure import engine, telemetry, timing

CHECK_STEPS = 3  # steps whose rank-averaged loss is recorded
RESULT, RANK_TELEMETRY = "result.json", "telemetry_rank{}.json"  # in the job's folder: rank 0's, each rank's


def job(p, cfg, backend: str, out, reference_batches=()) -> dict:
    """What the ranks run: the params' scaling windows, after a loss check at each of ``reference_batches``."""
    spec = dict(params=p.to_dict(), config=cfg.columns(), backend=backend, out=str(out))
    return spec | dict(reference_batches=list(reference_batches))


def read_job(path) -> tuple[dict, params.Params, engine.Config]:
    """(the job, its params, its configuration) from the JSON file at ``path``."""
    spec = json.loads(Path(path).read_text())
    p = params.Params(**{k: v for k, v in spec["params"].items() if k in params.FIELDS})
    return spec, p, engine.Config.of(**spec["config"])


def global_batches(p, cfg, global_batch: int, rank: int, world: int, device, n: int = 4) -> list:
    """``n`` deterministic global batches; this rank's contiguous slice of each, on its device."""
    per, out = global_batch // world, []
    for i in range(n):
        gen = torch.Generator().manual_seed(p.seed + 1000 + i)
        x = torch.randn((global_batch, cfg.in_channels, cfg.image_size, cfg.image_size), generator=gen)
        y = torch.randint(0, cfg.num_classes, (global_batch,), generator=gen)
        out.append(tuple(t[rank * per : (rank + 1) * per].to(device) for t in (x, y)))
    return out


def _all_reduce(value: float, op, device) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=op)
    return float(t)


def main(argv=None) -> int:
    paths.die_with_parent()  # a rank never outlives torchrun's agent
    spec, p, cfg = read_job((argv or sys.argv[1:])[0])
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    b = devices.backend(f"cuda:{local}" if spec["backend"] == "nccl" else "cpu")  # NCCL (RCCL): a GPU each
    b.enter_worker()
    dist.init_process_group(spec["backend"], rank=rank, world_size=world)
    try:
        result = train(spec, p, cfg, rank, world, b)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(spec["out"], RESULT).write_text(json.dumps(result, indent=1))
    return 0


def train(spec: dict, p, cfg, rank: int, world: int, device) -> dict:
    """The loss check at each reference global batch, then the measured run, each from fresh weights."""
    reference = {}
    for global_batch in spec["reference_batches"]:
        with engine.Workload(cfg, device, p) as work:
            reference[str(global_batch)] = _run(spec, p, work, rank, world, global_batch, check_only=True)
    with engine.Workload(cfg, device, p) as work:
        result = _run(spec, p, work, rank, world, cfg.batch_size * world)
    return {**result, "reference_losses": reference}


def _run(spec: dict, p, work, rank: int, world: int, global_batch: int, check_only: bool = False):
    # BatchNorm as in one process: a SyncBatchNorm's all-reduces, paid at world size 2 only, understate efficiency
    device = work.device
    work.forward = ddp = DistributedDataParallel(work.model, device_ids=work.backend.ddp_device_ids())
    batches = global_batches(p, work.cfg, global_batch, rank, world, device)

    def step(i: int) -> torch.Tensor:
        work.train_step(batches[i % len(batches)])
        return work.last_loss

    def mean(loss: torch.Tensor) -> float:
        return _all_reduce(float(loss), dist.ReduceOp.SUM, device) / world

    ddp.eval()  # the check: dropout off, BatchNorm on running statistics
    check = [mean(step(i)) for i in range(CHECK_STEPS)]
    ddp.train()
    if check_only:
        return check
    for i in range(p.warmup_steps):
        step(i)
    windows, steps = [], p.scaling_steps
    with telemetry.Sampler(work.backend, p.telemetry_interval_s) as sampler:
        for _ in range(p.scaling_repeats):
            dist.barrier()
            work.backend.synchronize()
            start = time.perf_counter()
            for i in range(steps):
                step(i)
            work.backend.synchronize()
            windows.append(_all_reduce(time.perf_counter() - start, dist.ReduceOp.MAX, device))
    sampled = {"rank": rank, "device": str(device), "summary": sampler.summary(), "series": sampler.series()}
    Path(spec["out"], RANK_TELEMETRY.format(rank)).write_text(json.dumps(sampled))
    # what the ranks ran and measured (what was asked for: job.json beside it)
    result = dict(world_size=world, backend=spec["backend"], global_batch=global_batch, check_losses=check)
    result |= dict(device_kind=work.backend.kind, device_name=work.backend.name())
    result |= dict(threads_per_process=torch.get_num_threads(), loss_last=mean(work.last_loss))
    return result | throughput(windows, global_batch, steps)


def throughput(windows: list[float], global_batch: int, steps: int) -> dict:
    """All images over the summed (slowest-rank) window times, and the 95% interval over windows."""
    images, total = global_batch * steps, sum(windows)
    out = dict(throughput_img_s=images * len(windows) / total, window_times_s=windows)
    out["throughput_ci95_img_s"] = timing.ci95_half_width([images / w for w in windows])
    return out | dict(step_time_mean_s=total / (len(windows) * steps))


if __name__ == "__main__":
    raise SystemExit(main())
