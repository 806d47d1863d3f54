#!/usr/bin/env python3
"""Every table the seed functions return, pickled, and two such snapshots compared: a refactor of
cnnbench.published, cnnbench.analysis.seeds or cnnbench.tables keeps the same tables and columns out.

    PYTHONPATH=lib python tools/seed_tables.py snapshot OUT.pkl [RUN_DIR]   (default: examples/example-cpu-2core)
    python tools/seed_tables.py compare BEFORE.pkl AFTER.pkl

Take a snapshot with the code before the change (e.g. a `git archive` of it on PYTHONPATH) and one after; the
comparison is exact (values, dtypes, column order), over every analysis.beside() table with the run's tables and with none,
published.tables(), inconsistencies(), corrections(), memory_bound_verdict(), tables.complexity_vs_seed(), every
published view and constant and each seed's setup.
"""

from __future__ import annotations

import pickle
import sys
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
VIEWS = (
    "COMPLEXITY_000 AI_TABLE_000 THROUGHPUT_000 EPOCHS_000 UTILISATION_000 SWEEP_000 PEAKS_000 SPEEDUPS_000 "
    "THROUGHPUT_003 ACHIEVED_003 PEAKS_003 COMPLEXITY_003 BACKENDS_001 TELEMETRY_002 TIMES_002 TIMES_004 OPS_004 "
    "MEMORY_004 SEEDS DEVICES AI_003 AI_BY_BATCH_003 PARAM_PROXY_AI_000 EPOCH_IMAGES_000 CPU_002 "
    "SHAPE_004 MNIST_TRAIN_IMAGES EPOCH_SAMPLES_001"
).split()
# the tables of analysis.seeds.beside() (its BESIDE map) are snapshotted with the run's tables and with none


def snapshot(out: Path, run: Path) -> None:
    from cnnbench import analysis, published, results, tables
    from cnnbench.analysis import seeds

    warnings.simplefilter("ignore")
    merged, got = analysis.load([run]), {}
    for tag, given in (("example", merged), ("empty", {})):
        got |= {f"{tag} {name}": analysis.beside(name, given) for name in seeds.BESIDE}
    got |= {f"tables {k}": v for k, v in published.tables().items()} | {"tables": list(published.tables())}
    got |= {"inconsistencies": published.inconsistencies(), "corrections": published.corrections()}
    got |= {"verdict": published.memory_bound_verdict()}
    got["complexity_vs_seed"] = tables.complexity_vs_seed(results.read(run, "complexity"))
    got |= {f"published.{v}": getattr(published, v) for v in VIEWS}
    got |= {f"setup {s}": published.setup(s) for s in ("000", "001", "002", "003", "004")}
    out.write_bytes(pickle.dumps(got))
    print(f"seed_tables: {len(got)} items -> {out}")


def compare(before: Path, after: Path) -> int:
    a, b = (pickle.loads(p.read_bytes()) for p in (before, after))
    bad = [f"only in one: {k}" for k in set(a) ^ set(b)]
    for k in [k for k in a if k in b]:
        try:
            if isinstance(a[k], pd.DataFrame):
                pd.testing.assert_frame_equal(a[k], b[k], check_exact=True)
            elif a[k] != b[k]:
                raise AssertionError(f"{a[k]!r} != {b[k]!r}")
        except AssertionError as err:
            bad.append(f"{k}: {str(err)[:400]}")
    print("\n".join(bad) + f"\nseed_tables: {len(a)} items compared, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "snapshot":
        snapshot(Path(args[0]), Path(args[1]) if len(args) > 1 else ROOT / "examples" / "example-cpu-2core")
    else:
        sys.exit(compare(Path(args[0]), Path(args[1])))
