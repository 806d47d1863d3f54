"""Data-parallel training with DistributedDataParallel, one process per device, launched by torchrun:

    python -m torch.distributed.run --standalone --nproc_per_node 2 -m cnnbench.scaling.ddp --out DIR
    # several machines: the same script on each, e.g. 2 nodes x 8 GPUs, run on every node:
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 \\
        -m cnnbench.scaling.ddp --backend nccl --out DIR

Every rank trains on its slice of the same deterministic global batches. The first ``--check-steps`` steps
(dropout off, BatchNorm on running statistics) record the loss averaged over ranks, which must equal one
process's at the same global batch; then ``--repeats`` windows of ``--steps`` steps, each timed as the slowest
rank's. Rank 0 writes ``result.json``; every rank its telemetry."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from cnnbench import devices, heap, models, paths
from cnnbench.measure import telemetry, timing


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="cnnbench.scaling.ddp", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch-size", type=int, default=32, help="per-device batch size")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--check-steps", type=int, default=3, help="steps whose rank-averaged loss is recorded")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="measured steps per window")
    ap.add_argument("--repeats", type=int, default=3, help="measured windows (0: the loss check only)")
    ap.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    ap.add_argument("--threads", type=int, default=0, help="CPU threads per process (0: torch's default)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--telemetry-interval", type=float, default=0.1)
    ap.add_argument("--host-heap", default="keep", choices=heap.HEAPS, help="see cnnbench.heap")
    ap.add_argument(
        "--reference-batches",
        type=int,
        nargs="*",
        default=[],
        help="global batch sizes whose check losses are also recorded (the single-device reference)",
    )
    ap.add_argument("--out", required=True, help="folder for result.json and telemetry_rank<r>.json")
    return ap.parse_args(argv)


def backend_for(name: str) -> str:
    """The torch.distributed backend: ``auto`` is that of the device ``auto`` resolves to (nccl on GPUs)."""
    return devices.backend(devices.resolve("auto")).ddp_backend if name == "auto" else name


def global_batches(args, global_batch: int, rank: int, world: int, device: torch.device, n: int = 4) -> list:
    """``n`` deterministic global batches of the model's input; this rank keeps its contiguous slice of each, on
    its device."""
    per = global_batch // world
    out = []
    for i in range(n):
        gen = torch.Generator().manual_seed(args.seed + 1000 + i)
        x = torch.randn((global_batch, *models.input_shape(args.model, args.image_size)), generator=gen)
        y = torch.randint(0, args.num_classes, (global_batch,), generator=gen)
        out.append((x[rank * per : (rank + 1) * per].to(device), y[rank * per : (rank + 1) * per].to(device)))
    return out


def _mean_over_ranks(value: torch.Tensor, world: int) -> float:
    value = value.detach().float().clone()
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return float(value) / world


def _slowest(seconds: float, device: torch.device) -> float:
    t = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def main(argv=None) -> int:
    paths.die_with_parent()  # a rank never outlives torchrun's agent
    args = parse(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    backend = backend_for(args.backend)
    # NCCL (RCCL) runs on GPUs
    device = torch.device(f"cuda:{local}") if backend == "nccl" else torch.device("cpu")
    devices.backend(device).enter_worker()
    if args.threads:
        torch.set_num_threads(args.threads)
    heap.apply(args.host_heap)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        with devices.backend(device).math("fp32"):  # fp32 means fp32, as in every other experiment
            result = train(args, rank, world, device, backend)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(args.out, "result.json").write_text(json.dumps(result, indent=1))
    return 0


def setup(args, rank: int, world: int, device: torch.device, global_batch: int):
    """(DDP model, optimizer, this rank's batches): the same initial weights on every rank and in every call."""
    torch.manual_seed(args.seed)
    # the single-device model, BatchNorm as it is (no SyncBatchNorm, on CUDA as on CPU): a SyncBatchNorm would
    # add an all-reduce per BN layer at world size 2 that world size 1 never pays, understating the efficiency
    net = models.build(args.model, num_classes=args.num_classes, image_size=args.image_size).to(device)
    ddp = DistributedDataParallel(net, device_ids=devices.backend(device).ddp_device_ids())
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    return ddp, opt, global_batches(args, global_batch, rank, world, device)


def stepper(ddp, opt, batches):
    loss_fn = nn.CrossEntropyLoss()

    def step(i: int) -> torch.Tensor:
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(models.logits(ddp(x)), y)
        loss.backward()
        opt.step()
        return loss

    return step


def check_losses(ddp, step, n: int, world: int) -> list[float]:
    """The rank-averaged loss of ``n`` steps with dropout off and BatchNorm on running statistics."""
    ddp.eval()
    losses = [_mean_over_ranks(step(i), world) for i in range(n)]
    ddp.train()
    return losses


def train(args, rank: int, world: int, device: torch.device, backend: str) -> dict:
    reference = {}
    # the same check at other global batches, from the same weights
    for global_batch in args.reference_batches:
        ddp, opt, batches = setup(args, rank, world, device, global_batch)
        reference[str(global_batch)] = check_losses(ddp, stepper(ddp, opt, batches), args.check_steps, world)
    ddp, opt, batches = setup(args, rank, world, device, args.batch_size * world)
    step = stepper(ddp, opt, batches)
    check = check_losses(ddp, step, args.check_steps, world)
    for i in range(args.warmup):
        step(i)
    windows, last = [], float("nan")
    with telemetry.Sampler(device, args.telemetry_interval) as sampler:
        for _ in range(args.repeats):
            dist.barrier()
            devices.synchronize(device)
            start = time.perf_counter()
            for i in range(args.steps):
                loss = step(i)
            devices.synchronize(device)
            windows.append(_slowest(time.perf_counter() - start, device))
    if args.repeats:
        last = _mean_over_ranks(loss, world)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    sampled = {"rank": rank, "device": str(device), "summary": sampler.summary(), "series": sampler.series()}
    Path(args.out, f"telemetry_rank{rank}.json").write_text(json.dumps(sampled))
    result = {
        "world_size": world,
        "backend": backend,
        "model": args.model,
        "per_device_batch": args.batch_size,
        "global_batch": args.batch_size * world,
        "image_size": args.image_size,
        "device_kind": devices.backend(device).kind,
        "device_name": devices.device_name(device),
        "threads_per_process": torch.get_num_threads(),
        "check_losses": check,
        "reference_losses": reference,
        "loss_last": last,
        "measured_steps": args.steps,
        "repeats": args.repeats,
    }
    if windows:
        result.update(throughput(windows, args.batch_size * world, args.steps))
    return result


def throughput(windows: list[float], global_batch: int, steps: int) -> dict:
    """All images over the summed (slowest-rank) window times, and the 95% interval over windows."""
    images_per_window = global_batch * steps
    rates = [images_per_window / w for w in windows]
    return {
        "throughput_img_s": images_per_window * len(windows) / sum(windows),
        "throughput_ci95_img_s": timing.ci95_half_width(rates),
        "window_times_s": windows,
        "step_time_mean_s": sum(windows) / (len(windows) * steps),
    }


if __name__ == "__main__":
    raise SystemExit(main())
