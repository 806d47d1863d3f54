"""cnnbench: measure CNN training speed across CPUs and accelerators, and explain it.

Imports are lazy: ``import cnnbench`` (and ``cnnbench --help``) does not import torch; ``cnnbench.open_run``
and ``cnnbench.Run`` load :mod:`cnnbench.run` on first use."""

import os

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep torch.profiler's start/stop chatter out of notebooks

__version__ = "0.1.0"
SCHEMA_VERSION = 3  # bumped when a results CSV changes meaning; 08_analysis refuses to merge across versions

__all__ = ["Run", "open_run", "SCHEMA_VERSION", "__version__"]


def __getattr__(name: str):
    if name in ("Run", "open_run"):
        from cnnbench import run

        return getattr(run, name)
    raise AttributeError(f"module 'cnnbench' has no attribute '{name}'")
