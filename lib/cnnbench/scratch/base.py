"""The interface every from-scratch backend implements, :func:`make` (one by name), the per-operation timer and
the two networks. Parameters travel as NumPy float32 arrays in PyTorch's layout and names, so every backend
compares one to one with autograd."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

# Each network's forward, layer by layer: a layer's type is its name less the digit, its op kind ``KIND[type]``;
# conv and fc layers hold parameters, named as in PyTorch's layout (shapes follow from the input size).
FORWARD = {
    "mnist_cnn": "conv1 relu1 pool1 conv2 relu2 pool2 fc1 relu3 fc2".split(),
    "mlp": "fc1 relu1 fc2".split(),
}
KIND = {"conv": "conv", "relu": "relu", "pool": "pool", "fc": "matmul"}
PARAM_NAMES = {
    m: tuple(f"{n}.{w}" for n in ops if n.startswith(("conv", "fc")) for w in ("weight", "bias"))
    for m, ops in FORWARD.items()
}
ACTIVATIONS = ("a1", "p1", "i1", "a2", "p2", "i2", "h", "logits")  # a step's arrays its backward reads
# Seed 004's Table 4 groups operations into these kinds; every op a backend times carries one.
OP_KINDS = ("matmul", "conv", "relu", "pool", "softmax", "gradient", "update", "transfer")


class BackendUnavailable(RuntimeError):
    """The backend cannot run here (no CUDA, no CuPy, no MPS...): the message is the reason."""


@dataclass
class OpTimer:
    """Times named operations between synchronisations (``clock``, ``sync`` injectable), the first call of each
    apart; disabled (the default during epochs) it adds no synchronisation."""

    sync: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.perf_counter
    enabled: bool = False
    # per (op, kind, phase), its calls' seconds, the first call's first
    times: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)

    @contextmanager
    def op(self, name: str, kind: str, phase: str):
        if not self.enabled:
            yield
            return
        self.sync()
        start = self.clock()
        yield
        self.sync()
        self.times.setdefault((name, kind, phase), []).append(self.clock() - start)

    def rows(self) -> list[dict]:
        """One row per op: first-call time apart, then median / mean / 95% interval of the later calls (ms)."""
        from cnnbench.measure.timing import ci95_half_width

        nan = float("nan")
        return [
            {
                "op": name,
                "op_kind": kind,
                "phase": phase,
                "calls": len(later),
                "first_call_ms": first * 1e3,
                "median_ms": statistics.median(later) * 1e3 if later else nan,
                "mean_ms": statistics.fmean(later) * 1e3 if later else nan,
                "ci95_ms": ci95_half_width(later) * 1e3,
            }
            for (name, kind, phase), (first, *later) in self.times.items()
        ]


class Backend:
    """What every from-scratch backend offers: ``init(weights)`` loads parameters (PyTorch layout, float32) and
    zeroes gradients and momentum; ``loss_and_grads(x, y)``: forward, mean softmax cross-entropy, full backward,
    the loss; ``train_step`` adds torch.optim.SGD's update (``_sgd``); ``evaluate``: accuracy; ``grads()``:
    the gradients, host NumPy copies in PyTorch layout; ``memory()``: bytes per component (batch, parameters,
    gradients, optimizer_state, activations, workspace). A backend supplies ``_layout`` and ``_device`` (a host
    batch to its arrays), ``_host`` and ``_predict``."""

    def __init__(self, name: str, model: str, lr: float = 0.01, momentum: float = 0.9):
        self.name, self.model, self.lr, self.momentum = name, model, lr, momentum
        self.timer = OpTimer(sync=self.sync)
        self.batch = None

    momentum_buffers = False  # kept without momentum too
    jit_s = float("nan")  # seconds init spent compiling (Numba)

    def sync(self) -> None:
        """Wait for queued device work (no-op on CPU backends)."""

    def _load(self, weights: dict, put) -> None:
        """``p``, ``g`` and ``v`` copied by ``put(name, host array)``; ``v`` as torch.optim.SGD keeps it."""
        host = {k: np.ascontiguousarray(weights[k], dtype=np.float32) for k in PARAM_NAMES[self.model]}
        self.p = {k: put(k, w) for k, w in host.items()}
        self.g = {k: put(k, np.zeros_like(w)) for k, w in host.items()}
        keep_v = self.momentum or self.momentum_buffers
        self.v = {k: put(k, np.zeros_like(w)) for k, w in host.items()} if keep_v else {}

    def put(self, x, y):
        """Host batch (N, C, H, W) -> the backend's arrays (its ``_layout``, on its device), timed as a transfer."""
        with self.timer.op("input", "transfer", "forward"):
            self.batch = self._device(np.ascontiguousarray(self._layout(x), dtype=np.float32))
            return self.batch, self._device(np.ascontiguousarray(y, dtype=np.int64))

    def _layout(self, x):
        return x.reshape(len(x), -1) if self.model == "mlp" else x

    def train_step(self, x, y) -> float:
        loss = self.loss_and_grads(x, y)
        with self.timer.op("sgd", "update", "update"):
            self._sgd()
        return loss

    def evaluate(self, x, y, chunk: int = 2048) -> float:
        correct = 0
        for i in range(0, len(x), chunk):
            xb, _ = self.put(x[i : i + chunk], y[i : i + chunk])
            correct += int((self._predict(xb) == y[i : i + chunk]).sum())
        return correct / max(len(x), 1)

    def grads(self) -> dict[str, np.ndarray]:
        return {k: self._host(v, k) for k, v in self.g.items()}


def torch_weights(model: str, seed: int = 0, image_size: int = 28, hidden: int = 10) -> dict[str, np.ndarray]:
    """Initial weights of :func:`torch_module` from PyTorch's seeded initialisation (same seed, same weights)."""
    import torch

    torch.manual_seed(seed)
    net = torch_module(model, image_size, hidden)
    return {k: v.detach().numpy().copy() for k, v in named_params(net, model).items()}


def named_params(net, model: str) -> dict:
    """``net``'s parameters (a :func:`torch_module`) by the names the from-scratch backends give them."""
    return dict(zip(PARAM_NAMES[model], net.parameters(), strict=True))


def torch_module(model: str, image_size: int = 28, hidden: int = 10):
    """The PyTorch network of ``model`` (the reference the from-scratch backends are checked against)."""
    from torch import nn

    from cnnbench.models import MnistCNN

    if model == "mlp":
        return nn.Sequential(
            nn.Flatten(), nn.Linear(image_size * image_size, hidden), nn.ReLU(), nn.Linear(hidden, 10)
        )
    return MnistCNN(num_classes=10, in_channels=1, image_size=image_size)


def nbytes(arrays) -> int:
    """Bytes of ``arrays`` (NumPy, CuPy, Numba device arrays or torch tensors; None skipped)."""
    return int(sum(a.nbytes for a in arrays if a is not None))


def component_bytes(backend, acts, work) -> dict[str, int]:
    """:meth:`Backend.memory` of a backend holding ``p``, ``g``, ``v``, ``batch``, ``acts`` and ``work``."""
    return {
        "batch": nbytes([backend.batch]),
        "parameters": nbytes(backend.p.values()),
        "gradients": nbytes(backend.g.values()),
        "optimizer_state": nbytes(backend.v.values()),
        "activations": nbytes(acts),
        "workspace": nbytes(work),
    }


def image_side(model: str, p: dict) -> int:
    """The side of the square images parameters ``p`` (PyTorch layout) were made for."""
    if model == "mlp":
        return int(round(p["fc1.weight"].shape[1] ** 0.5))
    pooled = int(round((p["fc1.weight"].shape[1] / p["conv2.weight"].shape[0]) ** 0.5))
    return next(s for s in range(8, 512) if ((s - 2) // 2 - 2) // 2 == pooled)


def step_buffers(model: str, p: dict, image: int, n: int, empty) -> dict:
    """The arrays a step of ``n`` images works in (activations, int32 pool argmaxes, workspace) by ``empty``."""
    hid, out = p["fc1.weight"].shape[0], p["fc2.weight"].shape[0]
    shapes = {"h": (n, hid), "logits": (n, out), "d": (n, out), "dh": (n, hid)}
    if model == "mnist_cnn":
        f1, f2 = p["conv1.weight"].shape[0], p["conv2.weight"].shape[0]
        s1, s2 = image - 2, (image - 2) // 2
        s3, s4 = s2 - 2, (s2 - 2) // 2
        conv1, pool1, conv2, pool2 = (n, f1, s1, s1), (n, f1, s2, s2), (n, f2, s3, s3), (n, f2, s4, s4)
        shapes.update(
            a1=conv1, p1=pool1, i1=pool1, a2=conv2, p2=pool2, i2=pool2, da2=conv2, dp1=pool1, da1=conv1
        )
        shapes["dflat"] = (n, f2 * s4 * s4)
    return {k: empty(s, np.int32 if k in ("i1", "i2") else np.float32) for k, s in shapes.items()}


class Buffered(Backend):
    """What the Numba backends share: a step's arrays per batch size (:func:`step_buffers`) and its kernels in
    order; a backend launches a kernel (``_launch(kernel, size, *args)``, size: the elements it writes), passes
    lr and momentum to its ``sgd`` kernel as ``scalar`` and supplies the steps that differ (``_dense_w``,
    ``_grad``, ``_softmax``, ``_loss``)."""

    def _put(self, name, a):
        return self._device(a.copy())  # never train the caller's arrays

    def init(self, weights: dict[str, np.ndarray]) -> None:
        """Parameters loaded, every kernel compiled (or loaded from Numba's cache) on a one-image batch where the
        backend ``compiles`` (``jit_s``), then the parameters loaded afresh with zero gradients and momentum."""
        self._load(weights, self._put)
        self.buffers, self.image = {}, image_side(self.model, weights)
        if self.compiles:
            start = time.perf_counter()
            self.train_step(np.zeros((1, 1, self.image, self.image), np.float32), np.zeros(1, np.int64))
            self.sync()
            self.jit_s = time.perf_counter() - start
        self._load(weights, self._put)
        self.buffers.clear()
        self.sync()

    def _forward(self, x, b):
        p, op, k, run = self.p, self.timer.op, self.kernels, self._launch
        n = x.shape[0]
        for i, source in ((1, x), (2, b["p1"])) if self.model == "mnist_cnn" else ():
            a, pooled = b[f"a{i}"], b[f"p{i}"]
            with op(f"conv{i}+relu{i}", "conv", "forward"):
                run(k.conv_relu_fwd, a.size, source, p[f"conv{i}.weight"], p[f"conv{i}.bias"], a)
            with op(f"pool{i}", "pool", "forward"):
                run(k.maxpool_fwd, pooled.size, a, pooled, b[f"i{i}"])
        if self.model == "mnist_cnn":
            x = b["p2"].reshape(n, b["p2"].size // n)
        for fc, source, out, relu in (("fc1", x, b["h"], True), ("fc2", b["h"], b["logits"], False)):
            with op("fc1+relu" if relu else "fc2", "matmul", "forward"):
                run(k.dense_fwd, out.size, source, self._dense_w(fc), p[f"{fc}.bias"], out, relu)
        return x

    def loss_and_grads(self, x, y) -> float:
        x, y = self.put(x, y)
        b, p, op, k, run = self._buf(x.shape[0]), self.p, self.timer.op, self.kernels, self._launch
        flat = self._forward(x, b)
        with op("softmax_ce", "softmax", "forward"):
            loss = self._softmax(b, y)
        with op("fc2_bwd", "gradient", "backward"):
            self._grad(k.dense_bwd_weight, "fc2", b["d"], b["h"])
            run(k.dense_bwd_input, b["dh"].size, b["d"], p["fc2.weight"], b["h"], b["dh"], True)
        with op("fc1_bwd", "gradient", "backward"):
            self._grad(k.dense_bwd_weight, "fc1", b["dh"], flat)
            if self.model == "mnist_cnn":
                run(k.dense_bwd_input, b["dflat"].size, b["dh"], p["fc1.weight"], b["dh"], b["dflat"], False)
        for i, source in ((2, b["p1"]), (1, x)) if self.model == "mnist_cnn" else ():
            da = b[f"da{i}"]
            with op(f"pool{i}+relu{i}_bwd", "gradient", "backward"):
                dpooled = b["dflat"].reshape(*b["p2"].shape) if i == 2 else b["dp1"]
                run(k.maxpool_relu_bwd, da.size, dpooled, b[f"p{i}"], b[f"i{i}"], da)
            with op(f"conv{i}_bwd", "gradient", "backward"):
                self._grad(k.conv_bwd_weight, f"conv{i}", source, da)
                if i == 2:  # the first layer's input needs no gradient
                    run(k.conv_bwd_input, b["dp1"].size, da, p["conv2.weight"], b["dp1"])
        return self._loss(loss, b)

    def _sgd(self):
        for k, p in self.p.items():
            flat = (a.reshape(p.size) for a in (p, self.g[k], self.v.get(k, p)))
            self._launch(self.kernels.sgd, p.size, *flat, self.scalar(self.lr), self.scalar(self.momentum))

    def _predict(self, x):
        b = self._buf(len(x))
        self._forward(x, b)
        return self._host(b["logits"]).argmax(axis=1)

    def memory(self) -> dict[str, int]:
        b = self.buffers[len(self.batch)]  # the last step's
        acts = [v for k, v in b.items() if k in ACTIVATIONS]
        return component_bytes(self, acts, [v for k, v in b.items() if k not in ACTIVATIONS])
