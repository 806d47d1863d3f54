"""Each notebook's expected time: its time in this run folder before, else in the latest run beside it with the
same params file, else in the committed example where this run repeats it, else the budgets' model
(:func:`budget_model`). :class:`Remaining` revises them by this run's pace (the clock is an argument)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import time
import types
from collections.abc import Callable, Mapping
from pathlib import Path

from cnnbench import params, paths, results
from cnnbench.params import NUMBERED, SCRATCH_BACKENDS

RECORD, EXAMPLE = "earlier run", "the committed example on a 2-core CPU"
BUDGET = "the budgets: configurations x protocol + start-up, a rough estimate"
EXAMPLE_RUN = "examples/example-cpu-2core"  # under the workbook's root; its executed notebooks hold its times
# Keys that do not change what a run measures or how long it takes (names, paths, the notebook list).
_NOT_TIMED = (
    "run_name params_file overrides device expect_device notebooks analysis_runs cell_timeout_s data_path "
    "transfer_data_path scratch_data_path"
).split()
PACE_MIN_S = 30.0  # expected seconds of finished notebooks before their pace revises the other estimates
PACE_BAND = 0.10  # a pace less than 10% slower than the estimates leaves them as they are
PROCESS_LINE = re.compile(r": process \d+/\d+ ")  # cnnbench.progress.process_done's


def _configs(p, notebook: str) -> list:
    """The configurations 02 or 03 measures in worker processes (03's without those it takes from 02)."""
    from cnnbench import scenarios

    if notebook == NUMBERED["02"]:
        return scenarios.scenario_a_configs(p)
    return scenarios.sweep_to_measure(p) if notebook == NUMBERED["03"] and p.sweep else []


def planned(p, notebook: str) -> tuple[int, float]:
    """Worker processes ``notebook`` runs at least, and the seconds it may spend on more (``adapt_budget_s``)."""
    n = len(_configs(p, notebook))
    return (n * p.processes, p.adapt_budget_s) if n else (0, 0.0)


# The budget model of a first run: rough figures for a 2-core CPU; the kernel, a worker process and a step are each
# device kind's ``Backend.budget``
COUNT_S = 2.0  # 01: counting one model's FLOPs and bytes
SCRATCH_S = 2.0  # 05: one backend and model set up (or found unavailable)
ANALYSIS_S = 20.0  # 08: merging, comparing and drawing the run's tables
COMPILE_S = 40.0  # 07: torch.compile of one model, precision and format (ResNet-50 on 16 cores)


def _process_s(p, step_s: float, start_s: float, steps_per_window: int = 0, repeats: int = 0) -> float:
    """One worker process of a configuration: start-up, warm-up and ``repeats`` windows (the params' own)."""
    steps = steps_per_window or p.measured_steps
    window = max(steps * step_s, p.min_window_s) if steps else p.window_s
    epochs = 2 * (p.max_batches or 10) * step_s if p.epoch_mode else 0.0
    return start_s + p.warmup_steps * step_s + (repeats or p.repeats) * window + epochs


def _runs_on(name: str, kind: str) -> bool:
    """Whether a from-scratch backend (numpy, cupy, ...) or a device (cuda:1) runs on a ``kind`` machine."""
    from cnnbench import devices

    needs = SCRATCH_BACKENDS.get(name, name.split(":")[0])
    return needs == kind or devices.backend_class(devices.backend(needs).kind).on_host


def _engine(p, b) -> tuple:
    configs, shared = _configs(p, b.notebook), b.round_worker and p.isolate  # a worker per round
    fixed = b.kernel_s + (p.adapt_budget_s + p.processes * b.process_s * shared if configs else 0.0)
    steps = b.steps or [b.step_s] * len(configs)
    each = [p.processes * _process_s(p, s, b.process_s * (not shared)) for s in steps]
    return len(configs), sum(each) / max(len(each), 1), fixed


def _scratch(p, b) -> tuple:  # a model: the CNN's or MLP's steps
    steps = p.scratch_epochs * max((p.scratch_train_images or 60_000) // max(p.scratch_batch_size, 1), 1)
    configs = sum(_runs_on(n, b.kind) for n in p.scratch_backends) * len(p.scratch_models)
    return configs, SCRATCH_S + (steps + p.scratch_mlp_steps) / 2 * b.scratch_step_s, b.kernel_s


def _transfer(p, b) -> tuple:
    step, start, here = b.step_s, b.process_s, sum(_runs_on(d, b.kind) for d in p.transfer_devices)
    images = (p.transfer_train_images or 512) + (p.transfer_val_images or 128)
    per_point = start + p.transfer_epochs * images / max(min(p.transfer_batch_sizes), 1) * step
    phases = len(p.models) * (start + 2 * max(p.phase_steps * step, p.phase_window_s))
    profile = len(p.profile_models) * (start + (p.profile_steps + 1) * step)
    scaling = sum(p.scaling_world_sizes) * _process_s(p, step, start, p.scaling_steps, p.scaling_repeats)
    fixed = b.kernel_s + phases + profile + scaling
    return len(p.transfer_lrs) * len(p.transfer_batch_sizes) * here, per_point, fixed


def _tuning(p, b) -> tuple:
    confirm = params.tuning_confirm_s(p, b.process_s, b.step_s)
    compiled = len([m for m in p.tune_compile_modes if m != "off"]) * 2 * len(p.tune_precisions) * COMPILE_S
    numerics = 2 * len(p.tune_precisions) * len(p.tune_compile_modes)  # the guard's, both memory formats
    guard = min(numerics * (b.process_s + p.tune_guard_steps * b.step_s) + compiled, p.tune_guard_budget_s)
    return len(p.tune_models) * len(p.tune_phases), p.tune_budget_s + confirm + guard, b.kernel_s


# Per notebook of ``params.NOTEBOOKS``: (configurations, mean seconds each, fixed seconds) from the params ``p`` and
# ``b`` (the kind's budget, kind, notebook, 02/03's step times); 04's host cost: 23 tiny steps (measure.dispatch).
BUDGET_MODELS = {
    NUMBERED["01"]: lambda p, b: (len(p.models), COUNT_S, b.kernel_s),
    NUMBERED["02"]: _engine,
    NUMBERED["03"]: _engine,
    NUMBERED["04"]: lambda p, b: (
        len(p.models) * len(p.phases),
        b.layers_s + 23 * b.step_s,
        b.kernel_s + p.peak_repeats * b.peaks_s,
    ),
    NUMBERED["05"]: _scratch,
    NUMBERED["06"]: _transfer,
    NUMBERED["07"]: _tuning,
    NUMBERED["08"]: lambda p, b: (0, 0.0, b.kernel_s + ANALYSIS_S),
}


def budget_model(p, notebook: str, kind: str = "cpu", steps: list[float] | None = None):
    """:data:`BUDGET_MODELS`' figures for ``notebook`` on a ``kind`` device (``steps``: 02's or 03's step times);
    a notebook it does not know gets its kernel's start-up."""
    from cnnbench import devices

    backend = devices.backend_class(kind)
    extra = dict(round_worker=backend.round_worker, kind=kind, notebook=notebook, steps=steps)
    b = types.SimpleNamespace(**backend.budget, **extra)
    return BUDGET_MODELS.get(notebook, lambda p, b: (0, 0.0, b.kernel_s))(p, b)


def params_device(p, kind: str, device_name: str, params_file_name: str) -> str:
    """The device of device_specs.csv whose rates estimate a ``kind`` run's steps: the one running it, else the one
    ``params_file_name`` is written for; "" for the host CPU or neither."""
    from cnnbench import devices, predict

    if devices.backend_class(kind).on_host:
        return ""
    with contextlib.suppress(predict.Refused):
        if device_name:
            return predict.spec_roof(device_name)["device"]
    return predict.PARAMS_DEVICES.get(params_file_name, "")


class Budgets:
    """Notebook -> seconds by :func:`budget_model` (``[name]``, ``get``), computed when first asked for; 02's and
    03's steps at the rates predicted for ``device`` where it can be, else ``kind``'s; :meth:`source` says which."""

    def __init__(self, p, kind: str = "cpu", device: str = ""):
        self.p, self.kind, self.device, self._got = p, kind, device, {}

    def _get(self, notebook: str) -> tuple[float, str]:
        if notebook not in self._got:
            steps, source, configs = None, BUDGET, self.device and _configs(self.p, notebook)
            if configs:
                from cnnbench import predict

                try:
                    steps = predict.step_times(configs, self.device)
                    source = f"the budgets, steps predicted for {self.device}"
                except Exception as err:  # noqa: BLE001 - an estimate must never stop a run
                    source = f"{BUDGET} (no prediction for {self.device}: {str(err).splitlines()[0][:80]})"
            n, each, fixed = budget_model(self.p, notebook, self.kind, steps)
            self._got[notebook] = (n * each + fixed, source)
        return self._got[notebook]

    def __getitem__(self, notebook: str) -> float:
        return self._get(notebook)[0]

    get = __getitem__

    def source(self, notebook: str) -> str:
        return self._get(notebook)[1]


def example_record(p, device_kind: str, example_dir) -> dict[str, float]:
    """Seconds each notebook took in the committed example run where this run repeats it on its kind of device
    (the same parameters, names and paths apart); {} otherwise."""
    example_dir = Path(example_dir)
    try:
        theirs = json.loads((example_dir / paths.RESOLVED).read_text())
        kind = json.loads((example_dir / paths.ENVIRONMENT).read_text())["device_kind"]
    except (OSError, ValueError, KeyError):
        return {}
    ours = json.loads(json.dumps(dataclasses.asdict(p), default=str))
    if kind != device_kind or any(ours.get(k, v) != v for k, v in theirs.items() if k not in _NOT_TIMED):
        return {}
    executed = sorted((example_dir / "notebooks").glob("*.ipynb"))
    return {
        nb.stem: float(json.loads(nb.read_text())["metadata"]["papermill"]["duration"]) for nb in executed
    }


def example_hardware(kind: str):
    """The :class:`cnnbench.devices.Hardware` of the committed example run on a ``kind`` device, a complete one
    (no ``FAILED.txt``) before a failed one, else None."""
    from cnnbench import devices

    found = (paths.repo_root() / "examples").glob(f"*/{paths.ENVIRONMENT}")
    for path in sorted(found, key=lambda e: ((e.parent / paths.FAILED).exists(), e)):
        env = json.loads(path.read_text())
        if env.get("device_kind") == kind:
            cap = tuple(int(x) for x in str(env.get("gpu_compute_capability", "")).split(".") if x.isdigit())
            gpu = {"capability": cap or None, "sms": int(env.get("gpu_multiprocessors") or 0)}
            memory = int(float(env.get("gpu_memory_gb") or 0) * 2**30)
            return devices.Hardware(
                kind, env["device_name"], int(env["cpu_physical_cores"]), memory_bytes=memory, **gpu
            )
    return None


def record(run_dir) -> dict[str, float]:
    """Seconds each notebook took in ``run_dir`` (its ``timings`` table), the latest time of each."""
    times = {}
    for r in results.file(run_dir, "timings").current():
        with contextlib.suppress(ValueError):
            times[r["notebook"]] = float(r["duration_s"])
    return times  # never negative nor infinite: results.read_rows refuses such a time


def sibling_record(run_dir, params_file_name: str) -> tuple[str, dict[str, float]]:
    """(name, seconds per notebook) of the run beside ``run_dir`` with the same params file whose ``timings.csv``
    changed last; ("", {}) when there is none."""
    run_dir, found = Path(run_dir), []
    for d in run_dir.parent.glob("*/"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            theirs = json.loads((d / paths.RESOLVED).read_text()).get("params_file", "")
            if d.resolve() != run_dir.resolve() and Path(str(theirs)).name == params_file_name:
                found.append((results.file(d, "timings").path.stat().st_mtime, d))
    for _, d in sorted(found)[-1:]:
        with contextlib.suppress(Exception):  # an estimate never stops a run
            return (d.name, times) if (times := record(d)) else ("", {})
    return "", {}


def expected_times(
    notebooks,
    record: Mapping[str, float],
    budgets: Mapping[str, float | None],
    example: Mapping[str, float] | None = None,
    sibling: tuple[str, Mapping[str, float]] | None = None,
) -> dict[str, tuple[float | None, str]]:
    """Per notebook: (expected seconds or None, where the figure comes from)."""
    sibling_name, sibling_times = sibling or ("", {})
    sibling_source = f"run '{sibling_name}' beside it"
    sources = ((record, RECORD), (sibling_times, sibling_source), (example or {}, EXAMPLE), (budgets, BUDGET))
    out = {}
    for name in notebooks:
        times, source = next(((t, s) for t, s in sources if t.get(name) is not None), (None, ""))
        if times is budgets and isinstance(budgets, Budgets):
            source = budgets.source(name)
        out[name] = (None if times is None else float(times[name]), source)
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
    """The time left of a run of ``expected`` notebooks (name -> (seconds or None, source)), by ``clock``, revised by
    this run's pace; ``planned``: name -> its least worker processes, or (processes, seconds it may add after)."""

    def __init__(self, expected: Mapping, clock: Callable[[], float] = time.monotonic, planned=None):
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
        pace, why = self.pace(), f"from {source}"
        why = why if pace == 1.0 else f"{duration(secs)} {why}, x{pace:.2f} at this run's pace"
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
        """Seconds the finished notebooks took per second of their estimates, where above 1 + ``PACE_BAND`` over
        ``PACE_MIN_S`` of estimates; else 1.0 (a resumed notebook is fast: a faster pace is not carried over)."""
        done = [(took, self.expected[n][0]) for n, took in self.took.items() if self.expected[n][0]]
        expected = sum(e for _, e in done)
        factor = sum(t for t, _ in done) / expected if expected >= PACE_MIN_S else 1.0
        return factor if factor > 1 + PACE_BAND else 1.0

    def notebook_left(self) -> float | None:
        """Seconds left of the running notebook (negative past its estimate, None without one): from its finished
        processes' pace where planned, else its expected time at this run's pace less its elapsed."""
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
        """Seconds left of the whole run, and whether that is complete (else a lower bound)."""
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
        """``line; run: <time> left`` (and the pace that revised it), or ``line`` where the run's time is unknown."""
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
