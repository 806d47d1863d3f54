"""One configuration measured in a fresh worker process (its peak memory its own; a worker that dies is a
``crashed`` row)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import platform
import runpy
import signal
import sys
import traceback

import torch

from cnnbench import devices, paths
from cnnbench.measure import engine, timing

forkserver = sys.modules.get("multiprocessing.forkserver")
if forkserver and any(f.f_code is forkserver.main.__code__ for f, _ in traceback.walk_stack(None)):
    paths.die_with_parent()  # imported by the forkserver (preload): it dies with its kernel, however it dies
# tests only: "<file>::<argument>", whose hook(model, argument) a worker runs before each configuration
HOOK_ENV = "CNNBENCH_TEST_WORKER_HOOK"


def _context():
    """forkserver on Linux (fast, no CUDA state inherited); spawn elsewhere (Metal does not survive a fork)."""
    if platform.system() != "Linux":
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["cnnbench.measure.worker"])
    return ctx


@contextlib.contextmanager
def _main_not_rerun():
    """Start workers without re-running the caller's ``__main__`` in them (the worker needs only cnnbench)."""
    main = sys.modules["__main__"]
    saved = {k: main.__dict__.pop(k) for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _measured(
    device, cfg: engine.Config, p, dataset, hooks: str, known: dict, busy: bool, isolation: str
) -> dict:
    """:func:`engine.measure` in a worker, with the FLOPs its parent counted; a failure outside it is a row too."""
    engine._FLOPS.update(known)
    try:
        if hooks:
            path, _, argument = hooks.partition("::")
            runpy.run_path(path)["hook"](cfg.model, argument)
        return engine.measure(cfg, device, p, dataset, isolation=isolation, busy=busy)
    except Exception as err:  # noqa: BLE001 - a failure outside measure is a row too
        return {**engine.base_row(cfg, device, p), "isolation": isolation, **engine.failure(err, device)}


def as_row(device, fn, *args, isolation: str = "worker") -> dict:
    """``fn(*args)``'s row with its ``isolation``, or the failure's row where it raises."""
    try:
        return {**fn(*args), "isolation": isolation}
    except Exception as err:  # noqa: BLE001 - a failure is a row
        return {"isolation": isolation, **engine.failure(err, device)}


def measure_isolated(cfg: engine.Config, device, p, dataset=None, busy: bool = True) -> dict:
    """:func:`cnnbench.measure.engine.measure` in a fresh worker process; a worker that dies gives a ``crashed`` row."""
    rows = []
    measure_round([cfg], device, p, [dataset], [busy], lambda i, row: rows.append(row))
    return rows[0]


def measure_round(cfgs: list, device, p, datasets: list, busy: list[bool], on_row) -> None:
    """Each of ``cfgs`` measured in turn in one fresh worker, ``on_row(i, row)`` as each arrives; a death: ``crashed``."""
    for cfg in cfgs:  # counted once here, not again in the worker (it would also add to its memory peak)
        with contextlib.suppress(Exception):  # the worker counts (and reports any failure) itself
            engine.flops_per_image(cfg.model, cfg.image_size, cfg.num_classes)
    cfgs = [c.replace(threads=c.threads or torch.get_num_threads()) for c in cfgs]  # the worker's: the run's
    isolation, hooks = "worker" if len(cfgs) == 1 else "round_worker", os.environ.get(HOOK_ENV, "")
    known, work = dict(engine._FLOPS), zip(cfgs, datasets, busy, strict=True)
    calls = [(_measured, cfg, p, dataset, hooks, known, b, isolation) for cfg, dataset, b in work]
    got, exitcode = _in_worker(calls, device, f"cnnbench-worker-{cfgs[0].model}", on_row)
    if got < len(cfgs):  # the worker died (segfault, OOM killer, os._exit): the rest are not measured
        row = {**engine.base_row(cfgs[got], device, p), "timestamp": engine.now(), "isolation": isolation}
        on_row(got, {**row, "status": "crashed", "error": engine.death(exitcode), "exitcode": exitcode})


def _entered(start_method: str | None, device_spec: str, threads: int, calls: list, conn) -> None:
    """A worker's body: each call ``fn(backend, *args)`` with the device's one backend, its row sent as made."""
    paths.die_with_parent()  # a worker never outlives its forkserver (and so its kernel and its run)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C kills the worker from the parent: no 2nd traceback
    mp.set_start_method(start_method, force=True)  # processes it starts: by the caller's method
    torch.set_num_threads(threads)
    device = devices.backend(device_spec)
    device.enter_worker()
    for fn, *args in calls:
        conn.send(fn(device, *args))
    conn.close()


def _in_worker(calls: list, device, name: str, on_row) -> tuple[int, int | None]:
    """``calls`` made in a fresh worker, ``on_row(i, row)`` for each row it sends; (how many, its exit code)."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    spec = str(timing.backend_of(device).device)
    args = (mp.get_start_method(allow_none=True), spec, torch.get_num_threads(), calls, send)
    proc = ctx.Process(target=_entered, name=name, args=args)
    with _main_not_rerun():
        proc.start()
    send.close()
    received = 0
    try:
        while received < len(calls) and (proc.is_alive() or receive.poll(0)):
            if receive.poll(0.2):
                try:
                    on_row(received, receive.recv())
                except EOFError:
                    break
                received += 1
        proc.join()
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
        receive.close()
    return received, proc.exitcode


def call_isolated(fn, *args, device: torch.device, name: str = "cnnbench-worker") -> dict:
    """``fn(*args)`` (picklable, returning a row) in a fresh worker: its row, a failure's or a ``crashed`` one."""
    rows: list = []
    _, exitcode = _in_worker([(as_row, fn, *args)], device, name, lambda _, row: rows.append(row))
    return rows[0] if rows else {"isolation": "worker", "status": "crashed", "error": engine.death(exitcode)}
