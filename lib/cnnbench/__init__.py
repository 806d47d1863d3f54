"""cnnbench: measure CNN training speed across CPUs and accelerators, and explain it."""

import os

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep torch.profiler's start/stop chatter out of notebooks

__version__ = "0.1.0"
SCHEMA_VERSION = 2  # bumped when a results CSV changes meaning; 08_analysis refuses to merge across versions

from cnnbench.run import Run, open_run  # noqa: E402

__all__ = ["Run", "open_run", "SCHEMA_VERSION", "__version__"]
