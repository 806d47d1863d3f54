"""Many configurations, each measured in fresh processes in interleaved rounds of a seeded random order until
its interval is within ``ci_target_pct``, ``max_processes`` or ``adapt_budget_s``; each process's windows are
written as it ends, so a rerun goes on from them. Files and columns: docs/outputs.md, docs/measurement.md."""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from cnnbench.devices import energy
from cnnbench.measure import engine, telemetry, timing, worker
from cnnbench.measure.engine import Config
from cnnbench.measure.reproducibility import number
from cnnbench.progress import bar, process_done, resumed, row_done, say
from cnnbench.results import TABLES, ResultsFile, config_keys

# per results file: the keys of the configurations a headline pass (``only``) measured, which the file's next full
# call counts as measured by it, neither kept from an earlier run nor measured again (a failure row included)
_HEADLINE_MEASURED: dict[str, set] = {}


class _Config:
    """One configuration across rounds: its key, its processes' windows and rows, the failure that ends it."""

    def __init__(self, cfg: Config, key: dict, windows: ResultsFile):
        self.cfg, self.key = cfg, key
        mine = [w for w in windows.rows() if _key(windows, w) == _key(windows, key)]
        self.windows = [_typed_window(w) for w in mine]
        self.rows: dict[int, dict] = {}
        self.failure: dict | None = None
        self.attempts = len(self.processes)

    @property
    def processes(self) -> list[int]:
        return sorted({w["process"] for w in self.windows})

    @property
    def count(self) -> int:  # measured or tried: a process that returned no windows is not tried forever
        return max(self.attempts, len(self.processes))

    def rates(self) -> list[float]:  # each process's images over its windows' time
        per = [[w for w in self.windows if w["process"] == p] for p in self.processes]
        return [sum(w["images"] for w in ws) / sum(w["window_time_s"] for w in ws) for ws in per]

    def ci_pct(self) -> float:
        rates = self.rates()
        mean = statistics.fmean(rates) if len(rates) >= 2 else 0.0
        return 100 * timing.ci95_half_width(rates) / mean if mean > 0 else math.inf


def _key(file: ResultsFile, key: dict) -> tuple[str, ...]:
    return file.key_of(key)[: len(config_keys())]


def _typed_window(w: dict) -> dict:
    out = {**w, **{k: int(float(w[k])) for k in ("process", "repeat", "steps", "images")}}
    return out | {"window_time_s": float(w["window_time_s"]), "probe_img_s": number(w.get("probe_img_s"))}


def _merge_numbers(rows: list[dict]) -> dict:
    """The processes' numeric columns as one: maxima the largest, minima the smallest, the rest the mean."""
    out, not_merged = {}, {*config_keys(), "process", "steps_per_window", "exitcode"}
    for k in rows[0]:
        vals = [float(v) for r in rows if isinstance(v := r.get(k), int | float) and type(v) is not bool]
        vals = [v for v in vals if math.isfinite(v)]
        if k in not_merged or not vals:
            continue
        big, small = k.startswith("peak_") or "_max" in k, "_min" in k or k == "baseline_rss_mib"
        out[k] = max(vals) if big else min(vals) if small else sum(vals) / len(vals)
    return out


def merge(state: _Config, stop_reason: str, steps: ResultsFile | None) -> dict:
    """The configuration's row over all its processes (see the module's docstring)."""
    rows = [state.rows[p] for p in sorted(state.rows)]
    base = dict(rows[-1]) if rows else {**state.key, "status": "ok", "error": ""}
    if not state.windows:  # nothing timed (a measurement that returned no windows): the row as it came
        return {**base, "processes_measured": 0, "stop_reason": stop_reason}
    if rows:
        base.update(_merge_numbers(rows))
        unread = [r for r in rows if not math.isfinite(number(r.get("energy_j")))]  # rows kept are "ok"
        if unread:  # a mean over the processes that read it would be theirs alone: none, with a reason
            base.update(energy.none(unread[-1].get("energy_source", ""), unread[-1].get("energy_note", "")))
    mine = steps.rows() if steps is not None else []
    step_times = [float(s["step_time_s"]) for s in mine if _key(steps, s) == _key(steps, state.key)]
    walls = [w["window_time_s"] for w in state.windows]
    counts = [w["steps"] for w in state.windows]
    within = base.get("throughput_ci95_img_s", math.nan)
    if not step_times:  # no step file: the windows' mean step stands in for every step
        step_times = [w["window_time_s"] / w["steps"] for w in state.windows for _ in range(w["steps"])]
    base.update(timing.summarize(step_times, walls, counts, state.cfg.batch_size))
    base["windows"] = base["repeats"]  # all windows of all processes; the key keeps ``repeats`` per process
    base.update(state.key)
    rates = state.rates()
    half = timing.ci95_half_width(rates)
    base.update(
        processes_measured=len(rates),
        throughput_ci95_img_s=half,
        throughput_ci95_within_img_s=within,
        process_rates_img_s=dict(zip(state.processes, rates, strict=True)),
        throughput_process_min_img_s=min(rates),
        throughput_process_max_img_s=max(rates),
        throughput_process_cv_pct=100 * statistics.stdev(rates) / statistics.fmean(rates)
        if len(rates) > 1
        else math.nan,
        ci95_pct=100 * half / base["throughput_img_s"] if base["throughput_img_s"] else math.nan,
        stop_reason=stop_reason,
    )
    if math.isfinite(number(base.get("gflops_per_image"))):
        base["achieved_gflops"] = base["throughput_img_s"] * float(base["gflops_per_image"])
        base["achieved_tflops"] = base["achieved_gflops"] / 1e3
    if probes := [w["probe_img_s"] for w in state.windows if math.isfinite(w["probe_img_s"])]:
        base["probe_img_s"] = sum(probes) / len(probes)
        base["probe_spread_pct"] = 100 * (max(probes) - min(probes)) / base["probe_img_s"]
    base["step_bound"] = engine.step_bound(float(base.get("device_busy_pct", math.nan)))
    base["machine_state"], base["machine_note"] = telemetry.judge(base)
    base["busy_windows"] = sum(1 for w in state.windows if telemetry.judge(w)[0] == "busy")
    return base


def _rounds(states: list[_Config], p, measure: Callable[[list, float], None], probe: Callable) -> list[str]:
    """Each configuration's stop reason after the rounds (see the module's docstring)."""
    least = max(p.processes, 1)
    order = random.Random(f"rounds {p.seed}")
    for _ in range(least):
        probe()
        todo = [s for s in order.sample(states, len(states)) if s.failure is None and s.count < least]
        measure([(s, s.count + 1) for s in todo], math.inf)
    started = time.perf_counter()
    while True:
        wide = [
            s
            for s in states
            if s.failure is None and s.ci_pct() > p.ci_target_pct and s.count < p.max_processes
        ]
        if not wide or time.perf_counter() - started >= p.adapt_budget_s:
            break
        probe()
        measure([(s, s.count + 1) for s in order.sample(wide, len(wide))], started + p.adapt_budget_s)

    def reason(s: _Config) -> str:
        if s.ci_pct() <= p.ci_target_pct:
            return "target" if s.count > least else "processes"
        return "max_processes" if s.count >= p.max_processes else "budget"

    return [reason(s) for s in states]


def run_configs(
    configs: Iterable[Config],
    device,
    p,
    path,
    steps_path=None,
    dataset_for: Callable[[Config], object] | None = None,
    desc: str = "measuring",
    telemetry_path=None,
    source: str = "",
    isolate: bool = False,
    only: Iterable[Config] | None = None,
    reuse: Path | None = None,
) -> list[dict]:
    """Measure every configuration of ``configs`` not done in ``path`` with the protocol ``p``; their rows.
    ``isolate``: each process a fresh worker; ``only``: measure these now; ``reuse``: a results file whose
    finished rows of the same configurations are copied (``measured_in``) instead of measured again."""
    device, configs, source = timing.backend_of(device), list(configs), source or desc
    # every engine table is declared alike (results.schema): scenario_a's key and row bound are batch_sweep's
    results = TABLES["scenario_a"].at(path)
    windows = TABLES["scenario_a_windows"].at(results.path.with_name(f"{results.path.stem}_windows.csv"))
    steps = TABLES["scenario_a_steps"].at(steps_path) if steps_path else None
    tele = TABLES["telemetry"].at(telemetry_path) if telemetry_path else None
    keys = [engine.config_key(c, device, p) for c in configs]
    files = [f for f in (results, windows, steps, tele) if f is not None]
    for f in files:  # each refused before any work (one line): unreadable, another schema, over its row bound
        f.rows()
    for f in files:  # these configurations, and only they, are this invocation's rows (ResultsFile.plan)
        f.plan(keys, source, config_keys())
    copied = []
    if reuse is not None:  # its finished rows that ``results`` lacks, copied with ``measured_in``
        donor = TABLES["scenario_a"].at(reuse)
        wanted = {results.key_of(k) for k in keys if not results.done(k)}
        copied = [
            {**r, "measured_in": donor.path.stem}
            for r in donor.current()
            if donor.key_of(r) in wanted and donor.done(r)
        ]
    if copied:
        results.extend(copied)
        say(f"took {len(copied)} of {len(configs)} configurations from {Path(reuse).name}, measured there")
    if only is not None:
        now = list(only)
        keys = [k for c, k in zip(configs, keys, strict=True) if c in now]
        configs = [c for c in configs if c in now]
    headline = _HEADLINE_MEASURED.pop(str(path), set()) if only is None else set()
    fresh = [(c, k) for c, k in zip(configs, keys, strict=True) if not results.done(k)]
    states = [_Config(c, k, windows) for c, k in fresh if results.key_of(k) not in headline]
    probed = {"img_s": math.nan}

    def probe() -> None:  # the host CPU's own speed before each round (telemetry.speed_probe), where the
        if device.on_host and states:  # host CPU is the measured device
            probed["img_s"] = telemetry.speed_probe()

    total = sum(max(p.processes - len(s.processes), 0) for s in states)
    progress = bar(total=total, desc=desc, unit="process")

    def record(state: _Config, process: int, row: dict) -> None:
        """One process's windows, steps and telemetry into their files; its row kept for the merge."""
        state.attempts = process
        row["process"] = process
        process_done(row, process, max(p.processes, process))
        progress.update(1)
        step_times, walls, spans, series = (
            row.pop(k, []) for k in ("step_times_s", "window_times_s", "window_spans_s", "telemetry_series")
        )
        counts = row.pop("window_steps", None) or [row.get("steps_per_window")] * len(walls)
        if row.get("status") != "ok":
            state.failure = {**row, **state.key, "processes_measured": len(state.processes)}
            return
        state.rows[process] = row
        bs, key = state.cfg.batch_size, state.key
        stamp = {"probe_img_s": probed["img_s"], "timestamp": row.get("timestamp", "")}
        rows = [
            {**key, "process": process, "repeat": i, "steps": n, "images": n * bs, "window_time_s": wall}
            | {"throughput_img_s": n * bs / wall, **telemetry.span_summary(series, *span), **stamp}
            for i, (wall, n, span) in enumerate(zip(walls, counts, spans, strict=True))
        ]
        windows.extend(rows)
        state.windows.extend(rows)
        if steps is not None and step_times:
            where = [(r, i) for r, n in enumerate(counts) for i in range(n)]  # (window, step) of each time
            steps.extend(
                [
                    {**key, "process": process, "repeat": r, "step": i, "step_time_s": t}
                    for (r, i), t in zip(where, step_times, strict=True)
                ],
                group=(*config_keys(), "process"),
            )
        if tele is not None and series:
            context = {**key, "source": source, "process": process, "device_name": row.get("device_name", "")}
            tele.extend([{**context, **s} for s in series], group=(*config_keys(), "source", "process"))

    def measure(pairs: list, until: float) -> None:
        """``record`` each of ``pairs`` until ``until``: in one worker, one worker each, or here."""
        sets = [dataset_for(s.cfg) if dataset_for else None for s, _ in pairs]  # data.for_configs: cached
        busy = [process == 1 for _, process in pairs]  # the device's busy share: profiled in a first process
        if isolate and device.round_worker and pairs and time.perf_counter() < until:
            cfgs = [s.cfg for s, _ in pairs]
            worker.measure_round(cfgs, device, p, sets, busy, lambda i, row: record(*pairs[i], row))
            return
        for (s, process), dataset, profile in zip(pairs, sets, busy, strict=True):
            if time.perf_counter() >= until:
                return
            how = worker.measure_isolated if isolate else engine.measure
            record(s, process, how(s.cfg, device, p, dataset, busy=profile))

    try:
        reasons = _rounds(states, p, measure, probe)
    finally:
        progress.close()
    for s, reason in zip(states, reasons, strict=True):
        row = s.failure if s.failure is not None else merge(s, reason, steps)
        row.pop("process", None)
        results.append(row)
        row_done(row)  # one progress line per configuration for the pipeline's console
    if only is not None:
        _HEADLINE_MEASURED[str(path)] = {results.key_of(s.key) for s in states}
    else:
        kept = len(configs) - len(states) - len(copied) - len(headline)
        resumed(kept, len(configs), Path(path).name, taken=len(copied), taken_from=Path(reuse or "").name)
    mine = {results.key_of(k) for k in keys}
    return [r for r in results.current() if results.key_of(r) in mine]
