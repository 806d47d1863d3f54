"""Every results table of a run, declared once: its file, notebook, key, the plan that chooses its current rows,
and the columns a reader relies on. Producers write through :func:`file`, readers read through :func:`read`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cnnbench import knobs
from cnnbench.params import FIELDS, NUMBERED
from cnnbench.results.files import HOST, ResultsFile, frame

# The params keys that change an engine measurement (a rerun with other values measures new rows)
_PROTOCOL = (
    "warmup_steps measured_steps window_s min_window_s repeats processes max_processes ci_target_pct lr "
    "momentum synthetic_images seed data_path isolate telemetry_interval_s"
)
PROTOCOL_KEYS = tuple(_PROTOCOL.split())


def _keys(text: str) -> Callable[[], tuple[str, ...]]:
    """Key columns declared as text, read when asked: ``knobs`` stands for every keyed knob
    (:mod:`cnnbench.knobs`), ``default_knobs`` for each with ``default_`` before it."""

    def keys() -> tuple[str, ...]:
        words = {"knobs": knobs.keyed(), "default_knobs": [f"default_{k}" for k in knobs.keyed()]}
        return tuple(c for w in text.split() for c in words.get(w, [w]))

    return keys


# What a measurement is of: the workload, device kind, machine (HOST, filled by .files), keyed knobs, protocol.
_CONFIG = f"model device_kind {HOST} phase dataset image_size num_classes in_channels knobs {_PROTOCOL}"
config_keys, window_keys = _keys(_CONFIG), _keys(f"{_CONFIG} process repeat")
# What the other experiments measure: the workload and every keyed knob, then their own settings.
_SHAPE = f"model device_kind {HOST} image_size num_classes in_channels dataset"
epoch_keys = _keys(f"{_SHAPE} knobs max_batches epoch_images synthetic_images data_path isolate")
# 06's step phases: the configuration, the protocol parts that change a phase time, and the phase settings.
PHASE_PASS_KEYS = ("phase_steps", "phase_window_s", "phase_max_s", "phase_batch_size")
PHASE_PROTOCOL = ("warmup_steps", "synthetic_images", "seed", "data_path")
phase_plan = _keys(f"{_SHAPE} knobs {' '.join((*PHASE_PROTOCOL, *PHASE_PASS_KEYS))}")
# 05's backends: every scratch_* key but the lists of what 05 runs (other values: trained again).
_SCRATCH = (k for k in FIELDS if k.startswith("scratch_") and k not in ("scratch_backends", "scratch_models"))
SCRATCH_KEYS = ("threads", "seed", *_SCRATCH)
SCRATCH_PLAN = ("backend", "model", HOST, *SCRATCH_KEYS)
# 06's profiler and scaling: one traced configuration / one scaling pass (kept or measured again as a whole).
profile_plan = _keys(f"{_SHAPE} knobs seed optimizer lr warmup_steps profiled_steps profile_top_k")
SCALING_PLAN = tuple(
    (
        f"model {HOST} backend world_size per_device_batch image_size threads_per_process scaling_steps repeats "
        "warmup_steps host_heap seed"
    ).split()
)
# 04's measured peaks and bandwidth sweep (kept when these match) and profiled layers (kept per key).
PEAK_SETTINGS = ("device_name", "peak_threads", "peak_matmul_size", "peak_stream_mb", "peak_repeats", HOST)
layer_plan = _keys(f"{_SHAPE} phase knobs device_name seed layer_steps")
# 06's fine-tuning grid: one point (its epochs are rows).
TRANSFER_GRID_KEYS = tuple(
    (
        f"model device_kind {HOST} dataset optimizer pretrained lr batch_size image_size threads freeze_backbone "
        "momentum train_images val_images epochs seed workers pin_memory data_path"
    ).split()
)
# 07's search: its workload, the defaults it is measured against, and every tune_* key but what is searched.
_TUNE = (k for k in FIELDS if k.startswith("tune_") and k not in ("tune_models", "tune_phases"))
TUNING_PARAM_KEYS = ("seed", "lr", "momentum", "synthetic_images", "repeats", *_TUNE)
search_keys = _keys(
    f"model device_kind {HOST} phase image_size num_classes in_channels dataset default_knobs "
    + " ".join(TUNING_PARAM_KEYS)
)


# Far more rows than a run writes (a larger file is refused when read): per configuration, or a series.
CONFIG_ROWS, SERIES_ROWS = 10_000, 2_000_000
_SERIES = {"merged": False, "most_rows": SERIES_ROWS}  # a series of one run, not merged across runs
_GROUPS = {"merged": False, "unique": False}  # rows sharing a key, replaced as a group (ResultsFile.extend)


# A declared column (Table.columns) is read as text where named in TEXT, else as a number.
TEXT = frozenset(
    (
        "model phase status error device_name noisy machine_state machine_note step_bound process_rates_img_s "
        "source layer roof bound kind level precision row_kind config roof_precision matches_published data_mode "
        "step_phase backend dataset method"
    ).split()
)
_RATE = "model phase status error device_name throughput_img_s throughput_ci95_img_s achieved_gflops"
_ENGINE = (
    f"{_RATE} batch_size image_size num_classes dataset noisy achieved_tflops peak_rss_mib peak_device_mem_mib "
    "baseline_rss_mib machine_state machine_note step_bound device_busy_pct probe_img_s process_rates_img_s"
)
_BACKEND = "backend model status error"
_ROOFLINE = (
    "source layer roof bound model phase batch_size efficiency intensity_flop_per_byte achieved_gflops"
)
_PEAKS = "kind level precision peak_gflops bandwidth_gbs peak_spread capacity_mib cache_size_kib"
_EXPLORE = f"{_RATE} batch_size precision data_mode"
_EXPLORE_KEY = ("timestamp", "model", "batch_size", "precision")
_TELEMETRY = "source process t_s metric device_index"
_HOST = "model phase status ops host_step_s"
_EPOCHS = "status device_name train_images train_epoch_s val_epoch_s"
_STEP_PHASES = "model step_phase status device_name sum_diff_ci95_pct"
_TUNING = (
    f"{_RATE} row_kind config roof_precision speedup_x speedup_ci95_x compute_roof_pct energy_j_per_image"
)
_TRANSFER_TELEMETRY = ("experiment", "configuration", "rank", "metric", "device_index", "t_s")


@dataclass(frozen=True)
class Table:
    """One results CSV of a run folder."""

    name: str
    notebook: str
    # what a plan selects on (a function: one holding the knobs); () = written whole by its notebook
    plans: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    by: str = ""  # beyond the plan, what tells its rows apart: the key is the plan and these
    merged: bool = True  # read by the analysis and merged across runs
    unique: bool = True  # False: rows share their key (a group, written whole by ResultsFile.extend)
    most_rows: int = CONFIG_ROWS
    columns: str = ""  # beyond the key, what a reader relies on: read() yields each, NA where a file lacks it

    @property
    def plan_columns(self) -> tuple[str, ...]:
        return tuple(self.plans() if callable(self.plans) else self.plans)

    @property
    def key(self) -> tuple[str, ...]:
        return (*self.plan_columns, *self.by.split())

    @property
    def dtypes(self) -> dict[str, str]:
        return {c: "str" if c in TEXT else "float64" for c in self.columns.split()}

    @property
    def filename(self) -> str:
        return f"{self.name}.csv"

    def file(self, run_dir: str | Path) -> ResultsFile:
        return self.at(Path(run_dir) / self.filename)

    def at(self, path: str | Path) -> ResultsFile:
        """This table's file at ``path`` (another name), keyed and bounded as declared."""
        return ResultsFile(path, self.key, self.unique, self.most_rows)

    def plan(self, run_dir: str | Path, configs, writer: str = "") -> None:
        """Declare the configurations ``writer`` measures now: they are this table's current rows."""
        self.file(run_dir).plan(configs, writer, self.plan_columns)


def _engine(name: str, notebook: str) -> list[Table]:
    return [
        Table(name, notebook, config_keys, columns=_ENGINE),
        Table(f"{name}_windows", notebook, config_keys, "process repeat", **_SERIES),
        Table(f"{name}_steps", notebook, config_keys, "process repeat step", **_SERIES),
    ]


TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        Table("complexity", NUMBERED["01"], columns="model matches_published"),
        *_engine("scenario_a", NUMBERED["02"]),
        Table(
            "telemetry", NUMBERED["02"], config_keys, _TELEMETRY, most_rows=SERIES_ROWS, columns="value"
        ),  # and 03
        Table("epochs", NUMBERED["02"], epoch_keys, columns=_EPOCHS),
        *_engine("batch_sweep", NUMBERED["03"]),
        Table("roofline", NUMBERED["04"], columns=_ROOFLINE),
        Table("device_peaks", NUMBERED["04"], columns=_PEAKS),
        Table("host_steps", NUMBERED["04"], ("device_name", "model", "phase", "precision"), columns=_HOST),
        Table("bandwidth_sweep", NUMBERED["04"], merged=False),
        Table("roofline_layers", NUMBERED["04"], layer_plan, "layer op", **_GROUPS),
        Table("gradcheck", NUMBERED["05"], SCRATCH_PLAN, "tensor", columns=_BACKEND),
        Table("backends", NUMBERED["05"], SCRATCH_PLAN, "epoch", columns=_BACKEND),
        Table("backend_ops", NUMBERED["05"], SCRATCH_PLAN, "op", columns=_BACKEND),
        Table("backend_memory", NUMBERED["05"], SCRATCH_PLAN, "component", columns=f"{_BACKEND} method"),
        Table("transfer", NUMBERED["06"], TRANSFER_GRID_KEYS, "epoch", columns="status"),
        Table("step_phases", NUMBERED["06"], phase_plan, "step_phase", columns=_STEP_PHASES),
        Table("profile_ops", NUMBERED["06"], profile_plan, "pass op", merged=False, columns="model status"),
        Table("transfer_telemetry", NUMBERED["06"], _TRANSFER_TELEMETRY, **_SERIES),
        Table("scaling", NUMBERED["06"], SCALING_PLAN, columns="status"),
        Table("tuning", NUMBERED["07"], search_keys, "row_kind stage rung config", columns=_TUNING),
        Table("tuning_space", NUMBERED["07"], ("model", "device_kind", "knob", "value"), merged=False),
        Table("explore", NUMBERED["08"], _EXPLORE_KEY, merged=False, columns=_EXPLORE),
        # 08's analysis of the runs it merged, each recomputed whole
        Table("speedups", NUMBERED["08"], merged=False),
        Table("ratios", NUMBERED["08"], merged=False),
        Table("findings", NUMBERED["08"], merged=False),
        Table("seed_corrections", NUMBERED["08"], merged=False),
        Table("predictions", NUMBERED["08"], merged=False),  # every seed's and run's rate (cnnbench.predict)
        # cnnbench compare's, in the outputs root (or --out): a new compare of the same runs replaces their rows
        Table("compare", "cnnbench compare", ("compared",), **_GROUPS, most_rows=SERIES_ROWS),
        # how long each notebook took, written by the pipeline (cnnbench.eta)
        Table("timings", "pipeline", ("notebook",), merged=False),
    ]
}
# the tables of a configuration's measured rate (the engine's), each with the notebook measuring it ("02")
RATES = {name: t.notebook[:2] for name, t in TABLES.items() if t.columns == _ENGINE}
MERGED = tuple(name for name, t in TABLES.items() if t.merged)  # what the analysis merges across runs


def table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown results table '{name}'; known: {', '.join(TABLES)}") from None


def file(run_dir: str | Path, name: str) -> ResultsFile:
    """The results file of table ``name`` in ``run_dir``, keyed as declared."""
    return table(name).file(run_dir)


def rows(run_dir: str | Path, name: str) -> list[dict[str, str]]:
    """The current rows of table ``name`` in ``run_dir`` as written (strings), [] when absent (:meth:`current`)."""
    return table(name).file(run_dir).current()


def read(run_dir: str | Path, name: str):
    """The current rows of table ``name`` in ``run_dir`` as a pandas frame with every declared column (NA where
    the file lacks it; no rows when it is absent): the one reader of results, for notebooks and the analysis."""
    return declared(frame(rows(run_dir, name)), name)


def declared(df, name: str):
    """``df`` with every declared column of table ``name``: one it lacks (or a text one all NA) as NA, and without
    rows its key's too (a row carries its key)."""
    import pandas as pd

    t = table(name)
    dtypes = t.dtypes if len(df) else {c: "str" if c in TEXT else "float64" for c in t.key} | t.dtypes
    missing = [c for c, t in dtypes.items() if c not in df or t == "str" and df[c].isna().all()]
    return df.assign(**{c: pd.Series(float("nan"), df.index, dtypes[c]) for c in missing}) if missing else df
