"""The time model: every op of a step (forward, backward, optimizer step; :mod:`cnnbench.measure.traffic`'s counts)
takes max(FLOPs / (efficiency x peak), bytes / (efficiency x bandwidth)) plus a fixed overhead, and a step is their
sum. The efficiencies (one per op class) and the overhead are fitted per device kind on rows of rates, by least
squares on the log of the step time; the log-efficiencies are pulled toward their mean (``SHRINK``), so classes the
rows cannot tell apart stay together instead of absorbing each other's error."""

from __future__ import annotations

import functools
import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

# convolution and matmul are compute classes (their bytes stream at the elementwise efficiency); batch norm is
# normalisation while training (several passes over its input) and elementwise in eval (one pass)
CLASSES = ("convolution", "matmul", "elementwise", "normalisation", "pooling")
SHRINK = 0.05
STEPS, LEARNING_RATE, START = 600, 0.05, (0.3, 2e-5)  # Adam; every fit starts at 30% and 20 us per op


def cache_dir() -> Path:
    """Where op counts are kept between processes: $CNNBENCH_CACHE, else the user's cache folder."""
    return Path(
        os.environ.get("CNNBENCH_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")) / "cnnbench"
    )


@functools.cache
def ops(model: str, batch_size: int, image_size: int, num_classes: int, phase: str, precision: str):
    """FLOPs, bytes and class (index into CLASSES) of every op of one step, counted on the meta device (kept on
    disk under :func:`cache_dir`, keyed by the arguments, torch's version and the counters' source)."""
    import torch

    from cnnbench.measure import flops, traffic

    key = [model, batch_size, image_size, num_classes, phase, precision, torch.__version__]
    key += [Path(m.__file__).read_text() for m in (flops, traffic)]
    path = cache_dir().expanduser() / f"ops-{hashlib.sha256(repr(key).encode()).hexdigest()[:20]}.npy"
    if path.exists():
        f, b, c = np.load(path)
        return f, b, c.astype(int)
    o = traffic.count_step(model, batch_size, image_size, num_classes, phase, precision)
    name = o.op.str
    train_bn = name.contains("batch_norm") & (phase == "train")
    cls = np.select([name.contains("conv"), o.flops > 0, train_bn, name.contains("pool")], [0, 1, 3, 4], 2)
    out = np.stack([o.flops.to_numpy(float), o.bytes.to_numpy(float), cls])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path.with_suffix(f".{os.getpid()}.npy"), out)
    os.replace(path.with_suffix(f".{os.getpid()}.npy"), path)
    return ops(model, batch_size, image_size, num_classes, phase, precision)


def _stack(rows: pd.DataFrame):
    """Every row's compute ops one by one and its memory-bound ops' bytes summed per class (their time is the same),
    as tensors: FLOPs, bytes, class, row, the row's peak and bandwidth; and each row's number of ops."""
    import torch

    counted = [ops(r.model, int(r.batch_size), int(r.image_size), int(r.num_classes), r.phase, r.precision)
               for r in rows.itertuples()]  # fmt: skip
    parts = []
    for flops, nbytes, cls in counted:
        mem = cls >= 2
        summed = np.bincount(cls[mem] - 2, weights=nbytes[mem], minlength=len(CLASSES) - 2)
        parts.append((np.r_[flops[~mem], 0 * summed], np.r_[nbytes[~mem], summed], np.r_[cls[~mem], 2:5]))
    row = np.repeat(np.arange(len(parts)), [len(p[0]) for p in parts])
    flops, nbytes, cls = (np.concatenate([p[i] for p in parts]) for i in range(3))
    peak, bandwidth = (rows[c].to_numpy(float)[row] * 1e9 for c in ("peak_gflops", "bandwidth_gbs"))
    counts = np.array([len(c[0]) for c in counted], float)
    return [torch.as_tensor(a) for a in (flops, nbytes, cls, row, peak, bandwidth, counts)]


def _parts(log_params, stacked, n: int):
    """Seconds per step of each row: (compute-bound ops, memory-bound ops, overhead)."""
    import torch

    flops, nbytes, cls, row, peak, bandwidth, count = stacked
    e = torch.exp(log_params[: len(CLASSES)])
    compute = flops / (e[cls] * peak)
    memory = nbytes / (torch.where(cls <= 1, e[2], e[cls]) * bandwidth)

    def per_row(x):
        return torch.zeros(n, dtype=x.dtype).index_add_(0, row, x)

    slower = torch.maximum(compute, memory)
    return (
        per_row(torch.where(compute >= memory, slower, 0)),
        per_row(torch.where(compute < memory, slower, 0)),
        count * torch.exp(log_params[len(CLASSES)]),
    )


@dataclass(frozen=True)
class Fit:
    """Fitted efficiencies (one per class of CLASSES) and overhead of one device kind, and the rows they came from."""

    kind: str
    efficiency: tuple[float, ...]
    overhead_s: float
    rows: int
    models: tuple[str, ...]

    @property
    def log_params(self):
        import torch

        return torch.log(torch.tensor([*self.efficiency, self.overhead_s], dtype=torch.float64))

    def text(self) -> str:
        eff = ", ".join(f"{c} {e:.0%}" for c, e in zip(CLASSES, self.efficiency, strict=True))
        return (
            f"{self.kind} efficiencies {eff}, overhead {self.overhead_s * 1e6:.1f} us per op, fitted on "
            f"{self.rows} row(s) of {', '.join(self.models)}"
        )


def fit(rows: pd.DataFrame, kind: str) -> Fit:
    """Efficiencies and overhead minimising the squared log error of the step time (batch / rate) of ``rows``."""
    import torch

    stacked, n = _stack(rows), len(rows)
    target = torch.log(torch.tensor((rows.batch_size / rows.rate_img_s).to_numpy(float)))
    theta = torch.tensor([math.log(START[0])] * len(CLASSES) + [math.log(START[1])], dtype=torch.float64)
    theta.requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=LEARNING_RATE)
    for _ in range(STEPS):
        opt.zero_grad()
        log_e = theta[: len(CLASSES)]
        error = torch.log(sum(_parts(theta, stacked, n))) - target
        loss = (error**2).mean() + SHRINK * ((log_e - log_e.mean()) ** 2).mean()
        loss.backward()
        opt.step()
    values = theta.detach().exp().tolist()
    return Fit(kind, tuple(values[:-1]), values[-1], n, tuple(sorted(set(rows.model))))


def predict(rows: pd.DataFrame, f: Fit | None) -> pd.DataFrame:
    """Per row (model, batch_size, image_size, num_classes, phase, precision, peak_gflops, bandwidth_gbs, level): the
    roofline ceiling (images/s with every op at the peak and the bandwidth, no overhead) and with ``f``, the predicted
    images/s, what bounds the step (the part taking most of its time) and each part's share."""
    import torch

    stacked, n = _stack(rows), len(rows)
    ceiling = sum(_parts(torch.tensor([0.0] * len(CLASSES) + [-math.inf], dtype=torch.float64), stacked, n))
    out = pd.DataFrame({"ceiling_img_s": rows.batch_size.to_numpy(float) / ceiling.numpy()}, index=rows.index)
    if f is None:
        return out
    parts = np.stack([p.numpy() for p in _parts(f.log_params, stacked, n)], axis=1)
    total = parts.sum(axis=1)
    rate = rows.batch_size.to_numpy(float) / total
    return out.assign(
        predicted_img_s=rate,
        bound=[
            ("compute", f"memory ({lv})", "overhead")[i]
            for i, lv in zip(parts.argmax(axis=1), rows.level, strict=True)
        ],
        time_shares=[
            ", ".join(f"{w} {s:.0%}" for w, s in zip(("compute", "memory", "overhead"), p / t, strict=True))
            for p, t in zip(parts, total, strict=True)
        ],
        fit=f.text(),
    )
