"""08's one entry point: merge the runs (:mod:`.merge`), compare them (:mod:`.compare`), say what they show
(:mod:`.findings`), set the seeds beside ours (:mod:`.seeds`), present 07's searches (:mod:`.searches`), and
the display helpers, figures, predictions and explorer 08 uses. Nothing below imports it."""

from cnnbench import predict as predict
from cnnbench import published as published
from cnnbench.analysis.compare import machine as machine
from cnnbench.analysis.compare import match_keys as match_keys
from cnnbench.analysis.compare import ratio_table as ratio_table
from cnnbench.analysis.compare import ratios as ratios
from cnnbench.analysis.compare import repeated as repeated
from cnnbench.analysis.compare import speedup_matrix as speedup_matrix
from cnnbench.analysis.compare import speedups as speedups
from cnnbench.analysis.compare import summary as summary
from cnnbench.analysis.compare import unmatched as unmatched
from cnnbench.analysis.findings import findings_markdown as findings_markdown
from cnnbench.analysis.findings import findings_table as findings_table
from cnnbench.analysis.findings import placed_points as placed_points
from cnnbench.analysis.findings import write_tables as write_tables
from cnnbench.analysis.merge import merged_statement as merged_statement
from cnnbench.analysis.merge import runs_table as runs_table
from cnnbench.analysis.searches import best_configurations as best_configurations
from cnnbench.analysis.searches import tuning_findings_markdown as tuning_findings_markdown
from cnnbench.analysis.seeds import beside as beside
from cnnbench.interactive import explorer as explorer
from cnnbench.plots import batch_sweep as batch_sweep
from cnnbench.plots import per_model_rooflines as per_model_rooflines
from cnnbench.plots import throughput as throughput
from cnnbench.results.runs import ALL_RUNS as ALL_RUNS
from cnnbench.results.runs import Merged as Merged
from cnnbench.results.runs import discover as discover
from cnnbench.results.runs import load as load
from cnnbench.results.runs import runs_for as runs_for
from cnnbench.results.runs import zip_run as zip_run
from cnnbench.tables import readable_display as readable_display
from cnnbench.tables import show as show
from cnnbench.tables import utilisation as utilisation
