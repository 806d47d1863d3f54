"""Tidy results files written atomically row by row (an interrupted run loses nothing, a rerun resumes); only
the rows of every writer's latest plan are current (:meth:`ResultsFile.plan`, :meth:`ResultsFile.current`)."""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cnnbench import SCHEMA_VERSION, paths

DONE_STATUSES = ("ok", "oom", "unstable")  # outcomes a rerun keeps; "error" rows are measured again
PLANS = "current_rows.json"  # per run folder: {file name: {writer: {columns, values}}}, see ResultsFile.plan
# The machine a row was measured on, in the key of every measured table (results.schema): a configuration that
# names none is this machine's, so a run folder copied from elsewhere resumes nothing measured there.
HOST = "host_id"


@functools.cache
def host_id() -> str:
    """This machine's hardware as :func:`cnnbench.envinfo.host_fingerprint` names a CPU run's."""
    import torch

    from cnnbench import envinfo

    return envinfo.capture(torch.device("cpu"))["host_id"]


# what every refusal of a corrupt file ends with
MOVE_AWAY = "move it away, and a rerun measures its rows again"


class CorruptResults(ValueError):
    """A results file that cannot be read as the tidy CSV this version writes: the message is one line."""


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (:func:`cnnbench.paths.replacing`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with paths.replacing(path, "w", newline="") as f:
        f.write(text)


def _jsonable(value: Any) -> Any:
    """Strict JSON: non-finite floats become null (json.dumps would write NaN)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    value = _plain(value)
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, allow_nan=False, default=str) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def read_object(path: Path, absent: dict | None = None, advice: str = "") -> dict:
    """The JSON object in ``path`` (``absent``, when given, where there is no such file), else
    :class:`CorruptResults` saying in one line why not: the file's name first, ``advice`` (where, what to do) last."""
    if absent is not None and not path.exists():
        return absent
    if path.exists() and not path.is_file():  # a folder, or a FIFO that reading would wait on forever
        raise CorruptResults(f"{path.name} is not a file{advice}")
    try:
        value = read_json(path)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise CorruptResults(f"{path.name} unreadable ({type(err).__name__}){advice}") from None
    if not isinstance(value, dict):
        raise CorruptResults(f"{path.name} is not a JSON object{advice}")
    return value


def _plain(value: Any) -> Any:
    """numpy scalars (np.float64, np.int64, np.bool_) as the Python number or bool they hold."""
    return value.item() if getattr(value, "shape", None) == () and hasattr(value, "item") else value


def _cell(value: Any) -> Any:
    """One CSV cell: a plain number (``repr`` of a float round-trips exactly), "" for NaN/inf, JSON for lists."""
    value = _plain(value)
    if isinstance(value, float):
        return "" if not math.isfinite(value) else repr(float(value))
    if isinstance(value, int):  # and bool
        return str(value)
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(_jsonable(value), default=str)
    return value


def _csv(rows: list[Mapping[str, Any]]) -> str:
    """``rows`` as CSV text, columns in order of first appearance, each value as :func:`_cell` writes it."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    writer.writerows({k: _cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def write_rows(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write all ``rows`` as one CSV, columns in order of first appearance, atomically."""
    atomic_write_text(path, _csv(list(rows)))


_NUMPY_REPR = re.compile(r"^(np|numpy)\.\w+\(")


def frame(rows: Iterable[Mapping[str, Any]], columns: Iterable[str] = ()):
    """Rows (as written or as read back) as a typed pandas frame, with ``columns`` present even if all empty."""
    import pandas as pd

    rows = list(rows)
    df = pd.read_csv(io.StringIO(_csv(rows))) if rows else pd.DataFrame()
    return df.assign(**{c: float("nan") for c in columns if c not in df})


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows of a results CSV ([] when absent). Raises :class:`CorruptResults` (one line) for a file that is
    not a tidy CSV: unreadable, ragged rows, a last line cut short, a cell this workbook never writes."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        text = path.read_bytes().decode()
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows, times = list(reader), [c for c in reader.fieldnames or [] if c.endswith("_s")]  # seconds, rates
    except (UnicodeDecodeError, csv.Error) as err:
        raise CorruptResults(
            f"{path}: not a readable CSV ({type(err).__name__}: {err}); {MOVE_AWAY}"
        ) from None
    if why := _fault(text, rows, times):
        raise CorruptResults(f"{path}: {why}; {MOVE_AWAY}")
    return rows


def _fault(text: str, rows: list[dict], times: list[str]) -> str:
    """What makes a CSV's text not one this workbook wrote ("" when nothing does)."""
    if text and not text.endswith("\n"):  # every row this workbook writes ends its line
        return "its last line is cut short (written only in part)"
    for i, row in enumerate(rows, start=2):
        if None in row or None in row.values():
            return f"line {i} has {'more' if None in row else 'fewer'} cells than the header"
        for k, v in row.items():
            if _NUMPY_REPR.match(v) or k in times and _impossible(v):
                return f"line {i}, column '{k}' holds {v[:40]}, which this workbook never writes (edited?)"
    return ""


def _impossible(text: str) -> bool:
    """A cell that parses as a negative or non-finite number (this workbook writes those as "")."""
    try:
        return not 0 <= float(text) < math.inf
    except ValueError:  # "" (none), a list
        return False


class ResultsFile:
    """One tidy CSV of a run, keyed by the columns that identify a configuration: ``append`` replaces any row
    with the same key, atomically; ``done`` tells whether a configuration already has a finished row."""

    def __init__(self, path: str | Path, key: Iterable[str], unique: bool = True, most_rows: int = 0):
        self.path, self.key, self.most_rows = Path(path), tuple(key), most_rows  # 0: no bound
        self.unique = unique and bool(self.key)  # False: a key shared by a group of rows

    def key_of(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        """The row's (or a configuration's) key as the file stores it: comparable across writes and reads."""
        return _values(row, self.key)

    def plan(
        self, configs: Iterable[Mapping[str, Any]], writer: str = "", columns: Iterable[str] | None = None
    ) -> None:
        """Declare the configurations this invocation of ``writer`` measures: from now on they, and only they,
        are the file's current rows for that writer (selected on ``columns``, by default the key)."""
        columns = tuple(columns) if columns is not None else self.key
        values = [list(v) for v in sorted({_values(c, columns) for c in configs})]
        plans = _plans(self.path)
        plans.setdefault(self.path.name, {})[writer] = {"columns": list(columns), "values": values}
        write_json(self.path.with_name(PLANS), plans)

    def current(self) -> list[dict[str, str]]:
        """The rows of every writer's latest plan, in file order (every row when no plan was declared); refuses
        (one line) two of one key, which no write leaves (:meth:`append` replaces a row of the same key)."""
        rows, lines = self.rows(), {}
        for i, r in enumerate(rows, start=2):
            if self.unique and lines.setdefault(self.key_of(r), i) != i:
                raise CorruptResults(
                    f"{self.path}: lines {lines[self.key_of(r)]} and {i} hold the same configuration (the file was "
                    f"edited?); {MOVE_AWAY}"
                )
        return current_rows(self.path, rows)

    def rows(self) -> list[dict[str, str]]:
        """The file's rows; refuses (one line) a corrupt file, more than ``most_rows``, another schema's rows."""
        rows = read_rows(self.path)
        if self.most_rows and len(rows) > self.most_rows:
            raise CorruptResults(
                f"{self.path}: {len(rows):,} rows, more than a run writes of this table (at most "
                f"{self.most_rows:,}); {MOVE_AWAY}"
            )
        for i, r in enumerate(rows, start=2):
            if HOST in self.key:
                r.setdefault(HOST, "")  # a row of a file without the column was measured on no known machine
            if r.get("schema_version", "") not in ("", str(SCHEMA_VERSION)):
                raise CorruptResults(
                    f"{self.path}: line {i} is of results schema {r['schema_version']}, this version writes "
                    f"{SCHEMA_VERSION}; use a new run_name or move the old run away"
                )
        return rows

    def done(self, config: Mapping[str, Any]) -> bool:
        return self.finished(config, self.key)

    def finished(
        self, config: Mapping[str, Any], columns: Iterable[str], final: Iterable[str] = DONE_STATUSES
    ):
        """Whether the file has rows of ``config`` (on ``columns``), every one with a ``final`` status."""
        final, columns = tuple(final), tuple(columns)
        same = [r for r in self.rows() if _values(r, columns) == _values(config, columns)]
        return bool(same) and all(r.get("status") in final for r in same)

    def append(self, row: Mapping[str, Any]) -> None:
        self.extend([row])

    def extend(self, rows: Iterable[Mapping[str, Any]], group: Iterable[str] | None = None) -> None:
        """Add many rows in one atomic write, replacing rows with the same keys, or, with ``group`` (a subset of
        the columns), every row of the same group (e.g. all step times of a configuration measured again)."""
        stamp = {"schema_version": SCHEMA_VERSION, **({HOST: host_id()} if HOST in self.key else {})}
        rows = [{**stamp, **r} for r in rows]
        cols = tuple(group) if group is not None else self.key
        keys = {_values(r, cols) for r in rows}
        write_rows(self.path, [*(r for r in self.rows() if _values(r, cols) not in keys), *rows])


def _values(config: Mapping[str, Any], columns: Iterable[str]) -> tuple[str, ...]:
    """``config``'s values on ``columns`` as a file stores them; one naming no :data:`HOST` is this machine's."""
    return tuple(str(_cell(config[k] if k in config else host_id() if k == HOST else "")) for k in columns)


def _plans(path: Path) -> dict:
    """The plans beside the results file ``path`` ({} when none), every file's of that folder."""
    return read_object(path.with_name(PLANS), {}, f" in {path.parent}; move it away")


def current_rows(path: str | Path, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Of ``rows`` (read from ``path``), those selected by the latest plan of any writer of that file."""
    path = Path(path)
    plans = _plans(path).get(path.name)
    if not plans:
        return rows
    wanted = [(plan["columns"], {tuple(v) for v in plan["values"]}) for plan in plans.values()]
    return [r for r in rows if any(tuple(r.get(k, "") for k in cols) in values for cols, values in wanted)]
