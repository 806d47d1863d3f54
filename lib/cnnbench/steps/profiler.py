"""A torch.profiler trace of seed 002's fine-tuning step (Chrome/Perfetto JSON) and the top operators by self
time per pass, each operator in the labelled pass whose interval contains its start."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pandas as pd
import torch
from torch.profiler import profile, record_function, schedule

from cnnbench import devices, models
from cnnbench.measure import engine

PASSES = ("forward", "backward", "optimizer")
LABEL = "cnnbench."
GZIP_ABOVE_MIB = 20


def op_table(events, backend: devices.Backend) -> pd.DataFrame:
    """Per pass and operator: calls, self CPU and self device time (s; NaN where the profiler has none)."""
    device_timed = backend.op_time == "device"
    # host-side events only: a kernel's device time is counted in its launching operator's self device time,
    # and the device-side copies of the pass labels run on the GPU's timeline
    events = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    labels = [
        (e.name[len(LABEL) :], e.time_range.start, e.time_range.end)
        for e in events
        if e.name.startswith(LABEL) and e.name[len(LABEL) :] in PASSES
    ]
    rows = []
    for e in events:
        if e.name.startswith(LABEL) or e.name.startswith("ProfilerStep"):
            continue
        start = e.time_range.start
        where = next((name for name, lo, hi in labels if lo <= start <= hi), "other")
        device_s = backend.op_time_us(e, self_only=True) / 1e6 if device_timed else float("nan")
        rows.append((where, e.name, e.self_cpu_time_total / 1e6, device_s))
    df = pd.DataFrame(rows, columns=["pass", "op", "self_cpu_s", "self_device_s"])
    if df.empty:
        return df.assign(calls=[])
    return df.groupby(["pass", "op"], as_index=False).agg(
        calls=("op", "size"),
        self_cpu_s=("self_cpu_s", "sum"),
        self_device_s=("self_device_s", lambda s: s.sum(min_count=1)),
    )


def top_ops(table: pd.DataFrame, k: int, by: str = "self_cpu_s") -> pd.DataFrame:
    """The ``k`` operators with the largest ``by`` in each pass, with their share of the pass (%)."""
    out = []
    for _, g in table.groupby("pass", sort=False):
        total = g[by].sum()
        g = g.sort_values(by, ascending=False).head(k).assign(rank=range(1, min(k, len(g)) + 1))
        out.append(g.assign(share_of_pass_pct=100 * g[by] / total if total > 0 else float("nan")))
    return pd.concat(out, ignore_index=True) if out else table


def export(prof, folder: Path, model: str) -> Path:
    """The Chrome/Perfetto trace ``trace_<model>.json`` (gzipped when large: Perfetto opens .json.gz)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"trace_{model}.json"
    prof.export_chrome_trace(str(path))
    if not path.is_file():
        raise OSError(f"the profiler could not write {path}")
    if path.stat().st_size > GZIP_ABOVE_MIB * 2**20:
        with path.open("rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        path = Path(f"{path}.gz")
    return path


RANKED_BY = {"device": "self_device_s", "host": "self_cpu_s", "queue": "self_cpu_s"}
QUEUE_NOTE = "times are the host's time to queue each op on the device, not the device's time to run it"


def profile_model(
    cfg: engine.Config, device: torch.device, p, folder: Path, steps: int, top_k: int, optimizer: str = "sgd"
) -> list[dict]:
    """Rows of the top operators of ``steps`` traced training steps of ``cfg`` (after one warm-up), ranked by the
    time the profiler has of them here (``ranked_by``; ``time_note`` where it is not the device's)."""
    b = devices.backend(device)
    base = {
        **{k: getattr(cfg, k) for k in ("model", "batch_size", "image_size", "num_classes", "precision")},
        "optimizer": optimizer,
        "lr": p.lr,
        "device_kind": b.kind,
        "device_name": b.name(),
        "profiled_steps": steps,
    }
    try:
        plan = schedule(wait=0, warmup=1, active=steps, repeat=1)
        with engine.Workload(
            cfg.replace(phase="train", data_mode="device"), device, p, optimizer=optimizer
        ) as work:
            with profile(activities=b.profiler_activities(), schedule=plan) as prof:
                for _ in range(steps + 1):  # each pass labelled for the profiler (the loss in the forward)
                    x, y = work.next_batch()
                    with record_function(LABEL + "forward"):
                        loss = work.loss_fn(models.logits(work.forward(x)), y)
                    with record_function(LABEL + "backward"):
                        loss.backward()
                    with record_function(LABEL + "optimizer"):
                        work.optimizer.step()
                        work.optimizer.zero_grad(set_to_none=True)
                    b.synchronize()
                    prof.step()
        trace = export(prof, folder, cfg.model)
        by = RANKED_BY[b.op_time]
        ops = top_ops(op_table(prof.events(), b), top_k, by)
        note = QUEUE_NOTE if b.op_time == "queue" else ""
        done = {"ranked_by": by, "time_note": note, "trace_file": trace.name, "status": "ok", "error": ""}
        return [{**base, **r, **done} for r in ops.to_dict("records")]
    except Exception as err:  # noqa: BLE001 - a failure is a row, the run goes on
        return [{**base, "pass": "", "op": "", **engine.failure(err, device)}]
