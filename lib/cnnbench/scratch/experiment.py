"""Experiment 05: both networks on every backend from identical weights and data order, every gradient checked
against autograd, each step broken down by operation and memory, into :data:`CSVS` (one row per measurement, with
a status: ``unavailable`` with the reason where a backend cannot run here, ``error``/``oom``/``unstable``)."""

from __future__ import annotations

import importlib
import math
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np
import psutil
import torch
import torch.nn.functional as F

from cnnbench import devices, paths, results
from cnnbench.params import SCRATCH_BACKENDS as DEVICE_KIND
from cnnbench.params import ParamsError, scratch_data_problem
from cnnbench.progress import note, resumed
from cnnbench.results.schema import SCRATCH_KEYS, SCRATCH_PLAN
from cnnbench.scratch.base import Backend, BackendUnavailable, named_params, torch_module, torch_weights

MIB = 2**20
TOLERANCE = 1e-4  # gradient check: max |ours - reference| / max |reference|, per tensor
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


@dataclass
class Data:
    x_train: np.ndarray  # (N, 1, 28, 28) float32, normalised
    y_train: np.ndarray  # (N,) int64
    x_test: np.ndarray
    y_test: np.ndarray
    source: str


def synthetic_mnist(n_train: int, n_test: int, seed: int = 0, size: int = 28) -> Data:
    """Learnable MNIST-shaped data: per class a glyph of four random strokes in six styles, shifted, dimmed and
    noisy, with MNIST's pixel statistics; the CNN learns it in a few epochs and the MLP slowly, as on MNIST."""
    rng = np.random.default_rng(seed)
    (yy, xx), t = np.mgrid[:size, :size][..., None], np.linspace(0, 1, 40)[:, None, None]
    ends = rng.uniform(6, size - 6, (10, 4, 2, 2))  # class, stroke, end, (row, column)

    def style(e):
        e = e + rng.normal(0, 1.5, e.shape)
        pts = (e[:, 0] + t * (e[:, 1] - e[:, 0])).reshape(-1, 2)
        return np.exp(-((yy - pts[:, 0]) ** 2 + (xx - pts[:, 1]) ** 2).min(-1) / 5)

    styles = np.stack([[style(ends[c]) for _ in range(6)] for c in range(10)])
    moves = [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)]
    shifted = np.stack([np.roll(styles, d, axis=(2, 3)) for d in moves], 2)  # class, style, shift, y, x

    def draw(n):
        y, s, at = rng.integers(0, 10, n), rng.integers(0, 6, n), rng.integers(0, shifted.shape[2], n)
        x = shifted[y, s, at] * rng.uniform(0.7, 1, (n, 1, 1))
        x = np.clip(x + rng.normal(0, 0.15, x.shape), 0, 1)
        return ((x - MNIST_MEAN) / MNIST_STD)[:, None].astype(np.float32), y.astype(np.int64)

    return Data(*draw(n_train), *draw(n_test), source="synthetic")


def mnist(root, n_train: int, n_test: int, download: bool) -> Data:
    """Real MNIST through the workbook's loader, normalised as seed 001's PyTorch versions."""
    from cnnbench import data

    def split(name, n):
        ds = data.open_dataset("mnist", root, name, 1, 28, download)
        x = ds.data.numpy()[: n or None].astype(np.float32) / 255
        y = ds.targets.numpy()[: n or None].astype(np.int64)
        return ((x - MNIST_MEAN) / MNIST_STD)[:, None].astype(np.float32), y

    return Data(*split("train", n_train), *split("test", n_test), source="mnist")


def unit_scale(data: Data) -> Data:
    """Pixels back in [0, 1], as seed 004 fed its MLP (its lr is tuned for that scale)."""
    x_train, x_test = ((x * MNIST_STD + MNIST_MEAN).astype(np.float32) for x in (data.x_train, data.x_test))
    return Data(x_train, data.y_train, x_test, data.y_test, data.source)


def load_data(p) -> Data:
    """05's data; a one-line :class:`ParamsError` if real MNIST is asked for but absent and not downloadable."""
    if problem := scratch_data_problem(p):
        raise ParamsError(problem)
    n_train, n_test = p.scratch_train_images, p.scratch_test_images
    if p.scratch_dataset == "mnist":
        return mnist(paths.resolve(p.scratch_data_path), n_train, n_test, p.download)
    return synthetic_mnist(n_train or 60000, n_test or 10000, p.seed)


def identity(backend: str, model: str, threads: int) -> dict:
    """The columns naming a row's backend, model, device ("" where absent) and threads."""
    kind = DEVICE_KIND[backend]
    name = devices.device_name(torch.device(kind)) if kind in devices.available() else ""
    return dict(backend=backend, model=model, device_name=name, device_kind=kind, threads=threads)


# Numba's errors (numba.cuda.cudadrv.error) for a missing CUDA driver, libNVVM or NVRTC: unavailable, not broken
MISSING_TOOLKIT = ("CudaSupportError", "NvvmSupportError", "NvrtcSupportError")


def status_of(err: BaseException, kind: str = "cpu") -> str:
    if isinstance(err, BackendUnavailable) or type(err).__name__ in MISSING_TOOLKIT:
        return "unavailable"
    return "oom" if devices.backend(kind).is_oom(err) else "error"


def failure(ident: dict, err: BaseException) -> dict:
    error = f"{type(err).__name__}: {err}".splitlines()[0][:300]
    return {**ident, "status": status_of(err, ident.get("device_kind", "cpu")), "error": error}


def make(name: str, model: str, lr: float = 0.01, momentum: float = 0.9) -> Backend:
    """The backend ``name`` for ``model``, its module imported now (:class:`BackendUnavailable`: why not here)."""
    if name not in DEVICE_KIND:
        raise ValueError(f"unknown scratch backend '{name}'; valid: {', '.join(DEVICE_KIND)}")
    module = (
        "torch_backend" if name.startswith("torch_") else "xp_backend" if name in ("numpy", "cupy") else name
    )
    return importlib.import_module(f"cnnbench.scratch.{module}").backend(name, model, lr, momentum)


def _make(backend: str, model: str, p):
    """The backend for ``model`` with the run's SGD settings of that model."""
    mlp = "" if model == "mnist_cnn" else "mlp_"
    return make(backend, model, getattr(p, f"scratch_{mlp}lr"), getattr(p, f"scratch_{mlp}momentum"))


def set_threads(threads: int) -> int:
    """Numba's and the BLAS pool's threads set to the run's (torch's are the run's); returns the number in force."""
    import numba
    from threadpoolctl import threadpool_limits

    threads = max(1, min(threads, numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(threads)
    threadpool_limits(limits=threads, user_api="blas")
    return threads


def gradcheck(
    backend: str, model: str, weights: dict, x: np.ndarray, y: np.ndarray, threads: int
) -> list[dict]:
    """One row per tensor (``loss`` first): max abs and relative error against autograd in float64 on the CPU."""
    ident = identity(backend, model, threads)
    try:
        b = make(backend, model)
        b.init(weights)
        loss = b.loss_and_grads(x, y)
        grads = b.grads()
    except Exception as err:  # noqa: BLE001 - a failure is a row
        return [{**failure(ident, err), "tensor": "loss"}]
    net = torch_module(model, x.shape[-1], weights["fc1.weight"].shape[0]).double()
    named = named_params(net, model)
    with torch.no_grad():
        for k, prm in named.items():
            prm.copy_(torch.from_numpy(weights[k].astype(np.float64)))
    ref_loss = F.cross_entropy(net(torch.from_numpy(x.astype(np.float64))), torch.from_numpy(y))
    ref_loss.backward()
    rows = []
    pairs = [("loss", np.float64(loss), np.float64(ref_loss.item()))]
    for name, ours, theirs in pairs + [(k, grads[k], prm.grad.numpy()) for k, prm in named.items()]:
        err = float(np.max(np.abs(np.asarray(ours, np.float64) - theirs)))
        rel = err / max(float(np.max(np.abs(theirs))), 1e-30)
        shape = "x".join(map(str, np.shape(theirs))) or "scalar"
        row = {"tensor": name, "shape": shape, "batch": len(x), "max_abs_err": err, "rel_err": rel}
        rows.append({**ident, **row, "tolerance": TOLERANCE, "passed": rel <= TOLERANCE, "status": "ok"})
    return rows


def train(backend: str, model: str, p, weights: dict, data: Data, threads: int, on_row=lambda row: None):
    """A row per CNN epoch (minibatches in the order seeded by seed + epoch; the mean loss) or per
    ``scratch_mlp_eval_every`` full-batch MLP steps (seed 004; ``epoch``: steps done; the last loss), each to
    ``on_row``, accuracies outside the time; a failure or NaN ends it."""
    ident, rows, i, n, cnn = identity(backend, model, threads), [], 0, len(data.x_train), model == "mnist_cnn"
    bs = p.scratch_batch_size if cnn else n
    blocks = (
        range(1, p.scratch_epochs + 1) if cnn else range(0, p.scratch_mlp_steps, p.scratch_mlp_eval_every)
    )

    def block(b, i: int) -> dict:
        if cnn:
            order = np.random.default_rng(p.seed + i).permutation(n)
            steps = [order[s * bs : (s + 1) * bs] for s in range(n // bs)]
        else:
            steps = [slice(None)] * min(p.scratch_mlp_eval_every, p.scratch_mlp_steps - i)
        b.sync()  # the window's time between two device synchronisations
        start = time.perf_counter()
        losses = [b.train_step(data.x_train[s], data.y_train[s]) for s in steps]
        b.sync()
        seconds = time.perf_counter() - start
        k = len(steps)
        row = {"epoch": i if cnn else i + k, "steps": k, "batch_size": bs, "epoch_s": seconds}
        row |= {} if cnn else {"step_s": seconds / k}
        row |= {"images": k * bs, "throughput_img_s": k * bs / seconds}
        row["train_loss"] = float(np.mean(losses) if cnn else losses[-1])
        row |= {} if cnn else {"train_accuracy": b.evaluate(data.x_train, data.y_train)}
        return {**row, "test_accuracy": b.evaluate(data.x_test, data.y_test)}

    try:
        b = _make(backend, model, p)
        b.init(weights)
        for i in blocks:
            figures = block(b, i)
            finite = math.isfinite(figures["train_loss"])
            rows.append({**ident, **figures, "jit_s": b.jit_s, "status": "ok" if finite else "unstable"})
            on_row(rows[-1])
            if not finite:
                break
    except Exception as err:  # noqa: BLE001 - a failure is a row, the run goes on
        rows.append({**failure(ident, err), "epoch": i})
        on_row(rows[-1])
    return rows


def op_breakdown(backend: str, model: str, p, weights: dict, x: np.ndarray, y: np.ndarray, threads: int):
    """Every op of a training step timed between synchronisations: a first call, then ``scratch_op_steps``."""
    ident = identity(backend, model, threads)
    try:
        b = _make(backend, model, p)
        b.init(weights)
        b.timer.enabled = True
        for _ in range(1 + p.scratch_op_steps):
            b.train_step(x, y)
    except Exception as err:  # noqa: BLE001
        return [{**failure(ident, err), "op": ""}]
    fixed = {"batch_size": len(x), "jit_s": b.jit_s, "status": "ok"}
    return [{**ident, **row, **fixed} for row in b.timer.rows()]


def rss() -> int:
    return psutil.Process().memory_info().rss


def _measure_hooks(backend: str):
    """(read_current, read_peak, reset_peak, read_pool_held, what) for ``backend``'s allocator (tracemalloc started
    where NumPy allocates its arrays); pool held: what a GPU allocator holds (in use or cached), else None."""
    if backend in ("numpy", "numba_cpu"):
        how, traced = "tracemalloc (NumPy reports its allocations)", tracemalloc.get_traced_memory
        tracemalloc.start()
        return (lambda: traced()[0]), (lambda: traced()[1]), tracemalloc.reset_peak, lambda: None, how
    if backend == "cupy":
        import cupy

        pool = cupy.get_default_memory_pool()
        return pool.used_bytes, pool.used_bytes, lambda: None, pool.total_bytes, "CuPy memory pool used_bytes"
    if backend in ("torch_cuda", "torch_mps"):
        b = devices.backend(torch.device(DEVICE_KIND[backend]))

        def peak() -> float:  # a device without a high-water mark (MPS): what it holds after the step
            mib = b.peak_memory_mib()["peak_device_mem_mib"]
            return b.allocated_bytes() if math.isnan(mib) else mib * 2**20

        what = f"torch's {b.kind} allocator: allocated bytes (high-water mark where it has one, else after the step)"
        return b.allocated_bytes, peak, b.reset_peak_memory, b.reserved_bytes, what
    if backend == "numba_cuda":
        from numba import cuda

        def used():
            info = cuda.current_context().get_memory_info()
            return info.total - info.free

        return used, used, lambda: None, lambda: None, "CUDA free memory delta (after the step)"
    return rss, rss, lambda: None, lambda: None, "process RSS delta (after the step)"


def memory_breakdown(
    backend: str, model: str, p, weights: dict, x: np.ndarray, y: np.ndarray, data: Data, threads: int
) -> list[dict]:
    """Seed 004's Table 5: each component from array sizes beside what the allocator reports, and the RSS."""
    ident, rss0 = identity(backend, model, threads), rss()
    try:
        b = _make(backend, model, p)
        current, peak, reset_peak, pool_held, how = _measure_hooks(backend)
        try:
            before = current()
            b.init(weights)  # Numba compiles here: its compile-time allocations are freed before we read
            b.sync()
            state = current() - before
            reset_peak()
            base = current()
            b.train_step(x, y)  # the first step allocates everything a step needs (after init's JIT)
            b.sync()
            step_peak = max(peak(), current()) - base
        finally:
            tracemalloc.stop()  # a no-op where not tracing
        comp, rss_growth, held = b.memory(), rss() - rss0, pool_held()
    except Exception as err:  # noqa: BLE001
        return [{**failure(ident, err), "component": ""}]
    state_c = comp["parameters"] + comp["gradients"] + comp["optimizer_state"]
    copied = DEVICE_KIND[backend] != "cpu"  # the step copies the batch into the device's measured allocator
    step_c = comp["activations"] + comp.get("workspace", 0) + copied * comp["batch"]
    # no allocator counters (torch on the CPU): an RSS difference measures neither state nor the step's peak
    coarse = how.startswith("process RSS")
    unmeasured = (
        "not measured: no allocator counters for this backend, and the process RSS delta "
        "({rss:.3f} MiB) misses memory reused from pages already resident"
    )
    dataset = data.x_train.nbytes + data.y_train.nbytes + data.x_test.nbytes + data.y_test.nbytes
    state_how, step_how = [unmeasured.format(rss=v / MIB) if coarse else how for v in (state, step_peak)]
    batch_how = " + the batch it copies to the device" if copied else "; the batch stays on the host"
    step_how += f" (activations + workspace{batch_how})"
    overhead = None if coarse else step_peak - step_c
    over_how = "measured step peak - computed step_total (temporaries, allocator pool)"
    pool_how = "CuPy pool total_bytes / torch's reserved bytes (a GPU allocator's pool)"
    rss_how = "RSS after a step - before the backend: libraries, CUDA context, allocator caches, buffers"
    rows = [
        ("parameters", comp["parameters"], None, "array sizes"),
        ("gradients", comp["gradients"], None, "array sizes"),
        ("optimizer_state", comp["optimizer_state"], None, "array sizes (momentum buffers)"),
        ("model_state_total", state_c, None if coarse else state, state_how),
        ("activations", comp["activations"], None, "arrays kept for the backward"),
        ("workspace", comp.get("workspace", float("nan")), None, "im2col columns / gradient buffers"),
        ("batch_inputs", comp["batch"], None, "array sizes"),
        ("step_total", step_c, None if coarse else step_peak, step_how),
        ("backend_overhead", None, overhead, over_how),
        ("dataset_inputs", dataset, None, "host arrays of the train and test images"),
        ("allocator_pool_held", None, held, pool_how),
        ("process_rss_growth", None, rss_growth, rss_how),
        ("process_rss_baseline", None, rss0, "psutil RSS before the backend was made"),
    ]
    return [
        {
            **ident,
            "component": component,
            "batch_size": len(x),
            "computed_mib": computed / MIB if computed is not None else float("nan"),
            "measured_mib": measured / MIB if measured is not None else float("nan"),
            "method": method,
            "status": "ok",
            "measured_status": NAN_STATUS.get(component, "computed_only") if measured is None else "measured",
        }
        for component, computed, measured, method in rows
    ]


# a memory row's measured_status where measured_mib is NaN (else "measured"); these three lack a measure only
# where the backend has no allocator counters
NAN_STATUS = dict.fromkeys(("model_state_total", "step_total", "backend_overhead"), "not_measured")
NAN_STATUS["allocator_pool_held"] = "not_applicable"


def settings_of(p, model: str, threads: int) -> dict:
    """The parameters in ``model``'s rows' key, the other model's empty: a change reruns only its model."""
    cnn = ("scratch_epochs", "scratch_batch_size", "scratch_lr", "scratch_momentum")
    other = "scratch_mlp_" if model == "mnist_cnn" else cnn
    return {
        k: threads if k == "threads" else "" if k.startswith(other) else getattr(p, k) for k in SCRATCH_KEYS
    }


def run_all(run, data: Data | None = None, progress=print) -> dict[str, list[dict]]:
    """Everything 05 measures, written to the run folder row by row (:data:`CSVS`); fp32 means fp32 for torch
    (TF32 off on CUDA, whose cuDNN default is on, else torch_cuda would fail the 1e-4 gradient check)."""
    with devices.backend("cuda").math("fp32"):
        return _run_all(run, data or load_data(run.params), progress)


def _run_all(run, data: Data, progress) -> dict[str, list[dict]]:
    p, threads = run.params, run.threads
    set_threads(threads)
    files = {name: results.file(run.dir, name) for name in CSVS}
    pairs = [(b, m) for m in p.scratch_models for b in p.scratch_backends]
    planned = [{"backend": b, "model": m, **settings_of(p, m, threads)} for b, m in pairs]
    for name in CSVS:
        results.table(name).plan(run.dir, planned, "backends")
    out: dict[str, list[dict]] = {k: [] for k in files}

    def keep(name: str, rows: list[dict]) -> None:
        for row in rows:
            row = {**row, **settings_of(p, row["model"], threads)}
            files[name].append(row)
            out[name].append(row)

    def measured_before(backend: str, model: str) -> bool:  # a rerun keeps a pair whose four tables are final
        pair = {"backend": backend, "model": model, **settings_of(p, model, threads)}
        return all(files[name].finished(pair, SCRATCH_PLAN) for name in CSVS)

    kept = sum(measured_before(b, m) for b, m in pairs)
    cnn_data = data
    for model in p.scratch_models:
        data = cnn_data if model == "mnist_cnn" else unit_scale(cnn_data)
        weights = torch_weights(model, seed=p.seed)
        xg, yg = data.x_train[: p.scratch_gradcheck_batch], data.y_train[: p.scratch_gradcheck_batch]
        bs = p.scratch_batch_size if model == "mnist_cnn" else len(data.x_train)
        xb, yb = data.x_train[:bs], data.y_train[:bs]
        for backend in p.scratch_backends:
            if measured_before(backend, model):
                progress(f"{model} on {backend}: kept from an earlier run with the same parameters")
                continue
            progress(f"{model} on {backend}")
            note(f"backends: {model} on {backend}")
            keep("gradcheck", gradcheck(backend, model, weights, xg, yg, threads))
            train(backend, model, p, weights, data, threads, lambda row: keep("backends", [row]))
            keep("backend_ops", op_breakdown(backend, model, p, weights, xb, yb, threads))
            keep("backend_memory", memory_breakdown(backend, model, p, weights, xb, yb, data, threads))
    absent = {(r["backend"], r["model"]) for t in out.values() for r in t if r["status"] == "unavailable"}
    resumed(kept, len(planned), "backends.csv", "backend/model pairs", unavailable=len(absent))
    return out


CSVS = ("backends", "gradcheck", "backend_ops", "backend_memory")


def load_frames(run_dir) -> dict:
    """The four CSVs of 05 in a run folder as DataFrames (empty ones where a file is missing)."""
    return {name: results.read(run_dir, name) for name in CSVS}
