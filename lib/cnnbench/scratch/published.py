"""Seeds 001 and 004's tables under the names 05 has used: the very objects :mod:`cnnbench.published` builds from
``data/seed_numbers.csv`` (the one copy of every seed number), not copies.

``TABLE_I_001`` is seed 001's Table I (``BACKENDS_001``); ``TABLE_3_004``, ``TABLE_4_004`` and ``TABLE_5_004`` are
seed 004's Tables 3-5 (``TIMES_004``, ``OPS_004``, ``MEMORY_004``: CPU = NumPy, GPU = CuPy).
"""

from __future__ import annotations

from cnnbench.published import BACKENDS_001 as TABLE_I_001
from cnnbench.published import MEMORY_004 as TABLE_5_004
from cnnbench.published import OPS_004 as TABLE_4_004
from cnnbench.published import SEED_001, SEED_004
from cnnbench.published import TIMES_004 as TABLE_3_004

__all__ = ["SEED_001", "SEED_004", "TABLE_I_001", "TABLE_3_004", "TABLE_4_004", "TABLE_5_004"]
