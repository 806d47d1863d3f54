#!/usr/bin/env python3
"""Notebook hygiene, run by `make test`: every notebook has exactly one `parameters` cell, kernelspec python3,
no stored outputs or execution counts, an Open-in-Colab badge pointing at itself, and the Colab set-up cell."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def problems(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    found = []
    cells = nb.get("cells", [])
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        found.append(f"has {len(tagged)} cells tagged 'parameters' (exactly one wanted)")
    if nb.get("metadata", {}).get("kernelspec", {}).get("name") != "python3":
        found.append("kernelspec is not python3")
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and (cell.get("outputs") or cell.get("execution_count")):
            found.append(f"cell {i} stores outputs or an execution count (strip with nbstripout)")
    badge = f"colab.research.google.com/github/cnnbench/cnnbench/blob/main/notebooks/{path.name}"
    if not any(badge in "".join(c.get("source", "")) for c in cells if c.get("cell_type") == "markdown"):
        found.append(f"has no Open-in-Colab badge linking to {badge}")
    if not any("colab-setup" in c.get("metadata", {}).get("tags", []) for c in cells[:4]):
        found.append("has no 'colab-setup' cell near the top")
    return found


def main(folder: str = "notebooks") -> int:
    paths = sorted(Path(folder).glob("*.ipynb"))
    if not paths:
        print(f"check_notebooks: no notebooks in {folder}", file=sys.stderr)
        return 1
    bad = 0
    for path in paths:
        for problem in problems(path):
            print(f"{path}: {problem}", file=sys.stderr)
            bad += 1
    print(f"check_notebooks: {len(paths)} notebooks, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
