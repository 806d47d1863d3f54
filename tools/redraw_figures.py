"""Redraw a finished run's figures that notebooks 01, 05 and 06 draw from its own CSVs, measuring nothing: the
calls those notebooks make, after a change to how the figures are drawn. 08's figures and the report are
redrawn by `cnnbench report RUN_DIR`.

    python tools/redraw_figures.py examples/example-cuda-h200 [more run folders]
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

from cnnbench import counts, results, scaling, scratch, transfer  # noqa: E402


def redraw(run_dir: Path) -> list[Path]:
    """Each figure whose table the run holds, redrawn in place; the paths drawn."""
    run, figures, drawn = SimpleNamespace(dir=run_dir), run_dir / "figures", []
    read = lambda name: results.read(run_dir, name)  # noqa: E731
    draws = {  # figure -> (the table it is drawn from, how 01, 05 and 06 draw it)
        "complexity.png": ("complexity", lambda p: counts.plot(read("complexity"), p)),
        "backends_cnn.png": ("backends", lambda p: scratch.figure_1(read("backends"), p)),
        "backend_ops.png": ("backend_ops", lambda p: scratch.op_breakdown(read("backend_ops"), p)),
        "transfer_curves.png": ("transfer", lambda p: transfer.learning_curves(read("transfer"), p)),
        "scaling_telemetry.png": ("transfer_telemetry", lambda p: scaling.telemetry(run, p)),
    }
    for name, (table, draw) in draws.items():
        if (run_dir / f"{table}.csv").exists() and (figures / name).exists():
            draw(figures / name)
            matplotlib.pyplot.close("all")
            drawn.append(figures / name)
    return drawn


if __name__ == "__main__":
    for folder in sys.argv[1:] or sys.exit(__doc__):
        for path in redraw(Path(folder)):
            print(f"redrawn: {path}")
