"""One configuration measured: warm-up, then ``repeats`` synchronised windows; a failure is a row with a status."""

from __future__ import annotations

import datetime as dt
import functools
import math
import signal
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import torch
from torch import nn

from cnnbench import data, devices, heap, knobs, models
from cnnbench.devices import energy
from cnnbench.knobs import Setting
from cnnbench.measure import flops, telemetry, timing
from cnnbench.results.schema import PROTOCOL_KEYS

# columns every result frame has, so a table of failures only still has them (empty)
MEASURE_COLUMNS = tuple(
    (
        "throughput_img_s throughput_ci95_img_s throughput_window_min_img_s throughput_window_max_img_s "
        "step_time_median_s step_time_mean_s step_time_std_s n_steps steps_per_window noisy gflops_per_image "
        "achieved_gflops achieved_tflops baseline_rss_mib peak_rss_mib peak_device_mem_mib "
        "peak_device_reserved_mib util_cpu_mean_pct util_device_mean_pct error"
    ).split()
)


@dataclass(frozen=True)
class Config:
    """The workload and every knob's value (``setting``, read as ``cfg.precision``): each a column of the row."""

    model: str
    phase: str  # train | eval
    image_size: int
    num_classes: int
    in_channels: int = 3
    dataset: str = "synthetic"
    setting: Setting = field(default_factory=Setting)

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "setting":
            raise AttributeError(name)
        try:
            return self.setting[name]
        except KeyError:
            raise AttributeError(f"'Config' has no field or knob '{name}'") from None

    @classmethod
    def of(cls, *args, **values) -> Config:
        """A configuration from its fields (in order or by name) and its knobs' values by name."""
        own = {f.name: values.pop(f.name) for f in fields(cls) if f.name in values}
        return cls(*args, **own, setting=Setting(values))

    def replace(self, **changes) -> Config:
        """This configuration with fields or knobs changed."""
        own = {f.name for f in fields(self)}
        setting = self.setting.with_(**{k: v for k, v in changes.items() if k not in own})
        return replace(self, setting=setting, **{k: v for k, v in changes.items() if k in own})

    def columns(self) -> dict:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "setting"}
        return {**own, **self.setting}


def config(p, model: str, phase: str, variant: dict | None = None, **changes) -> Config:
    """``model``'s configuration in the run of params ``p``, with ``variant``'s and ``changes``'s knobs."""
    dataset, channels, size, classes = models.spec(model).data_for(p.dataset, p.image_size, p.num_classes)
    setting = knobs.for_params(p, variant, batch_size=p.batch_size_for(model)).with_(**changes)
    return Config(model, phase, size, classes, channels, dataset, setting)


HOST_BOUND = "host-bound (launch overhead)"
HOST_BOUND_BELOW_PCT = 50.0  # a device busy less of its step than this waits on the host's launches
BUSY_STEPS = 3  # steps profiled for the device's busy time after the windows, in a first process


def step_bound(busy_pct: float) -> str:
    """What bounds a step whose device is busy ``busy_pct`` % of it: the host's launches, or the device ("" unknown)."""
    return "" if not math.isfinite(busy_pct) else HOST_BOUND if busy_pct < HOST_BOUND_BELOW_PCT else "device"


class UnstableLoss(RuntimeError):
    """The loss became NaN or infinite."""


_FLOPS: dict[tuple[str, int, int], tuple[float, float]] = {}


def flops_per_image(model: str, image_size: int, num_classes: int) -> tuple[float, float]:
    """(training, forward) FLOPs per image at the resolution run, counted on the CPU once per process."""
    key = (model, image_size, num_classes)
    if key not in _FLOPS:
        c = flops.complexity(model, image_size, num_classes, with_fvcore=False)
        _FLOPS[key] = (c.gflops_train * 1e9, c.gflops_fwd * 1e9)
    return _FLOPS[key]


class Workload:
    """``with Workload(cfg, device, p) as work:`` ``cfg``'s model, optimizer, data and ``step`` under its knobs;
    ``model``: a builder stepped on the caller's batches (06's fine-tuning), ``lr`` in place of the params'."""

    def __init__(self, cfg: Config, device, p, dataset=None, optimizer: str = "sgd", model=None, lr=None):
        build = functools.partial(
            models.build, cfg.model, num_classes=cfg.num_classes, image_size=cfg.image_size
        )
        self.build, self.own_batches, self.lr = model or build, model is None, lr or p.lr
        self.backend = timing.backend_of(device)
        self.cfg, self.p, self.dataset, self.optimizer_name = cfg, p, dataset, optimizer
        self.device = self.backend.device
        self.last_loss: torch.Tensor | None = None
        self._settings = None

    def __enter__(self) -> Workload:
        self._settings = knobs.applied(self.cfg.setting, self.backend, shape=self.cfg)
        self._settings.__enter__()
        try:
            self._build(self.cfg, self.p, self.backend)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _build(self, cfg: Config, p, b: devices.Backend) -> None:
        if reason := knobs.lacks("precision", cfg.precision, b.hardware()):
            raise devices.Unavailable(reason)  # a knob value this device lacks is never an error row
        torch.manual_seed(p.seed)
        model = self.build().to(self.device)
        if cfg.memory_format == "channels_last":
            model = model.to(memory_format=torch.channels_last)
        self.model = model.train(cfg.phase == "train")
        self.forward = torch.compile(model) if cfg.compile != "off" else model
        self.optimizer = models.make_optimizer(self.optimizer_name, model.parameters(), self.lr, p.momentum)
        self.loss_fn = nn.CrossEntropyLoss()
        self.scaler = b.grad_scaler(cfg.precision)
        if not self.own_batches:  # 06's fine-tuning steps on its own loaders' batches
            return
        if cfg.data_mode == "device":
            # one batch made once on the device: real images when a dataset is given, else synthetic
            if self.dataset is None:
                gen = torch.Generator().manual_seed(p.seed)
                x = torch.randn(
                    cfg.batch_size, cfg.in_channels, cfg.image_size, cfg.image_size, generator=gen
                )
                batch = x, torch.randint(0, cfg.num_classes, (cfg.batch_size,), generator=gen)
            else:
                batch = next(iter(data.loader(self.dataset, cfg.batch_size, 0, False, seed=p.seed)))
            x, y = self.to_device(*batch)
            self.next_batch = lambda: (x, y)
        else:
            images = max(p.synthetic_images, cfg.batch_size)
            ds = self.dataset or data.SyntheticImages(
                images, cfg.in_channels, cfg.image_size, cfg.num_classes, p.seed
            )
            batches = data.cycle(
                data.loader(ds, cfg.batch_size, cfg.workers, b.pin(cfg.pin_memory), seed=p.seed)
            )
            self.next_batch = lambda: self.to_device(*next(batches))

    def __exit__(self, *exc) -> None:
        for name in ("model", "forward", "optimizer", "scaler", "next_batch", "last_loss"):
            self.__dict__.pop(name, None)
        self.backend.release()
        if self._settings is not None:
            settings, self._settings = self._settings, None
            settings.__exit__(*exc)

    def to_device(self, x: torch.Tensor, y: torch.Tensor):
        """A host batch on the device (channels-last when asked); the copy is part of the step."""
        x = self.backend.to_device(x)
        if self.cfg.memory_format == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        return x, self.backend.to_device(y)

    def train_step(self, batch=None) -> None:
        """One training step on ``batch`` (x, y on the device), or on the workload's next batch."""
        x, y = batch if batch is not None else self.next_batch()
        self.optimizer.zero_grad(set_to_none=True)
        with self.backend.autocast(self.cfg.precision):
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
        with torch.inference_mode(), self.backend.autocast(self.cfg.precision):
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


def failure(err: BaseException, device=None) -> dict:
    """The status and message of a failed measurement: unavailable, oom, unstable (non-finite loss) or error."""
    if isinstance(err, UnstableLoss | devices.Unavailable):  # their message is the whole story
        return {"status": "unstable" if isinstance(err, UnstableLoss) else "unavailable", "error": str(err)}
    b = timing.backend_of(device or "cpu")
    return {
        "status": "oom" if b.is_oom(err) else "error",
        "error": f"{b.oom_note(err)}{type(err).__name__}: {err}"[:500],
    }


def steps_for_window(warmup_times: list[float], p) -> int:
    """Steps per window: ``measured_steps`` or more to fill ``min_window_s`` at the warm-up's pace; else ``window_s``."""
    target, least = window_target(p)
    if not target or not warmup_times:
        return least
    steady = statistics.median(warmup_times[len(warmup_times) // 2 :])
    return int(max(min(math.ceil(target / max(steady, 1e-6)), timing.MAX_WINDOW_STEPS), least))


def window_target(p) -> tuple[float, int]:
    """(the seconds a window is filled toward, 0 for none; the least steps it holds): ``min_window_s`` and
    ``measured_steps`` where steps are set, else ``window_s`` and 5."""
    return (p.min_window_s, p.measured_steps) if p.measured_steps else (p.window_s, 5)


def config_key(cfg: Config, device, p, keys=PROTOCOL_KEYS) -> dict:
    """A measurement's key: the workload, device kind, every knob as in force there and the params ``keys``."""
    b = timing.backend_of(device)
    in_force = cfg.replace(**knobs.in_force(cfg.setting, b)).columns()
    return {**in_force, "device_kind": b.kind, **{k: getattr(p, k) for k in keys}}


def now() -> str:
    """The UTC time now, as every row's ``timestamp``."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def base_row(cfg: Config, device, p, keys=PROTOCOL_KEYS) -> dict:
    """The columns every row of ``cfg`` on ``device`` carries, whatever its outcome: its key and the device's name."""
    b = timing.backend_of(device)
    return {**config_key(cfg, b, p, keys), "device_name": b.name()}


def death(exitcode: int | None) -> str:
    """How a worker process died, from its exit code (negative: the signal that killed it)."""
    if exitcode is None or exitcode >= 0:
        return f"worker process exited with code {exitcode} before returning a result"
    try:
        name = f"{signal.Signals(-exitcode).name} ({exitcode})"
    except ValueError:
        name = str(-exitcode)
    return f"worker process killed by signal {name}"


def _memory(b: devices.Backend, summary: dict, warmup_peak: dict) -> dict:
    """Peak device memory over the windows (after the warm-up's reset) and over the run (``..._run_mib``, NaN
    first: NaN), and peak RSS, the high-water mark or the largest sample (MiB), in place of the sampler's."""
    out = b.peak_memory_mib()
    for k in ("peak_device_mem_mib", "peak_device_reserved_mib"):
        out[k.replace("_mib", "_run_mib")] = max(out[k], warmup_peak.get(k, math.nan))
    if "mps_mem_max_mib" in summary:  # no peak counter: the largest 0.1 s sample, named as such
        out["mps_allocated_max_sampled_mib"] = summary["mps_mem_max_mib"]
    out["peak_rss_mib"] = max(devices.peak_rss_mib(), summary.get("peak_rss_mib", 0.0))
    return out


def measure(cfg: Config, device, p, dataset=None, isolation: str = "in_process", busy: bool = True) -> dict:
    """One configuration measured here with the protocol ``p``: always a row, with its series and step times."""
    b = timing.backend_of(device)
    row = {**base_row(cfg, b, p), "timestamp": now(), "status": "ok", "error": ""}
    timer = timing.StepTimer(b)
    try:
        b.empty_cache()
        b.reset_peak_memory()
        reset = devices.reset_peak_rss()
        row["isolation"] = isolation if reset or isolation == "worker" else f"{isolation}_unreset"
        row["baseline_rss_mib"] = devices.rss_mib()
        with Workload(cfg, b, p, dataset) as work, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # the first step (compilation if on, lazy initialisation) timed on its own, then the warm-up's: at
            # least two timed to pace the window with, or one where steps are set
            paced = (1 if p.measured_steps else 2) if window_target(p)[0] else 0
            warmup_times = []
            for _ in range(1 + max(p.warmup_steps - 1, paced)):
                t0 = time.perf_counter()
                work.step()
                b.synchronize()
                warmup_times.append(time.perf_counter() - t0)
            row["first_step_s"] = warmup_times.pop(0)
            warmup_peak = b.peak_memory_mib()
            b.reset_peak_memory()  # the windows' own peak from here
            n = row["steps_per_window"] = steps_for_window(warmup_times, p)
            fallbacks = [str(w.message) for w in caught if "fall back to run on the CPU" in str(w.message)]
            row["cpu_fallback_ops"] = ",".join(sorted({m.split("'")[1] for m in fallbacks if "'" in m}))
            row["loss_after_warmup"] = work.check_loss()
            step_times, window_times, spans, counts = [], [], [], []
            faults = heap.minor_faults()
            floor = p.min_window_s if p.measured_steps else 0.0
            counter = b.energy_counter()  # the one that covers this device's work, or why there is none
            with telemetry.Sampler(b, p.telemetry_interval_s) as sampler, energy.Meter(counter) as meter:
                for _ in range(p.repeats):
                    begin = sampler.elapsed()
                    times, wall = timer.window(work.step, n, floor)
                    spans.append((begin, sampler.elapsed()))
                    step_times.extend(times)
                    window_times.append(wall)
                    counts.append(len(times))
                    work.check_loss()
            row["page_faults_per_step"] = (heap.minor_faults() - faults) / sum(counts)
            row["loss_last"] = work.check_loss()
            summary = sampler.summary()
            row.update(_memory(b, summary, warmup_peak))
            busy_s = b.busy_s(work.step, BUSY_STEPS) if busy else None  # after the windows: untouched
        row.update(timing.summarize(step_times, window_times, counts, cfg.batch_size, p.seed))
        if busy_s is not None:
            row["device_busy_pct"] = 100 * busy_s / BUSY_STEPS / (row["window_time_s"] / row["n_steps"])
            row["step_bound"] = step_bound(row["device_busy_pct"])
        row["step_time_source"] = timer.source
        row.update({k: v for k, v in summary.items() if k not in ("mps_mem_max_mib", "peak_rss_mib")})
        row.update(meter.summary(sum(counts) * cfg.batch_size))  # energy over the measured windows
        per_image = flops_per_image(cfg.model, cfg.image_size, cfg.num_classes)[cfg.phase != "train"]
        row["gflops_per_image"] = per_image / 1e9
        row["achieved_gflops"] = row["throughput_img_s"] * per_image / 1e9
        row["achieved_tflops"] = row["achieved_gflops"] / 1e3
        row.update(
            step_times_s=step_times, window_times_s=window_times, window_spans_s=spans, window_steps=counts
        )
        row["telemetry_series"] = sampler.series()
        if cfg.compile != "off":
            row["compile_s"] = max(row["first_step_s"] - row["step_time_median_s"], 0.0)
    except Exception as err:  # noqa: BLE001 - every failure becomes a row, the run goes on
        row.update(failure(err, b))
    return row
