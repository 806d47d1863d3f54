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

from cnnbench import published as published
from cnnbench.scratch.base import BackendUnavailable as BackendUnavailable
from cnnbench.scratch.base import OpTimer as OpTimer
from cnnbench.scratch.base import torch_weights as torch_weights
from cnnbench.scratch.experiment import load_data as load_data
from cnnbench.scratch.experiment import load_frames as load_frames
from cnnbench.scratch.experiment import run_all as run_all
from cnnbench.scratch.registry import make as make
from cnnbench.scratch.summary import beside_seed_001 as beside_seed_001
from cnnbench.scratch.summary import beside_seed_004 as beside_seed_004
from cnnbench.scratch.summary import convergence as convergence
from cnnbench.scratch.summary import figure_1 as figure_1
from cnnbench.scratch.summary import forward_backward as forward_backward
from cnnbench.scratch.summary import gradcheck_table as gradcheck_table
from cnnbench.scratch.summary import memory_table as memory_table
from cnnbench.scratch.summary import op_breakdown as op_breakdown
from cnnbench.scratch.summary import op_kinds as op_kinds
from cnnbench.scratch.summary import speed_goals as speed_goals
from cnnbench.scratch.summary import status as status
from cnnbench.scratch.summary import summarize as summarize
