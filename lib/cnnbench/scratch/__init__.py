"""From-scratch backends (seeds 001 and 004): the MNIST CNN and the 784-10-10 MLP with full backpropagation.

One interface (:class:`cnnbench.scratch.base.Backend`), one module per backend family:

- ``xp_backend``: NumPy and CuPy (one array-module implementation, im2col into BLAS)
- ``numba_cpu``: fused ``@njit(parallel=True)`` loops, compile time measured apart
- ``numba_cuda``: ``@cuda.jit`` kernels for every op (runs on Numba's CUDA simulator in the tests)
- ``torch_backend``: PyTorch on CPU, CUDA and MPS running the same networks

:func:`make` builds any of them by name, or raises :class:`BackendUnavailable` with the reason.

05's one entry point: the experiment (``load_data``, ``run_all``, ``load_frames`` of :mod:`.experiment`), its
tables and figures (:mod:`.summary`) and the seeds' numbers (:mod:`cnnbench.published`), named here."""

from __future__ import annotations

from cnnbench import published
from cnnbench.params import SCRATCH_BACKENDS
from cnnbench.scratch.base import BackendUnavailable, OpTimer, torch_weights
from cnnbench.scratch.experiment import load_data, load_frames, run_all
from cnnbench.scratch.registry import make
from cnnbench.scratch.summary import (
    beside_seed_001,
    beside_seed_004,
    convergence,
    figure_1,
    forward_backward,
    gradcheck_table,
    memory_table,
    op_breakdown,
    op_kinds,
    speed_goals,
    status,
    summarize,
)

BACKENDS = tuple(SCRATCH_BACKENDS)
# the device type each backend runs on (cpu | cuda | mps), as in every results file
DEVICE_KIND = SCRATCH_BACKENDS

__all__ = [
    "BACKENDS",
    "DEVICE_KIND",
    "BackendUnavailable",
    "OpTimer",
    "beside_seed_001",
    "beside_seed_004",
    "convergence",
    "figure_1",
    "forward_backward",
    "gradcheck_table",
    "load_data",
    "load_frames",
    "make",
    "memory_table",
    "op_breakdown",
    "op_kinds",
    "published",
    "run_all",
    "speed_goals",
    "status",
    "summarize",
    "torch_weights",
]
