"""Every seed number once, with its source: data/seed_numbers.csv is the only copy, each value carries its seed
file, table and line, and (where the seed texts are beside the checkout) each stands on the line it cites."""

import os
import re
from pathlib import Path

import pandas as pd
import pytest

from cnnbench import published
from conftest import ROOT

# Files that still quote a seed's numbers in prose, with the reason; remove an entry once the file is fixed.
NOT_YET: dict[str, str] = {}


def _seeds_dir() -> Path | None:
    for d in (os.environ.get("CNNBENCH_SEEDS"), ROOT / "shared" / "seeds", ROOT.parent / "shared" / "seeds"):
        if d and (Path(d) / "INDEX.md").is_file():
            return Path(d)
    return None


def test_every_value_carries_its_seed_file_table_and_line():
    v = published.values()
    assert v.columns.tolist() == published.COLUMNS
    assert set(v.seed) == set(published.SEEDS.values()) and len(published.SEEDS) == 5
    assert all(re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt", s) for s in v.seed)
    assert (v.line >= 1).all() and (v["where"] != "").all() and (v.table.str[-3:] == v.seed.str[:3]).all()
    assert set(v.origin) == {"printed", "read", "reference", "inferred"}
    assert (v[v.origin == "reference"].note.str.startswith("not printed by the seed")).all()
    assert (v[v.origin == "inferred"].note.str.startswith("inferred from: ")).all()  # and names its lines
    assert (v[v.origin == "read"].printed != "").all()  # what we read a value from is kept verbatim
    assert not v.duplicated(["seed", "table", "key", "column"]).any()
    assert all(re.fullmatch(r"\w+=[^;=]+(;\w+=[^;=]+)*", k) for k in v.key)


def test_every_view_is_built_from_the_stored_values():
    v = published.values()
    for name in published.tables().values():
        assert set(name.source) <= set(published.SEEDS.values())
    for table in ("THROUGHPUT_000", "BACKENDS_001", "TELEMETRY_002", "THROUGHPUT_003", "MEMORY_004"):
        view = getattr(published, table)
        for r in v[(v.table == table) & (v.value != "")].itertuples():
            key = dict(part.split("=") for part in r.key.split(";"))
            row = view[(view[list(key)].astype(str) == pd.Series(key)).all(axis=1)]
            stored = float(r.value) if re.fullmatch(r"[\d.]+", r.value) else r.value
            assert len(row) == 1 and row[r.column].iloc[0] == stored, (table, r.key, r.column)


def _distinctive(text: str) -> bool:
    """Seed numbers unlikely to appear by chance: 3+ significant digits with a decimal part, or 4+ digits not
    ending in 00 (MNIST's 60,000 or a 1000-class head are everywhere)."""
    t = text.rstrip("0").rstrip(".") if "." in text else text
    digits = t.replace(".", "").lstrip("0")
    return len(digits) >= 3 and ("." in t or (len(t) >= 4 and not t.endswith("00")))


def test_seed_numbers_and_seed_file_names_appear_in_no_module_or_notebook():
    v = published.values()
    v = v[(v.origin != "reference") & v.value.str.fullmatch(r"\d+(\.\d+)?")]
    forms = {f for s in v.value if _distinctive(s) for f in (s, f"{int(s):,}" if "." not in s else s)}
    names = {s.split("_")[1].split(".")[0] for s in published.SEEDS.values()}
    found = {}
    files = [*(ROOT / "lib").rglob("*.py"), *(ROOT / "notebooks").glob("*.ipynb")]
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel in NOT_YET:
            continue
        text = path.read_text()
        hits = [f for f in forms if re.search(rf"(?<![\d.,]){re.escape(f)}(?!\d)", text)]
        hits += [n for n in names if n in text]
        if hits:
            found[rel] = sorted(hits)
    assert not found, f"seed numbers or seed file names outside {published.DATA_FILE}: {found}"


def test_the_data_file_ships_in_the_wheel():
    section = (ROOT / "pyproject.toml").read_text().split("[tool.setuptools.package-data]")[1].split("\n[")[0]
    patterns = re.findall(
        r'"([^"]+)"', re.search(r"^cnnbench\s*=\s*\[(.*?)\]", section, re.M | re.S).group(1)
    )
    assert any(Path(published.DATA_FILE).match(p) for p in patterns), patterns


@pytest.mark.skipif(
    _seeds_dir() is None, reason="the seed texts are not beside this checkout (CNNBENCH_SEEDS)"
)
def test_every_value_stands_on_the_line_it_cites():
    seeds = _seeds_dir()
    v = published.values()
    number = re.compile(r"\d[\d,]*\.?\d*")
    v = v[v.origin != "inferred"]  # printed nowhere: test_seed_statements checks what it is inferred from
    for (seed, table, key, line), g in v.groupby(["seed", "table", "key", "line"], sort=False):
        text = (seeds / seed).read_text().splitlines()[line - 1]
        for r in g.itertuples():
            assert (r.printed or r.value) in text, (seed, table, key, r.column, line)
        # the numbers printed as they are stored appear on the line in the order stored (the seed's columns)
        tokens = iter(t.replace(",", "").rstrip(".") for t in number.findall(text))
        plain = [r.value for r in g.itertuples() if not r.printed and re.fullmatch(r"[\d.]+", r.value)]
        assert all(any(t == p for t in tokens) for p in plain), (seed, table, key, line, plain)
