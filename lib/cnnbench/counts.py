"""01's one entry point: what each model costs, counted (parameters, MACs, FLOPs = 2 x MACs, training FLOPs,
activation memory), checked against torchvision's published counts, and shown beside fvcore and seed 000.

    table(models, image_size, num_classes)  the rows of complexity.csv (:func:`cnnbench.measure.flops.table`)
    write_rows(path, rows)                  complexity.csv, atomically (:mod:`cnnbench.results`)
    published_check(complexity)             a red warning naming any model off its published count by > 1%
    fvcore_difference, complexity_vs_seed   the tables beside fvcore and seed 000's Table 1 (:mod:`cnnbench.tables`)
    plot(complexity, path)                  complexity.png (:func:`cnnbench.plots.complexity`)"""

from __future__ import annotations

from cnnbench.measure.flops import published_check, table
from cnnbench.plots import complexity as plot
from cnnbench.results import write_rows
from cnnbench.tables import complexity_vs_seed, fvcore_difference

__all__ = ["table", "write_rows", "published_check", "fvcore_difference", "complexity_vs_seed", "plot"]
