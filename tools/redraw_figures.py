"""Redraw a finished run's figures that notebooks 01, 05 and 06 draw from its own CSVs, measuring nothing, after a
change to how the figures are drawn. The drawing call is read from the notebook's own cell, so the two cannot
drift; this tool only names the table each figure is drawn from. 08's figures and the report are redrawn by
`cnnbench report RUN_DIR`.

    python tools/redraw_figures.py examples/example-cuda-h200 [more run folders]
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

from cnnbench import results  # noqa: E402

# figure -> the table it is drawn from (the notebook's call gets that table, or the run where it takes the run)
TABLES = {
    "complexity.png": "complexity",
    "backends_cnn.png": "backends",
    "backend_ops.png": "backend_ops",
    "transfer_curves.png": "transfer",
    "scaling_telemetry.png": "transfer_telemetry",
}


NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def calls(notebooks: Path = NOTEBOOKS) -> dict[str, tuple[str, str, bool]]:
    """figure -> (module, function, takes the run) of the call in a notebook cell that draws it."""
    found = {}
    for nb in sorted(notebooks.glob("0*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        pattern = r"(\w+)\.(\w+)\(([^()]*?), run\.figure_path\(\"([\w.]+)\"\)\)"
        for module, function, first, figure in re.findall(pattern, code):
            found[figure] = (module, function, first.strip() == "run")
    return found


def redraw(run_dir: Path) -> list[Path]:
    """Each figure of :data:`TABLES` that the run holds, with its table, redrawn in place; the paths drawn."""
    run, figures, drawn, found = SimpleNamespace(dir=run_dir), run_dir / "figures", [], calls()
    for name, table in TABLES.items():
        if (run_dir / f"{table}.csv").exists() and (figures / name).exists():
            module, function, takes_run = found[name]
            draw = getattr(importlib.import_module(f"cnnbench.{module}"), function)
            draw(run if takes_run else results.read(run_dir, table), figures / name)
            matplotlib.pyplot.close("all")
            drawn.append(figures / name)
    return drawn


if __name__ == "__main__":
    for folder in sys.argv[1:] or sys.exit(__doc__):
        for path in redraw(Path(folder)):
            print(f"redrawn: {path}")
