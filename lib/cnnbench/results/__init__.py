"""The results layer: every table a run writes, declared once (:mod:`.tables`); tidy CSVs written atomically row
by row with the rule for a run's current rows (:mod:`.files`); and runs discovered and merged (:mod:`.runs`).

Producers write through it, notebooks and the analysis read through it (:func:`read`). It imports no
experiment module.
"""

from cnnbench.results.files import (
    DONE_STATUSES,
    PLANS,
    CorruptResults,
    ResultsFile,
    atomic_write_text,
    current_rows,
    frame,
    read_json,
    read_rows,
    write_json,
    write_rows,
)
from cnnbench.results.tables import (
    CONFIG_KEYS,
    EPOCH_KEYS,
    MERGED,
    PROTOCOL_KEYS,
    TABLES,
    WINDOW_KEYS,
    Table,
    file,
    read,
    rows,
    table,
)

__all__ = [
    "CONFIG_KEYS",
    "DONE_STATUSES",
    "EPOCH_KEYS",
    "MERGED",
    "PLANS",
    "PROTOCOL_KEYS",
    "TABLES",
    "WINDOW_KEYS",
    "CorruptResults",
    "ResultsFile",
    "Table",
    "atomic_write_text",
    "current_rows",
    "file",
    "frame",
    "read",
    "read_json",
    "read_rows",
    "rows",
    "table",
    "write_json",
    "write_rows",
]
