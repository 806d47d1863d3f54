"""Run parameters: one schema of documented defaults and declared bounds, overridden by a YAML file, then by
overrides; validated once, before any work, a problem a one-line :class:`ParamsError` naming the key."""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import difflib
import functools
import itertools
import math
import os
import re
import stat
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml

from cnnbench import knobs, paths
from cnnbench.knobs import KNOBS, MAX_THREADS

DATASETS = ("synthetic", "tiny_imagenet", "imagenette", "mnist", "cifar10", "imagefolder")
PHASES = ("train", "eval")
DOWNLOADABLE = ("tiny_imagenet", "imagenette", "mnist", "cifar10")  # public datasets download: true fetches
# The pipeline's notebooks in order; the analysis stays last and merges every experiment family before it.
NOTEBOOKS = (
    *"00_setup 01_complexity 02_scenario_a 03_batch_sweep 04_roofline 05_backends 06_transfer".split(),
    *"07_tuning 08_analysis".split(),
)
NUMBERED = {name.partition("_")[0]: name for name in NOTEBOOKS}  # "03": 03's name as NOTEBOOKS spells it
OPTIMIZERS = ("sgd", "adam", "adamw")
DEFAULT_MODELS = ("resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1", "densenet121", "mnist_cnn")
PRECISIONS, COMPILE_MODES = KNOBS["precision"].values, KNOBS["compile"].values
# 05's from-scratch backends -> the device type each runs on (declared here: validation imports no experiment)
SCRATCH_BACKENDS = {
    "numpy": "cpu",
    "numba_cpu": "cpu",
    "numba_cuda": "cuda",
    "cupy": "cuda",
    "torch_cpu": "cpu",
    "torch_cuda": "cuda",
    "torch_mps": "mps",
}
SCRATCH_MODELS = ("mnist_cnn", "mlp")
# The size cap: a params file (a few KiB) of at most 1 MiB, without aliases, so its values are no more than its
# bytes; every number is bounded on its key (In), a quoted value cut to 80 characters
MAX_PARAMS_BYTES, MAX_QUOTED = 1 << 20, 80
MAX_INT = 2**63 - 1  # every integer key fits a C int64 (torch's sizes and counts)
BATCH_MAX = KNOBS["batch_size"].high  # images in one step
THREADS_PER_CPU = 4  # at most 4 threads or processes per logical CPU (above one is oversubscribed: a warning)


class ParamsError(ValueError):
    """A bad parameter: the message is one line naming the source and the key."""

    def __init__(self, message: str):
        one_line = str(message).replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(one_line if len(one_line) <= 1000 else one_line[:1000] + " ...")


def listed(names, most: int = 12) -> str:
    """``names`` joined by commas, the first ``most`` of them and how many in all: a list a refusal can hold
    within :class:`ParamsError`'s length and still end with what to do."""
    names = list(names)
    return ", ".join(names) if len(names) <= most else f"{', '.join(names[:most])}, ... ({len(names)} in all)"


def _show(value: Any, limit: int = MAX_QUOTED) -> str:
    """``value`` as a message quotes it: its repr cut to ``limit`` characters with the full length said."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4300-digit repr limit
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def safe_name_error(name: str) -> str | None:
    """Why ``name`` cannot be a run folder's name (a path, '..', odd characters), or None when it can."""
    if SAFE_NAME.fullmatch(name) and ".." not in name:
        return None
    return (
        f"{_show(name)} is not a safe run name (1 to 100 letters, digits, '-', '_' or '.', starting with a letter or "
        "digit; no '..')"
    )


def _suggest(name: str, valid: typing.Sequence[str], what: str) -> str:
    """ "did you mean x, y?" and the first valid names."""
    close = difflib.get_close_matches(str(name)[:200], valid, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return f"{hint}valid {what}: {', '.join(valid[:8])}{', ...' if len(valid) > 8 else ''}"


# --- what a key's type declares beside it (``Annotated[int, In(1, 1000, "a thousand")]``), checked by _problem
@dataclass(frozen=True)
class In:
    """A number from ``lo`` (``gt``: above it) to ``hi``, ``why`` saying why not more."""

    lo: float
    hi: float = MAX_INT
    why: str = ""
    gt: bool = False

    def problem(self, v: float) -> str:
        if self.lo < v <= self.hi or (v == self.lo and not self.gt):
            return ""
        most = f" and at most {self.hi:,}" + (f" ({self.why})" if self.why else "")
        most = most if self.hi < MAX_INT or v > self.hi else ""
        return f"must be {'>' if self.gt else '>='} {self.lo}{most}, got {_show(v)}"


@dataclass(frozen=True)
class Names:
    """A name among ``allowed`` (a tuple, or a function giving them); ``what``: the kind of name, for the message."""

    allowed: Any
    what: str = ""

    def problem(self, name: str) -> str:
        allowed = self.allowed() if callable(self.allowed) else self.allowed
        if name in allowed:
            return ""
        if self.what:
            return f"names unknown {self.what} {_show(name)}; {_suggest(name, allowed, f'{self.what}s')}"
        return f"is {_show(name)}; allowed: {', '.join(map(str, allowed))}"


@dataclass(frozen=True)
class Filled:
    """A list of one value or more, ``holds`` among them where given (``why``: what needs it)."""

    holds: Any = None
    why: str = ""

    def problem(self, values: list) -> str:
        if self.holds is not None and self.holds not in values:
            return f"must include {_show(self.holds)}: {self.why}, got {_show(values)}"
        return "" if values else "must list at least one value"


def _knob_type(knob: Any) -> Any:
    """A knob's type as a key's is declared: with its allowed values, or an integer's bounds."""
    meta = Names(knob.values) if knob.values else In(knob.low, knob.high) if knob.type is int else None
    return Annotated[knob.type, meta] if meta else knob.type


def _given(value: Any) -> Any:
    """A field whose default is a fresh copy of ``value`` (a list or a mapping)."""
    return field(default_factory=functools.partial(copy.deepcopy, value))


def _model_names() -> list[str]:
    """The models a key may name, the usual ones first."""
    from cnnbench.models import model_names

    valid = model_names()
    return [*(m for m in DEFAULT_MODELS if m in valid), *(m for m in valid if m not in DEFAULT_MODELS)]


Model = Annotated[str, Names(_model_names, "model")]
Models = Annotated[list[Model], Filled()]
PositiveInt, NonNegativeInt = Annotated[int, In(1)], Annotated[int, In(0)]
PositiveFloat, NonNegativeFloat = Annotated[float, In(0, gt=True)], Annotated[float, In(0)]
Seconds = Annotated[float, In(0, 3600, "an hour", gt=True)]
Budget = Annotated[float, In(0, 86400, "a day", gt=True)]
Counts = Annotated[int, In(1, 1000, "a thousand")]
Steps = Annotated[int, In(0, 10**6, "a million steps")]
AtLeastOneStep = Annotated[int, In(1, 10**6, "a million steps")]
Epochs = Annotated[int, In(1, 10**4, "ten thousand epochs")]
# a batch past the device's memory is an out-of-memory row; past this, a mistake
Batch, MaybeBatch = Annotated[int, In(1, BATCH_MAX, "images")], Annotated[int, In(0, BATCH_MAX, "images")]
Phases = Annotated[list[Annotated[str, Names(PHASES)]], Filled()]


@dataclass(frozen=True)
class _Keys:
    """A run's keys that are not knobs: each type declares its bounds (:class:`In`, :class:`Names`,
    :class:`Filled`), each comment documents it (:func:`describe`)."""

    # --- identity and device
    run_name: str = ""  # results go to outputs/<run_name>; "" = <device kind>-<host name>
    device: str = "auto"  # auto (cuda, then mps, then cpu) | cpu | cuda | cuda:N | mps
    expect_device: str = ""  # text the device name must contain (e.g. "T4"); "" = any device
    # the device kind's protocol (cnnbench/devices: protocol) under this file's keys; false: these defaults
    protocol: bool = True
    # seed for model initialisation and synthetic data
    seed: Annotated[int, In(0, 2**32 - 1, "what torch and numpy accept")] = 0
    # --- models and data
    models: Models = _given(list(DEFAULT_MODELS))  # models of the run (torchvision names or mnist_cnn)
    image_size: PositiveInt = 64  # training resolution in pixels (square); Tiny-ImageNet is 64
    num_classes: PositiveInt = 200  # classes of the classifier head; Tiny-ImageNet has 200
    # synthetic | tiny_imagenet | imagenette | mnist | cifar10 | imagefolder
    dataset: Annotated[str, Names(DATASETS)] = "synthetic"
    data_path: str = ""  # root folder of a real dataset (required unless dataset is synthetic)
    download: bool = False  # download the dataset into data_path if it is missing (public datasets only)
    # per-model batch size overriding batch_size (seed 000 ran SqueezeNet at 64, seed 001 MNIST at 512)
    batch_size_per_model: dict[Model, Batch] = _given({"squeezenet1_1": 64, "mnist_cnn": 512})
    # --- measurement protocol
    phases: Phases = _given(["train", "eval"])  # which steps to time
    warmup_steps: Steps = 10  # steps run before the clock starts (seed 003 used 10)
    measured_steps: Steps = 0  # steps in one measured window; 0 = as many as fill window_s
    window_s: Seconds = 3.0  # target length of a measured window when measured_steps is 0 (seconds)
    # the least length of a window of measured_steps (seconds): steps are added at the steady warm-up steps' pace,
    # and more until it has lasted this long (a GPU's fast steps; NVML's energy needs 1 s); 0 = exactly measured_steps
    min_window_s: Annotated[float, In(0, 3600, "an hour")] = 0.0
    repeats: Counts = 3  # measured windows per process of a configuration
    # least fresh worker processes per configuration, in interleaved rounds; the interval spans them
    processes: Counts = 3
    # most processes per configuration while its interval is wider than ci_target_pct
    max_processes: Counts = 6
    # a configuration gets more processes until its 95% interval is within +-this %
    ci_target_pct: PositiveFloat = 5.0
    # seconds per pass (notebook) spent on processes beyond `processes`; 0: none
    adapt_budget_s: Annotated[float, In(0, 86400, "a day")] = 120.0
    # each a setting of any knobs (cnnbench.knobs: precision, memory_format, compile, threads, ...) over the run's
    # defaults; every configuration is measured in each
    variants: Annotated[list[dict], Filled()] = _given(
        [{"precision": "fp32", "memory_format": "nchw", "compile": False}]
    )
    lr: PositiveFloat = 0.01  # SGD learning rate
    momentum: NonNegativeFloat = 0.9  # SGD momentum
    epoch_mode: bool = False  # also time full train and validation epochs over the dataset (seed 000)
    max_batches: Steps = 0  # batches per epoch in epoch mode; 0 = the whole dataset
    # images in the synthetic dataset (loader mode and epochs)
    synthetic_images: Annotated[int, In(1, 10**6, "a million")] = 2048
    # sampling period of CPU/GPU utilisation during measured windows
    telemetry_interval_s: Annotated[float, In(0.01, 10, "seconds")] = 0.1
    # each configuration in a fresh worker process: its own memory peak, a crash is a row
    isolate: bool = True
    # --- batch-size sweep (03)
    sweep: dict[Model, Annotated[list[Batch], Filled()]] = _given(  # model -> batch sizes
        {"squeezenet1_1": [32, 64, 128, 256, 512], "resnet50": [32, 64, 128]}
    )
    # --- roofline (04)
    peak_repeats: Counts = 5  # repetitions of each peak micro-benchmark (the best one is kept)
    # square matmul size for the compute roof; 0 = by device (CUDA 8192, MPS 4096, CPU 2048)
    matmul_size: Annotated[int, In(0, 1 << 15, "three fp32 matrices of 4 GiB")] = 0
    # DRAM working set of the bandwidth sweep is 2 x this (MiB), at least 4x the last cache
    stream_mb: Annotated[int, In(1, 1 << 15, "a 64 GiB sweep buffer")] = 512
    layer_top_k: PositiveInt = 10  # layers shown on the per-layer roofline, by time
    # --- from-scratch backends (05, seeds 001 and 004): keys of cnnbench.scratch go here
    # backends 05 runs: numpy numba_cpu numba_cuda cupy torch_cpu torch_cuda torch_mps (absent -> unavailable)
    scratch_backends: list[Annotated[str, Names(tuple(SCRATCH_BACKENDS))]] = _given(list(SCRATCH_BACKENDS))
    # networks 05 trains: mnist_cnn (seed 001's CNN) | mlp (seed 004's 784-10-10)
    scratch_models: list[Annotated[str, Names(SCRATCH_MODELS)]] = _given(list(SCRATCH_MODELS))
    # synthetic (learnable MNIST-shaped patterns + noise) | mnist (real MNIST)
    scratch_dataset: Annotated[str, Names(("synthetic", "mnist"))] = "synthetic"
    # MNIST folder for scratch_dataset mnist (download: true fetches it)
    scratch_data_path: str = "data/mnist"
    scratch_train_images: NonNegativeInt = 0  # training images used by 05; 0 = all (60,000, as MNIST)
    scratch_test_images: NonNegativeInt = 0  # test images used by 05; 0 = all (10,000, as MNIST)
    scratch_epochs: Epochs = 10  # CNN training epochs per backend (seed 001: 10)
    scratch_batch_size: Batch = 512  # CNN batch size (seed 001: 512); the last partial batch is dropped
    scratch_lr: PositiveFloat = 0.01  # CNN SGD learning rate (seed 001: 0.01)
    scratch_momentum: NonNegativeFloat = 0.9  # CNN SGD momentum (seed 001: 0.9)
    # MLP full-batch gradient steps over the training images (seed 004: 500)
    scratch_mlp_steps: AtLeastOneStep = 500
    scratch_mlp_lr: PositiveFloat = 0.1  # MLP learning rate (seed 004: 0.1)
    scratch_mlp_momentum: NonNegativeFloat = 0.0  # MLP momentum (seed 004: 0, plain gradient descent)
    scratch_mlp_eval_every: PositiveInt = 10  # MLP steps per convergence point (one backends.csv row each)
    # steps timed op by op (device synced per op) after one first call kept apart
    scratch_op_steps: AtLeastOneStep = 5
    # images of the gradient check against PyTorch autograd (fp64 reference)
    scratch_gradcheck_batch: PositiveInt = 64

    # --- transfer learning, step phases, telemetry, scaling (06, seed 002): keys of cnnbench.transfer go here
    # optimizer of the fine-tuning runs (06): sgd (with momentum) | adam | adamw
    optimizer: Annotated[str, Names(OPTIMIZERS)] = "adam"
    # start fine-tuning from torchvision's ImageNet weights (downloaded); false = random init
    pretrained: bool = True
    transfer_model: Model = "densenet121"  # torchvision classifier fine-tuned in 06 (seed 002: DenseNet-121)
    # synthetic (two learnable classes, offline) | oxford_pet | imagefolder
    transfer_dataset: Annotated[str, Names(("synthetic", "oxford_pet", "imagefolder"))] = "synthetic"
    # root of oxford_pet (downloaded there with download: true) or of an ImageFolder
    transfer_data_path: str = ""
    transfer_image_size: PositiveInt = 224  # fine-tuning resolution in pixels (seed 002: 224)
    # learning rates of the grid
    transfer_lrs: Annotated[list[PositiveFloat], Filled()] = _given([0.003, 0.03])
    # batch sizes of the grid
    transfer_batch_sizes: Annotated[list[Batch], Filled()] = _given([64, 128])
    transfer_epochs: Epochs = 20  # epochs per grid point (seed 002: 20)
    # validation accuracy whose time to reach is reported (0..1)
    transfer_target_accuracy: Annotated[float, In(0, 1, gt=True)] = 0.9
    transfer_train_images: NonNegativeInt = 0  # training images used; 0 = all (synthetic: 512)
    transfer_val_images: NonNegativeInt = 0  # validation images used; 0 = all (synthetic: 128)
    transfer_freeze_backbone: bool = False  # train only the new head (false: fine-tune every layer)
    # devices fine-tuned on, side by side: those of the list present here (cpu | cuda | cuda:N | mps)
    transfer_devices: list[str] = _given(["cuda", "mps", "cpu"])
    # least steps per model in the per-phase breakdown pass (as many again unsplit, to check the sum)
    phase_steps: AtLeastOneStep = 5
    # least seconds of measured steps per model in that pass (small models run many steps)
    phase_window_s: Annotated[float, In(0, 3600, "an hour")] = 3.0
    # seconds per model in that pass (warm-up apart) up to which, past the least steps and window, steps are added
    # until the sum check is decided (its 99% interval wholly inside or outside +-5%) or its 95% interval is
    # within +-2%; at or below phase_window_s: none
    phase_max_s: Annotated[float, In(0, 3600, "an hour")] = 30.0
    # batch size of the phase breakdown; 0 = the model's batch size in Scenario A
    phase_batch_size: MaybeBatch = 0
    # models traced by torch.profiler in seed 002's fine-tuning step (optimizer, first of transfer_lrs, transfer_image_size, 2-class head)
    profile_models: list[Model] = _given(["densenet121"])
    # batch size of the profiled fine-tuning steps; 0 = the first of transfer_batch_sizes
    profile_batch_size: MaybeBatch = 0
    profile_steps: AtLeastOneStep = 3  # training steps recorded in each profiler trace (after 1 warm-up step)
    profile_top_k: PositiveInt = 15  # operators listed per pass (forward, backward, optimizer) by self time
    scaling_model: Model = "resnet18"  # model of the DistributedDataParallel scaling run
    scaling_world_sizes: Annotated[  # processes (devices) per run
        list[Annotated[int, In(1, MAX_THREADS, "no machine has more CPUs")]],
        Filled(1, "speedup and efficiency are taken against one process"),
    ] = _given([1, 2])
    # per-device batch size of the scaling run (fixed as devices are added)
    scaling_batch_size: Batch = 32
    scaling_steps: AtLeastOneStep = 10  # measured steps per window of the scaling run (warmup_steps first)
    scaling_repeats: Counts = 3  # measured windows per world size (one launch each): its rate's interval
    # torch.distributed backend: auto (nccl on CUDA, else gloo) | gloo | nccl
    scaling_backend: Annotated[str, Names(("auto", "gloo", "nccl"))] = "auto"

    # --- configuration search and energy (07): keys of cnnbench.tuning go here
    tune_models: list[Model] = _given(["resnet50"])  # models whose fastest configuration is searched
    tune_phases: Phases = _given(["train"])  # steps searched: train | eval
    # racing time per model and phase, seconds (guard and confirmation come on top)
    tune_budget_s: Budget = 60.0
    # successive halving keeps the best 1/tune_eta of the configurations at each rung
    tune_eta: Annotated[int, In(2)] = 2
    # precisions searched where the device supports them natively (the rest are skipped with the reason)
    tune_precisions: list[Annotated[str, Names(PRECISIONS)]] = _given(list(PRECISIONS))
    # torch.compile modes searched where supported (reduce-overhead = CUDA graphs, CUDA only)
    tune_compile_modes: list[Annotated[str, Names(COMPILE_MODES)]] = _given(list(COMPILE_MODES))
    # smallest batch size searched (powers of two up to tune_max_batch_size)
    tune_min_batch_size: Batch = 32
    # largest batch size tried; out of memory backs off from it as timm does
    tune_max_batch_size: Batch = 512
    # best configurations of the race re-measured with the full protocol, beside the default
    tune_confirm_top: Counts = 2
    tune_confirm_window_s: Seconds = 3.0  # length of each confirmation window (repeats windows), seconds
    # warm-up steps before the confirmation windows (the first one compiles)
    tune_confirm_warmup_steps: AtLeastOneStep = 2
    # seconds the correctness guard may spend (its builds and compiles too), before and apart from the race's
    tune_guard_budget_s: Budget = 300.0
    # training steps from the same initialisation whose loss the correctness guard compares
    tune_guard_steps: AtLeastOneStep = 8
    tune_guard_batch_size: Batch = 8  # batch size of the correctness guard's steps
    # largest gap of the guard's last loss from fp32 eager's, as a share of its loss decrease
    tune_guard_tolerance: PositiveFloat = 0.10

    # --- analysis (08)
    analysis_runs: list[str] = _given([])  # runs 08 merges: [] = this run; ["*"] = every user run
    interactive: bool = True  # show ipywidgets controls in JupyterLab (papermill always renders statically)
    # images per train/val epoch in epoch mode (seed 000's "epoch": 6,400); 0 = all
    epoch_images: NonNegativeInt = 0
    # per-model epoch_images overriding it (seed 000 ran 3,200 for SqueezeNet on its T4)
    epoch_images_per_model: dict[Model, PositiveInt] = _given({})
    # --- pipeline
    # which notebooks the pipeline runs
    notebooks: Annotated[list[Annotated[str, Names(NOTEBOOKS)]], Filled()] = field(
        default_factory=lambda: list(NOTEBOOKS)  # NOTEBOOKS as it is then (a test adds one)
    )
    cell_timeout_s: Annotated[int, In(1, 86400, "a day")] = 3600  # papermill's per-cell execution timeout
    # --- explorer (the "measure" button of 08's interactive controls)
    explore_warmup_s: Seconds = 1.0  # warm-up of a quick measurement (seconds, at least two steps)
    explore_window_s: Seconds = 0.5  # length of one measured window of a quick measurement (seconds)
    # windows are added until the 95% interval is within this % of the rate
    explore_ci_pct: PositiveFloat = 10.0
    explore_max_s: Seconds = 20.0  # time cap of a quick measurement; past it the result is marked noisy

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def batch_size_for(self, model: str) -> int:
        return self.batch_size_per_model.get(model, self.batch_size)


# All parameters of a run: the keys above and every run-wide knob (cnnbench.knobs), each a flat key of its own.
Params = dataclasses.make_dataclass(
    "Params",
    [(k.name, _knob_type(k), field(default=k.default)) for k in KNOBS.values() if k.run_wide],
    bases=(_Keys,),
    frozen=True,
)
Params.__module__ = __name__
Params.__doc__ = "All parameters of a run: :class:`_Keys` and the run-wide knobs."
FIELDS = {f.name: f for f in dataclasses.fields(Params)}
_HINTS = typing.get_type_hints(Params)
_DECLARED = typing.get_type_hints(Params, include_extras=True)


def describe() -> dict[str, str]:
    """Key -> its comment in this file (ending its line, else the lines just above it), or its knob's doc."""
    out: dict[str, str] = {k: knob.doc for k, knob in KNOBS.items() if k in FIELDS}
    above: list[str] = []
    for line in Path(__file__).read_text().splitlines():
        head, _, comment = line.partition("  # ")
        name = head.strip().split(":")[0]
        if line.startswith("    ") and not line.startswith("     ") and name in FIELDS and name not in out:
            out[name] = comment.strip() or " ".join(above)
        above = [*above, line.strip()[2:]] if line.strip().startswith("# ") and "---" not in line else []
    return out


def _name(tp: Any) -> str:
    """A declared type as a message names it: ``int``, ``list[str]``."""
    if typing.get_origin(tp) is Annotated:
        return _name(typing.get_args(tp)[0])
    args = ", ".join(_name(a) for a in typing.get_args(tp))
    return f"{(typing.get_origin(tp) or tp).__name__}[{args}]" if args else tp.__name__


def _not_finite(value: Any) -> bool:
    """Whether a float NaN or inf sits in ``value`` (or in a list or mapping inside it)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_not_finite(k) or _not_finite(v) for k, v in value.items())
    return isinstance(value, list) and any(_not_finite(v) for v in value)


def _problem(key: str, value: Any, tp: Any, path: str = "") -> str:
    """Why ``value`` is not what ``tp`` declares, or "": a wrong type named by ``path``, else by ``key``."""
    path, meta = path or key, ()
    if typing.get_origin(tp) is Annotated:
        tp, *meta = typing.get_args(tp)
    base, args = typing.get_origin(tp) or tp, typing.get_args(tp)
    if not isinstance(value, (int, float) if base is float else base) or (
        isinstance(value, bool) and base is not bool
    ):
        nan = "; NaN and inf are not finite: no key takes them" if _not_finite(value) else ""
        return f"key '{path}' must be {_name(tp)}, got {_show(value)} ({type(value).__name__}){nan}"
    if base is float and not abs(value) <= sys.float_info.max:  # NaN, inf, an integer past a float
        return f"key '{key}' must be a finite number, got {_show(value)}"
    inner = enumerate(value) if base is list else value.items() if base is dict and args else ()
    for k, v in inner:
        if base is dict:
            why = _problem(key, k, args[0]) or _problem(f"{key}.{k}", v, args[1], f"{path}.{k}")
        else:
            why = _problem(key, v, args[0], f"{path}[{k}]")
        if why:
            return why
    if base is list and key != "variants":  # two identical variants: an A/A measurement
        if twice := [v for v, n in collections.Counter(value).items() if n > 1]:
            return f"key '{key}' names {_show(twice[0])} twice: measured once, list it once"
    return next((f"key '{key}' {why}" for m in meta if (why := m.problem(value))), "")


def _first(problems: typing.Iterable[Any]) -> None:
    """Raise the first problem of ``problems`` ("" and False are none)."""
    if why := next(filter(None, problems), ""):
        raise ParamsError(why)


def validate(
    raw: dict[str, Any],
    src: str = "params",
    check_device: bool = True,
    overrides: dict[str, Any] | None = None,
    overrides_src: str = "overrides",
    override_names: dict[str, str] | None = None,
) -> Params:
    """:class:`Params` of ``raw`` with ``overrides`` (per-variant knobs there make its one variant); an
    error about a key ``overrides`` sets names ``overrides_src`` or its ``override_names``, not ``src``."""
    overrides = overrides or {}
    if (unknown := next((k for k in overrides if k not in FIELDS and k not in KNOBS), None)) is not None:
        raise ParamsError(f"{overrides_src} {_unknown_key(unknown)}")
    variant = {k: v for k, v in overrides.items() if k in KNOBS and not KNOBS[k].run_wide}
    if variant and "variants" in overrides:
        raise ParamsError(f"{overrides_src} gives 'variants' and {', '.join(variant)}: give one or the other")
    keys = {k: v for k, v in overrides.items() if k not in variant} | (
        {"variants": [variant]} if variant else {}
    )
    try:
        return _validated({**raw, **keys}, check_device)
    except ParamsError as err:  # said by the source of the first key it names that overrides set, else src
        why = str(err).replace("'variants[0].", "'") if variant else str(err)
        ours = sorted((m.start(), k) for k in overrides if (m := re.search(rf"\b{re.escape(k)}\b", why)))
        if not ours:
            raise ParamsError(f"{src}: {err}") from None
        key, label = ours[0][1], (override_names or {}).get(ours[0][1])
        why = f"{label}{why.removeprefix(f'key {key!r}')}" if label else f"{overrides_src} {why}"
        raise ParamsError(why) from None


def _validated(raw: dict[str, Any], check_device: bool) -> Params:
    from cnnbench import devices

    _first(_unknown_key(k) if k not in FIELDS else _problem(k, v, _DECLARED[k]) for k, v in raw.items())
    as_float = {
        k: float(v) if _HINTS[k] is float else [float(x) for x in v]
        for k, v in raw.items()
        if _HINTS[k] in (float, list[float])
    }
    p = Params(**{**raw, **as_float})
    _first(_problems(p, check_device))
    p = dataclasses.replace(p, variants=_numbered(p.variants))
    if check_device:
        for key, expect in (("device", ""), ("expect_device", p.expect_device)):
            try:
                device = devices.resolve(p.device, expect=expect)
            except devices.DeviceError as err:
                raise ParamsError(f"key '{key}': {err}") from None
        _first(_device_problems(p, devices.backend(device).hardware()))
    return p


def _machine_bounds(p: Params) -> typing.Iterator[str]:
    """A buffer one key sizes past half this machine's memory (the rest: OS, torch, the run), and more threads or
    processes than THREADS_PER_CPU per logical CPU: refused before work, not a kernel killed mid-notebook. A key
    sizes 04's three fp32 matmul matrices or 2 x stream_mb sweep, the uint8 synthetic dataset, or a batch's fp32
    input images (at the resolution its key trains)."""
    import psutil

    def largest(value) -> int:  # a batch size, or the largest in a list or mapping of them
        if isinstance(value, dict):
            value = list(value.values())
        return max(map(largest, value), default=0) if isinstance(value, list) else value

    transfer = max(p.image_size, p.transfer_image_size)
    need = {"matmul_size": 12 * p.matmul_size**2, "stream_mb": 2 * 2**20 * p.stream_mb}
    need["synthetic_images"] = 3 * p.image_size**2 * p.synthetic_images
    for key in ("batch_size", "batch_size_per_model", "sweep", "tune_max_batch_size", "scaling_batch_size"):
        need[key] = 12 * p.image_size**2 * largest(getattr(p, key))
    for key in ("transfer_batch_sizes", "phase_batch_size", "profile_batch_size"):
        need[key] = 12 * transfer**2 * largest(getattr(p, key))
    half = psutil.virtual_memory().total / 2
    for key, size in need.items():
        if size > half:
            memory = f"over half this machine's memory ({2 * half / 2**30:.1f} GiB)"
            yield f"key '{key}' needs {size / 2**30:.1f} GiB, {memory}"
    cpus = os.cpu_count() or 1
    for key in ("threads", "workers", "scaling_world_sizes"):
        value = getattr(p, key)
        most = max(value) if isinstance(value, list) else value
        if most > THREADS_PER_CPU * cpus:
            bound = f"{THREADS_PER_CPU * cpus} ({THREADS_PER_CPU} x the {cpus} logical CPUs here)"
            yield f"key '{key}' must be at most {bound}, got {most}"


def _problems(p: Params, check_device: bool) -> typing.Iterator[str]:
    """What is wrong across ``p``'s keys, first first; a check may take those yielded before it as passed."""
    from cnnbench import devices
    from cnnbench.models import spec

    yield p.run_name and (why := safe_name_error(p.run_name)) and f"key 'run_name': {why}"
    if check_device:
        yield from _machine_bounds(p)
    for key, name in [("device", p.device), *(("transfer_devices", d) for d in p.transfer_devices)]:
        if devices.ONE_DEVICE.fullmatch(name.strip().lower()):
            yield f"key '{key}' is {_show(name)}: the {name[:3].upper()} has no index; use {name[:3]}"
    if not p.sweep and (sweep := NUMBERED["03"]) in p.notebooks:
        yield f"key 'sweep' must map at least one model to batch sizes (or leave {sweep} out of 'notebooks')"
    for low, high in (("processes", "max_processes"), ("tune_min_batch_size", "tune_max_batch_size")):
        if (least := getattr(p, low)) > (most := getattr(p, high)):
            yield f"key '{low}' ({least}) exceeds {high} ({most})"
    if 0 < p.scratch_train_images < p.scratch_batch_size and "mnist_cnn" in p.scratch_models:
        yield (
            f"key 'scratch_train_images' ({p.scratch_train_images}) is below scratch_batch_size "
            f"({p.scratch_batch_size}): no full CNN batch"
        )
    if p.transfer_dataset != "synthetic" and not p.transfer_data_path:
        yield f"key 'transfer_data_path' is required for transfer_dataset '{p.transfer_dataset}'"
    if NUMBERED["07"] in p.notebooks and (need := tuning_cell_s(p)) > p.cell_timeout_s:
        yield (
            f"key 'cell_timeout_s' {p.cell_timeout_s} is less than 07's cell takes at least ({need:.0f} s: "
            "tune_models x tune_phases x tune_budget_s and confirmation windows); raise it or search less"
        )
    for i, variant in enumerate(p.variants):
        for k, value in variant.items():
            if k not in KNOBS:
                yield f"key 'variants[{i}]' has unknown key {_show(k)}; {_suggest(k, list(KNOBS), 'knobs')}"
            yield _problem(f"variants[{i}].{k}", KNOBS[k].parse(value), _knob_type(KNOBS[k]))
    # an absent scratch_data_path is refused by the pipeline and 05 (scratch_data_problem), not here
    yield NUMBERED["05"] in p.notebooks and scratch_data_problem(p, absent_ok=True)
    yield from _epoch_problems(p)
    yield from _data_problems(p) if p.dataset != "synthetic" else ()
    for model in p.models:  # a model with data of its own runs at its own resolution (the MNIST CNN at 28x28)
        if not spec(model).own_data and (why := _too_small(model, p.image_size)):
            what = "does not fit" if "divisible" in why else "is too small for"
            yield f"key 'image_size' {p.image_size} {what} model '{model}' ({why})"
    tuned = p.tune_models if NUMBERED["07"] in p.notebooks else []  # 07's guard steps fp32 eager at its batch
    for model, phase in ((m, ph) for m in tuned for ph in p.tune_phases if not spec(m).own_data):
        if why := _too_small(model, p.image_size, p.tune_guard_batch_size, phase == "train"):
            yield (
                f"key 'tune_guard_batch_size' {p.tune_guard_batch_size} is too small for model '{model}' at "
                f"image_size {p.image_size} ({why}); raise it"
            )
    yield from _transfer_problems(p)


def _unknown_key(key: str) -> str:
    if key in KNOBS:
        return f"unknown key {key!r}: it is set per variant; put it under variants: [{{{key}: ...}}]"
    return f"unknown key {_show(key)}; {_suggest(key, list(FIELDS), 'keys')}"


def _numbered(variants: list[dict]) -> list[dict]:
    """``variants``, each repeating an earlier one without naming its ``replica`` numbered by the first replica no
    variant of its setting names or took (an A/A measurement); a variant the same setting as an earlier one (its
    ``replica`` too: the same key measured twice) refused."""
    used = {knobs.Setting(v) for v in variants if "replica" in v}  # a copy takes the first replica not here
    settings, out = [], []
    for i, v in enumerate(variants):
        base = knobs.Setting({**v, "replica": 0})
        if "replica" not in v and base in {w.with_(replica=0) for w in settings}:
            v = {**v, "replica": next(n for n in itertools.count(1) if base.with_(replica=n) not in used)}
        if (s := knobs.Setting(v)) in settings:
            same = f"variants[{settings.index(s)}] ({knobs.label(s, knobs.variant_only())})"
            raise ParamsError(
                f"key 'variants[{i}]' is the same setting as {same}: it would be measured twice under one key; "
                "remove it or give it another replica (an A/A copy)"
            )
        used.add(s)
        settings.append(s)
        out.append(v)
    return out


def variant_notes(p: Params) -> list[str]:
    """One line per variant numbered a copy (``replica``): of which earlier variant, measured as an A/A comparison."""
    bases = [knobs.Setting({**v, "replica": 0}) for v in p.variants]  # each variant's setting, its copy apart
    return [
        f"variants[{i}] repeats variants[{j}]: measured again as its copy (replica {v['replica']}), an A/A "
        "comparison whose ratio should hold 1.0"
        if (j := bases.index(bases[i])) < i
        else f"variants[{i}] is replica {v['replica']} of its setting, though no earlier variant has that setting: "
        "measured once"
        for i, v in enumerate(p.variants)
        if v.get("replica")
    ]


def _device_problems(p: Params, hw) -> typing.Iterator[str]:
    """Every knob value of the run and its variants runs on this device as labelled and changes something."""
    for k, knob in KNOBS.items():
        if knob.run_wide and (why := knobs.lacks(k, getattr(p, k), hw)):
            yield f"key '{k}' {getattr(p, k)!r}: {why}"
    for i, variant in enumerate(p.variants):
        within = dataclasses.replace(p, **{k: v for k, v in variant.items() if KNOBS[k].run_wide})
        for k, value in variant.items():
            why = knobs.lacks(k, value, hw) or (value != getattr(p, k, value) and knobs.inert(k, hw, within))
            yield why and f"key 'variants[{i}].{k}' {value!r}: {why}"


def _transfer_problems(p: Params) -> typing.Iterator[str]:
    """06's devices and its image folder (oxford_pet may be downloaded when the run starts; a folder must exist)."""
    from cnnbench import devices

    for spec in p.transfer_devices:
        if not devices.SPEC.fullmatch(spec):
            yield f"key 'transfer_devices' has unknown device {_show(spec)}; use {devices.SPEC_NAMES}"
    if p.transfer_dataset == "imagefolder":
        from cnnbench.data import _class_dirs

        root = Path(p.transfer_data_path).expanduser()
        try:
            splits = [root / s for s in ("train", "val", "test") if (root / s).is_dir()]
            n = len(_class_dirs(splits[0] if len(splits) >= 2 else root)) if root.is_dir() else -1
            problem = "" if n >= 2 else f"holds {n} class folder(s): fine-tuning needs at least two"
            problem = "does not exist" if n < 0 else problem
        except OSError as err:
            problem = f"cannot be read ({err.strerror or type(err).__name__})"
        yield problem and f"key 'transfer_data_path': folder {_show(p.transfer_data_path)} {problem}"


def tuning_confirm_s(p: Params, start_s: float = 0.0, step_s: float = 0.0) -> float:
    """07's confirmation of one search: ``processes`` interleaved rounds of the default and ``tune_confirm_top``
    candidates, each a start (``start_s``), a warm-up of ``step_s`` steps and ``repeats`` windows."""
    each = start_s + p.tune_confirm_warmup_steps * step_s + p.repeats * p.tune_confirm_window_s
    return max(p.processes, 1) * (p.tune_confirm_top + 1) * each


def tuning_cell_s(p: Params) -> float:
    """The least time 07's one cell takes: per search, its race's budget and the confirmation's measured windows."""
    return len(p.tune_models) * len(p.tune_phases) * (p.tune_budget_s + tuning_confirm_s(p))


@functools.lru_cache(maxsize=256)
def _too_small(model: str, image_size: int, batch: int = 2, train: bool = True) -> str:
    """Why ``model`` cannot run at ``image_size`` ("" if it can): a cached forward pass on the meta device."""
    import torch
    import torchvision

    from cnnbench import models

    def problem() -> str:
        try:
            net = models.build_meta(model, num_classes=10, image_size=image_size).train(train)
        # a constructor that checks the size itself (ViT's patches)
        except (AssertionError, ValueError) as err:
            return (str(err).strip().splitlines() or [type(err).__name__])[0][:120]
        except Exception as err:  # noqa: BLE001 - a model that cannot even be built says so, not "too small"
            raise ParamsError(
                f"model '{model}' could not be built to check its image size ({type(err).__name__}: "
                f"{str(err).strip().splitlines()[0][:120] if str(err).strip() else ''})"
            ) from None
        try:
            with torch.no_grad():
                net(torch.empty(batch, models.spec(model).in_channels, image_size, image_size, device="meta"))
        except (RuntimeError, AssertionError, ValueError) as err:
            return (str(err).strip().splitlines() or [type(err).__name__])[0][:120]
        return ""

    key = [model, image_size, batch, train, torch.__version__, torchvision.__version__]
    return paths.cached("size-check", key, problem, (models, sys.modules[__name__]))


def _model_dataset(p: Params, model: str) -> str:
    """The dataset ``model`` runs on in this run (:meth:`cnnbench.models.ModelSpec.data_for`)."""
    from cnnbench.models import spec

    return spec(model).data_for(p.dataset, p.image_size, p.num_classes)[0]


def _batch_uses(p: Params) -> list[tuple[str, str, int, set[str]]]:
    """(model, key, batch size, splits) of every measurement drawing whole batches from the run's dataset."""

    def splits(phases) -> set[str]:
        return {"train" if phase == "train" else "val" for phase in phases}

    def key(model: str) -> str:
        return f"batch_size_per_model.{model}" if model in p.batch_size_per_model else "batch_size"

    uses = [
        (m, key(m), p.batch_size_for(m), splits(p.phases) | ({"train", "val"} if p.epoch_mode else set()))
        for m in p.models
    ]
    if NUMBERED["03"] in p.notebooks:
        uses += [(m, f"sweep.{m}", bs, splits(p.phases)) for m, sizes in p.sweep.items() for bs in sizes]
    if NUMBERED["07"] in p.notebooks:
        uses += [
            (m, "tune_max_batch_size", p.tune_max_batch_size, splits(p.tune_phases)) for m in p.tune_models
        ]
    return uses


def _epoch_problems(p: Params) -> typing.Iterator[str]:
    """An epoch of fewer images than one batch would hold no batch (recorded ``ok`` with 0 images)."""
    for model in p.models if p.epoch_mode else []:
        bs = p.batch_size_for(model)
        key = f"epoch_images_per_model.{model}" if model in p.epoch_images_per_model else "epoch_images"
        cap = p.epoch_images_per_model.get(model, p.epoch_images)
        one = f"below one batch of model '{model}' ({bs} images): its"
        yield 0 < cap < bs and f"key '{key}' ({cap}) is {one} epochs would hold no batch"
        if _model_dataset(p, model) == "synthetic" and p.synthetic_images < bs:
            yield f"key 'synthetic_images' ({p.synthetic_images}) is {one} synthetic epochs would hold no batch"


def _data_problems(p: Params) -> typing.Iterator[str]:
    """The real dataset: its folder, layout, classes and sizes, as far as they are known before loading it."""
    from cnnbench import data
    from cnnbench.models import spec

    yield not p.data_path and f"key 'data_path' is required for dataset '{p.dataset}'"
    root, folder = Path(p.data_path).expanduser(), _show(p.data_path)
    try:
        if not root.exists() and not p.download:
            yield f"key 'data_path': folder {folder} does not exist (set download: true to fetch it)"
        problem = data.layout_problem(p.dataset, root) if root.exists() else "absent"
        if problem and p.download and p.dataset not in DOWNLOADABLE:
            yield f"key 'download': {p.dataset} cannot be downloaded (only {', '.join(DOWNLOADABLE)} can)"
        yield problem and not p.download and f"key 'data_path': {problem}"
        users = [u for u in _batch_uses(p) if _model_dataset(p, u[0]) == p.dataset]
        # to be downloaded: a public dataset's own count of classes
        classes = data.CLASSES.get(p.dataset) if problem else data.dataset_classes(p.dataset, root)
        # a model with data of its own keeps its classes
        head = [m for m, *_ in users if not spec(m).own_data]
        own = all(p.num_classes == spec(m).reference_classes for m in head)  # their own head, as seed 003 ran
        if classes not in (None, p.num_classes) and head and not (own and classes < p.num_classes):
            yield f"key 'num_classes' {p.num_classes} does not match the {classes} classes of {p.dataset} at {folder}"
        most = max((bs for _, _, bs, _ in users), default=0)
        size = functools.cache(lambda split: data.split_size(p.dataset, root, split, at_most=most))
        for model, key, bs, splits in users if not problem else []:  # to be downloaded: sizes not known yet
            for split in sorted(splits):
                if (n := size(split)) is not None and n < bs:
                    yield f"key '{key}' {bs} is more than the {n} images of {folder}'s {split} split ('{model}')"
    except OSError as err:  # a name too long, a folder that cannot be listed
        yield f"key 'data_path': {folder} cannot be read ({err.strerror or type(err).__name__})"


def run_data_problem(p: Params) -> str:
    """Data a notebook of this run would find missing only once it starts (05's MNIST, 06's pets), or ""."""
    from cnnbench import data

    pets = NUMBERED["06"] in p.notebooks and p.transfer_dataset == "oxford_pet"
    mnist = NUMBERED["05"] in p.notebooks and p.scratch_dataset == "mnist"
    if NUMBERED["05"] in p.notebooks and (why := scratch_data_problem(p)):
        return why
    if pets and not p.download and not Path(p.transfer_data_path).expanduser().exists():
        return f"key 'transfer_data_path': {_show(p.transfer_data_path)} does not exist (set download: true)"
    pets = pets and not Path(p.transfer_data_path, "oxford-iiit-pet").is_dir()
    fetched = [  # a download whose host does not answer: before, not inside, a notebook
        ("data_path", p.dataset, p.data_path, p.dataset in DOWNLOADABLE),
        ("scratch_data_path", "mnist", p.scratch_data_path, mnist),
        ("transfer_data_path", "oxford_pet", p.transfer_data_path, pets),
    ]
    for key, name, folder, used in fetched if p.download else []:
        absent = used and (name == "oxford_pet" or data.layout_problem(name, folder))
        if why := absent and data.download_problem(name, folder):
            return f"key '{key}': {why}"
    return ""


def scratch_data_problem(p: Params, absent_ok: bool = False) -> str:
    """Why 05 cannot read real MNIST at ``scratch_data_path`` (absent without ``download``, or not MNIST), or ""."""
    from cnnbench import data

    if p.scratch_dataset != "mnist" or p.download:
        return ""
    try:
        root = paths.resolve(p.scratch_data_path)
        if not root.exists():
            where = f"key 'scratch_data_path': folder {_show(p.scratch_data_path)}"
            return "" if absent_ok else f"{where} does not exist (set download: true to fetch MNIST)"
        problem = data.layout_problem("mnist", root)
    except (OSError, RuntimeError) as err:  # a name too long, a link loop, a folder that cannot be listed
        return f"key 'scratch_data_path': {_show(p.scratch_data_path)} cannot be read ({err})"
    return f"key 'scratch_data_path': {problem}" if problem else ""


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing an alias (a document is no larger than its bytes) and a repeated key."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            line = self.peek_event().start_mark.line + 1
            raise ParamsError(f"line {line} uses an alias (*name): write the value out instead")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node in (k for k, _ in node.value if isinstance(k, yaml.ScalarNode)):  # others: refused later
            key, line = (key_node.tag, key_node.value), key_node.start_mark.line + 1
            if key in seen:
                raise ParamsError(
                    f"duplicate key {_show(key[1])} at lines {seen[key]} and {line} (the last would win)"
                )
            seen[key] = line
        return super().construct_mapping(node, deep)


def _load_yaml(text: str, where: str) -> Any:
    """``text`` read by :class:`_ParamsLoader`; any problem a :class:`ParamsError` starting with ``where``."""
    try:
        return yaml.load(text, Loader=_ParamsLoader)
    except ParamsError as err:  # an alias or a duplicate key
        why = str(err)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        why = f"malformed YAML{at}: {getattr(err, 'problem', None) or str(err).splitlines()[0]}"
    except RecursionError:  # the composer recurses per level: thousands of '[' nest past Python's stack
        why = "the document is nested too deeply"
    except ValueError as err:  # PyYAML's int() past Python's 4300 digits, a timestamp such as 2024-13-45
        why = f"a value cannot be read: {_show(str(err).splitlines()[0])}"
    raise ParamsError(f"{where}: {why}")


def parse_overrides(pairs: typing.Iterable[str], src: str = "--set") -> dict[str, Any]:
    """``["batch_size=64", "models=[resnet18]"]`` -> a dict; each value is read as YAML."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"{src} {_show(pair)}: expected key=value")
        if key.strip() in out:
            raise ParamsError(f"{src} {_show(pair)}: key {key.strip()!r} is given twice (the last would win)")
        out[key.strip()] = _load_yaml(value, f"{src} {_show(pair)}")
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The params file at ``path``: at most :data:`MAX_PARAMS_BYTES` of UTF-8 holding a YAML mapping."""
    path, give = Path(path), "give a .yaml file, e.g. params/local.yaml"
    if path.is_dir():
        raise ParamsError(f"{path}: is a folder, not a params file ({give})")
    try:  # O_NONBLOCK: a FIFO opens without waiting for a writer (and is refused)
        with open(
            path, "rb", opener=lambda name, flags: os.open(name, flags | getattr(os, "O_NONBLOCK", 0))
        ) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ParamsError(f"{path}: is not a regular file (a device, FIFO or socket): {give}")
            raw = f.read(MAX_PARAMS_BYTES + 1)
    except OSError as err:  # /proc/self/mem: a regular file whose read fails
        why = "not found" if isinstance(err, FileNotFoundError) else f"cannot be read ({err.strerror or err})"
        raise ParamsError(f"{path}: params file {why}") from None
    if len(raw) > MAX_PARAMS_BYTES:
        raise ParamsError(f"{path}: params file too large (more than {MAX_PARAMS_BYTES} bytes)")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw:  # Notepad's and PowerShell's '>' UTF-16
        raise ParamsError(f"{path}: is UTF-16 or UTF-32 text (it holds NUL bytes): save it as UTF-8")
    try:
        data = _load_yaml(raw.decode("utf-8-sig"), str(path))
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        why = f"is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}): save it as UTF-8"
        raise ParamsError(f"{path}: {why}") from None
    if data is not None and not isinstance(data, dict):
        raise ParamsError(
            f"{path}: expected a mapping of key: value at the top level, got {type(data).__name__}"
        )
    return data or {}


def resolved_path(option: str, given: str, resolve=lambda p: Path(p).expanduser().resolve()) -> Path:
    """``resolve(given)`` (the path option ``option`` names), or a one-line ParamsError."""
    try:
        return resolve(given)
    except (OSError, RuntimeError) as err:
        why = getattr(err, "strerror", None) or str(err)
        why = "a link that points back to itself" if "loop" in str(err).lower() else why
        raise ParamsError(f"{option} {_show(given)}: cannot be followed ({why})") from None


def resolved_folder(option: str, given: str, create: bool = False) -> Path:
    """The folder the path option ``option`` names, or a one-line ParamsError: a link loop, a file, a folder that
    cannot be read, or (``create``) made and written."""
    folder = resolved_path(option, given)
    if create and (problem := paths.folder_problem(folder, option)):
        raise ParamsError(problem)
    if not create and not folder.is_dir():
        raise ParamsError(f"{option} {folder} is not a folder of runs")
    return folder


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line instead of the whole usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """An argparse ``type``: a positive integer, else a one-line usage error."""
    if not re.fullmatch(r"\+?\d+", text.strip()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text[:40]}")
    return int(text)


def protocol(device: Any, hardware=None) -> dict:
    """The protocol of ``hardware``, else of ``device`` here, else of its kind; {} for no device."""
    from cnnbench import devices

    if hardware is not None:
        return devices.backend_class(hardware.kind).protocol_for(hardware)
    spec = device.strip().lower() if isinstance(device, str) else ""
    try:
        backend = devices.backend(devices.resolve(spec))
    except devices.DeviceError:
        kind = spec.split(":")[0]
        return devices.backend_class(kind).protocol_for(None) if kind in devices.KINDS else {}
    return backend.protocol_for(backend.hardware())


def load(
    path: str | Path,
    overrides: dict[str, Any] | None = None,
    check_device: bool = True,
    overrides_src: str = "overrides",
    override_names: dict[str, str] | None = None,
    hardware=None,
) -> Params:
    """Defaults, then the device's :func:`protocol`, the YAML at ``path``, ``overrides``; validated."""
    overrides, given = overrides or {}, read_yaml(path)
    device = {**given, **overrides}.get("device", Params().device)
    base = protocol(device, hardware) if {**given, **overrides}.get("protocol", True) else {}
    p = validate({**base, **given}, str(path), check_device, overrides, overrides_src, override_names)
    per = _shadowing(p)
    if per and "batch_size" in overrides:  # a --set batch_size that no measurement would use
        raise ParamsError(
            f"{overrides_src} key 'batch_size' {p.batch_size} changes nothing: batch_size_per_model sets every "
            f"model this run measures ({per}); set batch_size_per_model instead"
        )
    if per and "batch_size" in given:  # recorded as the default: nothing ran at it
        p = dataclasses.replace(p, batch_size=Params().batch_size)
    return p


def _shadowing(p: Params) -> str:
    """The models with their batch sizes when batch_size_per_model sets every model measured, else ""."""
    used = {*p.models, *p.tune_models, *p.profile_models}
    if not used or not used <= set(p.batch_size_per_model):
        return ""
    return ", ".join(f"{m}: {p.batch_size_per_model[m]}" for m in sorted(used))


def notes(path: str | Path, p: Params) -> list[str]:
    """One-line notes on the params file ``path`` that :func:`load` made ``p`` of: it sets no keys (the run uses
    the defaults); its own batch_size is used by no model measured (``p`` records the default instead)."""
    given, default = read_yaml(path), Params().batch_size
    if not given:
        return [f"{path} sets no keys: running with the defaults"]
    if not (per := _shadowing(p)) or given.get("batch_size", default) == default:
        return []  # load refuses a --set batch_size shadowed so
    return [
        f"warning: {Path(path).name} key 'batch_size' {given['batch_size']} is used by no model this run measures "
        f"(batch_size_per_model sets every one: {per}, from the file or the device's protocol); it is not recorded "
        "as this run's: set batch_size_per_model: {} (or protocol: false) to measure at it"
    ]


def table(p: Params):
    """Every key with its value in force, its default, whether it differs, and what it means (a DataFrame)."""
    import pandas as pd

    docs, defaults = describe(), Params()
    rows = [(k, v := getattr(p, k), d := getattr(defaults, k), v != d, docs.get(k, "")) for k in FIELDS]
    return pd.DataFrame(rows, columns=["key", "value", "default", "changed", "meaning"]).set_index("key")
