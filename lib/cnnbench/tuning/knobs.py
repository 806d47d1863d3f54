"""Knobs the engine's Config does not carry, applied around a measurement: CPU threads and the torch.compile
mode (``default`` is Inductor's default; ``max-autotune`` and ``reduce-overhead`` patch Inductor's options the
way ``torch.compile(mode=...)`` does, so the engine's plain ``torch.compile(model)`` compiles in that mode)."""

from __future__ import annotations

import contextlib

import torch

from cnnbench import devices


@contextlib.contextmanager
def applied(threads: int, compile_mode: str = "off"):
    """Within the block, torch uses ``threads`` CPU threads and compiles in ``compile_mode``; restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if compile_mode == "off":
            yield
            return
        import torch._dynamo as dynamo
        import torch._inductor as inductor
        import torch._inductor.config as inductor_config

        dynamo.reset()  # a fresh compile: cached graphs of another model or size would count against
        # dynamo's recompile limit and fall back to eager silently
        with inductor_config.patch(inductor.list_mode_options(compile_mode)):
            yield
    finally:
        torch.set_num_threads(before)


def autocast(device: torch.device, precision: str):
    """Autocast for bf16/fp16, nothing for fp32/tf32: the engine's own (devices.autocast)."""
    return devices.autocast(device, precision)
