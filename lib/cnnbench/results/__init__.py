"""The results layer: tables declared (:mod:`.schema`), written (:mod:`.files`), merged (:mod:`.runs`)."""

from cnnbench.results.files import (  # noqa: F401 - the layer's public names
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
from cnnbench.results.schema import MERGED, RATES, TABLES, config_keys, file, read, rows, table, window_keys  # noqa: F401
