"""Model complexity: parameters, MACs, FLOPs (2 x MACs, by ``FlopCounterMode``: matmuls, convolutions and
attention; not elementwise ops, normalisation or pooling, as torchvision's figures), training FLOPs and
activation memory."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import warnings
from types import SimpleNamespace

import pandas as pd
import torch
from torch import nn
from torch.utils.flop_counter import (
    FlopCounterMode,
    conv_flop_count,
    get_shape,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

from cnnbench import models
from cnnbench.progress import bar

aten = torch.ops.aten


def _conv_backward_flop(grad_out_shape, x_shape, w_shape, *args, out_shape, **kwargs) -> int:
    """Convolution backward, its weight gradient costing the forward's FLOPs (torch's formula ignores ``groups``)."""
    _bias, _stride, _padding, _dilation, transposed, _output_padding, _groups, output_mask = args
    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(grad_out_shape, w_shape, get_shape(out_shape[0]), not transposed)
    if output_mask[1]:
        flops += conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return flops


FLOP_FORMULAS = {
    aten.convolution_backward: _conv_backward_flop,
    # scaled_dot_product_attention's CPU kernels: Q K^T and softmax(Q K^T) V, by torch's own SDPA formulas
    aten._scaled_dot_product_flash_attention_for_cpu: lambda q, k, v, *_, **__: sdpa_flop_count(q, k, v),
    aten._scaled_dot_product_flash_attention_for_cpu_backward: lambda g, q, k, v, *_, **__: (
        sdpa_backward_flop_count(g, q, k, v)
    ),
}

# torchvision publishes _ops rounded to 3 decimals (GMACs): below 0.05 GMACs that rounding alone exceeds 1%
PUBLISHED_REL_TOL = 0.01
PUBLISHED_ABS_TOL_GMACS = 0.0005


def flop_counter() -> FlopCounterMode:
    """``FlopCounterMode`` with this module's corrections registered."""
    return FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS)


@contextlib.contextmanager
def attention_fastpath_off():
    """``nn.MultiheadAttention`` / ``TransformerEncoderLayer`` take their unfused path in the block."""
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def matches_published(gmacs: float, published: float | None) -> bool:
    """True when ``gmacs`` agrees with a published figure within 1% (or its 3-decimal rounding); no figure: True."""
    if pd.isna(published):
        return True
    return math.isclose(gmacs, published, rel_tol=PUBLISHED_REL_TOL, abs_tol=PUBLISHED_ABS_TOL_GMACS)


def forward_flops(model: nn.Module, x: torch.Tensor) -> int:
    """FLOPs of one forward pass over the batch ``x`` (2 per multiply-add)."""
    with torch.no_grad(), attention_fastpath_off(), flop_counter() as counter:
        model(x)
    return counter.get_total_flops()


def train_flops(model: nn.Module, x: torch.Tensor, num_classes: int) -> int:
    """FLOPs of one real training step's forward + backward over the batch ``x``."""
    target = torch.randint(0, num_classes, (x.shape[0],), device=x.device)
    model.zero_grad(set_to_none=True)
    with attention_fastpath_off(), flop_counter() as counter:
        loss = nn.functional.cross_entropy(models.logits(model(x)), target)
        loss.backward()
    return counter.get_total_flops()


def activation_bytes(model: nn.Module, x: torch.Tensor, num_classes: int) -> int:
    """Bytes of the storages autograd saves for backward in one training forward, parameters excluded."""
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in param_ptrs:
            storages[ptr] = max(storages.get(ptr, 0), storage.nbytes())
        return t

    target = torch.randint(0, num_classes, (x.shape[0],), device=x.device)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = nn.functional.cross_entropy(models.logits(model(x)), target)
    del loss
    return sum(storages.values())


_MATMUL_OPS = {"conv", "linear", "addmm", "matmul", "bmm", "mm", "einsum", "scaled_dot_product_attention"}


def complexity(
    name: str, image_size: int = 0, num_classes: int = 0, batch: int = 2, with_fvcore: bool = True
) -> SimpleNamespace:
    """01's table's columns for ``name`` per image at ``image_size`` (default: its reference resolution), counted
    on the CPU; published figures (None where none applies) only at the reference resolution and classes."""
    spec = models.spec(name)
    image_size = image_size or spec.reference_size
    num_classes = num_classes or spec.reference_classes
    torch.manual_seed(0)
    model = models.build(name, num_classes=num_classes, image_size=image_size)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, *models.input_shape(name, image_size), generator=gen)

    model.eval()
    fwd = forward_flops(model, x) / batch
    fv_total, fv_ops = float("nan"), {}
    if with_fvcore:  # fvcore's total (one multiply-add = one "flop") and its per-operator breakdown
        from fvcore.nn import FlopCountAnalysis

        logging.getLogger("fvcore").setLevel(logging.ERROR)
        with warnings.catch_warnings(), torch.no_grad(), attention_fastpath_off():
            warnings.simplefilter("ignore")
            analysis = FlopCountAnalysis(model, (x[:1],))
            analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
            fv_total, fv_ops = int(analysis.total()), dict(analysis.by_operator())
    model.train()
    train = train_flops(model, x, num_classes) / batch
    act = activation_bytes(model, x, num_classes) / batch
    model.zero_grad(set_to_none=True)

    extra = {op: n for op, n in fv_ops.items() if op not in _MATMUL_OPS and n}
    applies = image_size == spec.reference_size and num_classes == spec.reference_classes
    published = spec.published_gmacs if applies else None
    gmacs = fwd / 2 / 1e9
    return SimpleNamespace(
        model=name,
        image_size=image_size,
        in_channels=spec.in_channels,
        num_classes=num_classes,
        params=models.count_params(model),
        param_mib=models.param_bytes(model) / 2**20,
        gmacs_fwd=gmacs,
        gflops_fwd=fwd / 1e9,
        gflops_train=train / 1e9,
        train_fwd_ratio=train / fwd if fwd else float("nan"),
        fvcore_gmacs=fv_total / 1e9,
        fvcore_extra_ops=", ".join(
            f"{op} {n / 1e6:.1f}M" for op, n in sorted(extra.items(), key=lambda kv: -kv[1])
        ),
        activation_mib=act / 2**20,
        published_gmacs=published,
        published_params=spec.published_params if applies else None,  # a ViT's position embedding: by size
        macs_vs_published_pct=100 * (gmacs / published - 1) if published else None,
        matches_published=matches_published(gmacs, published),
    )


counted = functools.cache(complexity)  # complexity, counted once per (model, size, classes) in a process


def training_memory(cx) -> tuple[float, float]:
    """The bytes a training step of :func:`complexity`'s ``cx`` keeps, planned before it runs: saved activations
    per image, and once 4 x the weights (weights, gradients, Adam's two moments)."""
    return cx.activation_mib * 2**20, 4 * cx.param_mib * 2**20


def table(model_names, image_size: int, num_classes: int) -> list[dict]:
    """Complexity rows of every model at its reference resolution and at ``image_size`` (one for own-data models)."""
    rows = []
    for name in bar(model_names, desc="complexity", unit="model"):
        spec = models.spec(name)
        reference = (spec.reference_size, spec.reference_classes)
        configs = [("reference", *reference), ("training", image_size, num_classes)]
        for role, size, classes in [("reference+training", *reference)] if spec.own_data else configs:
            rows.append({"role": role, **vars(complexity(name, size, classes))})
    return rows


def off_published(complexity) -> str:
    """A red HTML warning naming every count of ``complexity`` (01's rows) off torchvision's published figures,
    MACs by more than 1% and parameters at all; "" when none is (01 shows it, and the report opens with it)."""
    import html

    bad = []
    for r in complexity.itertuples():
        if not matches_published(float(r.gmacs_fwd), r.published_gmacs):
            bad.append((r.model, "forward GMACs", float(r.gmacs_fwd), float(r.published_gmacs)))
        if pd.notna(r.published_params) and int(r.params) != int(r.published_params):
            bad.append((r.model, "parameters", int(r.params), int(r.published_params)))
    items = "".join(
        f"<li><b>{html.escape(m)}</b>: {what} ours {a:,.4g}, published {b:,.4g} ({100 * (a / b - 1):+.1f}%)</li>"
        for m, what, a, b in bad
    )
    return items and (
        "<div style='border:3px solid #c00;background:#fee;padding:8px 12px'><b>WARNING: these counts disagree "
        f"with torchvision's published figures (MACs by more than {PUBLISHED_REL_TOL:.0%}, parameters at all); every "
        f"FLOP figure of these models is suspect (01 · Complexity).</b><ul>{items}</ul></div>"
    )


def published_check(complexity):
    """An HTML verdict: :func:`off_published`'s warning, or one line saying all agree."""
    from IPython.display import HTML

    checked = int(complexity.published_gmacs.notna().sum())
    within = f"within {PUBLISHED_REL_TOL:.0%} (MACs) and exactly (parameters)"
    agree = f"<p><b>Counts checked:</b> all {checked} row(s) with a published figure agree {within}.</p>"
    return HTML(off_published(complexity) or agree)
