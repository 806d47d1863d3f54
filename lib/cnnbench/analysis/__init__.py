"""08's one entry point: merge the runs (:mod:`.merge`), compare them (:mod:`.compare`), say what they show
(:mod:`.findings`), set the seeds beside ours (:mod:`.seeds`), present 07's searches (:mod:`.searches`), and
the display helpers, figures, predictions and explorer 08 uses. Nothing below imports it."""
# ruff: noqa: F401 (every name below is re-exported for 08)

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
from cnnbench.analysis.findings import findings_markdown, findings_table, placed_points, write_tables
from cnnbench.analysis.merge import merged_statement, runs_table
from cnnbench.analysis.searches import best_configurations, tuning_findings_markdown
from cnnbench.analysis.seeds import beside
from cnnbench.interactive import explorer
from cnnbench.plots import batch_sweep, per_model_rooflines, throughput
from cnnbench.results.runs import ALL_RUNS, Merged, discover, load, runs_for, zip_run
from cnnbench.tables import readable_display, show, utilisation
