"""A run: validated parameters, the resolved device, and the folder its results go to."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cnnbench import devices, envinfo, params, paths, results


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

    def figure_path(self, name: str) -> Path:
        path = self.dir / "figures" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def environment(self, refresh: bool = False) -> dict:
        """environment.json of this run, captured now if it is missing (or ``refresh``)."""
        path = self.path("environment.json")
        if refresh or not path.is_file():
            results.write_json(path, envinfo.capture(self.device, self.params.to_dict()))
        return results.read_json(path)


def run_name(p: params.Params, device: torch.device) -> str:
    """``run_name`` from the params, else <device kind>-<host name>."""
    return p.run_name or paths.default_run_name(device.type)


def open_run(
    params_file: str | Path = "", overrides: dict[str, Any] | None = None, run_dir: str | Path = ""
) -> Run:
    """Load and validate the parameters, resolve the device, set CPU threads, create the run folder.

    ``params_file`` "" means params/colab_t4.yaml on Colab and params/local.yaml elsewhere; ``run_dir`` ""
    means outputs/<run_name>. Raises :class:`cnnbench.params.ParamsError` on bad input, before any work, and
    :class:`cnnbench.paths.RunLocked` while another process (a pipeline) writes the same run folder. Warns
    when the params file is empty (defaults) or ``threads`` is above the core count.
    """
    path = paths.resolve(params_file) if params_file else paths.default_params_file()
    overrides = dict(overrides or {})
    p = params.load(path, overrides)
    if params.empty_file_note(path):
        warnings.warn(params.empty_file_note(path), stacklevel=2)
    cores = os.cpu_count() or 1
    if p.threads > cores:
        warnings.warn(f"threads {p.threads} is above the {cores} CPU cores here: the run is oversubscribed",
                      stacklevel=2)
    device = devices.resolve(p.device, expect=p.expect_device)
    root = Path(run_dir) if run_dir else paths.outputs_root() / run_name(p, device)
    if os.environ.get(paths.LOCK_ENV) != str(root.resolve()):
        holder = paths.RunLock(root).holder()
        if holder is not None:
            raise paths.RunLocked(f"run '{root.name}' is being written by process {holder}; wait for it or "
                                  "choose another run_name")
    threads = devices.set_threads(p.threads)
    torch.manual_seed(p.seed)
    root.mkdir(parents=True, exist_ok=True)
    results.write_json(
        root / "params.json", {"params_file": str(path), "overrides": overrides, **p.to_dict()}
    )
    from cnnbench import tables

    tables.readable_display()  # every table a notebook shows is whole: nothing behind "..."
    return Run(p, path, root.resolve(), device, threads, overrides)
