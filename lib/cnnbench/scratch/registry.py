"""The from-scratch backends by name: :func:`make` imports only the module of the backend it builds."""

from __future__ import annotations

from cnnbench.params import SCRATCH_BACKENDS
from cnnbench.scratch.base import Backend


def make(name: str, model: str, lr: float = 0.01, momentum: float = 0.9) -> Backend:
    """The backend ``name`` for ``model``; :class:`BackendUnavailable` (reason in the message) if it cannot run."""
    if name in ("numpy", "cupy"):
        from cnnbench.scratch.xp_backend import array_backend

        return array_backend(name, model, lr, momentum)
    if name == "numba_cpu":
        from cnnbench.scratch.numba_cpu import NumbaCpuBackend

        return NumbaCpuBackend(model, lr=lr, momentum=momentum)
    if name == "numba_cuda":
        from cnnbench.scratch.numba_cuda import NumbaCudaBackend

        return NumbaCudaBackend(model, lr=lr, momentum=momentum)
    if name.startswith("torch_"):
        from cnnbench.scratch.torch_backend import TorchBackend

        return TorchBackend(name, model, lr=lr, momentum=momentum)
    raise ValueError(f"unknown scratch backend '{name}'; valid: {', '.join(SCRATCH_BACKENDS)}")
