"""Runs: discover the run folders under ``outputs/``, decide which are merged (saying why not), and merge their
current rows, each stamped with its run's identity."""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from cnnbench import SCHEMA_VERSION, knobs, paths
from cnnbench.results.files import CorruptResults, read_object
from cnnbench.results.schema import MERGED, PROTOCOL_KEYS, TABLES, declared, read

ALL_RUNS = "*"  # analysis_runs: ["*"] merges every user run of outputs/
# The parameters that make two runs' configurations differ (shown beside a merge; the rows themselves are
# matched on their own columns): what is measured, and how (the protocol's keys).
RUN_CONFIG_KEYS = (
    *"models image_size num_classes dataset batch_size_per_model variants phases".split(),
    *"epoch_images epoch_images_per_model".split(),
    *(name for name, knob in knobs.KNOBS.items() if knob.run_wide),
    *PROTOCOL_KEYS,
)


@dataclass
class Merged:
    runs: list[str]
    environments: dict[str, dict]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    config_differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    derived: dict = field(default_factory=dict, repr=False, compare=False)  # what once() computed

    def __getitem__(self, name: str) -> pd.DataFrame:
        """The merged table ``name``; with no row in any run, its declared columns and the run's identity."""
        none = pd.DataFrame(columns=["run_name", "host_id", "host"], dtype="str")
        return declared(self.tables.get(name, none), name)

    def once(self, name: str, compute) -> pd.DataFrame:
        """``compute(self)`` (a copy of it), computed once while every merged table is the same object: a table
        replaced since is a new analysis (one changed in place is not seen)."""
        tables = tuple(self.tables.values())
        kept = self.derived.get(name)
        if kept is None or list(map(id, kept[0])) != list(map(id, tables)):  # kept[0] holds them: ids unique
            kept = self.derived[name] = (tables, compute(self))
        return kept[1].copy()


def machine_label(device_name, host) -> str:
    """ "<device> on <host>"; a CPU run's host label alone, which already names its CPU."""
    device_name, host = str(device_name or "?"), str(host or "?")
    return host if host.startswith(device_name) else f"{device_name} on {host}"


def run_params(run_dir: Path) -> dict:
    """A run's params.json ({} when absent)."""
    return read_object(Path(run_dir) / paths.RESOLVED, {})


# The fields of environment.json a report or a comparison reads, with their types (None: not captured)
ENV_TYPES = {"schema_version": int, **dict.fromkeys("device_name device_kind cpu_model host".split(), str)}
ENV_TYPES |= dict.fromkeys(("host_id", "captured_at", "git_commit"), str)
ENV_TYPES |= {"cpu_physical_cores": int, "torch_threads": int, "git_dirty": bool}


def environment(run_dir: Path) -> dict:
    """A run's environment.json; :class:`CorruptResults` for one of :data:`ENV_TYPES` of another type."""
    env = read_object(Path(run_dir) / paths.ENVIRONMENT)
    for key, tp in ENV_TYPES.items():
        value = env.get(key)
        if value is not None and (not isinstance(value, tp) or isinstance(value, bool) and tp is not bool):
            raise CorruptResults(f"{paths.ENVIRONMENT}: {key!r} is {type(value).__name__}, not {tp.__name__}")
    return env


def verdict(run_dir: Path) -> str | None:
    """Why ``cnnbench report`` and ``cnnbench compare`` refuse a run folder, or None."""
    run_dir = Path(run_dir)
    if not is_run(run_dir) or not (run_dir / paths.RESOLVED).is_file():
        return f"not a run (no {paths.ENVIRONMENT} or {paths.RESOLVED}); run the pipeline into it first"
    try:
        return failed_run_reason(run_dir) or load([run_dir], tables=tuple(TABLES)).excluded.get(run_dir.name)
    except (OSError, CorruptResults) as err:
        return f"broken run ({err})"


def test_run_reason(run_dir: Path) -> str | None:
    """Why a run folder is a smoke/test run kept out of combined reports (None: a user run)."""
    if run_dir.name.lower().startswith("smoke"):
        return "smoke/test run (run name starts with 'smoke')"
    if Path(str(run_params(run_dir).get("params_file", ""))).name == "smoke.yaml":
        return "smoke/test run (made from params/smoke.yaml)"
    return None


def failed_run_reason(run_dir: Path) -> str | None:
    """Why a run folder is left out as failed: the pipeline's FAILED.txt, its first line (None: no failure)."""
    failed = run_dir / paths.FAILED  # written by the pipeline when a run does not finish
    if not failed.is_file():
        return None
    first = next(iter(failed.read_text(errors="replace").splitlines()), "").strip()
    return f"failed run ({paths.FAILED}: {first[:200] or 'no reason given'})"


def is_run(d: Path) -> bool:
    """A run folder: one with the environment.json 00 writes first (finished, stopped or failed alike)."""
    return d.is_dir() and (d / paths.ENVIRONMENT).exists()


def _left_out(d: Path) -> str | None:
    if d.name[0] in "_.":
        return "not a run (name starts with '_' or '.')"
    try:
        return test_run_reason(d) or failed_run_reason(d)
    except CorruptResults as err:
        return f"broken run ({err})"


def discover(outputs: Path, names: list[str] | None = None, excluded: dict | None = None) -> list[Path]:
    """Run folders (with environment.json) under ``outputs``: those named in ``names``, or with ``names`` None
    or ``["*"]`` every user run (folders starting with '_' or '.', smoke/test runs, failed and broken runs are
    left out, each with its reason in ``excluded``)."""
    excluded = {} if excluded is None else excluded
    if names and names != [ALL_RUNS]:
        dirs = [Path(n) if Path(n).is_absolute() else outputs / n for n in names]
        missing = [str(d) for d in dirs if not is_run(d)]
        if missing:
            raise FileNotFoundError(f"not runs (no {paths.ENVIRONMENT}): {', '.join(missing)}")
        return dirs
    found = sorted(d for d in outputs.iterdir() if is_run(d)) if outputs.is_dir() else []
    left = {d.name: why for d in found if (why := _left_out(d))}
    excluded.update(left)
    return [d for d in found if d.name not in left]


def runs_for(run_dir: Path, analysis_runs: list[str], excluded: dict | None = None) -> list[Path]:
    """The runs an analysis of ``run_dir`` merges: [] = that run only; ["*"] = every user run beside it."""
    if not analysis_runs:
        return [run_dir] if is_run(run_dir) else []
    return discover(run_dir.parent, analysis_runs, excluded)


def identity(run_dir: Path, env: dict) -> dict:
    """run_name, host_id and host label of a run; :class:`CorruptResults` for a malformed environment."""
    try:
        if "host_id" in env:
            fp = {"host_id": env["host_id"], "host": env["host"]}
        else:  # envinfo imports torch: only for an environment written before host_id was
            from cnnbench import envinfo

            fp = envinfo.host_fingerprint(env)
    except Exception as err:  # noqa: BLE001 - any malformed field: the run is broken, the merge goes on
        raise CorruptResults(f"{paths.ENVIRONMENT} unreadable as a host ({type(err).__name__})") from None
    if not all(isinstance(v, str) for v in fp.values()):
        raise CorruptResults(f"{paths.ENVIRONMENT}'s host_id/host are not text")
    return {"run_name": run_dir.name, **fp}


def load(dirs: list[Path], excluded: dict | None = None, tables: tuple[str, ...] = MERGED) -> Merged:
    """Merge the current rows of the runs ``dirs``, each row stamped with its run's identity; runs of another
    schema version and broken runs are left out, with the reason (as are those already in ``excluded``). Only
    ``tables`` are read (every merged table by default; the others read as empty)."""
    envs, per_run, excluded = {}, {}, dict(excluded or {})
    for d in dirs:
        try:
            env = environment(d)
            if (version := env.get("schema_version")) != SCHEMA_VERSION:
                excluded[d.name] = f"schema version {version!r} (this workbook reads {SCHEMA_VERSION})"
                continue
            read_tables = {n: df for n in tables if len(df := read(d, n))}  # a broken one refused
            run_params(d)
            stamp = identity(d, env)
        except CorruptResults as err:
            excluded[d.name] = f"broken run ({err})"
            continue
        envs[d.name] = {**env, **stamp}
        per_run[d] = (stamp, read_tables)
    merged = Merged([d.name for d in per_run], envs, excluded=excluded)
    for name in MERGED:
        # copied first: a table read column by column is fragmented, and assign then warns (to the user's console)
        frames = [t[name].copy().assign(**stamp) for stamp, t in per_run.values() if name in t]
        if frames:
            merged.tables[name] = pd.concat(frames, ignore_index=True)
    merged.config_differences = config_differences(list(per_run))
    return merged


def config_differences(dirs: list[Path]) -> pd.DataFrame:
    """The configuration parameters whose values differ between runs, one column per run."""
    prm = {d.name: run_params(d) for d in dirs}
    values = {key: {run: str(p.get(key)) for run, p in prm.items()} for key in RUN_CONFIG_KEYS}
    return pd.DataFrame([{"key": k, **v} for k, v in values.items() if len(set(v.values())) > 1])


def zip_run(run_dir: Path) -> Path:
    """outputs/<run_name>.zip of a run folder: its own files, less ``.lock`` and links leading out of it."""
    run_dir = Path(run_dir)
    root, archive = run_dir.resolve(), run_dir.parent / f"{run_dir.name}.zip"
    # written beside it, then renamed over it: a link planted at the archive is replaced, never written through
    with paths.replacing(archive) as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
        for folder, _dirs, files in os.walk(run_dir):  # does not descend into linked folders
            for name in sorted(files):
                path = Path(folder) / name
                target = path.resolve()
                if target.is_file() and target.is_relative_to(root) and path != run_dir / paths.LOCK:
                    zf.write(target, Path(run_dir.name) / path.relative_to(run_dir))
    return archive
