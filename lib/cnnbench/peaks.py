"""Device peaks: measured compute roofs (dense matmul per precision, a representative 3x3 convolution) and a
measured memory roof (stream copy and triad), beside spec-sheet roofs from a data file with sources."""

from __future__ import annotations

import statistics
import time
from importlib import resources

import pandas as pd
import torch

from cnnbench import devices


def precisions(device: torch.device) -> list[str]:
    """Precisions with a meaningful roof on ``device``."""
    if device.type == "cuda":
        major = torch.cuda.get_device_capability(device)[0]
        return ["fp32"] + (["tf32"] if major >= 8 else []) + ["fp16"] + (["bf16"] if major >= 8 else [])
    if device.type == "mps":
        return ["fp32", "fp16"]
    return ["fp32"] + (["bf16"] if devices.cpu_has_bf16() else [])


def _times(fn, device: torch.device, repeats: int, warmup: int = 2) -> list[float]:
    """Synced wall times of ``repeats`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        devices.synchronize(device)
        t0 = time.perf_counter()
        fn()
        devices.synchronize(device)
        times.append(time.perf_counter() - t0)
    return times


def _best_time(fn, device: torch.device, repeats: int, warmup: int = 2) -> float:
    return min(_times(fn, device, repeats, warmup))


def _tf32(device: torch.device, on: bool) -> None:
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


def matmul_gflops(device: torch.device, precision: str = "fp32", n: int = 4096, repeats: int = 5,
                  spread: bool = False):
    """Best dense n x n matmul rate (2 n^3 FLOPs per product), GFLOP/s; with ``spread``, also the median."""
    _tf32(device, precision == "tf32")
    a = torch.randn(n, n, device=device, dtype=devices.DTYPES[precision])
    b = torch.randn(n, n, device=device, dtype=devices.DTYPES[precision])
    inner = max(1, int(2e9 // (2 * n**3)))  # enough work per timed call to dwarf launch and clock costs
    times = _times(lambda: [torch.mm(a, b) for _ in range(inner)], device, repeats)
    _tf32(device, False)
    rates = [2 * n**3 * inner / t / 1e9 for t in times]
    return (max(rates), statistics.median(rates)) if spread else max(rates)


def conv_gflops(device: torch.device, precision: str = "fp32", batch: int = 32, channels: int = 128, size: int = 28,
                repeats: int = 5) -> float:
    """Best rate of a representative 3x3 convolution (ResNet stage 2 shape), forward, GFLOP/s."""
    _tf32(device, precision == "tf32")
    conv = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False).to(device, devices.DTYPES[precision])
    x = torch.randn(batch, channels, size, size, device=device, dtype=devices.DTYPES[precision])
    flops = 2 * batch * size * size * channels * channels * 9
    with torch.inference_mode():
        t = _best_time(lambda: conv(x), device, repeats)
    _tf32(device, False)
    return flops / t / 1e9


def stream_gbs(device: torch.device, mb: int = 512, repeats: int = 5) -> dict[str, float]:
    """Best copy (b = a: 2 x 4 bytes/element) and triad (a = b + s c: 3 x 4 bytes/element) rates, GB/s."""
    n = mb * 2**20 // 4
    a = torch.rand(n, device=device)
    b = torch.rand(n, device=device)
    c = torch.rand(n, device=device)
    copy = _best_time(lambda: b.copy_(a), device, repeats)
    triad = _best_time(lambda: torch.add(b, c, alpha=3.0, out=a), device, repeats)
    return {"copy_gbs": 2 * 4 * n / copy / 1e9, "triad_gbs": 3 * 4 * n / triad / 1e9}


def measure(device: torch.device, matmul_size: int, stream_mb: int, repeats: int) -> pd.DataFrame:
    """Measured roofs for every precision of ``device``: rows of device_peaks.csv."""
    before = torch.get_num_threads()
    threads = devices.set_threads(0) if device.type == "cpu" else before
    try:
        return _measure(device, matmul_size, stream_mb, repeats, threads)
    finally:
        torch.set_num_threads(before)  # the run's own thread setting applies again afterwards


def _measure(device: torch.device, matmul_size: int, stream_mb: int, repeats: int, threads: int) -> pd.DataFrame:
    n = matmul_size or (8192 if device.type == "cuda" else 2048)
    bw = stream_gbs(device, stream_mb, repeats)
    bandwidth = max(bw.values())
    rows = []
    for precision in precisions(device):
        mm, mm_median = matmul_gflops(device, precision, n, repeats, spread=True)
        conv = max(conv_gflops(device, precision, repeats=repeats),  # ResNet stage 2 and stage 3 shapes
                   conv_gflops(device, precision, batch=64, channels=256, size=14, repeats=repeats))
        peak = max(mm, conv)  # the roof is the best dense rate observed: a roof below a kernel is no roof
        rows.append({
            "device_name": devices.device_name(device), "kind": "measured", "precision": precision,
            "peak_gflops": peak, "bandwidth_gbs": bandwidth, "ridge_flop_per_byte": peak / bandwidth,
            "matmul_gflops": mm, "matmul_gflops_median": mm_median, "conv3x3_gflops": conv, **bw, "threads": threads,
            "source": f"measured: best of a {n}x{n} matmul and two 3x3 convs ({'matmul' if mm >= conv else 'conv'} "
                      f"won), best of {repeats}; stream copy/triad over {stream_mb} MiB arrays",
        })
    return pd.DataFrame(rows)


def specs() -> pd.DataFrame:
    """The spec-sheet table shipped with the package (dense figures only, each with its source)."""
    with resources.files("cnnbench").joinpath("data/device_specs.csv").open() as f:
        return pd.read_csv(f)


def spec_for(device_name: str) -> pd.DataFrame:
    """Spec rows whose ``match`` text appears in ``device_name`` (longest match wins), as device_peaks rows."""
    table = specs()
    hits = table[[m.lower() in device_name.lower() for m in table.match]]
    if hits.empty:
        return pd.DataFrame(columns=["device_name", "kind", "precision", "peak_gflops", "bandwidth_gbs",
                                     "ridge_flop_per_byte", "source"])
    best = hits[hits.match.str.len() == hits.match.str.len().max()]
    return pd.DataFrame({
        "device_name": device_name, "kind": "spec", "precision": best.precision, "peak_gflops": best.peak_gflops,
        "bandwidth_gbs": best.bandwidth_gbs, "ridge_flop_per_byte": best.peak_gflops / best.bandwidth_gbs,
        "source": best.device + ": " + best.source,
    }).reset_index(drop=True)


def compare(measured: pd.DataFrame, spec: pd.DataFrame) -> pd.DataFrame:
    """Measured roofs over spec-sheet roofs, per precision both have."""
    m = measured[["precision", "peak_gflops", "bandwidth_gbs"]]
    s = spec[["precision", "peak_gflops", "bandwidth_gbs"]]
    both = m.merge(s, on="precision", suffixes=("_measured", "_spec"))
    both["peak_measured_over_spec"] = both.peak_gflops_measured / both.peak_gflops_spec
    both["bandwidth_measured_over_spec"] = both.bandwidth_gbs_measured / both.bandwidth_gbs_spec
    return both
