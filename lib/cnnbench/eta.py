"""How long will this take? The expected time of each notebook and, while one runs, the time left for it and for
the whole run.

A notebook's expected time is how long it took in this run folder before (its ``timings`` table), else
in the latest run beside it with the same params file (:func:`sibling_record`), else in the committed example
where this run repeats it (:func:`example_record`), else a model of time from the protocol's budgets
(:func:`budget_s`); else it has none. :class:`Remaining` revises them by this run's pace; it is pure: the
clock is an argument."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

RECORD, EXAMPLE = "earlier run", "the committed example on a 2-core CPU"
BUDGET = "the budgets: configurations x protocol + start-up, a rough estimate"
EXAMPLE_RUN = "examples/example-cpu-2core"  # under the workbook's root; its executed notebooks hold its times
# Keys that do not change what a run measures or how long it takes (names, paths, the notebook list).
_NOT_TIMED = tuple(
    (
        "run_name params_file overrides device expect_device notebooks analysis_runs cell_timeout_s "
        "data_path transfer_data_path scratch_data_path"
    ).split()
)
PACE_MIN_S = 30.0  # expected seconds of finished notebooks before their pace revises the other estimates
PACE_BAND = 0.10  # a pace less than 10% slower than the estimates leaves them as they are
PROCESS_LINE = re.compile(r": process \d+/\d+ ")  # cnnbench.progress.process_line


def _configs(p, notebook: str) -> list:
    """The configurations 02 or 03 measures in worker processes ([] for the other notebooks): 03's without
    those 02 measures in the same run (03 takes their rows)."""
    from cnnbench import scenarios

    if notebook == "02_scenario_a":
        return scenarios.scenario_a_configs(p)
    return scenarios.sweep_to_measure(p) if notebook == "03_batch_sweep" and p.sweep else []


def planned(p, notebook: str) -> tuple[int, float]:
    """Worker processes ``notebook`` runs at least (configurations x ``processes``) and the seconds it may
    spend on more (``adapt_budget_s``)."""
    n = len(_configs(p, notebook))
    return (n * p.processes, p.adapt_budget_s) if n else (0, 0.0)


# The budget model of a first run (no record, no earlier run, no example): rough figures for a 2-core CPU, each
# labelled as such in the line it makes. A notebook's time is its fixed cost (kernel start-up and imports) plus,
# per configuration it measures, what its protocol gives that configuration.
# The kernel, a worker process and a nominal step: each device kind's ``budget`` (cnnbench.devices)
COUNT_S = 2.0  # 01: counting one model's FLOPs and bytes
SCRATCH_S = 2.0  # 05: one backend and model set up (or found unavailable)
ANALYSIS_S = 20.0  # 08: merging, comparing and drawing the run's tables
COMPILE_S = (
    40.0  # 07: torch.compile of one model, precision and format (a ResNet-50 training step on 16 cores)
)


def _process_s(p, step_s: float, start_s: float, steps_per_window: int = 0, repeats: int = 0) -> float:
    """One worker process of a configuration: its ``start_s``, warm-up and its ``repeats`` measured windows (the
    params' own unless given)."""
    steps = steps_per_window or p.measured_steps
    window = max(steps * step_s, p.min_window_s) if steps else p.window_s
    epochs = 2 * (p.max_batches or 10) * step_s if p.epoch_mode else 0.0
    return start_s + p.warmup_steps * step_s + (repeats or p.repeats) * window + epochs


def _runs_on(name: str, kind: str) -> bool:
    """Whether a from-scratch backend (numpy, torch_cuda, cupy, ...) or a device (cpu, cuda:1, mps) runs on a
    ``kind`` machine: the host's always (others end in an "unavailable" row at once)."""
    from cnnbench import devices
    from cnnbench.params import SCRATCH_BACKENDS

    needs = SCRATCH_BACKENDS.get(name, name.split(":")[0])
    return needs == kind or devices.backend_class(devices.backend(needs).kind).on_host


def budget_model(p, notebook: str, kind: str = "cpu", steps: list[float] | None = None):
    """``notebook``'s model of time from the protocol on a ``kind`` device (cpu, cuda, mps): (configurations it
    measures, mean seconds per configuration, fixed seconds), or None for a notebook this model does not know.
    ``steps``: the seconds of a step of each of 02's or 03's configurations (else the ``kind``'s nominal step)."""
    from cnnbench import devices

    backend = devices.backend_class(kind)
    step_s, start_s, kernel_s = (backend.budget[k] for k in ("step_s", "process_s", "kernel_s"))
    peaks_s, layers_s, scratch_step_s = (backend.budget[k] for k in ("peaks_s", "layers_s", "scratch_step_s"))
    if notebook == "00_setup":
        return 0, 0.0, kernel_s
    if notebook == "01_complexity":
        return len(p.models), COUNT_S, kernel_s
    if notebook in ("02_scenario_a", "03_batch_sweep"):
        configs, shared = _configs(p, notebook), backend.round_worker and p.isolate  # a worker per round
        fixed = kernel_s + (p.adapt_budget_s + p.processes * start_s * shared if configs else 0.0)
        each = [
            p.processes * _process_s(p, s, start_s * (not shared)) for s in steps or [step_s] * len(configs)
        ]
        return len(configs), sum(each) / max(len(each), 1), fixed
    if notebook == "04_roofline":
        # per model and phase: its layers profiled, and its host cost (23 tiny steps: cnnbench.measure.dispatch)
        return len(p.models) * len(p.phases), layers_s + 23 * step_s, kernel_s + p.peak_repeats * peaks_s
    if notebook == "05_backends":
        images = p.scratch_train_images or 60_000
        steps = p.scratch_epochs * max(images // max(p.scratch_batch_size, 1), 1) + p.scratch_mlp_steps
        configs = sum(_runs_on(b, kind) for b in p.scratch_backends) * len(p.scratch_models)
        return configs, SCRATCH_S + steps / 2 * scratch_step_s, kernel_s  # a model: the CNN's or MLP's steps
    if notebook == "06_transfer":
        devices_here = sum(_runs_on(d, kind) for d in p.transfer_devices)
        grid = len(p.transfer_lrs) * len(p.transfer_batch_sizes) * devices_here
        images = (p.transfer_train_images or 512) + (p.transfer_val_images or 128)
        per_point = start_s + p.transfer_epochs * images / max(min(p.transfer_batch_sizes), 1) * step_s
        phases = len(p.models) * (start_s + 2 * max(p.phase_steps * step_s, p.phase_window_s))
        profile = len(p.profile_models) * (start_s + (p.profile_steps + 1) * step_s)
        scaling = sum(p.scaling_world_sizes) * _process_s(
            p, step_s, start_s, p.scaling_steps, p.scaling_repeats
        )
        return grid, per_point, kernel_s + phases + profile + scaling
    if notebook == "07_tuning":
        searches = len(p.tune_models) * len(p.tune_phases)
        confirm = (p.tune_confirm_top + 1) * (start_s + p.repeats * p.tune_confirm_window_s)
        compiled = len([m for m in p.tune_compile_modes if m != "off"])
        numerics = 2 * len(p.tune_precisions) * len(p.tune_compile_modes)  # the guard's, both memory formats
        guard = (
            numerics * (start_s + p.tune_guard_steps * step_s)
            + compiled * 2 * len(p.tune_precisions) * COMPILE_S
        )
        return searches, p.tune_budget_s + confirm + min(guard, p.tune_guard_budget_s), kernel_s
    if notebook == "08_analysis":
        return 0, 0.0, kernel_s + ANALYSIS_S
    return None


def budget_s(p, notebook: str, kind: str = "cpu") -> float | None:
    """Seconds ``notebook`` is expected to take by :func:`budget_model` (configurations x seconds each + fixed
    costs), the estimate of a first run that has nothing measured to go by; None for a notebook it does not know."""
    return Budgets(p, kind)[notebook]


def params_device(p, kind: str, device_name: str, params_file_name: str) -> str:
    """The device of device_specs.csv whose predicted rates estimate a ``kind`` run's steps: the one running it
    where the specs give it an fp32 peak, else the one ``params_file_name`` is written for; "" for the host CPU or
    neither."""
    from cnnbench import devices, predict

    if devices.backend_class(kind).on_host:
        return ""
    with contextlib.suppress(predict.Refused):
        if device_name:
            return predict.spec_roof(device_name)["device"]
    return predict.PARAMS_DEVICES.get(params_file_name, "")


class Budgets(Mapping):
    """Notebook -> :func:`budget_s`, computed when first asked for (a run with a record of its own never predicts):
    02's and 03's steps at the rates :func:`cnnbench.predict.step_times` predicts for ``device`` (where named and
    predictable), else the budgets' nominal step of ``kind``; :meth:`source` says which."""

    def __init__(self, p, kind: str = "cpu", device: str = ""):
        self.p, self.kind, self.device, self._got = p, kind, device, {}

    def _steps(self, notebook: str) -> tuple[list[float] | None, str]:
        configs = self.device and _configs(self.p, notebook)
        if not configs:
            return None, BUDGET
        from cnnbench import predict

        try:
            return predict.step_times(configs, self.device), f"the budgets, steps predicted for {self.device}"
        except Exception as err:  # noqa: BLE001 - an estimate must never stop a run
            return None, f"{BUDGET} (no prediction for {self.device}: {str(err).splitlines()[0][:80]})"

    def _get(self, notebook: str) -> tuple[float | None, str]:
        if notebook not in self._got:
            steps, source = self._steps(notebook)
            model = budget_model(self.p, notebook, self.kind, steps)
            self._got[notebook] = (None if model is None else model[0] * model[1] + model[2], source)
        return self._got[notebook]

    def __getitem__(self, notebook: str) -> float | None:
        return self._get(notebook)[0]

    def source(self, notebook: str) -> str:
        """Where ``notebook``'s figure comes from: BUDGET, or the budgets with steps predicted for the device."""
        return self._get(notebook)[1]

    def __iter__(self):
        return iter(self.p.notebooks)

    def __len__(self) -> int:
        return len(self.p.notebooks)


def example_record(p, device_kind: str, example_dir) -> dict[str, float]:
    """How long each notebook took in the committed example run, where this run is the same as that one (a CPU
    run with the same parameters, names and paths apart); {} otherwise."""
    example_dir = Path(example_dir)
    try:
        theirs = json.loads((example_dir / "params.json").read_text())
    except (OSError, ValueError):
        return {}
    ours = json.loads(json.dumps(dataclasses.asdict(p), default=str))
    same = all(ours.get(k) == v for k, v in theirs.items() if k not in _NOT_TIMED and k in ours)
    try:
        theirs_kind = json.loads((example_dir / "environment.json").read_text()).get("device_kind")
    except (OSError, ValueError):
        theirs_kind = None
    if device_kind != theirs_kind or not same:  # the example's times hold for its own kind of device only
        return {}
    out = {}
    for nb in sorted((example_dir / "notebooks").glob("*.ipynb")):
        try:
            took = json.loads(nb.read_text())["metadata"]["papermill"]["duration"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(took, (int, float)):
            out[nb.stem] = float(took)
    return out


def example_hardware(kind: str):
    """The :class:`cnnbench.devices.Hardware` of the committed example run on a ``kind`` device (examples/), what an
    estimate for a device not at hand stands on; None where no example ran on one."""
    from cnnbench import devices, paths

    for path in sorted((paths.repo_root() / "examples").glob("*/environment.json")):
        env = json.loads(path.read_text())
        if env.get("device_kind") == kind:
            cap = tuple(int(x) for x in str(env.get("gpu_compute_capability", "")).split(".") if x.isdigit())
            gpu = {"capability": cap or None, "sms": int(env.get("gpu_multiprocessors") or 0)}
            memory = int(float(env.get("gpu_memory_gb") or 0) * 2**30)
            return devices.Hardware(
                kind, env["device_name"], int(env["cpu_physical_cores"]), memory_bytes=memory, **gpu
            )
    return None


def sibling_record(run_dir, params_file_name: str) -> tuple[str, dict[str, float]]:
    """(name, seconds per notebook) of the run beside ``run_dir`` (same outputs folder, same params file by name)
    whose ``timings.csv`` changed last: a second run name estimates from the first. ("", {}) when there is none."""
    run_dir, best = Path(run_dir), None
    for d in run_dir.parent.glob("*/"):
        timings = d / "timings.csv"
        if d.resolve() == run_dir.resolve() or not timings.is_file():
            continue
        try:
            theirs = json.loads((d / "params.json").read_text()).get("params_file", "")
        except (OSError, ValueError, AttributeError):
            continue
        newer = best is None or timings.stat().st_mtime > best.stat().st_mtime
        if Path(str(theirs)).name == params_file_name and newer:
            best = timings
    if best is None:
        return "", {}
    out = {}
    try:
        with best.open(newline="") as f:
            for row in csv.DictReader(f):  # appended in order: the last row of a notebook is its latest time
                try:
                    took = float(row.get("duration_s"))
                except (TypeError, ValueError):
                    continue
                if row.get("notebook") and math.isfinite(took) and took >= 0:
                    out[row["notebook"]] = took
    except (OSError, UnicodeDecodeError, csv.Error):
        return "", {}
    return (best.parent.name, out) if out else ("", {})


def expected_times(
    notebooks,
    record: Mapping[str, float],
    budgets: Mapping[str, float | None],
    example: Mapping[str, float] | None = None,
    sibling: tuple[str, Mapping[str, float]] | None = None,
) -> dict[str, tuple[float | None, str]]:
    """Per notebook: (expected seconds or None, where the figure comes from: RECORD, the sibling run's name,
    EXAMPLE, BUDGET or "")."""
    out, example = {}, example or {}
    sibling_name, sibling_times = sibling or ("", {})
    for name in notebooks:
        if record.get(name) is not None and math.isfinite(record[name]):
            out[name] = (float(record[name]), RECORD)
        elif sibling_times.get(name) is not None:
            out[name] = (float(sibling_times[name]), f"run '{sibling_name}' beside it")
        elif example.get(name) is not None:
            out[name] = (float(example[name]), EXAMPLE)
        elif budgets.get(name) is not None:
            source = budgets.source(name) if isinstance(budgets, Budgets) else BUDGET
            out[name] = (float(budgets[name]), source)
        else:
            out[name] = (None, "")
    return out


def duration(seconds: float | None) -> str:
    """``1h02m``, ``4m05s``, ``12s``; ``?`` for no estimate."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = max(int(round(seconds)), 0)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Remaining:
    """The time left of a run of ``expected`` notebooks (name -> (seconds or None, source)), by ``clock``.

    ``planned``: name -> its least worker processes, or (processes, seconds it may add after them: its
    ``adapt_budget_s``). Every figure is revised by the pace of this run: a running notebook's by its own
    finished processes, the others' by :meth:`pace`. A notebook still running past its estimate says by how
    much, never "0s left"; the run's figure then is a lower bound."""

    def __init__(
        self,
        expected: Mapping[str, tuple[float | None, str]],
        clock: Callable[[], float] = time.monotonic,
        planned: Mapping[str, int | tuple[int, float]] | None = None,
    ):
        self.expected, self.clock = dict(expected), clock
        self.planned = {k: v if isinstance(v, tuple) else (v, 0.0) for k, v in (planned or {}).items()}
        self.order, self.current, self.started, self.took = list(expected), None, 0.0, {}
        self.process_times: list[float] = []

    def start(self, notebook: str) -> str:
        """Mark ``notebook`` started; returns its line: the expected time and where it comes from."""
        self.current, self.started, self.process_times = notebook, self.clock(), []
        secs, source = self.expected.get(notebook, (None, ""))
        if secs is None:
            return self.with_run(f"{notebook}: no estimate (no earlier run of it here, no time budget)")
        pace = self.pace()
        why = (
            f"from {source}"
            if pace == 1.0
            else f"{duration(secs)} from {source}, x{pace:.2f} at this run's pace"
        )
        return self.with_run(f"{notebook}: expected {duration(secs * pace)} ({why})")

    def finish(self, notebook: str) -> float:
        """Mark ``notebook`` finished; returns how long it took."""
        took = self.clock() - self.started
        self.took[notebook], self.current = took, None
        return took

    def seen(self, line: str) -> None:
        """A progress line of the running notebook: one more process done if it is a process's line."""
        if PROCESS_LINE.search(line):
            self.process_times.append(self.clock())

    def elapsed(self) -> float:
        return self.clock() - self.started if self.current else 0.0

    def pace(self) -> float:
        """Seconds the finished notebooks took per second of their estimates: the factor on every estimate
        not yet measured in this run. 1.0 until they were expected to take ``PACE_MIN_S``, and while under 1 +
        ``PACE_BAND`` (a faster pace is not carried over: a resumed notebook keeps its rows in seconds)."""
        done = [(took, self.expected[n][0]) for n, took in self.took.items() if self.expected[n][0]]
        expected = sum(e for _, e in done)
        factor = sum(t for t, _ in done) / expected if expected >= PACE_MIN_S else 1.0
        return factor if factor > 1 + PACE_BAND else 1.0

    def notebook_left(self) -> float | None:
        """Seconds left of the running notebook, negative once it is past its estimate; None without one.
        With planned processes done: from their pace (between the first and the latest once two are done, so
        the kernel's start-up is not counted again for each), after the last planned one from the seconds it
        may add (and one process that starts at their end); else its expected time at this run's pace less its
        elapsed."""
        (todo, after), times = self.planned.get(self.current, (0, 0.0)), self.process_times
        if todo and times:
            done, now = len(times), self.clock()
            pace = (times[-1] - times[0]) / (done - 1) if done > 1 else times[0] - self.started
            if done < todo:
                return pace * (todo - done) - (now - times[-1])
            return after + pace - (now - times[todo - 1])
        secs = self.expected.get(self.current, (None, ""))[0] if self.current else None
        return None if secs is None else secs * self.pace() - self.elapsed()

    def run_left(self) -> tuple[float, bool]:
        """Seconds left of the whole run, and whether that is complete (False: a notebook has no estimate or
        is past it, so the figure is a lower bound)."""
        left, complete, pace = 0.0, True, self.pace()
        for name in self.order:
            if name in self.took:
                continue
            now = self.notebook_left() if name == self.current else self.expected[name][0]
            if now is None or now <= 0:
                complete = False
            else:
                left += now if name == self.current else now * pace
        return left, complete

    def run_text(self) -> str:
        left, complete = self.run_left()
        if not complete:
            return f"at least {duration(left)}" if left >= 1 else "?"
        return duration(max(left, 1) if left > 0 else 0.0)  # never "0s" while something is left

    def with_run(self, line: str) -> str:
        """``line; run: <time> left``, and why it differs from the estimates where this run's pace revised them;
        ``line`` alone where nothing is known of the run's time beyond the running notebook's."""
        if (text := self.run_text()) == "?":
            return line
        pace = self.pace()
        note = "" if pace == 1.0 else f" (revised: this run's work so far took {pace:.2f}x its estimates)"
        return f"{line}; run: {text} left{note}"

    def line(self) -> str:
        """The tqdm-style line while a notebook runs: elapsed and left for the notebook, then for the run."""
        name, left = self.current or "", self.notebook_left()
        todo, done = self.planned.get(name, (0, 0.0))[0], len(self.process_times)
        nb = "? left" if left is None else f"{duration(max(left, 1))} left"
        nb = f"past its estimate by {duration(-left)}" if left is not None and left <= 0 else nb
        if todo:
            more = f" + {done - todo} for wide intervals" if done > todo else ""
            nb += f" ({min(done, todo)}/{todo} processes{more})"
        return self.with_run(f"{name} {duration(self.elapsed())} elapsed, {nb}")
