"""From-scratch backends (seeds 001 and 004): the MNIST CNN and the 784-10-10 MLP with full backpropagation.

One interface (:class:`cnnbench.scratch.base.Backend`), one module per backend family:

- ``xp_backend``: NumPy and CuPy (one array-module implementation, im2col into BLAS)
- ``numba_cpu``: fused ``@njit(parallel=True)`` loops, compile time measured apart
- ``numba_cuda``: ``@cuda.jit`` kernels for every op (runs on Numba's CUDA simulator in the tests)
- ``torch_backend``: PyTorch on CPU, CUDA and MPS running the same networks

:func:`make` builds any of them by name, or raises :class:`BackendUnavailable` with the reason.

05's one entry point: the experiment (``load_data``, ``run_all``, ``load_frames`` of :mod:`.experiment`), its
tables and figures (:mod:`.summary`) and the seeds' numbers (:mod:`cnnbench.published`), re-exported here and
imported on first use (a worker importing one backend does not pay for matplotlib).
"""

from __future__ import annotations

from cnnbench.params import SCRATCH_BACKENDS
from cnnbench.scratch.base import MODELS, Backend, BackendUnavailable, OpTimer, torch_weights

BACKENDS = tuple(SCRATCH_BACKENDS)
DEVICE_KIND = SCRATCH_BACKENDS  # the device type each backend runs on (cpu | cuda | mps), as in every results file

_EXPERIMENT = ("load_data", "run_all", "load_frames")
_SUMMARY = ("status", "summarize", "speed_goals", "gradcheck_table", "beside_seed_001", "op_kinds", "beside_seed_004",
            "forward_backward", "memory_table", "figure_1", "convergence", "op_breakdown")

__all__ = ["BACKENDS", "DEVICE_KIND", "MODELS", "Backend", "BackendUnavailable", "OpTimer", "make",
           "torch_weights", "published", *_EXPERIMENT, *_SUMMARY]


def __getattr__(name: str):
    """The experiment's and the summary's functions (and ``published``), imported on first use."""
    import importlib

    if name in _EXPERIMENT:
        return getattr(importlib.import_module("cnnbench.scratch.experiment"), name)
    if name in _SUMMARY:
        return getattr(importlib.import_module("cnnbench.scratch.summary"), name)
    if name == "published":
        return importlib.import_module("cnnbench.published")
    raise AttributeError(f"module 'cnnbench.scratch' has no attribute '{name}'")


def make(name: str, model: str, lr: float = 0.01, momentum: float = 0.9) -> Backend:
    """The backend ``name`` for ``model``; :class:`BackendUnavailable` (reason in the message) if it cannot run."""
    if name == "numpy":
        from cnnbench.scratch.xp_backend import XpBackend

        return XpBackend(name, model, lr=lr, momentum=momentum)
    if name == "cupy":
        from cnnbench.scratch.cupy_support import cupy_backend

        return cupy_backend(model, lr, momentum)
    if name == "numba_cpu":
        from cnnbench.scratch.numba_cpu import NumbaCpuBackend

        return NumbaCpuBackend(model, lr=lr, momentum=momentum)
    if name == "numba_cuda":
        from cnnbench.scratch.numba_cuda import NumbaCudaBackend

        return NumbaCudaBackend(model, lr=lr, momentum=momentum)
    if name.startswith("torch_"):
        from cnnbench.scratch.torch_backend import TorchBackend

        return TorchBackend(name, model, lr=lr, momentum=momentum)
    raise ValueError(f"unknown scratch backend '{name}'; valid: {', '.join(BACKENDS)}")
