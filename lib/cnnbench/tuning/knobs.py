"""Knobs the engine's Config does not carry, applied around a measurement: CPU threads and the torch.compile
mode (``default`` is Inductor's default; ``max-autotune`` and ``reduce-overhead`` patch Inductor's options the
way ``torch.compile(mode=...)`` does, so the engine's plain ``torch.compile(model)`` compiles in that mode)."""

from __future__ import annotations

import contextlib

import torch

from cnnbench import devices

# What dynamo's cache holds since the last reset: the compile mode it was compiled in and the shapes (one engine
# configuration each) compiled under it. Inductor's options are patched around the plain torch.compile, and
# dynamo's cache does not key on them, so a change of mode must reset; a shape seen before reuses its graphs.
_compiled: dict = {"mode": None, "shapes": set()}
SHAPES_PER_RESET = 4  # distinct shapes compiled between resets; dynamo recompiles per shape, and past its
# recompile limit (8 by default) falls back to eager silently


@contextlib.contextmanager
def applied(threads: int, compile_mode: str = "off", shape=None):
    """Within the block, torch uses ``threads`` CPU threads and compiles in ``compile_mode``; restored after.

    ``shape`` (hashable: the engine configuration and threads of the window) lets windows of the same shape
    reuse the graphs dynamo compiled for it: dynamo is reset only when the mode changes, when ``shape`` is
    None (unknown), or when a new shape would pass ``SHAPES_PER_RESET`` since the last reset. The search's
    rungs measure the same candidates again, and each compile costs seconds to minutes on a 2-vCPU host."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if compile_mode == "off":
            yield
            return
        import torch._dynamo as dynamo
        import torch._inductor as inductor
        import torch._inductor.config as inductor_config

        fresh = (
            shape is None
            or _compiled["mode"] != compile_mode
            or (shape not in _compiled["shapes"] and len(_compiled["shapes"]) >= SHAPES_PER_RESET)
        )
        if fresh:
            dynamo.reset()  # graphs of another mode, or too many shapes, would count against the recompile limit
            _compiled["mode"], _compiled["shapes"] = compile_mode, set()
        if shape is not None:
            _compiled["shapes"].add(shape)
        with inductor_config.patch(inductor.list_mode_options(compile_mode)):
            yield
    finally:
        torch.set_num_threads(before)


def shape_of(config, threads: int) -> tuple:
    """The key under which :func:`applied` reuses compiled graphs: the engine configuration and threads."""
    return repr(config), threads


def autocast(device: torch.device, precision: str):
    """Autocast for bf16/fp16, nothing for fp32/tf32: the engine's own (devices.autocast)."""
    return devices.autocast(device, precision)
