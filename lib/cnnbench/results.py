"""Tidy results files: written atomically row by row, so an interrupted run loses nothing and a rerun resumes."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cnnbench import SCHEMA_VERSION

DONE_STATUSES = ("ok", "oom", "unstable")  # outcomes a rerun keeps; "error" rows are measured again


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers see the old or the new file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jsonable(value: Any) -> Any:
    """Strict JSON: non-finite floats become null (json.dumps would write NaN), paths become strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, allow_nan=False, default=str) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def write_rows(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write all ``rows`` as one CSV, columns in order of first appearance, atomically."""
    rows = list(rows)
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    atomic_write_text(path, buf.getvalue())


def read_rows(path: str | Path) -> list[dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


class ResultsFile:
    """One tidy CSV of a run, keyed by the columns that identify a configuration.

    ``append`` rewrites the file atomically with the new row, replacing any row with the same key; ``done``
    tells whether a configuration already has a finished row (status ok, oom or unstable), so reruns resume.
    """

    def __init__(self, path: str | Path, key: Iterable[str]):
        self.path = Path(path)
        self.key = tuple(key)

    def _key_of(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(str(_cell(row.get(k, ""))) for k in self.key)

    def rows(self) -> list[dict[str, str]]:
        return read_rows(self.path)

    def done(self, config: Mapping[str, Any]) -> bool:
        key = self._key_of(config)
        return any(self._key_of(r) == key and r.get("status") in DONE_STATUSES for r in self.rows())

    def append(self, row: Mapping[str, Any]) -> None:
        row = {"schema_version": SCHEMA_VERSION, **row}
        key = self._key_of(row)
        kept = [r for r in self.rows() if self._key_of(r) != key]
        write_rows(self.path, [*kept, row])

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Add many rows in one atomic write, replacing rows with the same keys."""
        rows = [{"schema_version": SCHEMA_VERSION, **r} for r in rows]
        keys = {self._key_of(r) for r in rows}
        write_rows(self.path, [*(r for r in self.rows() if self._key_of(r) not in keys), *rows])
