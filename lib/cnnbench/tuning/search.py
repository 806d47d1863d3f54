"""The budgeted search for one model and phase: **guard** (a numerics whose loss after a few steps strays from
fp32 eager's is out), **race** within ``tune_budget_s`` (successive halving in stages: numerics, batch size from
the largest that fits down, host knobs), **confirm** the best few and the default with the full protocol,
**explain** (speedup with its interval, roofline, energy). Pure logic: evaluation and clock are arguments."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import asdict, dataclass, field
from functools import partial
from itertools import product

import torch

from cnnbench import devices, knobs, models
from cnnbench.devices import energy
from cnnbench.knobs import Setting, Space
from cnnbench.measure import engine, reproducibility, timing


@dataclass(frozen=True)
class Verdict:
    loss: float
    reference_loss: float
    diff_pct: float  # |loss - reference| / the reference's progress (or |reference| in eval), percent
    ok: bool
    reason: str  # why it was rejected ('' when ok)

    def columns(self) -> dict:
        return {f"guard_{k}": v for k, v in asdict(self).items()}


def loss_after(cfg: engine.Config, device: torch.device, p, steps: int) -> tuple[float, float]:
    """(first, last) loss of ``steps`` training steps of ``cfg`` on one batch (eval: one forward's, twice)."""
    with engine.Workload(cfg.replace(data_mode="device"), device, p) as work:
        if cfg.phase == "train":
            losses = []
            for _ in range(steps):
                work.train_step()
                losses.append(work.check_loss())
            return losses[0], losses[-1]
        x, y = work.next_batch()
        with torch.inference_mode(), work.backend.autocast(cfg.precision):
            loss = float(work.loss_fn(models.logits(work.forward(x)).float(), y))
            return loss, loss


def judge(loss: float, reference: float, tolerance: float, reference_start: float | None = None) -> Verdict:
    """Accept ``loss`` when finite and within ``tolerance`` of ``reference``, as a share of the reference's
    progress ``reference_start - reference`` (or of ``|reference|`` when it made none, as in eval); against a
    reference that is not finite the guard cannot judge, and rejects."""
    if not math.isfinite(reference):
        return Verdict(
            loss, reference, math.nan, False, f"fp32 eager's loss is {reference}: the guard cannot judge"
        )
    if not math.isfinite(loss):
        return Verdict(loss, reference, math.nan, False, f"loss is {loss}")
    progress = abs(reference_start - reference) if reference_start is not None else 0.0
    scale = progress if progress > 1e-6 * max(abs(reference), 1.0) else abs(reference)
    rel = abs(loss - reference) / max(scale, 1e-12)
    what = "of fp32 eager's progress" if scale == progress else "of fp32 eager's loss"
    why = f"loss {loss:.4f} vs fp32 eager {reference:.4f}: {rel:.1%} {what} apart > tolerance {tolerance:.0%}"
    return Verdict(loss, reference, 100 * rel, not rel > tolerance, why if rel > tolerance else "")


def check(
    numerics_list, measure_loss, tolerance: float, reference: tuple, spent=lambda: False
) -> dict[tuple, Verdict]:
    """Verdicts for every numerics of ``numerics_list`` against ``reference``: ``measure_loss(numerics) ->
    (first, last)``; a failure to run is a rejection (the reference's too: then nothing can be judged, and
    nothing else is run), and once ``spent()`` the rest are rejected as such."""
    try:
        start, ref = measure_loss(reference)
        out = {reference: judge(ref, ref, tolerance, start)}
    except Exception as err:  # noqa: BLE001 - a reference that cannot run is its row, not a traceback
        start = ref = math.nan
        out = {reference: Verdict(ref, ref, ref, False, engine.failure(err)["error"][:200])}
    spent_why = "not guarded: tune_guard_budget_s was spent (the guard's steps and compiles count in it)"
    for numerics in (n for n in numerics_list if n not in out):
        if not math.isfinite(ref):  # nothing to judge against: not run
            out[numerics] = judge(math.nan, ref, tolerance)
        elif spent():
            out[numerics] = Verdict(math.nan, ref, math.nan, False, spent_why)
        else:
            try:
                out[numerics] = judge(measure_loss(numerics)[1], ref, tolerance, start)
            except Exception as err:  # noqa: BLE001 - a configuration that cannot run cannot win
                out[numerics] = Verdict(math.nan, ref, math.nan, False, engine.failure(err)["error"][:200])
    return out


@dataclass
class Outcome:
    """What one short window measured (``status`` ok, oom, unstable or error, as engine rows; skipped: not
    measured, the budget was spent)."""

    status: str
    throughput_img_s: float = math.nan
    throughput_ci95_img_s: float = math.nan
    error: str = ""
    extra: dict = field(default_factory=dict)  # further columns of the row (steps, window time, energy, ...)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and math.isfinite(self.throughput_img_s)


@dataclass
class Trial:
    """One evaluation in a race: a row of tuning.csv. ``fate``: kept, pruned, winner, failed, budget."""

    candidate: Hashable
    rung: int
    window_target_s: float
    outcome: Outcome
    fate: str = ""
    reused: bool = False  # the outcome was measured before this race (the previous stage's winner)


@dataclass
class Race:
    trials: list[Trial]
    winner: Hashable | None
    rungs: int  # rungs the race planned
    budget_exhausted: bool = False


def planned_rungs(n: int, eta: int) -> int:
    """Rungs successive halving needs to bring ``n`` candidates down to one, keeping ceil(n/eta) each time."""
    rungs = 0
    while n > 1:
        n = math.ceil(n / eta)
        rungs += 1
    return rungs


SPENT = "not measured: the budget was spent"


def successive_halving(
    candidates: Iterable,
    evaluate: Callable[[object, float, int], Outcome],
    budget_s: float,
    eta: int = 2,
    known: dict | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_trial: Callable[[Trial], None] = lambda trial: None,
) -> Race:
    """Race ``candidates`` within ``budget_s`` (shared equally by rungs and candidates), the best ceil(n/eta) going
    on; ``known`` outcomes are reused at rung 0; each :class:`Trial` goes to ``on_trial`` once its fate is known.
    The clock is checked before each evaluation once a candidate has a rate: once ``budget_s`` is spent the rest
    are not measured (fate ``budget``, status skipped), so the race ends within ``budget_s`` and one evaluation."""
    alive = list(dict.fromkeys(candidates))
    known = dict(known or {})
    start = clock()
    rungs = planned_rungs(len(alive), eta)
    trials: list[Trial] = []

    def finish(trial: Trial, fate: str) -> None:
        trial.fate = fate
        on_trial(trial)

    if not alive:
        return Race(trials, None, 0)
    exhausted = False
    for rung in range(max(rungs, 1)):  # one candidate: measured once (unless known), in one rung
        remaining = budget_s - (clock() - start) if rung else budget_s
        if exhausted := rung > 0 and remaining <= 0:
            break
        window = max(remaining, 0.0) / (max(rungs, 1) - rung) / len(alive)
        results, rest = [], []
        for i, c in enumerate(alive):
            reuse = rung == 0 and c in known
            if not reuse and any(t.outcome.ok for t in trials + results) and clock() - start >= budget_s:
                exhausted, rest = True, alive[i:]
                break
            out = known[c] if reuse else evaluate(c, window, rung)
            results.append(Trial(c, rung, window, out, reused=reuse))
        trials.extend(results)
        if exhausted:  # spent within the rung: those measured in it (and earlier, not in it) are judged below
            for t in results:
                if not t.outcome.ok:
                    finish(t, "failed")
            unmeasured = [Trial(c, rung, 0.0, Outcome("skipped", error=SPENT)) for c in rest if not rung]
            trials.extend(unmeasured)
            for t in unmeasured:
                finish(t, "budget")
            alive = [t.candidate for t in results if t.outcome.ok] + (rest if rung else [])
            break
        ranked = sorted((t for t in results if t.outcome.ok), key=lambda t: -t.outcome.throughput_img_s)
        keep = max(1, math.ceil(len(alive) / eta))
        last = rung == rungs - 1 or len(ranked) <= 1
        for i, t in enumerate(ranked):
            finish(t, "pruned" if i >= keep or (last and i > 0) else "winner" if last else "kept")
        for t in results:
            if not t.outcome.ok:
                finish(t, "failed")
        alive = [t.candidate for t in ranked[:keep]]
        if len(alive) <= 1:
            break
    if exhausted and alive:  # the budget ran out: the best of the last rung measured wins
        last_trials = {t.candidate: t for t in trials if t.candidate in alive}
        best = max(alive, key=lambda c: last_trials[c].outcome.throughput_img_s)
        for c in alive:
            finish(last_trials[c], "winner" if c == best else "budget")
        alive = [best]
    return Race(trials, alive[0] if alive else None, rungs, exhausted)


def decay_batch_step(batch_size: int, num_intra_steps: int = 2) -> int:
    """The next smaller batch size after an oom, as timm's benchmark.py: 1024, 768, 512, 384, 256 ..."""
    if batch_size <= 1:
        return 0
    base = 2 ** int(math.log2(batch_size - 1)) if batch_size > 2 else 1
    step = max(base // num_intra_steps, 1)
    return base + ((batch_size - base - 1) // step) * step


def fit_batch_size(
    start: int, attempt: Callable[[int], Outcome], minimum: int = 1, spent: Callable[[], bool] = lambda: False
) -> tuple[int, list[tuple[int, Outcome]]]:
    """(largest batch size from ``start`` down that fits, 0: none, or ``spent()`` before one did; every (size,
    outcome) tried)."""
    tried: list[tuple[int, Outcome]] = []
    bs = start
    while bs >= max(minimum, 1) and not (tried and spent()):
        out = attempt(bs)
        tried.append((bs, out))
        if out.status != "oom":
            return bs, tried
        bs = decay_batch_step(bs)
    return 0, tried


MIN_WINDOW_STEPS = 3  # a race window never has fewer steps (one step: no spread, a zero bootstrap interval)
SETTLED, SETTLE_STEPS = 0.10, 20  # warm-up: until two steps agree within 10%, at most 20 steps


def window(base: engine.Config, c: Setting, device: torch.device, p, window_s: float) -> Outcome:
    """One race window of ``base`` in ``c``: warm-up until two steps agree, then ``window_s`` of steps."""
    try:
        with engine.Workload(base.replace(**c), device, p) as work:
            times = [_timed(work, device), _timed(work, device)]
            while abs(times[-1] - times[-2]) > SETTLED * times[-1] and len(times) < SETTLE_STEPS:
                times.append(_timed(work, device))
            first, pace = times[0], times[-1]
            n = int(min(max(round(window_s / max(pace, 1e-6)), MIN_WINDOW_STEPS), 10_000))
            with energy.Meter(timing.backend_of(device).energy_counter()) as meter:
                times, wall = timing.StepTimer(device).window(work.step, n)
            work.check_loss()
        s = timing.summarize(times, [wall], [n], c.batch_size, p.seed)
        extra = {"first_step_s": first, "measured_steps": n, "window_time_s": float(wall)}
        extra |= {"step_time_median_s": float(s["step_time_median_s"]), **meter.summary(n * c.batch_size)}
        return Outcome("ok", float(s["throughput_img_s"]), float(s["throughput_ci95_img_s"]), extra=extra)
    except Exception as err:  # noqa: BLE001 - a failure is a row and the race goes on
        f = engine.failure(err, device)
        return Outcome(f["status"], error=f["error"])


def _timed(work: engine.Workload, device: torch.device) -> float:
    devices.synchronize(device)
    t0 = time.perf_counter()
    work.step()
    devices.synchronize(device)
    return time.perf_counter() - t0


@dataclass
class Search:
    """The search of one model and phase, its measurements injected; each row goes to ``sink`` once known."""

    base: engine.Config
    space: Space
    p: object
    identity: dict
    evaluate: Callable[[Setting, float], Outcome]
    guard_loss: Callable[[tuple], tuple[float, float]]
    confirm: Callable[[Setting, int], dict]
    sink: Callable[[dict], None]
    clock: Callable[[], float] = time.monotonic
    explain: Callable[[Setting, dict], dict] = lambda c, row: {}
    probe: Callable[[], float] | None = None
    evaluations: int = 0
    trials: list[tuple[str, Trial]] = field(default_factory=list)
    verdicts: dict[tuple, Verdict] = field(default_factory=dict)
    batch_limit: int = 0
    batch_note: str = ""
    exhausted: list[str] = field(default_factory=list)

    def counted(self, c: Setting, window_s: float, rung: int = 0) -> Outcome:
        """``evaluate``, counted (the rung a race passes is not the search's concern)."""
        self.evaluations += 1
        return self.evaluate(c, window_s)

    def label(self, c: Setting) -> str:
        """The candidate in words: the knobs always named and every knob this search varies."""
        varied = [k for k in knobs.KNOBS if knobs.KNOBS[k].always or len(self.space.values.get(k, ())) > 1]
        return knobs.label(c, varied)

    def _row(self, kind: str, stage: str, c: Setting | None, **cols) -> dict:
        head = dict(row_kind=kind, stage=stage, rung=cols.pop("rung", ""))
        head["config"] = self.label(c) if c else cols.pop("config", "")
        return {**self.identity, **head, **(dict(c) if c else {}), **cols}

    def _report(self, stage: str, t: Trial) -> None:
        """A race's trial of ``stage``, once its fate is known: a row to the sink, and kept."""
        o = t.outcome
        verdict = self.verdicts.get(t.candidate.numerics, Verdict(*[math.nan] * 3, True, ""))
        cols = dict(rung=t.rung, status=o.status, error=o.error, throughput_img_s=o.throughput_img_s)
        cols |= dict(throughput_ci95_img_s=o.throughput_ci95_img_s, window_target_s=t.window_target_s)
        cols |= dict(fate=t.fate, reused=t.reused, **o.extra, **verdict.columns())
        self.sink(self._row("race", stage, t.candidate, **cols))
        self.trials.append((stage, t))

    def run_guard(self) -> list[tuple]:
        """The numerics the guard lets race, within ``tune_guard_budget_s``: the run's own variants first, then
        those changing fewer knobs, those that compile last."""
        start = self.clock()
        names = [k for k in self.space.values if knobs.KNOBS[k].numerics]
        reference = self.space.default.with_(**{k: knobs.KNOBS[k].default for k in names}).numerics
        measured = {tuple(Setting(v)[k] for k in names) for v in self.p.variants}

        def changes(n: tuple) -> tuple[bool, int, bool]:
            changed = [k for k, a, b in zip(names, n, reference, strict=True) if a != b]
            return n not in measured, len(changed), "compile" in changed

        numerics = sorted(product(*(self.space.values[k] for k in names)), key=changes)
        tol, deadline = self.p.tune_guard_tolerance, start + self.p.tune_guard_budget_s
        self.verdicts = check(numerics, self.guard_loss, tol, reference, lambda: self.clock() >= deadline)
        for n, v in self.verdicts.items():
            cols = dict(config=" ".join(map(str, n)), **dict(zip(names, n, strict=True)))
            cols |= dict(status="ok" if v.ok else "skipped", error=v.reason, **v.columns())
            self.sink(self._row("guard", "guard", None, **cols))
        return [dict(zip(names, n, strict=True)) for n in numerics if self.verdicts[n].ok]

    def _batch_sizes(self, winner: Setting, budget_s: float, known: dict) -> tuple[list[Setting], dict]:
        """The batch sizes to race: the largest that fits (backing off from the top on oom) and those below."""
        sizes = sorted(self.space.values["batch_size"], reverse=True)
        per = budget_s / max(planned_rungs(len(sizes), self.p.tune_eta), 1) / len(sizes)

        def attempt(bs: int) -> Outcome:
            c = winner.with_(batch_size=bs)
            if c in known:
                return known[c]
            out = self.counted(c, per)
            t = Trial(c, 0, per, out, fate="" if out.ok else "failed")
            if out.status == "oom":
                self._report("batch_size", t)
            return out

        spent = lambda: self.clock() - start >= budget_s  # noqa: E731 - the back-off stops with the stage's share
        start = self.clock()
        self.batch_limit, tried = fit_batch_size(sizes[0], attempt, min(sizes), spent)
        ooms = ", ".join(str(bs) for bs, o in tried if o.status == "oom")
        # the back-off stopped with the stage's share spent before a size fitted: the winner's size stands
        stopped = not self.batch_limit and decay_batch_step(tried[-1][0]) >= min(sizes)
        self.batch_note = f"{self.batch_limit} (the largest tried) fits"
        if ooms:
            fits = (
                "the budget ran out before one fitted" if stopped else f"largest that fits {self.batch_limit}"
            )
            self.batch_note = f"out of memory at {ooms}; {fits}"
        known = {**known, **{winner.with_(batch_size=bs): o for bs, o in tried if o.status != "oom"}}
        fits = [self.batch_limit] + [bs for bs in sizes if bs < self.batch_limit] if self.batch_limit else []
        fits = [winner.batch_size] if stopped else fits
        return [winner.with_(batch_size=bs) for bs in fits], known

    def run(self) -> dict:
        """Guard, race each stage's knobs in turn, confirm; returns the 'best' row (also sent to the sink)."""
        # the guard has a budget of its own (its compiles too); the race has tune_budget_s; confirmation on top
        passing = self.run_guard()
        start = self.clock()
        d, v = self.space.default, self.space.values

        def grid(stage: str, base: Setting) -> list[Setting]:
            names = [k for k in self.space.stage(stage) if not knobs.KNOBS[k].numerics]
            return [base.with_(**dict(zip(names, vs, strict=True))) for vs in product(*(v[k] for k in names))]

        stage1 = [c for n in passing for c in grid("numerics", d.with_(**n))]
        stage1.sort(key=lambda c: knobs.KNOBS["compile"].values.index(c.compile))  # one mode after another
        sizes = {"numerics": len(stage1), "batch_size": len(v.get("batch_size", [d.batch_size]))}
        sizes["host"] = len(grid("host", d))
        known, winner = {}, d
        for stage in knobs.STAGES:
            remaining = self.p.tune_budget_s - (self.clock() - start)
            if remaining <= 0:  # the previous stage's winner stands
                self.exhausted.append(f"{stage} (not raced: no time left)")
                continue
            stage_start = self.clock()
            later = knobs.STAGES[knobs.STAGES.index(stage) :]
            share = max(remaining, 0.0) * sizes[stage] / sum(sizes[s] for s in later)
            if stage == "numerics":
                candidates = stage1
            elif stage == "batch_size":
                candidates, known = self._batch_sizes(winner, share, known)
            else:
                candidates = grid("host", winner)
            # the batch-size back-off's windows count in the stage's share
            share -= self.clock() - stage_start
            report = partial(self._report, stage)
            race = successive_halving(
                candidates, self.counted, share, self.p.tune_eta, known, self.clock, report
            )
            if race.budget_exhausted:
                self.exhausted.append(stage)
            # each at the highest rung it reached
            known = {t.candidate: t.outcome for t in race.trials if t.outcome.status != "skipped"}
            if race.winner is None:
                break
            winner = race.winner
        return self._confirm_and_explain(self.clock() - start)

    def ranked(self) -> list[Setting]:
        """Distinct raced candidates, best first, each by its outcome at the highest rung it reached."""
        last = {t.candidate: t.outcome for _, t in self.trials}
        ok = [(c, o) for c, o in last.items() if o.ok]
        return [c for c, _ in sorted(ok, key=lambda co: -co[1].throughput_img_s)]

    def _steps_for(self, c: Setting) -> int:
        mine = [t.outcome.extra for _, t in self.trials if t.candidate == c and t.outcome.ok]
        pace = [e["step_time_median_s"] for e in mine if e.get("step_time_median_s")]
        return max(1, round(self.p.tune_confirm_window_s / pace[-1])) if pace else 0

    def _confirm_and_explain(self, search_s: float) -> dict:
        d = self.space.default
        top = [c for c in self.ranked() if c != d][: self.p.tune_confirm_top]
        rows, rounds, probes = {}, {c: [] for c in [d, *top]}, []
        for _ in range(max(self.p.processes, 1)):  # interleaved rounds: d, top..., d, top..., so drift
            if self.probe is not None:  # the CPU's own speed before each round, as 02 and 03 probe theirs
                probes.append(self.probe())
            for c in rounds:  # falls on every candidate alike
                if not rounds[c] or rounds[c][-1].get("status") == "ok":
                    rounds[c].append(self.confirm(c, self._steps_for(c)))
        probe = sum(probes) / len(probes) if probes else math.nan
        for c, measured in rounds.items():
            row = {**combine_rounds(measured), "probe_img_s": probe}
            row = {k: v for k, v in row.items() if k not in self.identity and k not in c}
            rows[c] = self._row("confirm", "confirm", c, role="default" if c == d else "candidate", **row)
            self.sink(rows[c])
        ok = {c: r for c, r in rows.items() if r.get("status") == "ok"}
        best = max(ok, key=lambda c: ok[c]["throughput_img_s"]) if ok else None
        rejected = [f"{' '.join(map(str, n))}: {v.reason}" for n, v in self.verdicts.items() if not v.ok]
        pruned = {s: sum(1 for st, t in self.trials if st == s and t.fate == "pruned") for s in knobs.STAGES}
        by_rung = Counter(t.rung for _, t in self.trials if t.fate == "pruned")
        tried = len({t.candidate for _, t in self.trials if t.outcome.status != "skipped"})
        summary = dict(configs_in_space=self.space.size(), configs_tried=tried, evaluations=self.evaluations)
        summary |= dict(pruned=sum(pruned.values()), failed=sum(t.fate == "failed" for _, t in self.trials))
        summary["pruned_by_stage"] = ", ".join(f"{s} {n}" for s, n in pruned.items())
        summary["pruned_by_rung"] = ", ".join(f"rung {r} {n}" for r, n in sorted(by_rung.items()))
        summary |= dict(guard_rejected="; ".join(rejected), budget_s=self.p.tune_budget_s, search_s=search_s)
        summary |= dict(budget_exhausted_in=",".join(self.exhausted), batch_size_limit=self.batch_limit)
        summary["batch_size_limit_note"] = self.batch_note
        summary["skipped_knobs"] = "; ".join(f"{k}={v}: {why}" for k, v, why in self.space.skipped)
        if best is None:
            row = self._row(
                "best", "best", None, status="error", error="no configuration confirmed", **summary
            )
        else:
            base, dflt = rows[best], rows[d] if rows[d].get("status") == "ok" else {}
            skip = {*self.identity, "row_kind", "stage", "rung", "config", "role", *best}
            cols = {k: v for k, v in base.items() if k not in skip} | speedup(base, dflt)
            defaults = ("throughput_img_s", "throughput_ci95_img_s", "achieved_gflops", "energy_j_per_image")
            cols |= self.explain(best, base) | {f"default_{k}": dflt.get(k, math.nan) for k in defaults}
            row = self._row("best", "best", best, **cols, **summary)
        self.sink(row)
        return row


def combine_rounds(measured: list[dict]) -> dict:
    """One confirmation row from its interleaved rounds: all images over all measured time, the 95% interval
    over the rounds' rates (one round's: ``..._within_img_s``); the first failure, if a round failed."""
    failed = [r for r in measured if r.get("status") != "ok"]
    if failed:
        return failed[0]
    row = dict(measured[-1])
    rates = [r["throughput_img_s"] for r in measured]
    times = [r.get("window_time_s") or 1.0 for r in measured]  # equal weights where a row has no wall time
    row["throughput_ci95_within_img_s"] = row.get("throughput_ci95_img_s", math.nan)
    row["throughput_img_s"] = sum(r * t for r, t in zip(rates, times, strict=True)) / sum(times)
    row["confirm_rounds"] = len(measured)
    if len(measured) >= 2:
        row["throughput_ci95_img_s"] = timing.ci95_half_width(rates)
    if "gflops_per_image" in row:
        row["achieved_gflops"] = row["throughput_img_s"] * row["gflops_per_image"]
    return row


def speedup(best: dict, default: dict) -> dict:
    """Best over default throughput with a half-width of its 95% interval (:func:`.reproducibility.ratio`): the side
    facing 1x, so "speedup +- half" holds 1 exactly when the interval does; infinite where it has no upper bound."""
    b, d = best.get("throughput_img_s", math.nan), default.get("throughput_img_s", math.nan)
    if not (d and math.isfinite(d) and math.isfinite(b)):
        return {"speedup_x": math.nan, "speedup_ci95_x": math.nan}
    cb, cd = best.get("throughput_ci95_img_s", 0.0), default.get("throughput_ci95_img_s", 0.0)
    r, low, high = reproducibility.ratio(d, cd, b, cb)
    out = {"speedup_x": r, "speedup_ci95_x": abs(r - low if r > 1 and high < math.inf else high - r)}
    return out | {"distinguishable_from_default": reproducibility.distinguishable(b, cb, d, cd)}
