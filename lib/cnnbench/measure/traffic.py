"""Arithmetic intensity without hardware counters: FLOPs and bytes of every aten op of a real step, under
**compulsory traffic with no reuse between ops** (each op reads its inputs once and writes its outputs once;
views move nothing). FLOPs as in ``cnnbench.measure.flops`` (elementwise and normalisation ops: none)."""

from __future__ import annotations

import sys

import pandas as pd
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.module_tracker import ModuleTracker

from cnnbench import models, paths
from cnnbench.devices import DTYPES
from cnnbench.measure import flops

_NO_TRAFFIC = {
    f"aten::{op}" for op in "detach alias lift_fresh empty empty_strided empty_like _to_copy_meta".split()
}


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor's elements occupy, at most its storage (broadcast views are not re-read)."""
    logical = t.numel() * t.element_size()
    try:
        return min(logical, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return logical


def shapes_key(args) -> str:
    """Argument shapes as torch.profiler records them: one list per argument, [] for non-tensors."""
    return str([list(a.shape) if isinstance(a, torch.Tensor) else [] for a in args])


# a record's columns; flops_elementwise: 1 per output element of an op without a FLOP formula (placement on
# layer rooflines only)
RECORD = ("section", "module", "op", "shapes", "flops", "flops_elementwise", "bytes_read", "bytes_written")


class TrafficCounter(TorchDispatchMode):
    """Records FLOPs and bytes of every aten op, with the innermost module and the step section it ran in."""

    def __init__(self, tracker: ModuleTracker | None = None):
        super().__init__()
        self.tracker = tracker
        self.section = "forward"
        self.records: list[tuple] = []  # one per op, as RECORD names
        self._flops = flops.flop_counter().flop_registry

    def _module(self) -> str:
        if self.tracker is None or self.section == "optimizer":
            return self.section
        names = [p for p in self.tracker.parents if p != "Global"]
        return max(names, key=lambda n: n.count("."), default="(model)")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._schema.name
        if func.is_view or name in _NO_TRAFFIC or name.startswith("profiler::"):
            return out
        packet = func._overloadpacket
        f = self._flops[packet](*args, **kwargs, out_val=out) if packet in self._flops else 0
        read = sum(tensor_bytes(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor))
        written = sum(tensor_bytes(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
        elementwise = 0 if f else sum(t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor))
        self.records.append(
            (self.section, self._module(), name, shapes_key(args), int(f), elementwise, read, written)
        )
        return out

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.records, columns=RECORD)
        return df.assign(bytes=df.bytes_read + df.bytes_written)


def count_step(
    model_name: str,
    batch_size: int,
    image_size: int,
    num_classes: int,
    phase: str = "train",
    precision: str = "fp32",
) -> pd.DataFrame:
    """Per-op FLOPs and bytes of one SGD training or eval step on the meta device, by module; cached. bf16 and
    fp16 (autocast): the model's ops in 16 bits, the optimizer on fp32 weights, gradients and momentum."""
    args = (model_name, batch_size, image_size, num_classes, phase, precision)
    code = (flops, models, sys.modules[__name__])
    return paths.cached("step", [*args, torch.__version__], lambda: _count_step(*args), code)


def train_step(model: nn.Module, x, y, opt, counter: TrafficCounter) -> None:
    """One SGD training step with ``counter`` told its section (forward, backward, optimizer) as it goes."""
    counter.section = "forward"
    loss = nn.functional.cross_entropy(models.logits(model(x)), y)
    counter.section = "backward"
    loss.backward()
    counter.section = "optimizer"
    opt.step()


def _count_step(model_name, batch_size, image_size, num_classes, phase, precision):
    torch.manual_seed(0)
    model = models.build_meta(model_name, num_classes=num_classes, image_size=image_size)
    model = model.to(device="meta", dtype=DTYPES[precision]).train(phase == "train")
    shape = (batch_size, *models.input_shape(model_name, image_size))
    x = torch.randn(shape, device="meta", dtype=DTYPES[precision])
    y = torch.randint(0, num_classes, (batch_size,), device="meta")
    params = list(model.parameters())
    if DTYPES[precision] != torch.float32:  # autocast: the optimizer steps fp32 weights with fp32 gradients
        params = [torch.zeros_like(p, dtype=torch.float32, requires_grad=True) for p in params]
        for param in params:
            param.grad = torch.zeros_like(param)
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if phase == "train":  # the steady state's step, as every one after the first: buffers exist
        for param in params:
            opt.state[param]["momentum_buffer"] = torch.zeros_like(param)
    with flops.attention_fastpath_off(), ModuleTracker() as tracker, TrafficCounter(tracker) as counter:
        if phase == "train":
            train_step(model, x, y, opt, counter)
        else:
            # no_grad, not inference_mode: under inference_mode composite ops (conv2d, linear) reach this mode
            # undecomposed and unknown to the FLOP formulas; the kernels that run are the same
            with torch.no_grad():
                model(x)
    return counter.frame()


def summary(ops: pd.DataFrame) -> dict[str, float]:
    """Whole-step FLOPs, bytes and intensity, and the share of each section."""
    out = {"gflops": ops.flops.sum() / 1e9, "gbytes": ops.bytes.sum() / 1e9}
    out["intensity_flop_per_byte"] = ops.flops.sum() / ops.bytes.sum()
    for section, g in ops.groupby("section"):
        out[f"{section}_gbytes"] = g.bytes.sum() / 1e9
        out[f"{section}_gflops"] = g.flops.sum() / 1e9
    return out


def by_op_shape(ops: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """(op, shapes) -> FLOPs, bytes and calls summed and the modules it ran in, for joining with the profiler."""
    groups = ops.groupby(["op", "shapes"], sort=False)
    summed = groups[["flops", "flops_elementwise", "bytes"]].sum()
    return summed.assign(calls=groups.size(), modules=groups.module.unique().map(list)).to_dict("index")
