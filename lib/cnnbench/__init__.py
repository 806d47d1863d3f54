"""cnnbench: measure CNN training speed across CPUs and accelerators, and explain it."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1  # bumped when a results CSV changes meaning; 05_analysis refuses to merge across versions

from cnnbench.run import Run, open_run  # noqa: E402

__all__ = ["Run", "open_run", "SCHEMA_VERSION", "__version__"]
