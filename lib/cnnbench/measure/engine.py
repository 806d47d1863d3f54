"""The measurement engine: one training or evaluation configuration, measured the way a performance engineer
would accept.

One training step = zero_grad, forward, loss, backward, optimizer step. One eval step = forward under
``torch.inference_mode()``. Same model, optimizer (SGD; the profiler's
fine-tuning step: its own, see :class:`Workload`) and loss on every device. Warm-up steps run first;
then ``repeats`` windows of ``measured_steps`` steps each, the device synchronised before every clock read.
Failures are rows: out of memory -> ``status=oom``, a non-finite loss -> ``status=unstable``, anything else ->
``status=error`` with the message; a worker process that dies -> ``status=crashed`` with its exit code or signal.

:func:`measure` measures one configuration once, in this process; :func:`cnnbench.measure.runner.run_configs` measures
many, each in several fresh worker processes in interleaved rounds (see :mod:`cnnbench.measure.runner`).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import nn

from cnnbench import data, devices, heap, models
from cnnbench.measure import energy, flops, telemetry, timing
from cnnbench.params import default

# Everything that changes a measurement (declared with the tables, results.tables): a rerun with other
# parameters measures new rows instead of reusing old ones.
from cnnbench.results.tables import PROTOCOL_KEYS  # noqa: E402

# Columns every result frame has, so a table of failures only still has them (empty).
MEASURE_COLUMNS = ("throughput_img_s", "throughput_ci95_img_s", "throughput_window_min_img_s",
                   "throughput_window_max_img_s", "step_time_median_s", "step_time_mean_s", "step_time_std_s",
                   "n_steps", "steps_per_window", "noisy", "gflops_per_image", "achieved_gflops", "achieved_tflops",
                   "baseline_rss_mib", "peak_rss_mib", "peak_device_mem_mib", "peak_device_reserved_mib",
                   "util_cpu_mean_pct", "util_device_mean_pct", "error")


@dataclass(frozen=True)
class Config:
    """What is measured: every field is a column of the result row."""

    model: str
    phase: str  # train | eval
    batch_size: int
    image_size: int
    num_classes: int
    in_channels: int = 3
    precision: str = "fp32"  # fp32 | tf32 | bf16 | fp16
    memory_format: str = "nchw"  # nchw | channels_last
    compile: bool = False
    data_mode: str = "device"  # device | loader
    dataset: str = "synthetic"


@dataclass(frozen=True)
class Protocol:
    """How it is measured (the defaults are the params' own: :func:`cnnbench.params.default`)."""

    warmup_steps: int = default('warmup_steps')
    measured_steps: int = default('measured_steps')  # 0 = as many as fill window_s, from the timed warm-up steps
    window_s: float = default('window_s')
    repeats: int = default('repeats')  # measured windows per process
    processes: int = default('processes')  # least fresh processes per configuration; the reported interval spans them
    max_processes: int = default('max_processes')  # most processes per configuration while its interval is wider than ci_target_pct
    ci_target_pct: float = default('ci_target_pct')  # stop adding processes once the 95% interval is within +-this % of the rate
    adapt_budget_s: float = default('adapt_budget_s')  # seconds per pass spent on processes beyond ``processes`` (0: none)
    lr: float = default('lr')
    momentum: float = default('momentum')
    workers: int = default('workers')
    pin_memory: bool = default('pin_memory')
    cudnn_benchmark: bool = default('cudnn_benchmark')  # torch.backends.cudnn.benchmark around the steps (CUDA)
    synthetic_images: int = default('synthetic_images')
    telemetry_interval_s: float = default('telemetry_interval_s')
    host_heap: str = default('host_heap')  # keep | system: whether freed host memory goes back to the OS (cnnbench.heap)
    seed: int = default('seed')
    data_path: str = default('data_path')
    download: bool = default('download')

    @classmethod
    def from_params(cls, p) -> Protocol:
        return cls(**{k: getattr(p, k) for k in cls.__dataclass_fields__})


class UnstableLoss(RuntimeError):
    """The loss became NaN or infinite."""


_FLOPS: dict[tuple[str, int, int], tuple[float, float]] = {}


def flops_per_image(model: str, image_size: int, num_classes: int) -> tuple[float, float]:
    """(training, forward) FLOPs per image at the resolution actually run, counted on the CPU once per process
    (a worker is handed the parent's count, see :mod:`cnnbench.measure.worker`)."""
    key = (model, image_size, num_classes)
    if key not in _FLOPS:
        c = flops.complexity(model, image_size, num_classes, device="cpu", with_fvcore=False)
        _FLOPS[key] = (c.gflops_train * 1e9, c.gflops_fwd * 1e9)
    return _FLOPS[key]


def _grad_scaler(device: torch.device, precision: str):
    if precision != "fp16":
        return None
    try:
        return torch.amp.GradScaler(device.type)
    except (RuntimeError, ValueError, AttributeError):
        return None


class Workload:
    """The model, optimizer, loss and data of one configuration on one device, and its step function."""

    def __init__(self, cfg: Config, device: torch.device, protocol: Protocol, dataset=None, optimizer: str = "sgd"):
        """``optimizer``: sgd (Scenario A's, every measured configuration), adam or adamw (the fine-tuning step
        the profiler traces, seed 002's); lr and momentum are the protocol's."""
        self.cfg, self.device, self.protocol = cfg, device, protocol
        heap.apply(protocol.host_heap)  # process-wide, before the first step allocates
        if reason := devices.precision_unavailable(device, cfg.precision):
            raise devices.Unavailable(reason)  # a knob this torch lacks is never an error row
        torch.manual_seed(protocol.seed)
        model = models.build(cfg.model, num_classes=cfg.num_classes, image_size=cfg.image_size).to(device)
        self.channels_last = cfg.memory_format == "channels_last"
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.model = model.train(cfg.phase == "train")
        self.forward = torch.compile(model) if cfg.compile else model
        self.optimizer = models.make_optimizer(optimizer, model.parameters(), protocol.lr, protocol.momentum)
        self.loss_fn = nn.CrossEntropyLoss()
        self.scaler = _grad_scaler(device, cfg.precision)
        self.last_loss: torch.Tensor | None = None
        devices.math_precision(device, cfg.precision, protocol.cudnn_benchmark).__enter__()  # for the workload's life (measure restores)
        if cfg.data_mode == "device":
            # one batch made once on the device: real images when a dataset is given, else synthetic
            x, y = self._synthetic_batch() if dataset is None else self.to_device(
                *next(iter(data.loader(dataset, cfg.batch_size, 0, False, seed=protocol.seed))))
            self.next_batch = lambda: (x, y)
        else:
            ds = dataset or data.synthetic_for(cfg.in_channels, cfg.image_size, cfg.num_classes,
                                               max(protocol.synthetic_images, cfg.batch_size), protocol.seed)
            pin = protocol.pin_memory and device.type == "cuda"
            batches = data.cycle(data.loader(ds, cfg.batch_size, protocol.workers, pin, seed=protocol.seed))
            self.next_batch = lambda: self.to_device(*next(batches))

    def _synthetic_batch(self):
        gen = torch.Generator().manual_seed(self.protocol.seed)
        shape = (self.cfg.batch_size, self.cfg.in_channels, self.cfg.image_size, self.cfg.image_size)
        return self.to_device(torch.randn(shape, generator=gen),
                               torch.randint(0, self.cfg.num_classes, (self.cfg.batch_size,), generator=gen))

    def to_device(self, x: torch.Tensor, y: torch.Tensor):
        """A host batch on the device (channels-last when asked); the copy is part of the step."""
        x = devices.to_device(x, self.device)  # non-blocking only from pinned memory to CUDA
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, devices.to_device(y, self.device)

    def train_step(self, batch=None) -> None:
        """One training step on ``batch`` (x, y on the device), or on the workload's next batch."""
        x, y = batch if batch is not None else self.next_batch()
        self.optimizer.zero_grad(set_to_none=True)
        with devices.autocast(self.device, self.cfg.precision):
            loss = self.loss_fn(models.logits(self.forward(x)), y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.last_loss = loss.detach()

    def eval_step(self, batch=None) -> None:
        x, _ = batch if batch is not None else self.next_batch()
        with torch.inference_mode(), devices.autocast(self.device, self.cfg.precision):
            self.forward(x)

    @property
    def step(self) -> Callable[[], None]:
        return self.train_step if self.cfg.phase == "train" else self.eval_step

    def check_loss(self) -> float:
        """The last training loss; raises :class:`UnstableLoss` when it is not finite."""
        if self.last_loss is None:
            return math.nan
        value = float(self.last_loss.float().item())
        if not math.isfinite(value):
            raise UnstableLoss(f"loss became {value}")
        return value


def failure(err: BaseException) -> dict:
    """The status and message of a failed measurement: oom, unstable (non-finite loss) or error."""
    if isinstance(err, UnstableLoss):
        return {"status": "unstable", "error": str(err)}
    if isinstance(err, devices.Unavailable):
        return {"status": "unavailable", "error": str(err)}
    note = "CUDA-graph capture failed, taken as out of memory: " if devices.is_capture_failure(err) else ""
    return {"status": "oom" if devices.is_oom(err) else "error", "error": f"{note}{type(err).__name__}: {err}"[:500]}


def steps_for_window(warmup_times: list[float], protocol: Protocol) -> int:
    """Measured steps per window: as set, or (0) enough to last ``window_s`` at the warm-up's median pace."""
    if protocol.measured_steps:
        return protocol.measured_steps
    pace = statistics.median(warmup_times) if warmup_times else protocol.window_s
    return int(min(max(math.ceil(protocol.window_s / max(pace, 1e-6)), 5), 10_000))


def protocol_values(protocol: Protocol, keys) -> dict:
    """``protocol``'s values of ``keys`` as a row records them: ``host_heap`` is the setting it gives on this
    machine (``keep`` asked for where the C library cannot keep is ``system``)."""
    values = {k: getattr(protocol, k) for k in keys}
    if "host_heap" in values:
        values["host_heap"] = heap.effective(values["host_heap"])
    return values


def config_key(cfg: Config, device: torch.device, protocol: Protocol, threads: int | None = None) -> dict:
    """The columns that identify a measurement: the configuration, device kind, threads and protocol."""
    return {**asdict(cfg), "device_kind": device.type,
            "threads": torch.get_num_threads() if threads is None else threads,
            **protocol_values(protocol, PROTOCOL_KEYS)}


def _base_row(cfg: Config, device: torch.device, protocol: Protocol) -> dict:
    return {**config_key(cfg, device, protocol), "device_name": devices.device_name(device)}


def crashed(cfg: Config, device: torch.device, protocol: Protocol, exitcode: int | None, threads: int) -> dict:
    """The row of a configuration whose worker process died (segfault, OOM killer, os._exit)."""
    return {**config_key(cfg, device, protocol, threads), "device_name": devices.device_name(device),
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "isolation": "worker",
            "status": "crashed", "error": death(exitcode), "exitcode": exitcode}


def death(exitcode: int | None) -> str:
    """How a worker process died, from its exit code (negative: the signal that killed it)."""
    import signal

    if exitcode is not None and exitcode < 0:
        try:
            how = f"killed by signal {signal.Signals(-exitcode).name} ({exitcode})"
        except ValueError:
            how = f"killed by signal {-exitcode}"
    else:
        how = f"exited with code {exitcode} before returning a result"
    return f"worker process {how}"


def _memory(device: torch.device, sampler: telemetry.Sampler, summary: dict) -> dict:
    """Peak device memory and this configuration's peak RSS (MiB): the high-water marks (CUDA); on MPS, which
    has none, the columns named for what they hold (devices.peak_memory_mib) and the largest sample."""
    out = devices.peak_memory_mib(device)
    if "mps_mem_max_mib" in summary:  # MPS has no peak counter: the largest 0.1 s sample, named as such
        out["mps_allocated_max_sampled_mib"] = summary["mps_mem_max_mib"]
    out["peak_rss_mib"] = max(devices.peak_rss_mib(), summary.get("peak_rss_mib", 0.0))
    return out


def measure(cfg: Config, device: torch.device, protocol: Protocol, dataset=None,
            timer: timing.StepTimer | None = None, isolation: str = "in_process") -> dict:
    """Measure one configuration in this process; always returns a row (``status`` ok, oom, unstable or error).

    ``baseline_rss_mib`` is the process before the model is built; ``peak_rss_mib`` its high-water mark, reset
    here where the OS allows (Linux), so it is this configuration's own (``isolation`` records how: "worker",
    a fresh process per configuration, see :mod:`cnnbench.measure.worker`; "in_process"; "in_process_unreset" when the
    high-water mark could not be reset and may belong to an earlier configuration). ``telemetry_series`` and
    ``step_times_s`` ride along in the row for :func:`run_configs` to write to their own files.
    """
    row = _base_row(cfg, device, protocol)
    row["timestamp"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    row.update(status="ok", error="")
    timer = timer or timing.StepTimer(device)
    work, math = None, devices.math_precision(device, cfg.precision, protocol.cudnn_benchmark)
    try:
        math.__enter__()
        devices.empty_cache(device)
        devices.reset_peak_memory(device)
        reset = devices.reset_peak_rss()
        row["isolation"] = isolation if reset or isolation == "worker" else f"{isolation}_unreset"
        row["baseline_rss_mib"] = devices.rss_mib()
        work = Workload(cfg, device, protocol, dataset)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            work.step()  # first step: compilation (if on) and lazy initialisation, timed on its own
            devices.synchronize(device)
            row["first_step_s"] = time.perf_counter() - t0
            warmup_times = []
            for _ in range(max(protocol.warmup_steps - 1, 0 if protocol.measured_steps else 2)):
                t0 = time.perf_counter()
                work.step()
                devices.synchronize(device)
                warmup_times.append(time.perf_counter() - t0)
        n = row["steps_per_window"] = steps_for_window(warmup_times, protocol)
        fallbacks = sorted({str(w.message).split("'")[1] for w in caught if "fall back to run on the CPU" in str(w.message)
                            and "'" in str(w.message)})
        row["cpu_fallback_ops"] = ",".join(fallbacks)
        row["loss_after_warmup"] = work.check_loss()
        step_times, window_times, spans = [], [], []
        faults = heap.minor_faults()
        with telemetry.Sampler(device, protocol.telemetry_interval_s) as sampler, energy.Meter(device) as meter:
            for _ in range(protocol.repeats):
                begin = sampler.elapsed()
                times, wall = timer.window(work.step, n)
                spans.append((begin, sampler.elapsed()))
                step_times.extend(times)
                window_times.append(wall)
                work.check_loss()
        row["page_faults_per_step"] = (heap.minor_faults() - faults) / (n * protocol.repeats)
        row["loss_last"] = work.check_loss()
        row.update(timing.summarize(step_times, window_times, [n] * protocol.repeats,
                                    cfg.batch_size, protocol.seed))
        row["step_time_source"] = timer.source
        summary = sampler.summary()
        row.update({k: v for k, v in summary.items() if k != "mps_mem_max_mib"})
        row.update(meter.summary(n * cfg.batch_size * protocol.repeats))  # energy over the measured windows
        row.update(_memory(device, sampler, summary))
        train_f, fwd_f = flops_per_image(cfg.model, cfg.image_size, cfg.num_classes)
        per_image = train_f if cfg.phase == "train" else fwd_f
        row["gflops_per_image"] = per_image / 1e9
        row["achieved_gflops"] = row["throughput_img_s"] * per_image / 1e9
        row["achieved_tflops"] = row["achieved_gflops"] / 1e3
        row["step_times_s"] = step_times
        row["window_times_s"] = window_times
        row["window_spans_s"] = spans
        row["telemetry_series"] = sampler.series()
        if cfg.compile:
            row["compile_s"] = max(row["first_step_s"] - row["step_time_median_s"], 0.0)
    except Exception as err:  # noqa: BLE001 - every failure becomes a row, the run goes on
        row.update(failure(err))
    finally:
        del work
        devices.release(device)
        math.__exit__(None, None, None)
    return row
