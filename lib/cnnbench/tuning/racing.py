"""Racing: successive halving on short measured windows within a time budget, and the out-of-memory back-off
of the batch size. Pure logic: the evaluation and the clock are arguments."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field


@dataclass
class Outcome:
    """What one short window measured (``status`` ok, oom, unstable or error, as engine rows)."""

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

    def best_outcome(self, candidate) -> Outcome | None:
        """The candidate's outcome at the highest rung it reached."""
        mine = [t for t in self.trials if t.candidate == candidate]
        return mine[-1].outcome if mine else None


def planned_rungs(n: int, eta: int) -> int:
    """Rungs successive halving needs to bring ``n`` candidates down to one, keeping ceil(n/eta) each time."""
    rungs = 0
    while n > 1:
        n = math.ceil(n / eta)
        rungs += 1
    return rungs


def successive_halving(
    candidates: Iterable,
    evaluate: Callable[[object, float, int], Outcome],
    budget_s: float,
    eta: int = 2,
    known: dict | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_trial: Callable[[Trial], None] | None = None,
) -> Race:
    """Race ``candidates`` within ``budget_s`` seconds, ``evaluate(candidate, window_s, rung)`` measuring one
    window, the remaining budget shared equally by rungs and candidates; the best ceil(n/eta) go on. ``known``:
    outcomes reused at rung 0; each :class:`Trial` goes to ``on_trial`` once its fate is known."""
    alive = list(dict.fromkeys(candidates))
    known = dict(known or {})
    start = clock()
    rungs = planned_rungs(len(alive), eta)
    trials: list[Trial] = []

    def finish(trial: Trial, fate: str) -> None:
        trial.fate = fate
        if on_trial:
            on_trial(trial)

    if len(alive) == 1:  # nothing to race: measure it once unless it is known
        c = alive[0]
        out = known.get(c) or evaluate(c, budget_s, 0)
        trial = Trial(c, 0, budget_s, out, reused=c in known)
        trials.append(trial)
        finish(trial, "winner" if out.ok else "failed")
        return Race(trials, c if out.ok else None, 0)
    exhausted = False
    for rung in range(rungs):
        remaining = budget_s - (clock() - start)
        if rung > 0 and remaining <= 0:
            exhausted = True
            break
        window = max(remaining, 0.0) / (rungs - rung) / len(alive)
        results = []
        for c in alive:
            reuse = rung == 0 and c in known
            out = known[c] if reuse else evaluate(c, window, rung)
            results.append(Trial(c, rung, window, out, reused=reuse))
        trials.extend(results)
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
    """The next smaller batch size after an out-of-memory error, as timm's ``benchmark.py`` backs off:
    power-of-two steps with ``num_intra_steps`` steps in between (1024 -> 768 -> 512 -> 384 -> 256 ...)."""
    if batch_size <= 1:
        return 0
    base = 2 ** int(math.log2(batch_size - 1)) if batch_size > 2 else 1
    step = max(base // num_intra_steps, 1)
    return base + ((batch_size - base - 1) // step) * step


def fit_batch_size(
    start: int, attempt: Callable[[int], Outcome], minimum: int = 1
) -> tuple[int, list[tuple[int, Outcome]]]:
    """(the largest batch size from ``start`` down that does not run out of memory, 0 if none down to
    ``minimum``; every (batch size, outcome) tried). Failures other than oom stop the back-off."""
    tried: list[tuple[int, Outcome]] = []
    bs = start
    while bs >= max(minimum, 1):
        out = attempt(bs)
        tried.append((bs, out))
        if out.status != "oom":
            return bs, tried
        bs = decay_batch_step(bs)
    return 0, tried
