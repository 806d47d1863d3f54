"""Successive halving and the out-of-memory back-off, driven by fake evaluations and a fake clock."""

import pytest

from cnnbench.tuning import search as racing
from cnnbench.tuning.search import Outcome


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def fake_evaluate(speeds, clock, log, cost=None):
    """Throughput = speeds[c]; each evaluation advances the clock by its window (or ``cost``)."""

    def evaluate(c, window_s, rung):
        log.append((c, rung, window_s))
        clock.t += window_s if cost is None else cost
        s = speeds[c]
        return Outcome("oom", error="out of memory") if s == "oom" else Outcome("ok", s, 0.0)

    return evaluate


def test_planned_rungs():
    assert [racing.planned_rungs(n, 2) for n in (1, 2, 3, 4, 5, 8, 9)] == [0, 1, 2, 2, 3, 3, 4]
    assert racing.planned_rungs(9, 3) == 2


def test_halving_keeps_the_best_half_each_rung_and_windows_grow():
    speeds = {c: v for c, v in zip("abcdefgh", [10, 80, 30, 70, 20, 60, 50, 40], strict=True)}
    clock, log, seen = FakeClock(), [], []
    race = racing.successive_halving(
        speeds, fake_evaluate(speeds, clock, log), budget_s=24, eta=2, clock=clock, on_trial=seen.append
    )
    assert race.rungs == 3 and race.winner == "b" and not race.budget_exhausted
    by_rung = {r: sorted(c for c, rr, _ in log if rr == r) for r in range(3)}
    assert by_rung == {0: list("abcdefgh"), 1: list("bdfg"), 2: ["b", "d"]}
    windows = {r: w for _, r, w in log}
    assert (
        windows[0] == pytest.approx(1.0)
        and windows[1] == pytest.approx(2.0)
        and windows[2] == pytest.approx(4.0)
    )
    fates = {(t.candidate, t.rung): t.fate for t in race.trials}
    assert fates[("a", 0)] == "pruned" and fates[("b", 0)] == "kept" and fates[("d", 2)] == "pruned"
    assert fates[("b", 2)] == "winner"
    assert len(seen) == len(race.trials) == 14  # every trial reported once its fate is known
    assert clock.t == pytest.approx(24)


def test_failures_are_out_at_once_and_do_not_win():
    speeds = {"a": 50, "b": "oom", "c": 90, "d": "oom"}
    clock, log = FakeClock(), []
    race = racing.successive_halving(speeds, fake_evaluate(speeds, clock, log), budget_s=8, clock=clock)
    assert race.winner == "c"
    fates = {(t.candidate, t.rung): t.fate for t in race.trials}
    assert fates[("b", 0)] == "failed" and fates[("d", 0)] == "failed"
    assert fates[("a", 0)] == "kept" and fates[("a", 1)] == "pruned" and fates[("c", 1)] == "winner"
    assert ("b", 1) not in fates and ("d", 1) not in fates


def test_known_outcomes_are_reused_at_rung_zero():
    speeds = {"a": 50, "b": 60}
    clock, log = FakeClock(), []
    race = racing.successive_halving(
        speeds,
        fake_evaluate(speeds, clock, log),
        budget_s=4,
        clock=clock,
        known={"a": Outcome("ok", 55, 1.0)},
    )
    assert [c for c, _, _ in log] == ["b"]
    assert race.winner == "b" and [t.reused for t in race.trials] == [True, False]


def test_budget_exhausted_stops_and_the_best_of_the_last_rung_wins():
    speeds = {c: v for c, v in zip("abcd", [10, 40, 30, 20], strict=True)}
    clock, log = FakeClock(), []
    race = racing.successive_halving(
        speeds, fake_evaluate(speeds, clock, log, cost=5.0), budget_s=8, clock=clock
    )
    assert race.budget_exhausted and race.winner == "b"
    assert [c for c, r, _ in log] == ["a", "b"] and all(r == 0 for _, r, _ in log)  # spent once b is measured
    fates = {(t.candidate, t.rung): t.fate for t in race.trials}
    assert fates[("b", 0)] == "winner" and fates[("c", 0)] == "budget" and fates[("a", 0)] == "budget"


def test_single_candidate_is_measured_once_or_reused():
    clock, log = FakeClock(), []
    race = racing.successive_halving(["a"], fake_evaluate({"a": 5}, clock, log), budget_s=3, clock=clock)
    assert race.winner == "a" and len(log) == 1 and race.trials[0].fate == "winner"
    race = racing.successive_halving(
        ["a"], fake_evaluate({"a": 5}, clock, log), budget_s=3, clock=clock, known={"a": Outcome("ok", 7)}
    )
    assert len(log) == 1 and race.trials[0].reused


def test_no_candidates_is_a_race_with_no_winner():
    """A stage left with nothing to race (no batch size fits, the guard passed none) ends without a winner."""
    race = racing.successive_halving([], fake_evaluate({}, FakeClock(), []), budget_s=3, clock=FakeClock())
    assert race.winner is None and race.trials == [] and not race.budget_exhausted


def test_a_single_candidate_gets_the_whole_budget_as_its_window():
    ticks = iter(range(100))
    log = []
    racing.successive_halving(
        ["a"], fake_evaluate({"a": 5}, FakeClock(), log), budget_s=3, clock=lambda: next(ticks) * 1e-6
    )
    assert log == [("a", 0, 3)]


def test_decay_batch_step_matches_timm():
    seq, bs = [], 1024
    while bs:
        seq.append(bs)
        bs = racing.decay_batch_step(bs)
    assert seq[:9] == [1024, 768, 512, 384, 256, 192, 128, 96, 64]
    assert seq[-3:] == [3, 2, 1]


def test_fit_batch_size_backs_off_until_it_fits():
    tried = []

    def attempt(bs):
        tried.append(bs)
        return Outcome("oom", error="CUDA out of memory") if bs > 300 else Outcome("ok", float(bs))

    limit, log = racing.fit_batch_size(1024, attempt)
    assert limit == 256 and tried == [1024, 768, 512, 384, 256]
    assert [o.status for _, o in log] == ["oom"] * 4 + ["ok"]


def test_fit_batch_size_stops_on_other_errors_and_at_the_minimum():
    limit, log = racing.fit_batch_size(64, lambda bs: Outcome("error", error="boom"))
    assert limit == 64 and len(log) == 1
    limit, log = racing.fit_batch_size(64, lambda bs: Outcome("oom"), minimum=16)
    assert limit == 0 and [bs for bs, _ in log] == [64, 48, 32, 24, 16]


CAPTURE_OOM = (
    "CUDA error: operation failed due to a previous error during capture\nCUDA kernel errors might be "
    "asynchronously reported at some other API call, so the stacktrace below might be incorrect."
)


def test_out_of_memory_during_cuda_graph_capture_backs_off_like_an_oom(monkeypatch, fake_gpu):
    """reduce-overhead captures CUDA graphs; an allocation failing inside the capture invalidates it and torch
    raises the capture error (cudaErrorStreamCaptureInvalidated), not OutOfMemoryError. The back-off must take
    it as out of memory and try a smaller batch."""
    import torch

    from cnnbench.knobs import Setting
    from cnnbench.measure import engine
    from cnnbench.params import Params
    from cnnbench.tuning import search

    cpu = torch.device("cpu")  # the fake GPU's (its rules are CUDA's)
    f = engine.failure(RuntimeError(CAPTURE_OOM), cpu)
    assert f["status"] == "oom" and "capture" in f["error"]
    assert (
        engine.failure(RuntimeError("cudaErrorStreamCaptureInvalidated: operation failed"), cpu)["status"]
        == "oom"
    )
    assert engine.failure(RuntimeError("shape mismatch"), cpu)["status"] == "error"

    class FakeWorkload:
        def __init__(self, cfg, device, protocol, dataset=None):
            self.cfg = cfg
            self.step = lambda: None

        def __enter__(self):
            if self.cfg.batch_size > 64:
                raise RuntimeError(CAPTURE_OOM)
            return self

        def __exit__(self, *exc):
            return False

        def check_loss(self):
            return 1.0

    monkeypatch.setattr(engine, "Workload", FakeWorkload)
    base = engine.Config.of("mnist_cnn", "train", 28, 10, 1, batch_size=128)
    cand = Setting(batch_size=256)
    limit, tried = racing.fit_batch_size(
        256, lambda bs: search.window(base, cand.with_(batch_size=bs), cpu, Params(), 0.01)
    )
    assert limit == 64 and [o.status for _, o in tried] == ["oom"] * 4 + ["ok"]  # 256 192 128 96 64


def test_a_spent_budget_measures_no_more_candidates_even_at_rung_zero():
    """The H200 example raced 15 s in 102 s: rung 0 measured every candidate whatever the clock said. The clock is
    checked before each evaluation: a budget smaller than one rung's evaluations ends within one more."""
    speeds = {c: v for c, v in zip("abcdefgh", [10, 40, 30, 20, 80, 70, 60, 50], strict=True)}
    clock, log, seen = FakeClock(), [], []
    race = racing.successive_halving(
        speeds, fake_evaluate(speeds, clock, log, cost=5.0), budget_s=8, clock=clock, on_trial=seen.append
    )
    assert clock.t <= 8 + 5.0 and [c for c, _, _ in log] == ["a", "b"]
    assert race.budget_exhausted and race.winner == "b"
    fates = {t.candidate: t.fate for t in seen}
    assert fates == {"a": "budget", "b": "winner", **{c: "budget" for c in "cdefgh"}}
    assert all(t.outcome.status == "skipped" for t in seen if t.candidate in "cdefgh")


def test_the_budget_is_checked_once_a_candidate_has_a_rate():
    """A race always ends with a winner where one can run: failures do not count as the candidate measured."""
    speeds = {"a": "oom", "b": 30, "c": 40}
    clock, log = FakeClock(), []
    race = racing.successive_halving(
        speeds, fake_evaluate(speeds, clock, log, cost=5.0), budget_s=1, clock=clock
    )
    assert [c for c, _, _ in log] == ["a", "b"] and race.winner == "b"
