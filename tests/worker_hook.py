"""The test hook a measurement worker runs before each configuration (cnnbench.measure.worker.HOOK_ENV):
``{model: action}``, actions ``segfault``, ``exit:N``, ``raise`` and ``ballast:MIB``. Set it with :func:`env`."""

import json
import os
import signal
import sys


def env(actions: dict) -> str:
    """The value of ``CNNBENCH_TEST_WORKER_HOOK`` that runs ``actions`` in the workers."""
    return f"{__file__}::{json.dumps(actions)}"


def hook(model: str, argument: str) -> None:
    action = json.loads(argument).get(model, "")
    if action == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif action.startswith("exit:"):
        os._exit(int(action.split(":")[1]))
    elif action == "raise":
        raise RuntimeError(f"test hook: {model} fails")
    elif action.startswith("ballast:"):
        block = bytearray(int(action.split(":")[1]) * 2**20)
        block[::4096] = b"\1" * len(block[::4096])  # touch every page so it is resident
        # kept alive in the worker (run_path's namespace is not), so the measurement's RSS peak holds it
        sys.modules["cnnbench.measure.worker"].__dict__.setdefault("ballast", []).append(block)
