"""A run: validated parameters, the resolved device, and the folder its results go to."""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cnnbench import devices, envinfo, heap, params, paths, results
from cnnbench.results import runs


@dataclass
class Run:
    params: params.Params
    params_file: Path
    dir: Path
    device: torch.device
    threads: int
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def device_name(self) -> str:
        return devices.device_name(self.device)

    def path(self, name: str) -> Path:
        """A file of this run, e.g. ``run.path("complexity.csv")``."""
        return self.dir / name

    def read(self, table: str):
        """Table ``table``'s current rows in this run (:func:`cnnbench.results.read`)."""
        return results.read(self.dir, table)

    def figure_path(self, name: str) -> Path:
        path = self.dir / "figures" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def environment(self, refresh: bool = False) -> dict:
        """environment.json of this run, captured now if it is missing (or ``refresh``)."""
        path = self.path(paths.ENVIRONMENT)
        if refresh or not path.is_file():
            results.write_json(path, envinfo.capture(self.device, self.params.to_dict()))
        return results.read_json(path)


def write_resolved(
    run_dir: str | Path, p: params.Params, params_file: str | Path, overrides: dict[str, Any]
) -> Path:
    """``<run_dir>/params.json``: the resolved parameters and where they came from, which every notebook of a
    pipeline run reads as its ``params_file``."""
    path = Path(run_dir) / paths.RESOLVED
    content = {"params_file": paths.shown(params_file), "overrides": overrides, **p.to_dict()}
    # as it is, .inf and .nan too (JSON's Infinity, NaN), so every notebook gets the very same set
    results.atomic_write_text(path, json.dumps(content, indent=2, default=str) + "\n")
    return path


def _resolved(path: Path) -> dict[str, Any] | None:
    """The content of a resolved set written by :func:`write_resolved` at ``path``, else None (a params file)."""
    with contextlib.suppress(OSError, ValueError):
        data = results.read_json(path) if path.suffix == ".json" else None
        return data if isinstance(data, dict) and {"params_file", "overrides"} <= data.keys() else None


class NoRuns(RuntimeError):
    """An analysis opened before any run exists: one line, shown by IPython without a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def open_run(
    params_file: str | Path = "",
    overrides: dict[str, Any] | None = None,
    run_dir: str | Path = "",
    needs_runs: bool = False,
) -> Run:
    """Load and validate the parameters, resolve the device, set CPU threads, create the run folder.

    ``params_file`` "": ``run_dir``'s params.json, else params/colab_t4.yaml on Colab, params/local.yaml elsewhere;
    ``run_dir`` "": outputs/<run_name>. ``needs_runs`` (08): :class:`NoRuns` when there is nothing to analyse, no
    device check, and a run's params.json never rewritten. Raises ParamsError, RunLocked before any work."""
    given = Path(run_dir) / paths.RESOLVED if run_dir and not params_file else None
    if given is not None and given.is_file():  # only a run folder: the run's own parameters, not local.yaml's
        params_file = given
    default = paths.repo_root() / "params" / ("colab_t4.yaml" if paths.on_colab() else "local.yaml")
    path = paths.resolve(params_file) if params_file else default
    overrides = dict(overrides or {})
    resolved = _resolved(path)
    if resolved is not None:
        started = os.environ.get(paths.RESOLVED_ENV, "")
        if started.rsplit(" ", 1)[0] == str(path.resolve()) and started != paths.fingerprint(path):
            raise params.ParamsError(
                f"{path} changed since the run started (edited by hand?): the notebooks "
                "before this one measured what it said then; restore it or start again"
            )
        keys = {k: v for k, v in resolved.items() if k in params.FIELDS}
        p = params.validate(keys, str(path), check_device=not needs_runs, overrides=overrides)
        path, overrides = paths.resolve(resolved["params_file"]), {**resolved["overrides"], **overrides}
    else:
        p = params.load(path, overrides, check_device=not needs_runs)
        for note in params.notes(path, p):
            warnings.warn(note, stacklevel=2)
    cores = os.cpu_count() or 1
    if p.threads > cores:
        warnings.warn(
            f"threads {p.threads} is above the {cores} CPU cores here: the run is oversubscribed",
            stacklevel=2,
        )
    device = devices.resolve(p.device, expect=p.expect_device)
    name = p.run_name or paths.default_run_name(devices.backend(device).kind)
    root = Path(run_dir) if run_dir else paths.outputs_root() / name
    if os.environ.get(paths.LOCK_ENV) != str(root.resolve()):
        holder = paths.RunLock(root).holder()
        if holder is not None:
            raise paths.RunLocked(root, holder)
    if needs_runs and not runs.runs_for(root, p.analysis_runs):
        where = root if not p.analysis_runs else root.parent
        near = sorted(d.name for d in root.parent.glob("*/") if runs.is_run(d))
        beside = (
            f", or open one of the runs beside it ({params.listed(near, 6)}) by setting run_dir to its folder"
        )
        raise NoRuns(
            f"no run to analyse in {where}: run the pipeline first (cnnbench --params params/local.yaml), "
            f"then open this notebook again{beside if near else ''}"
        )
    threads = devices.set_threads(p.threads)
    # everything this process measures (in-process work of any notebook) keeps its heap alike
    heap.apply(p.host_heap)
    torch.manual_seed(p.seed)
    root.mkdir(parents=True, exist_ok=True)
    # an analysis reads a run; it never rewrites its record
    if not (needs_runs and (root / paths.RESOLVED).is_file()):
        write_resolved(root, p, path, overrides)
    from cnnbench import tables

    tables.readable_display()  # every table a notebook shows is whole: nothing behind "..."
    return Run(p, path, root.resolve(), device, threads, overrides)
