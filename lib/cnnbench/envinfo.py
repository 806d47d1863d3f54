"""The environment a run measured on: software, CPU, memory, accelerator, and the workbook's commit."""

from __future__ import annotations

import datetime as dt
import hashlib
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
    """The workbook's commit and whether its code (outputs/ and examples/ apart) has uncommitted changes (None
    outside git)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=paths.repo_root(), capture_output=True, text=True, check=True
        ).stdout

    try:
        status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!outputs", ":!examples")
        return {"git_commit": git("rev-parse", "HEAD").strip(), "git_dirty": bool(status.strip())}
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": None, "git_dirty": None}


ISA_PREFIXES = ("avx2", "avx512", "amx", "fma", "asimd", "sve")  # the vector/matrix extensions torch uses
HOST_KEYS = tuple(
    (
        "cpu_model cpu_physical_cores cpu_logical_cores cpu_isa ram_gb gpu_name gpu_memory_gb gpu_driver "
        "apple_chip"
    ).split()
)


def cpu_isa(flags: frozenset[str] | None = None) -> str:
    """The CPU's vector and matrix extensions (avx2, avx512*, amx*, ...), sorted, space-separated."""
    flags = devices.cpu_features() if flags is None else flags
    return " ".join(sorted(f for f in flags if f.startswith(ISA_PREFIXES)))


def host_fingerprint(env: dict) -> dict:
    """``host_id``, a hash of the hardware fields (:data:`HOST_KEYS`; never the host name, which cloud machines change
    per session): runs with the same ``host_id`` ran on the same hardware; ``host``, their label."""
    fields = {k: env.get(k) for k in HOST_KEYS}
    digest = hashlib.sha1(repr(sorted(fields.items())).encode()).hexdigest()[:10]
    isa = fields["cpu_isa"] or ""
    short = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in isa.split()]
    isa_note = ", " + " ".join(short) if short else ""
    label = f"{fields['cpu_model']} ({fields['cpu_physical_cores']} cores{isa_note})"
    if fields["gpu_name"]:
        label += f" + {fields['gpu_name']} {fields['gpu_memory_gb']} GiB, driver {fields['gpu_driver']}"
    return {"host_id": digest, "host": label}


def capture(device: torch.device, params: dict | None = None) -> dict:
    """Everything needed to interpret a measurement taken on ``device``."""
    mem, backend = psutil.virtual_memory(), devices.backend(device)
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
        "device_kind": backend.kind,
        "device_name": backend.name(),
        "cpu_model": devices.cpu_model(),
        "cpu_arch": platform.machine(),
        "cpu_physical_cores": devices.physical_cores(),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_isa": cpu_isa(),
        "cpu_bf16_native": devices.native_bf16(),
        "torch_threads": torch.get_num_threads(),
        "ram_gb": round(mem.total / 2**30, 2),
        "mps_built": torch.backends.mps.is_built(),
        "mps_available": "mps" in devices.available(),
        **git_commit(),
    }
    env.update(backend.environment())
    if platform.system() == "Darwin":
        env["apple_chip"] = devices.cpu_model()
    env.update(host_fingerprint(env))
    if params is not None:
        env["params"] = params
    return env


def table(env: dict) -> pd.DataFrame:
    """The environment as a two-column table (parameters are shown separately)."""
    return pd.DataFrame(
        [(k, v) for k, v in env.items() if k != "params"], columns=["item", "value"]
    ).set_index("item")
