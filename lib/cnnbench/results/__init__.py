"""The results layer: tables declared (:mod:`.schema`), written (:mod:`.files`), merged (:mod:`.runs`)."""

from cnnbench.results.files import (
    DONE_STATUSES,
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
from cnnbench.results.schema import MERGED, TABLES, config_keys, file, read, rows, table, window_keys

__all__ = [
    "DONE_STATUSES",
    "MERGED",
    "TABLES",
    "CorruptResults",
    "ResultsFile",
    "atomic_write_text",
    "config_keys",
    "current_rows",
    "file",
    "frame",
    "read",
    "read_json",
    "read_rows",
    "rows",
    "table",
    "window_keys",
    "write_json",
    "write_rows",
]
