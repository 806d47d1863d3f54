"""08's story, one module per job: merge the runs (:mod:`.merge`, over the results layer's
:mod:`cnnbench.results.runs`), compare them (:mod:`.compare`), say what they show (:mod:`.findings`), set every
seed's numbers beside ours (:mod:`.seeds`) and present 07's searches (:mod:`.searches`).

Results flow one way: producers write through :mod:`cnnbench.results`, the analysis reads through it, and
nothing below imports the analysis.

08's one entry point: besides the jobs above, its display helpers (:mod:`cnnbench.tables`: show,
readable_display, utilisation), figures (:mod:`cnnbench.plots`: throughput, batch_sweep, per_model_rooflines),
the seeds' tables (``published``), the predictions (:mod:`cnnbench.predict`) and the explorer
(:func:`cnnbench.interactive.explorer`) are named here."""

from cnnbench import predict, published
from cnnbench.analysis.compare import (
    machine,
    match_keys,
    ratio_table,
    ratios,
    repeated,
    speedup_matrix,
    speedups,
    summary,
    unmatched,
)
from cnnbench.analysis.findings import (
    findings,
    findings_markdown,
    findings_table,
    placed_points,
    write_tables,
)
from cnnbench.analysis.merge import merged_statement, runs_table
from cnnbench.analysis.searches import best_configurations, tuning_findings_markdown
from cnnbench.analysis.seeds import (
    achieved_beside_003,
    backends_beside_001,
    beside,
    cpu_beside_002,
    epochs_beside_published,
    inference_beside_002,
    memory_mb_beside_004,
    ops_beside_published,
    performance_beside_000,
    published_beside_ours,
    speedups_beside_000,
    sweep_beside_000,
    telemetry_beside_published,
    times_beside_004,
    utilisation_beside_000,
)
from cnnbench.interactive import explorer
from cnnbench.plots import batch_sweep, per_model_rooflines, throughput
from cnnbench.results.runs import ALL_RUNS, Merged, discover, load, runs_for, zip_run
from cnnbench.tables import readable_display, show, utilisation

__all__ = [
    "batch_sweep",
    "explorer",
    "per_model_rooflines",
    "predict",
    "published",
    "readable_display",
    "show",
    "throughput",
    "utilisation",
    "ALL_RUNS",
    "Merged",
    "match_keys",
    "achieved_beside_003",
    "cpu_beside_002",
    "inference_beside_002",
    "memory_mb_beside_004",
    "ratio_table",
    "ratios",
    "performance_beside_000",
    "speedups_beside_000",
    "sweep_beside_000",
    "times_beside_004",
    "utilisation_beside_000",
    "backends_beside_001",
    "beside",
    "best_configurations",
    "discover",
    "epochs_beside_published",
    "findings",
    "findings_markdown",
    "findings_table",
    "load",
    "machine",
    "merged_statement",
    "ops_beside_published",
    "placed_points",
    "published_beside_ours",
    "repeated",
    "runs_for",
    "runs_table",
    "speedup_matrix",
    "speedups",
    "summary",
    "telemetry_beside_published",
    "tuning_findings_markdown",
    "unmatched",
    "write_tables",
    "zip_run",
]
