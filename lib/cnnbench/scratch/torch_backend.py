"""PyTorch running the same two networks (``torch_cpu``, ``torch_cuda``, ``torch_mps``): the forward op by op with
``torch.nn.functional`` (each op timed), one ``loss.backward()``, ``torch.optim.SGD`` as seed 001 ran."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from cnnbench import devices
from cnnbench.params import SCRATCH_BACKENDS
from cnnbench.scratch import base
from cnnbench.scratch.base import PARAM_NAMES, Backend, BackendUnavailable, nbytes

# each layer type's op (fc's input flattened)
OPS = {"conv": F.conv2d, "relu": F.relu, "pool": lambda a: F.max_pool2d(a, 2), "fc": F.linear}


class TorchBackend(Backend):
    def __init__(self, name: str, model: str, lr: float = 0.01, momentum: float = 0.9):
        kind = SCRATCH_BACKENDS[name]
        if kind not in devices.available():
            available = ", ".join(devices.available())
            raise BackendUnavailable(f"no {kind} device visible to PyTorch here (available: {available})")
        self.device = torch.device(kind)
        super().__init__(name, model, lr, momentum)

    def sync(self) -> None:
        devices.synchronize(self.device)

    def init(self, weights: dict[str, np.ndarray]) -> None:
        f32 = {"dtype": torch.float32, "device": self.device}
        self.p = {k: torch.nn.Parameter(torch.tensor(weights[k], **f32)) for k in PARAM_NAMES[self.model]}
        self.opt = torch.optim.SGD(self.p.values(), lr=self.lr, momentum=self.momentum)
        for prm in self.p.values():  # zero gradients and momentum now, as every backend's init: SGD's first
            prm.grad = torch.zeros_like(prm)  # step then makes momentum * 0 + grad, what its lazy clone makes
            if self.momentum:
                self.opt.state[prm]["momentum_buffer"] = torch.zeros_like(prm)
        self._saved: dict[int, int] = {}

    def _forward(self, x):
        for name in base.FORWARD[self.model]:
            wb = [self.p[f"{name}.{w}"] for w in ("weight", "bias") if f"{name}.{w}" in self.p]
            with self.timer.op(name, base.KIND[name[:-1]], "forward"):
                x = OPS[name[:-1]](x.flatten(1) if name[:-1] == "fc" else x, *wb)
        return x

    def _pack(self, t):
        """Count what autograd saves for the backward (activations), once per storage, parameters excluded."""
        if not isinstance(t, torch.nn.Parameter) and t.data_ptr() != self.batch.data_ptr():
            self._saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    def _device(self, a):
        return torch.from_numpy(a).to(self.device)

    def loss_and_grads(self, x, y) -> float:
        xb, yb = self.put(x, y)
        self.opt.zero_grad(set_to_none=False)
        self._saved = {}
        with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
            logits = self._forward(xb)
            with self.timer.op("softmax_ce", "softmax", "forward"):
                loss = F.cross_entropy(logits, yb)
        with self.timer.op("backward", "gradient", "backward"):
            loss.backward()
        return float(loss.detach())

    def _sgd(self):
        self.opt.step()

    @torch.inference_mode()
    def _predict(self, x):
        return self._forward(x).argmax(dim=1).cpu().numpy()

    def _host(self, t, name=None) -> np.ndarray:
        return t.detach().cpu().numpy().copy()

    def grads(self) -> dict[str, np.ndarray]:
        return {k: self._host(v.grad) for k, v in self.p.items()}

    def memory(self) -> dict[str, int]:
        state = [t for s in self.opt.state.values() for t in s.values() if torch.is_tensor(t) and t.dim()]
        return {
            "batch": nbytes([self.batch]),
            "parameters": nbytes(self.p.values()),
            "gradients": nbytes(p.grad for p in self.p.values()),
            "optimizer_state": nbytes(state),
            "activations": int(sum(self._saved.values())),
        }


backend = TorchBackend
