"""08's one entry point: merge the runs (:mod:`.merge`), compare them (:mod:`.compare`), say what they show
(:mod:`.findings`), set the seeds beside ours (:mod:`.seeds`), present 07's searches (:mod:`.searches`), and
the display helpers, figures, predictions and explorer 08 uses (:data:`EXPORTS`). Nothing below imports it."""

import importlib

from cnnbench import predict as predict
from cnnbench import published as published

# What 08 reaches as ``analysis.<name>``, by the module that defines it (imported here, once).
EXPORTS = {
    "cnnbench.analysis.compare": (
        "machine match_keys ratio_table ratios repeated speedup_matrix speedups summary unmatched"
    ),
    "cnnbench.analysis.findings": "findings_markdown findings_table placed_points write_tables",
    "cnnbench.analysis.merge": "merged_statement runs_table",
    "cnnbench.analysis.searches": "best_configurations tuning_findings_markdown",
    "cnnbench.analysis.seeds": (
        "achieved_beside_003 backends_beside_001 beside cpu_beside_002 epochs_beside_published "
        "inference_beside_002 memory_mb_beside_004 ops_beside_published performance_beside_000 "
        "published_beside_ours speedups_beside_000 sweep_beside_000 telemetry_beside_published times_beside_004 "
        "utilisation_beside_000"
    ),
    "cnnbench.interactive": "explorer",
    "cnnbench.plots": "batch_sweep per_model_rooflines throughput",
    "cnnbench.results.runs": "ALL_RUNS Merged discover load runs_for zip_run",
    "cnnbench.tables": "readable_display show utilisation",
}
for _module, _names in EXPORTS.items():
    globals().update({n: getattr(importlib.import_module(_module), n) for n in _names.split()})
