#!/usr/bin/env python3
"""make gpu: prints the extra of pyproject.toml with 05's GPU backends (CuPy, numba-cuda, libNVVM) for the CUDA
major torch was built for, or "" where torch has no CUDA build with one: another major's would make pip swap
torch for a build that matches it."""

import importlib.metadata

import torch


def gpu_extra() -> str:
    extra = f"gpu-cu{(torch.version.cuda or '').split('.')[0]}"
    return extra if extra in (importlib.metadata.metadata("cnnbench").get_all("Provides-Extra") or []) else ""


if __name__ == "__main__":
    print(gpu_extra())
