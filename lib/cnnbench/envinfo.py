"""The environment a run measured on: software, CPU, memory, accelerator, and the workbook's commit."""

from __future__ import annotations

import datetime as dt
import platform
import socket
import subprocess

import pandas as pd
import psutil
import torch
import torchvision

import cnnbench
from cnnbench import devices, paths


def git_commit() -> dict[str, str | bool | None]:
    """The workbook's commit and whether its code has uncommitted changes (None outside git).

    outputs/ is left out: regenerating a committed example run changes results, not the workbook.
    """
    try:
        root = paths.repo_root()
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        )
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!outputs"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        return {"git_commit": commit.stdout.strip(), "git_dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.CalledProcessError, FileNotFoundError):
        return {"git_commit": None, "git_dirty": None}


def nvidia_info(device: torch.device) -> dict:
    props = torch.cuda.get_device_properties(device)
    info = {
        "gpu_name": props.name,
        "gpu_memory_gb": round(props.total_memory / 2**30, 2),
        "gpu_compute_capability": f"{props.major}.{props.minor}",
        "gpu_multiprocessors": props.multi_processor_count,
        "gpu_driver": None,
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        info["gpu_driver"] = pynvml.nvmlSystemGetDriverVersion()
        handle = devices.nvml_handle(device, pynvml)
        info["gpu_power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000
        info["gpu_max_sm_clock_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
    except Exception as err:  # telemetry is optional: record why it is missing
        info["gpu_driver_error"] = f"{type(err).__name__}: {err}"
    return info


def capture(device: torch.device, params: dict | None = None) -> dict:
    """Everything needed to interpret a measurement taken on ``device``."""
    mem = psutil.virtual_memory()
    env = {
        "schema_version": cnnbench.SCHEMA_VERSION,
        "cnnbench": cnnbench.__version__,
        "captured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device_kind": device.type,
        "device_name": devices.device_name(device),
        "cpu_model": devices.cpu_model(),
        "cpu_arch": platform.machine(),
        "cpu_physical_cores": devices.physical_cores(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_bf16_native": devices.cpu_has_bf16(),
        "torch_threads": torch.get_num_threads(),
        "ram_gb": round(mem.total / 2**30, 2),
        "mps_built": bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_built(),
        "mps_available": devices.mps_available(),
        **git_commit(),
    }
    if device.type == "cuda":
        env.update(nvidia_info(device))
    if device.type == "mps" or platform.system() == "Darwin":
        env["apple_chip"] = devices.cpu_model()
    if params is not None:
        env["params"] = params
    return env


def table(env: dict) -> pd.DataFrame:
    """The environment as a two-column table (parameters are shown separately)."""
    return pd.DataFrame(
        [(k, v) for k, v in env.items() if k != "params"], columns=["item", "value"]
    ).set_index("item")
