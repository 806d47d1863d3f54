"""05's one entry point: the from-scratch backends (seeds 001 and 004; one module per family, built by
:func:`make`), its experiment, tables, figures and the seeds' numbers."""

from __future__ import annotations

from cnnbench import published as published
from cnnbench.scratch.base import BackendUnavailable as BackendUnavailable
from cnnbench.scratch.base import OpTimer as OpTimer
from cnnbench.scratch.base import torch_weights as torch_weights
from cnnbench.scratch.experiment import load_data as load_data
from cnnbench.scratch.experiment import load_frames as load_frames
from cnnbench.scratch.experiment import make as make
from cnnbench.scratch.experiment import run_all as run_all
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
