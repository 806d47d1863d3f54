"""PyTorch running the same two networks (``torch_cpu``, ``torch_cuda``, ``torch_mps``): the forward op by op with
``torch.nn.functional`` (each op timed), one ``loss.backward()``, ``torch.optim.SGD`` as seed 001 ran."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from cnnbench import devices
from cnnbench.params import SCRATCH_BACKENDS
from cnnbench.scratch.base import BackendUnavailable, OpTimer, image_side, named_params, torch_module


class TorchBackend:
    def __init__(self, name: str, model: str, lr: float = 0.01, momentum: float = 0.9):
        self.name, self.model, self.lr, self.momentum = name, model, lr, momentum
        kind = SCRATCH_BACKENDS[name]
        if kind not in devices.available():
            available = ", ".join(devices.available())
            raise BackendUnavailable(f"no {kind} device visible to PyTorch here (available: {available})")
        self.device = torch.device(kind)
        self.timer = OpTimer(sync=self.sync)

    def sync(self) -> None:
        devices.synchronize(self.device)

    def init(self, weights: dict[str, np.ndarray]) -> None:
        image = image_side(self.model, weights)
        self.net = torch_module(self.model, image, weights["fc1.weight"].shape[0]).to(self.device)
        self.named = named_params(self.model, self.net)
        with torch.no_grad():
            for k, p in self.named.items():
                p.copy_(torch.from_numpy(np.asarray(weights[k], dtype=np.float32)))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=self.lr, momentum=self.momentum)
        self._batch = None

    def _op(self, name, kind, fn, *args):
        with self.timer.op(name, kind, "forward"):
            return fn(*args)

    def _forward(self, x):
        p = self.named
        if self.model == "mlp":
            a = self._op("fc1", "matmul", F.linear, x.flatten(1), p["fc1.weight"], p["fc1.bias"])
            a = self._op("relu1", "relu", F.relu, a)
            return self._op("fc2", "matmul", F.linear, a, p["fc2.weight"], p["fc2.bias"])
        a = self._op("conv1", "conv", F.conv2d, x, p["conv1.weight"], p["conv1.bias"])
        a = self._op("pool1", "pool", F.max_pool2d, self._op("relu1", "relu", F.relu, a), 2)
        a = self._op("conv2", "conv", F.conv2d, a, p["conv2.weight"], p["conv2.bias"])
        a = self._op("pool2", "pool", F.max_pool2d, self._op("relu2", "relu", F.relu, a), 2)
        a = self._op("fc1", "matmul", F.linear, a.flatten(1), p["fc1.weight"], p["fc1.bias"])
        a = self._op("relu3", "relu", F.relu, a)
        return self._op("fc2", "matmul", F.linear, a, p["fc2.weight"], p["fc2.bias"])

    def _pack(self, t):
        """Count what autograd saves for the backward (activations), once per storage, parameters excluded."""
        if not isinstance(t, torch.nn.Parameter) and t.data_ptr() != getattr(self._batch, "data_ptr", int)():
            self._saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    def put(self, x, y):
        with self.timer.op("input", "transfer", "forward"):
            xb = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(self.device)
            yb = torch.from_numpy(np.asarray(y, dtype=np.int64)).to(self.device)
        self._batch = xb
        return xb, yb

    def loss_and_grads(self, x, y) -> float:
        xb, yb = self.put(x, y)
        self.opt.zero_grad(set_to_none=False)
        self._saved: dict[int, int] = {}
        with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
            logits = self._forward(xb)
            loss = self._op("softmax_ce", "softmax", F.cross_entropy, logits, yb)
        with self.timer.op("backward", "gradient", "backward"):
            loss.backward()
        return float(loss.detach())

    def train_step(self, x, y) -> float:
        loss = self.loss_and_grads(x, y)
        with self.timer.op("sgd", "update", "update"):
            self.opt.step()
        return loss

    @torch.inference_mode()
    def evaluate(self, x, y, chunk: int = 2048) -> float:
        correct = 0
        for i in range(0, len(x), chunk):
            xb, yb = self.put(x[i : i + chunk], y[i : i + chunk])
            correct += int((self._forward(xb).argmax(dim=1) == yb).sum())
        return correct / max(len(x), 1)

    def params(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.named.items()}

    def grads(self) -> dict[str, np.ndarray]:
        return {k: v.grad.detach().cpu().numpy().copy() for k, v in self.named.items()}

    def memory(self) -> dict[str, int]:
        def size(ts):
            return int(sum(t.numel() * t.element_size() for t in ts))

        state = [t for s in self.opt.state.values() for t in s.values() if torch.is_tensor(t) and t.dim()]
        grads = [p.grad for p in self.named.values() if p.grad is not None]
        return {
            "batch": size([self._batch]) if self._batch is not None else 0,
            "parameters": size(self.named.values()),
            "gradients": size(grads),
            "optimizer_state": size(state),
            "activations": int(sum(getattr(self, "_saved", {}).values())),
        }
