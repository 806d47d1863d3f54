"""One configuration measured in a fresh worker process: its peak memory and allocator state are its own, and
a worker that dies becomes a row with ``status=crashed`` and its exit code or signal. Start-up is outside
every timed window.

``CNNBENCH_TEST_WORKER_HOOK`` (tests only): JSON ``{model: action}`` run in the worker before measuring that
model; actions ``segfault``, ``exit:N``, ``raise`` and ``ballast:MIB`` (hold MIB MiB of touched memory)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import platform
import signal
import sys
import traceback

import torch

from cnnbench import devices, paths
from cnnbench.measure import engine

forkserver = sys.modules.get("multiprocessing.forkserver")
if forkserver and any(f.f_code is forkserver.main.__code__ for f, _ in traceback.walk_stack(None)):
    paths.die_with_parent()  # imported by the forkserver (preload): it dies with its kernel, however it dies
HOOK_ENV = "CNNBENCH_TEST_WORKER_HOOK"
_ballast: list[bytearray] = []


def _context():
    """forkserver on Linux (children fork from a server that has imported torch: fast, and no CUDA state is
    inherited); spawn elsewhere (macOS: Metal does not survive a fork)."""
    if platform.system() == "Linux":
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["cnnbench.measure.worker"])
        return ctx
    return mp.get_context("spawn")


@contextlib.contextmanager
def _main_not_rerun():
    """Start workers without re-running the caller's ``__main__`` in them (the worker needs only cnnbench)."""
    main = sys.modules.get("__main__")
    saved = {
        k: main.__dict__.pop(k) for k in ("__file__", "__spec__") if main is not None and k in main.__dict__
    }
    if main is not None:
        main.__spec__ = None
    try:
        yield
    finally:
        if main is not None:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


def _test_hook(model: str, hooks: str) -> None:
    action = json.loads(hooks).get(model, "") if hooks else ""
    if action == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif action.startswith("exit:"):
        os._exit(int(action.split(":")[1]))
    elif action == "raise":
        raise RuntimeError(f"test hook: {model} fails")
    elif action.startswith("ballast:"):
        block = bytearray(int(action.split(":")[1]) * 2**20)
        block[::4096] = b"\1" * len(block[::4096])  # touch every page so it is resident
        _ballast.append(block)


def _job(cfg, device_spec: str, p, dataset, hooks: str, known_flops, busy: bool, conn) -> None:
    """The worker's body: take the device, measure, send the row back."""
    if known_flops is not None:
        engine._FLOPS[(cfg.model, cfg.image_size, cfg.num_classes)] = known_flops
    device = torch.device(device_spec)
    devices.backend(device).enter_worker()
    try:
        _test_hook(cfg.model, hooks)
        row = engine.measure(cfg, device, p, dataset, isolation="worker", busy=busy)
    except Exception as err:  # noqa: BLE001 - a failure outside measure is a row too
        row = {**engine._base_row(cfg, device, p), "isolation": "worker", **engine.failure(err, device)}
    conn.send(row)
    conn.close()


def measure_isolated(cfg: engine.Config, device: torch.device, p, dataset=None, busy: bool = True) -> dict:
    """:func:`cnnbench.measure.engine.measure` in a fresh worker process; a worker that dies gives a ``crashed`` row."""
    try:  # counted once here, not again in every worker (it would also add to the worker's memory peak)
        known_flops = engine.flops_per_image(cfg.model, cfg.image_size, cfg.num_classes)
    except Exception:  # noqa: BLE001 - the worker counts (and reports any failure) itself
        known_flops = None
    cfg = cfg.replace(threads=cfg.threads or torch.get_num_threads())  # the worker's threads are the run's
    row, exitcode = _in_worker(
        _job,
        f"cnnbench-worker-{cfg.model}",
        (cfg, str(device), p, dataset, os.environ.get(HOOK_ENV, ""), known_flops, busy),
    )
    return row if row is not None else engine.crashed(cfg, device, p, exitcode)


def _entered(target, start_method: str | None, *args) -> None:
    """A worker's entry: it dies with its parent, leaves Ctrl-C to it, and starts processes of its own (a
    DataLoader's) as its caller would, not by the harness's method (a forkserver child would start a server of its
    own, a fresh Python importing torch, inside every loader's start-up; None: the platform's default); then
    ``target(*args)``."""
    paths.die_with_parent()  # a worker never outlives its forkserver (and so its kernel and its run)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C kills the worker from the parent: no 2nd traceback
    mp.set_start_method(start_method, force=True)
    target(*args)


def _in_worker(target, name: str, args: tuple) -> tuple[dict | None, int | None]:
    """``target(*args, conn)`` in a fresh worker process: (the row it sent, or None if it died; its exit code).
    Interrupted, the worker is killed, so it does not go on measuring on the same cores."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_entered, name=name, args=(target, mp.get_start_method(allow_none=True), *args, send)
    )
    with _main_not_rerun():
        proc.start()
    send.close()
    row = None
    try:
        while row is None and (proc.is_alive() or receive.poll(0)):
            if receive.poll(0.2):
                try:
                    row = receive.recv()
                except EOFError:
                    break
        proc.join()
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
        receive.close()
    return row, proc.exitcode


def _call_job(fn, args: tuple, device_spec: str, threads: int, conn) -> None:
    """The body of a :func:`call_isolated` worker: set threads and device, call, send the row back."""
    torch.set_num_threads(threads)
    device = torch.device(device_spec)
    devices.backend(device).enter_worker()
    try:
        row = {**fn(*args), "isolation": "worker"}
    except Exception as err:  # noqa: BLE001 - a failure is a row
        row = {"isolation": "worker", **engine.failure(err, device)}
    conn.send(row)
    conn.close()


def died(exitcode: int | None) -> dict:
    """The status and message of a worker that died before sending its row (segfault, OOM killer, os._exit)."""
    return {"isolation": "worker", "status": "crashed", "error": engine.death(exitcode)}


def call_isolated(
    fn, *args, device: torch.device, threads: int | None = None, name: str = "cnnbench-worker"
) -> dict:
    """``fn(*args)`` (picklable, returning a row) in a fresh worker process: the row with
    ``isolation="worker"``; an exception gives :func:`cnnbench.measure.engine.failure`'s row, a worker that
    dies one with ``status="crashed"``."""
    threads = threads or torch.get_num_threads()
    row, exitcode = _in_worker(_call_job, name, (fn, args, str(device), threads))
    return row if row is not None else died(exitcode)
