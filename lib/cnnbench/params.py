"""Run parameters: one schema with documented defaults, overridden by a YAML file, then by overrides.

Every key a params file may hold is a field of :class:`Params`. Loading validates everything once, before any
work starts, and stops with a one-line :class:`ParamsError` naming the bad key (types, bounds, names, devices,
datasets). A params file is a regular UTF-8 file of at most 1 MiB whose YAML repeats no key and expands to at
most :data:`MAX_YAML_NODES` values; a value quoted in a message is cut to :data:`MAX_QUOTED` characters."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
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

from cnnbench.knobs import KNOBS

DATASETS = ("synthetic", "tiny_imagenet", "imagenette", "mnist", "cifar10", "imagefolder")
PHASES = ("train", "eval")
OPTIMIZERS = ("sgd", "adam", "adamw")
# public datasets that download: true fetches
DOWNLOADABLE = ("tiny_imagenet", "imagenette", "mnist", "cifar10")
TRANSFER_DATASETS = ("synthetic", "oxford_pet", "imagefolder")
SCALING_BACKENDS = ("auto", "gloo", "nccl")
# The pipeline's notebooks in order; the analysis stays last and merges every experiment family before it.
NOTEBOOKS = tuple(
    (
        "00_setup 01_complexity 02_scenario_a 03_batch_sweep 04_roofline 05_backends 06_transfer 07_tuning "
        "08_analysis"
    ).split()
)
MIN_TELEMETRY_INTERVAL_S = 0.01  # psutil's CPU counters tick every 10 ms
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
# A key's lower bound, declared by its type in the schema (a list's or mapping's: each value's)
PositiveInt, NonNegativeInt = Annotated[int, "> 0"], Annotated[int, ">= 0"]
PositiveFloat, NonNegativeFloat = Annotated[float, "> 0"], Annotated[float, ">= 0"]


# Bounds checked before any work, so that nothing overflows, hangs or fills memory once a notebook has started
MAX_PARAMS_BYTES = 1 << 20  # a params file is a few KiB; past 1 MiB it is not one
MAX_YAML_NODES = 10_000  # values a params document may expand to, an alias counted every time it is used
MAX_YAML_DEPTH = 50  # nesting of a params document (the schema nests three levels)
MAX_INT = 2**63 - 1  # every integer key fits a C int64 (torch's sizes and counts)
MAX_SEED = 2**32 - 1  # numpy's legacy seeds and torch.manual_seed take 0 .. 2**32-1
MAX_THREADS = 4096  # no machine torch runs on has more logical CPUs; torch itself stops at 2**31-1
THREADS_PER_CPU = 4  # at most 4 threads per logical CPU here (above one is oversubscribed: a warning)
MAX_QUOTED = 80  # characters of a value quoted in a message


class ParamsError(ValueError):
    """A bad parameter: the message is one line naming the source and the key."""

    def __init__(self, message: str):
        one_line = str(message).replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(one_line if len(one_line) <= 1000 else one_line[:1000] + " ...")


def _show(value: Any, limit: int = MAX_QUOTED) -> str:
    """``value`` as a message quotes it: its repr cut to ``limit`` characters with the full length said."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int past Python's 4300-digit repr limit inside a list
        text = f"<a {type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def safe_name_error(name: str) -> str | None:
    """Why ``name`` cannot be a run folder's name (a path, '..', odd characters), or None when it can."""
    if SAFE_NAME.fullmatch(name) and ".." not in name:
        return None
    return (
        f"{_show(name)} is not a safe run name: use letters, digits, '-', '_' and '.' only (no '/', no '..', "
        "at most 100 characters, starting with a letter or digit)"
    )


def _suggest(name: str, valid: typing.Sequence[str], what: str) -> str:
    """ "did you mean x, y?" and, for a long list, a count instead of every name."""
    close = difflib.get_close_matches(str(name)[:200], valid, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    if len(valid) <= 12:
        return f"{hint}valid {what}: {', '.join(valid)}"
    return f"{hint}{len(valid)} valid {what}, e.g. {', '.join(valid[:6])}, ..."


def _default_models() -> list[str]:
    return ["resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1", "densenet121", "mnist_cnn"]


@dataclass(frozen=True)
class _Keys:
    """The keys of a run that are not knobs. Field comments are the documentation shown by ``describe()``: the
    comment ending a field's line, else the comment line just above it. A ``Positive``/``NonNegative`` type is the
    key's lower bound (a list's or mapping's: each value's)."""

    # --- identity and device
    run_name: str = ""  # results go to outputs/<run_name>; "" = <device kind>-<host name>
    device: str = "auto"  # auto (cuda, then mps, then cpu) | cpu | cuda | cuda:N | mps
    expect_device: str = ""  # text the device name must contain (e.g. "T4"); "" = any device
    # the device kind's protocol (cnnbench/devices: protocol) under this file's keys; false: these defaults
    protocol: bool = True
    seed: NonNegativeInt = 0  # seed for model initialisation and synthetic data
    # --- models and data
    # models of the run (torchvision names or mnist_cnn)
    models: list[str] = field(default_factory=_default_models)
    image_size: PositiveInt = 64  # training resolution in pixels (square); Tiny-ImageNet is 64
    num_classes: PositiveInt = 200  # classes of the classifier head; Tiny-ImageNet has 200
    dataset: str = "synthetic"  # synthetic | tiny_imagenet | imagenette | mnist | cifar10 | imagefolder
    data_path: str = ""  # root folder of a real dataset (required unless dataset is synthetic)
    download: bool = False  # download the dataset into data_path if it is missing (public datasets only)
    # per-model batch size overriding batch_size (seed 000 ran SqueezeNet at 64, seed 001 MNIST at 512)
    batch_size_per_model: dict[str, PositiveInt] = field(
        default_factory=lambda: {"squeezenet1_1": 64, "mnist_cnn": 512}
    )
    # --- measurement protocol
    phases: list[str] = field(default_factory=lambda: ["train", "eval"])  # which steps to time
    warmup_steps: NonNegativeInt = 10  # steps run before the clock starts (seed 003 used 10)
    measured_steps: NonNegativeInt = 0  # steps in one measured window; 0 = as many as fill window_s
    window_s: PositiveFloat = 3.0  # target length of a measured window when measured_steps is 0 (seconds)
    # the least length of a window of measured_steps (seconds): steps are added at the steady warm-up steps' pace,
    # and more until it has lasted this long (a GPU's fast steps; NVML's energy needs 1 s); 0 = exactly measured_steps
    min_window_s: NonNegativeFloat = 0.0
    repeats: PositiveInt = 3  # measured windows per process of a configuration
    # least fresh worker processes per configuration, in interleaved rounds; the interval spans them
    processes: PositiveInt = 3
    # most processes per configuration while its interval is wider than ci_target_pct
    max_processes: PositiveInt = 6
    # a configuration gets more processes until its 95% interval is within +-this %
    ci_target_pct: PositiveFloat = 5.0
    # seconds per pass (notebook) spent on processes beyond `processes`; 0: none
    adapt_budget_s: NonNegativeFloat = 120.0
    # each a setting of any knobs (cnnbench.knobs: precision, memory_format, compile, threads, ...) over the run's
    # defaults; every configuration is measured in each
    variants: list[dict] = field(
        default_factory=lambda: [{"precision": "fp32", "memory_format": "nchw", "compile": False}]
    )
    lr: PositiveFloat = 0.01  # SGD learning rate
    momentum: NonNegativeFloat = 0.9  # SGD momentum
    epoch_mode: bool = False  # also time full train and validation epochs over the dataset (seed 000)
    max_batches: NonNegativeInt = 0  # batches per epoch in epoch mode; 0 = the whole dataset
    synthetic_images: PositiveInt = 2048  # images in the synthetic dataset (loader mode and epochs)
    # sampling period of CPU/GPU utilisation during measured windows
    telemetry_interval_s: PositiveFloat = 0.1
    # each configuration in a fresh worker process: its own memory peak, a crash is a row
    isolate: bool = True
    # --- batch-size sweep (03)
    # model -> batch sizes
    sweep: dict[str, list[PositiveInt]] = field(
        default_factory=lambda: {"squeezenet1_1": [32, 64, 128, 256, 512], "resnet50": [32, 64, 128]}
    )
    # --- roofline (04)
    peak_repeats: PositiveInt = 5  # repetitions of each peak micro-benchmark (the best one is kept)
    # square matmul size for the compute roof; 0 = by device (CUDA 8192, MPS 4096, CPU 2048)
    matmul_size: NonNegativeInt = 0
    # DRAM working set of the bandwidth sweep is 2 x this (MiB), at least 4x the last cache
    stream_mb: PositiveInt = 512
    layer_top_k: PositiveInt = 10  # layers shown on the per-layer roofline, by time
    # --- from-scratch backends (05, seeds 001 and 004): keys of cnnbench.scratch go here
    # backends 05 runs: numpy numba_cpu numba_cuda cupy torch_cpu torch_cuda torch_mps (absent -> unavailable)
    scratch_backends: list[str] = field(default_factory=lambda: list(SCRATCH_BACKENDS))
    # networks 05 trains: mnist_cnn (seed 001's CNN) | mlp (seed 004's 784-10-10)
    scratch_models: list[str] = field(default_factory=lambda: list(SCRATCH_MODELS))
    # synthetic (learnable MNIST-shaped patterns + noise) | mnist (real MNIST)
    scratch_dataset: str = "synthetic"
    # MNIST folder for scratch_dataset mnist (download: true fetches it)
    scratch_data_path: str = "data/mnist"
    scratch_train_images: NonNegativeInt = 0  # training images used by 05; 0 = all (60,000, as MNIST)
    scratch_test_images: NonNegativeInt = 0  # test images used by 05; 0 = all (10,000, as MNIST)
    scratch_epochs: PositiveInt = 10  # CNN training epochs per backend (seed 001: 10)
    scratch_batch_size: PositiveInt = 512  # CNN batch size (seed 001: 512); the last partial batch is dropped
    scratch_lr: PositiveFloat = 0.01  # CNN SGD learning rate (seed 001: 0.01)
    scratch_momentum: NonNegativeFloat = 0.9  # CNN SGD momentum (seed 001: 0.9)
    # MLP full-batch gradient steps over the training images (seed 004: 500)
    scratch_mlp_steps: PositiveInt = 500
    scratch_mlp_lr: PositiveFloat = 0.1  # MLP learning rate (seed 004: 0.1)
    scratch_mlp_momentum: NonNegativeFloat = 0.0  # MLP momentum (seed 004: 0, plain gradient descent)
    scratch_mlp_eval_every: PositiveInt = 10  # MLP steps per convergence point (one backends.csv row each)
    # steps timed op by op (device synced per op) after one first call kept apart
    scratch_op_steps: PositiveInt = 5
    # images of the gradient check against PyTorch autograd (fp64 reference)
    scratch_gradcheck_batch: PositiveInt = 64

    # --- transfer learning, step phases, telemetry, scaling (06, seed 002): keys of cnnbench.transfer go here
    optimizer: str = "adam"  # optimizer of the fine-tuning runs (06): sgd (with momentum) | adam | adamw
    # start fine-tuning from torchvision's ImageNet weights (downloaded); false = random init
    pretrained: bool = True
    transfer_model: str = "densenet121"  # torchvision classifier fine-tuned in 06 (seed 002: DenseNet-121)
    # synthetic (two learnable classes, offline) | oxford_pet | imagefolder
    transfer_dataset: str = "synthetic"
    # root of oxford_pet (downloaded there with download: true) or of an ImageFolder
    transfer_data_path: str = ""
    transfer_image_size: PositiveInt = 224  # fine-tuning resolution in pixels (seed 002: 224)
    transfer_lrs: list[float] = field(default_factory=lambda: [0.003, 0.03])  # learning rates of the grid
    # batch sizes of the grid
    transfer_batch_sizes: list[PositiveInt] = field(default_factory=lambda: [64, 128])
    transfer_epochs: PositiveInt = 20  # epochs per grid point (seed 002: 20)
    transfer_target_accuracy: float = 0.9  # validation accuracy whose time to reach is reported (0..1)
    transfer_train_images: NonNegativeInt = 0  # training images used; 0 = all (synthetic: 512)
    transfer_val_images: NonNegativeInt = 0  # validation images used; 0 = all (synthetic: 128)
    transfer_freeze_backbone: bool = False  # train only the new head (false: fine-tune every layer)
    # devices fine-tuned on, side by side: those of the list present here (cpu | cuda | cuda:N | mps)
    transfer_devices: list[str] = field(default_factory=lambda: ["cuda", "mps", "cpu"])
    # least steps per model in the per-phase breakdown pass (as many again unsplit, to check the sum)
    phase_steps: PositiveInt = 5
    # least seconds of measured steps per model in that pass (small models run many steps)
    phase_window_s: NonNegativeFloat = 3.0
    # seconds per model in that pass (warm-up apart) up to which, past the least steps and window, steps are added
    # until the sum check is decided (its 99% interval wholly inside or outside +-5%) or its 95% interval is
    # within +-2%; at or below phase_window_s: none
    phase_max_s: NonNegativeFloat = 30.0
    # batch size of the phase breakdown; 0 = the model's batch size in Scenario A
    phase_batch_size: NonNegativeInt = 0
    # models traced by torch.profiler in seed 002's fine-tuning step (optimizer, first of transfer_lrs, transfer_image_size, 2-class head)
    profile_models: list[str] = field(default_factory=lambda: ["densenet121"])
    # batch size of the profiled fine-tuning steps; 0 = the first of transfer_batch_sizes
    profile_batch_size: NonNegativeInt = 0
    profile_steps: PositiveInt = 3  # training steps recorded in each profiler trace (after 1 warm-up step)
    profile_top_k: PositiveInt = 15  # operators listed per pass (forward, backward, optimizer) by self time
    scaling_model: str = "resnet18"  # model of the DistributedDataParallel scaling run
    # processes (devices) per run
    scaling_world_sizes: list[PositiveInt] = field(default_factory=lambda: [1, 2])
    # per-device batch size of the scaling run (fixed as devices are added)
    scaling_batch_size: PositiveInt = 32
    scaling_steps: PositiveInt = 10  # measured steps per window of the scaling run (warmup_steps first)
    scaling_repeats: PositiveInt = 3  # measured windows per world size (one launch each): its rate's interval
    scaling_backend: str = "auto"  # torch.distributed backend: auto (nccl on CUDA, else gloo) | gloo | nccl

    # --- configuration search and energy (07): keys of cnnbench.tuning go here
    # models whose fastest configuration is searched
    tune_models: list[str] = field(default_factory=lambda: ["resnet50"])
    tune_phases: list[str] = field(default_factory=lambda: ["train"])  # steps searched: train | eval
    # racing time per model and phase, seconds (guard and confirmation come on top)
    tune_budget_s: PositiveFloat = 60.0
    tune_eta: int = 2  # successive halving keeps the best 1/tune_eta of the configurations at each rung
    # precisions searched where the device supports them natively (the rest are skipped with the reason)
    tune_precisions: list[str] = field(default_factory=lambda: ["fp32", "tf32", "bf16", "fp16"])
    # torch.compile modes searched where supported (reduce-overhead = CUDA graphs, CUDA only)
    tune_compile_modes: list[str] = field(
        default_factory=lambda: ["off", "default", "max-autotune", "reduce-overhead"]
    )
    # smallest batch size searched (powers of two up to tune_max_batch_size)
    tune_min_batch_size: PositiveInt = 32
    # largest batch size tried; out of memory backs off from it as timm does
    tune_max_batch_size: PositiveInt = 512
    # best configurations of the race re-measured with the full protocol, beside the default
    tune_confirm_top: PositiveInt = 2
    # length of each confirmation window (repeats windows), seconds
    tune_confirm_window_s: PositiveFloat = 3.0
    # warm-up steps before the confirmation windows (the first one compiles)
    tune_confirm_warmup_steps: int = 2
    # seconds the correctness guard may spend (its builds and compiles too), before and apart from the race's
    tune_guard_budget_s: PositiveFloat = 300.0
    # training steps from the same initialisation whose loss the correctness guard compares
    tune_guard_steps: PositiveInt = 8
    tune_guard_batch_size: PositiveInt = 8  # batch size of the correctness guard's steps
    # largest gap of the guard's last loss from fp32 eager's, as a share of its loss decrease
    tune_guard_tolerance: PositiveFloat = 0.10

    # --- analysis (08)
    # runs 08 merges: [] = this run; ["*"] = every user run
    analysis_runs: list[str] = field(default_factory=list)
    interactive: bool = True  # show ipywidgets controls in JupyterLab (papermill always renders statically)
    # images per train/val epoch in epoch mode (seed 000's "epoch": 6,400); 0 = all
    epoch_images: NonNegativeInt = 0
    # per-model epoch_images overriding it (seed 000 ran 3,200 for SqueezeNet on its T4)
    epoch_images_per_model: dict[str, PositiveInt] = field(default_factory=dict)
    # --- pipeline
    notebooks: list[str] = field(default_factory=lambda: list(NOTEBOOKS))  # which notebooks the pipeline runs
    cell_timeout_s: PositiveInt = 3600  # papermill's per-cell execution timeout
    # --- explorer (the "measure" button of 08's interactive controls)
    explore_warmup_s: PositiveFloat = 1.0  # warm-up of a quick measurement (seconds, at least two steps)
    explore_window_s: PositiveFloat = 0.5  # length of one measured window of a quick measurement (seconds)
    # windows are added until the 95% interval is within this % of the rate
    explore_ci_pct: PositiveFloat = 10.0
    explore_max_s: PositiveFloat = 20.0  # time cap of a quick measurement; past it the result is marked noisy

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def batch_size_for(self, model: str) -> int:
        return self.batch_size_per_model.get(model, self.batch_size)


# All parameters of a run: the keys above and every run-wide knob (cnnbench.knobs), each a flat key of its own.
Params = dataclasses.make_dataclass(
    "Params",
    [(k.name, k.type, field(default=k.default)) for k in KNOBS.values() if k.run_wide],
    bases=(_Keys,),
    frozen=True,
)
Params.__module__ = __name__
Params.__doc__ = "All parameters of a run: :class:`_Keys` and the run-wide knobs."
FIELDS = {f.name: f for f in dataclasses.fields(Params)}
_HINTS = typing.get_type_hints(Params)
_BOUNDED = typing.get_type_hints(Params, include_extras=True)


def describe() -> dict[str, str]:
    """Key -> the comment documenting it, read from this file (the schema is the documentation): the comment
    ending its line, else the comment lines just above it; or the knob's own."""
    out: dict[str, str] = {k: knob.doc for k, knob in KNOBS.items() if k in FIELDS}
    above: list[str] = []
    for line in Path(__file__).read_text().splitlines():
        head, _, comment = line.partition("  # ")
        name = head.strip().split(":")[0]
        if line.startswith("    ") and not line.startswith("     ") and name in FIELDS and name not in out:
            out[name] = comment.strip() or " ".join(above)
        above = [*above, line.strip()[2:]] if line.strip().startswith("# ") and "---" not in line else []
    return out


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _matches(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp in (int, float):  # a bool is no number here
        return isinstance(value, int if tp is int else (int, float)) and not isinstance(value, bool)
    if tp in (bool, str, dict):
        return isinstance(value, tp)
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return isinstance(value, list) and all(item is Any or _matches(v, item) for v in value)
    if origin is dict:
        key_t, val_t = typing.get_args(tp)
        return isinstance(value, dict) and all(
            _matches(k, key_t) and _matches(v, val_t) for k, v in value.items()
        )
    return True


def _not_finite(value: Any) -> bool:
    """Whether a float NaN or inf sits in ``value`` (or in a list or mapping inside it)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_not_finite(k) or _not_finite(v) for k, v in value.items())
    return isinstance(value, list) and any(_not_finite(v) for v in value)


def _mismatch(key: str, value: Any, tp: Any) -> str:
    """The message for a ``value`` that does not match ``tp``: the innermost entry that is wrong, by its path
    (``sweep.mnist_cnn[1]``), what it must be, what it is, and whether it is a NaN or inf (YAML's ``.nan``)."""
    origin = typing.get_origin(tp)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(tp) or (Any,)
        bad = next(i for i, v in enumerate(value) if not _matches(v, item))
        return _mismatch(f"{key}[{bad}]", value[bad], item)
    if origin is dict and isinstance(value, dict):
        key_t, val_t = typing.get_args(tp)
        for k, v in value.items():
            if not _matches(k, key_t):
                return _wrong(key, f"a mapping with {_type_name(key_t)} keys", k, "a key")
            if not _matches(v, val_t):
                return _mismatch(f"{key}.{k}", v, val_t)
    return _wrong(key, _type_name(tp), value)


def _wrong(key: str, must: str, got: Any, what: str = "") -> str:
    kind = f"{what}, {type(got).__name__}" if what else type(got).__name__
    nan = "; NaN and inf are not finite: no key takes them" if _not_finite(got) else ""
    return f"key '{key}' must be {must}, got {_show(got)} ({kind}){nan}"


def _out_of_range(value: Any, tp: Any) -> str:
    """Why a number inside ``value`` (which matches ``tp``) cannot be used, or "": one rule for every key, a float
    must be finite (NaN and inf pass every ``<= 0`` check) and an integer must fit an int64."""
    origin = typing.get_origin(tp)
    if tp is float:
        try:
            finite = math.isfinite(float(value))
        except OverflowError:  # an integer too large for a float
            finite = False
        return "" if finite else f"must be a finite number, got {_show(value)}"
    if tp is int:
        return "" if abs(value) <= MAX_INT else f"must be within +-(2**63-1), got {_show(value)}"
    if origin in (list, dict):  # each entry, a mapping's values
        item, entries = (typing.get_args(tp) or (Any,))[-1], value.values() if origin is dict else value
        return next((why for v in entries if (why := _out_of_range(v, item))), "")
    return ""


def _below(key: str, value: Any, tp: Any) -> str:
    """The first number in ``value`` below the bound its type ``tp`` declares (a mapping's entry named by its
    path, ``sweep.resnet50``) as "key 'k' must be ..., got v", or ""."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args:
        return next((why for v in value if (why := _below(key, v, args[0]))), "")
    if origin is dict and args:
        return next((why for k, v in value.items() if (why := _below(f"{key}.{k}", v, args[1]))), "")
    bound = getattr(tp, "__metadata__", ("",))[0]
    if bound == "> 0" and value <= 0:
        return (
            f"key '{key}' must be {'a positive integer' if tp.__origin__ is int else 'positive'}, got {value}"
        )
    return f"key '{key}' must be >= 0, got {value}" if bound == ">= 0" and value < 0 else ""


def _one_of(src: str, key: str, value: str | list[str], allowed: typing.Iterable[str]) -> None:
    for name in value if isinstance(value, list) else [value]:  # a list: each of its names
        if name not in allowed:
            raise ParamsError(f"{src}: key '{key}' is {_show(name)}; allowed: {', '.join(allowed)}")


def _check_models(src: str, key: str, names: typing.Iterable[str]) -> None:
    from cnnbench.models import model_names

    valid = model_names()
    common = [m for m in _default_models() if m in valid]
    for name in names:
        if name not in valid:
            valid = [*common, *(m for m in valid if m not in common)]  # the usual ones first
            raise ParamsError(
                f"{src}: key '{key}' names unknown model {_show(name)}; "
                f"{_suggest(name, valid, 'models (cnnbench.models.model_names())')}"
            )


@functools.lru_cache(maxsize=256)
def _too_small(model: str, image_size: int, batch: int = 2, train: bool = True) -> str:
    """Why ``model`` cannot run at ``image_size`` ("" if it can), from a forward pass of ``batch`` images on the
    meta device (``train``: with auxiliary heads and BatchNorm's batch statistics), kept in the workbook's cache
    (:func:`cnnbench.paths.cached`) for the next process."""
    import torch
    import torchvision

    from cnnbench import models, paths

    key = [model, image_size, batch, train, torch.__version__, torchvision.__version__]
    problem = functools.partial(_meta_forward_problem, model, image_size, batch, train)
    return paths.cached("size-check", key, problem, (models, sys.modules[__name__]))


def _meta_forward_problem(model: str, image_size: int, batch: int, train: bool) -> str:
    import torch

    from cnnbench import models

    try:
        net = models.build_meta(model, num_classes=10, image_size=image_size).train(train)
    except (AssertionError, ValueError) as err:  # a constructor that checks the size itself (ViT's patches)
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


def _check_image_size(src: str, p: Params) -> None:
    from cnnbench.models import spec

    for model in p.models:
        if spec(model).own_data:
            continue  # it runs at its own resolution (the MNIST CNN at 28x28)
        if why := _too_small(model, p.image_size):
            what = "does not fit" if "divisible" in why else "is too small for"
            raise ParamsError(f"{src}: key 'image_size' {p.image_size} {what} model '{model}' ({why})")


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
    if "03_batch_sweep" in p.notebooks:
        uses += [(m, f"sweep.{m}", bs, splits(p.phases)) for m, sizes in p.sweep.items() for bs in sizes]
    if "07_tuning" in p.notebooks:
        uses += [
            (m, "tune_max_batch_size", p.tune_max_batch_size, splits(p.tune_phases)) for m in p.tune_models
        ]
    return uses


def _check_epochs(src: str, p: Params) -> None:
    """An epoch of fewer images than one batch would hold no batch (recorded ``ok`` with 0 images)."""
    if not p.epoch_mode:
        return
    for model in p.models:
        bs = p.batch_size_for(model)
        key = f"epoch_images_per_model.{model}" if model in p.epoch_images_per_model else "epoch_images"
        cap = p.epoch_images_per_model.get(model, p.epoch_images)
        if 0 < cap < bs:
            raise ParamsError(
                f"{src}: key '{key}' ({cap}) is below one batch of model '{model}' ({bs} images): "
                "its epochs would hold no batch"
            )
        if _model_dataset(p, model) == "synthetic" and p.synthetic_images < bs:
            raise ParamsError(
                f"{src}: key 'synthetic_images' ({p.synthetic_images}) is below one batch of model "
                f"'{model}' ({bs} images): its synthetic epochs would hold no batch"
            )


def _check_data(src: str, p: Params) -> None:
    """The real dataset: its folder, layout, classes and sizes, as far as they are known before loading it."""
    try:
        _check_data_folder(src, p)
    except OSError as err:  # a name too long, a folder that cannot be listed
        why = err.strerror or type(err).__name__
        raise ParamsError(f"{src}: key 'data_path': {_show(p.data_path)} cannot be read ({why})") from None


def _check_data_folder(src: str, p: Params) -> None:
    from cnnbench import data

    if not p.data_path:
        raise ParamsError(f"{src}: key 'data_path' is required for dataset '{p.dataset}'")
    root = Path(p.data_path).expanduser()
    if not root.exists() and not p.download:
        raise ParamsError(
            f"{src}: key 'data_path': folder {_show(p.data_path)} does not exist (set "
            "download: true to fetch it)"
        )
    problem = data.layout_problem(p.dataset, root) if root.exists() else "absent"
    if problem and p.download and p.dataset not in DOWNLOADABLE:
        raise ParamsError(
            f"{src}: key 'download': {p.dataset} cannot be downloaded (only {', '.join(DOWNLOADABLE)} "
            f"can), and key 'data_path' {_show(p.data_path)}: "
            + ("does not exist" if problem == "absent" else problem)
        )
    if problem and not p.download:
        raise ParamsError(f"{src}: key 'data_path': {problem}")
    from cnnbench.models import spec

    users = [u for u in _batch_uses(p) if _model_dataset(p, u[0]) == p.dataset]
    if problem:  # to be downloaded: a public dataset's own count of classes
        classes = data.SHAPES[p.dataset].classes if p.dataset in data.SHAPES else None
    else:
        classes = data.dataset_classes(p.dataset, root)
    head = [m for m, *_ in users if not spec(m).own_data]  # a model with data of its own keeps its classes
    own = all(p.num_classes == spec(m).reference_classes for m in head)  # their own head, as seed 003 ran
    if classes is not None and classes != p.num_classes and head and not (own and classes < p.num_classes):
        raise ParamsError(
            f"{src}: key 'num_classes' {p.num_classes} does not match the {classes} classes of "
            f"{p.dataset} at {_show(p.data_path)}"
        )
    if problem:  # to be downloaded: its sizes are not known yet
        return
    most = max((bs for _, _, bs, _ in users), default=0)
    sizes: dict[str, int | None] = {}
    for model, key, bs, splits in users:
        for split in sorted(splits):
            if split not in sizes:
                sizes[split] = data.split_size(p.dataset, root, split, at_most=most)
            n = sizes[split]
            if n is not None and n < bs:
                raise ParamsError(
                    f"{src}: key '{key}' {bs} is more than the {n} images of the {split} split of "
                    f"{p.dataset} at {_show(p.data_path)}: model '{model}' would get no batch (lower "
                    "the batch size or add images)"
                )


def _check_scratch(src: str, p: Params) -> None:
    """Keys of the from-scratch backends (05)."""
    _one_of(src, "scratch_backends", p.scratch_backends, SCRATCH_BACKENDS)
    _one_of(src, "scratch_models", p.scratch_models, SCRATCH_MODELS)
    _one_of(src, "scratch_dataset", p.scratch_dataset, ("synthetic", "mnist"))
    if 0 < p.scratch_train_images < p.scratch_batch_size and "mnist_cnn" in p.scratch_models:
        raise ParamsError(
            f"{src}: key 'scratch_train_images' ({p.scratch_train_images}) is below "
            f"scratch_batch_size ({p.scratch_batch_size}): no full CNN batch"
        )
    # an absent scratch_data_path is refused by the pipeline and 05 (scratch_data_problem), not here
    if "05_backends" in p.notebooks and scratch_data_problem(p, absent_ok=True):
        raise ParamsError(f"{src}: {scratch_data_problem(p, absent_ok=True)}")


def run_data_problem(p: Params) -> str:
    """Data a notebook of this run would find missing only once it starts (05's MNIST, 06's pets), or ""."""
    if "05_backends" in p.notebooks and scratch_data_problem(p):
        return scratch_data_problem(p)
    if (
        "06_transfer" in p.notebooks
        and p.transfer_dataset == "oxford_pet"
        and not p.download
        and not Path(p.transfer_data_path).expanduser().exists()
    ):
        return (
            f"key 'transfer_data_path': folder {_show(p.transfer_data_path)} does not exist (set download: true "
            "to fetch oxford_pet)"
        )
    from cnnbench import data  # a download whose host does not answer: before, not inside, a notebook

    pets = "06_transfer" in p.notebooks and p.transfer_dataset == "oxford_pet"
    mnist = "05_backends" in p.notebooks and p.scratch_dataset == "mnist"
    pets = pets and not Path(p.transfer_data_path, "oxford-iiit-pet").is_dir()
    fetched = [
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
    from cnnbench import data, paths

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


def _unknown_key(key: str) -> str:
    if key in KNOBS:
        return f"unknown key {key!r}: it is set per variant; put it under variants: [{{{key}: ...}}]"
    return f"unknown key {_show(key)}; {_suggest(key, list(FIELDS), 'keys')}"


# Upper bounds of the keys sizing time, memory or processes (where the device is checked, _machine_bounds too)
MEMORY_SHARE = 0.5  # of the machine's memory, what one buffer a key sizes may take (the rest: OS, torch, run)
_WINDOWS = ("window_s", "min_window_s", "phase_window_s", "phase_max_s", "tune_confirm_window_s")
_STEPS = ("warmup_steps", "measured_steps", "phase_steps", "profile_steps", "scaling_steps", "max_batches")
CEILINGS = {
    **dict.fromkeys((*_WINDOWS, "explore_warmup_s", "explore_window_s", "explore_max_s"), (3600, "an hour")),
    **dict.fromkeys(
        ("adapt_budget_s", "tune_budget_s", "tune_guard_budget_s", "cell_timeout_s"), (86400, "a day")
    ),
    "telemetry_interval_s": (10, "a window of seconds gets its samples"),
    **dict.fromkeys(
        ("repeats", "processes", "max_processes", "peak_repeats", "scaling_repeats", "tune_confirm_top"),
        (1000, "a thousand"),
    ),
    **dict.fromkeys(
        (*_STEPS, "tune_guard_steps", "tune_confirm_warmup_steps", "scratch_mlp_steps", "scratch_op_steps"),
        (10**6, "a million steps"),
    ),
    **dict.fromkeys(("scratch_epochs", "transfer_epochs"), (10**4, "ten thousand epochs")),
    **dict.fromkeys(("threads", "workers", "scaling_world_sizes"), (MAX_THREADS, "no machine has more CPUs")),
    "seed": (MAX_SEED, "what torch and numpy accept"),
}


def _machine_bounds(p: Params) -> list[tuple[str, Any, int, str]]:
    """(key, value, bound, why) of each value sized by this machine: a buffer within MEMORY_SHARE of its
    memory, the processes it starts within THREADS_PER_CPU x its logical CPUs."""
    import psutil

    total, cpus = psutil.virtual_memory().total, os.cpu_count() or 1
    room, share = MEMORY_SHARE * total, f"{MEMORY_SHARE:.0%} of this machine's {total / 2**30:.1f} GiB"
    side = {"": p.image_size, "transfer": max(p.image_size, p.transfer_image_size), "scratch": 28}
    batches = [
        ("batch_size", p.batch_size, ""),
        ("tune_max_batch_size", p.tune_max_batch_size, ""),
        ("tune_guard_batch_size", p.tune_guard_batch_size, ""),
        ("scaling_batch_size", p.scaling_batch_size, ""),
        *((f"batch_size_per_model.{m}", bs, "") for m, bs in p.batch_size_per_model.items()),
        *((f"sweep.{m}", bs, "") for m, sizes in p.sweep.items() for bs in sizes),
        *(("transfer_batch_sizes", bs, "transfer") for bs in p.transfer_batch_sizes),
        ("phase_batch_size", p.phase_batch_size, "transfer"),
        ("profile_batch_size", p.profile_batch_size, "transfer"),
        ("scratch_batch_size", p.scratch_batch_size, "scratch"),
    ]
    cores = (THREADS_PER_CPU * cpus, f"{THREADS_PER_CPU} x the {cpus} logical CPUs here")
    return [
        ("matmul_size", p.matmul_size, int((room / 12) ** 0.5), f"three such fp32 matrices take {share}"),
        ("stream_mb", p.stream_mb, int(room / 2**21), f"twice that, the sweep's buffer, takes {share}"),
        ("synthetic_images", p.synthetic_images, int(room / 3 / p.image_size**2), f"they take {share}"),
        *(
            (key, bs, int(room / 12 / side[k] ** 2), f"a batch of {side[k]} px fp32 images takes {share}")
            for key, bs, k in batches
        ),
        ("threads", p.threads, *cores),
        ("workers", p.workers, *cores),
        *(("scaling_world_sizes", w, *cores) for w in p.scaling_world_sizes),
    ]


def _bounds(src: str, p: Params, check_device: bool) -> None:
    """Each key within its bound, no list naming an entry twice, no device index on the CPU or MPS."""
    entries = [
        (k, v, bound, why)
        for k, (bound, why) in CEILINGS.items()
        for v in (getattr(p, k) if isinstance(getattr(p, k), list) else [getattr(p, k)])
    ]
    for key, value, bound, why in entries + (_machine_bounds(p) if check_device else []):
        if value > bound:
            raise ParamsError(f"{src}: key '{key}' must be at most {bound:,} ({why}), got {_show(value)}")
    lists = [(k, getattr(p, k)) for k, tp in _HINTS.items() if typing.get_origin(tp) is list]
    for key, values in [*lists, *((f"sweep.{m}", v) for m, v in p.sweep.items())]:
        twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if twice is not None and key != "variants":  # two identical variants: an A/A measurement
            raise ParamsError(f"{src}: key '{key}' names {_show(twice)} twice: measured once, list it once")
    for key, spec in [("device", p.device), *(("transfer_devices", d) for d in p.transfer_devices)]:
        if re.fullmatch(r"(cpu|mps):\d+", spec.strip().lower()):
            raise ParamsError(
                f"{src}: key '{key}' is {_show(spec)}: the {spec[:3].upper()} has no index; "
                f"use {spec.split(':')[0]}"
            )


def _as_hinted(value: Any, tp: Any) -> Any:
    """Integers given for float keys (or float lists) become floats."""
    if tp is float:
        return float(value)
    return [float(v) for v in value] if tp == list[float] else value


def validate(raw: dict[str, Any], src: str = "params", check_device: bool = True) -> Params:
    """Check a merged mapping of parameters and build :class:`Params`. Raises :class:`ParamsError`."""
    if not isinstance(raw, dict):
        raise ParamsError(
            f"{src}: expected a mapping of key: value at the top level, got {type(raw).__name__}"
        )
    for key, value in raw.items():
        if key not in FIELDS:
            raise ParamsError(f"{src}: {_unknown_key(key)}")
        tp = _HINTS[key]
        if not _matches(value, tp):
            raise ParamsError(f"{src}: {_mismatch(key, value, tp)}")
        if why := _out_of_range(value, tp) or (KNOBS[key].problem(value) if key in KNOBS else ""):
            raise ParamsError(f"{src}: key '{key}' {why}")
        if below := _below(key, value, _BOUNDED[key]):
            raise ParamsError(f"{src}: {below}")
    p = Params(**{k: _as_hinted(v, _HINTS[k]) for k, v in raw.items()})

    if p.run_name and safe_name_error(p.run_name):
        raise ParamsError(f"{src}: key 'run_name': {safe_name_error(p.run_name)}")
    _bounds(src, p, check_device)
    if not p.models:
        raise ParamsError(f"{src}: key 'models' must name at least one model")
    if not p.notebooks:
        raise ParamsError(f"{src}: key 'notebooks' must list at least one of {', '.join(NOTEBOOKS)}")
    if not p.phases:
        raise ParamsError(f"{src}: key 'phases' must list at least one of {', '.join(PHASES)}")
    if not p.sweep and "03_batch_sweep" in p.notebooks:
        raise ParamsError(
            f"{src}: key 'sweep' must map at least one model to batch sizes "
            "(or leave 03_batch_sweep out of 'notebooks')"
        )
    for key in ("models", "batch_size_per_model", "sweep", "epoch_images_per_model"):
        _check_models(src, key, getattr(p, key))
    for model, sizes in p.sweep.items():
        if not sizes:
            raise ParamsError(f"{src}: key 'sweep.{model}' must list at least one batch size")
    # a sampler looping faster disturbs what it measures
    if p.telemetry_interval_s < MIN_TELEMETRY_INTERVAL_S:
        raise ParamsError(
            f"{src}: key 'telemetry_interval_s' must be at least {MIN_TELEMETRY_INTERVAL_S} s (the "
            f"sampler would compete with the measured work), got {p.telemetry_interval_s}"
        )
    if p.max_processes < p.processes:
        raise ParamsError(
            f"{src}: key 'max_processes' ({p.max_processes}) must be at least 'processes' ({p.processes})"
        )
    _one_of(src, "dataset", p.dataset, DATASETS)
    _one_of(src, "phases", p.phases, PHASES)
    _one_of(src, "notebooks", p.notebooks, NOTEBOOKS)
    _validate_tuning(src, p)
    p = dataclasses.replace(p, variants=_check_variants(src, p.variants))
    _check_scratch(src, p)
    _check_epochs(src, p)
    if p.dataset != "synthetic":
        _check_data(src, p)
    _check_image_size(src, p)
    _validate_transfer(src, p)
    if check_device:
        from cnnbench import devices
        from cnnbench.devices import DeviceError, resolve

        for key, expect in (("device", ""), ("expect_device", p.expect_device)):
            try:
                device = resolve(p.device, expect=expect)
            except DeviceError as err:
                raise ParamsError(f"{src}: key '{key}': {err}") from None
        _check_on_device(src, p, devices.backend(device).hardware())
    return p


def _check_variants(src: str, variants: list[dict]) -> list[dict]:
    """Every variant a mapping of knobs to values; one repeating an earlier one gets a ``replica`` number."""
    if not variants:
        raise ParamsError(f"{src}: key 'variants' must list at least one variant")
    from cnnbench import knobs

    out, seen = [], {}
    for i, variant in enumerate(variants):
        if not isinstance(variant, dict):
            raise ParamsError(
                f"{src}: key 'variants[{i}]' must be a mapping of knobs to values, got {_show(variant)}"
            )
        for k, value in variant.items():
            if k not in KNOBS:
                raise ParamsError(
                    f"{src}: key 'variants[{i}]' has unknown key {_show(k)}; "
                    f"{_suggest(k, list(KNOBS), 'knobs')}"
                )
            if why := KNOBS[k].problem(value):
                raise ParamsError(f"{src}: key 'variants[{i}].{k}' {why}")
        setting = knobs.Setting(variant)
        if setting in seen and "replica" not in variant:
            variant = {**variant, "replica": max(seen[setting]) + 1}
            seen[setting].append(variant["replica"])
        seen.setdefault(setting, [0])
        out.append(variant)
    return out


def variant_notes(p: Params) -> list[str]:
    """One line per variant that repeats an earlier one: it is measured again, as an A/A comparison."""
    return [
        f"variants[{i}] repeats an earlier variant: measured again as its copy (replica {v['replica']}), an A/A "
        "comparison whose ratio should hold 1.0"
        for i, v in enumerate(p.variants)
        if v.get("replica")
    ]


def _check_on_device(src: str, p: Params, hw) -> None:
    """Every knob value of the run and its variants runs on this device as labelled and changes something."""
    from cnnbench import knobs

    for k, knob in KNOBS.items():
        if knob.run_wide and (why := knobs.lacks(k, getattr(p, k), hw)):
            raise ParamsError(f"{src}: key '{k}' {getattr(p, k)!r}: {why}")
    for i, variant in enumerate(p.variants):
        within = dataclasses.replace(p, **{k: v for k, v in variant.items() if KNOBS[k].run_wide})
        for k, value in variant.items():
            if why := knobs.lacks(k, value, hw) or (
                value != getattr(p, k, value) and knobs.inert(k, hw, within)
            ):
                raise ParamsError(f"{src}: key 'variants[{i}].{k}' {value!r}: {why}")


def _validate_transfer(src: str, p: Params) -> None:
    """The keys of 06 (transfer learning, step phases, profiler, scaling)."""
    _one_of(src, "optimizer", p.optimizer, OPTIMIZERS)
    _one_of(src, "transfer_dataset", p.transfer_dataset, TRANSFER_DATASETS)
    _one_of(src, "scaling_backend", p.scaling_backend, SCALING_BACKENDS)
    _check_models(src, "transfer_model", [p.transfer_model])
    _check_models(src, "profile_models", p.profile_models)
    _check_models(src, "scaling_model", [p.scaling_model])
    for key in ("transfer_lrs", "transfer_batch_sizes", "scaling_world_sizes"):
        if not getattr(p, key):
            raise ParamsError(f"{src}: key '{key}' must list at least one value")
    for lr in p.transfer_lrs:
        if lr <= 0:
            raise ParamsError(f"{src}: key 'transfer_lrs' must hold positive learning rates, got {lr}")
    if not 0 < p.transfer_target_accuracy <= 1:
        raise ParamsError(
            f"{src}: key 'transfer_target_accuracy' must be in (0, 1], got {p.transfer_target_accuracy}"
        )
    for spec in p.transfer_devices:
        if not re.fullmatch(r"(cpu|mps|cuda)(:\d+)?", spec):
            raise ParamsError(
                f"{src}: key 'transfer_devices' has unknown device {_show(spec)}; use cpu, cuda, cuda:N or mps"
            )
    if p.transfer_dataset != "synthetic" and not p.transfer_data_path:
        raise ParamsError(
            f"{src}: key 'transfer_data_path' is required for transfer_dataset '{p.transfer_dataset}'"
        )
    # oxford_pet may be downloaded into transfer_data_path when the run starts; an ImageFolder must exist
    if p.transfer_dataset == "imagefolder":
        try:
            problem = _transfer_folder_problem(Path(p.transfer_data_path).expanduser())
        except OSError as err:
            problem = f"cannot be read ({err.strerror or type(err).__name__})"
        if problem:
            raise ParamsError(
                f"{src}: key 'transfer_data_path': folder {_show(p.transfer_data_path)} {problem}"
            )


def _transfer_folder_problem(root: Path) -> str:
    """Why 06 cannot fine-tune on the image folder ``root``, or ""."""
    from cnnbench.data import _class_dirs

    if not root.is_dir():
        return "does not exist"
    splits = [root / s for s in ("train", "val", "test") if (root / s).is_dir()]
    classes = _class_dirs(splits[0] if len(splits) >= 2 else root)
    return (
        "" if len(classes) >= 2 else f"holds {len(classes)} class folder(s): fine-tuning needs at least two"
    )


def _validate_tuning(src: str, p: Params) -> None:
    """The configuration search's keys (07)."""
    _check_models(src, "tune_models", p.tune_models)
    _one_of(src, "tune_phases", p.tune_phases, PHASES)
    _one_of(src, "tune_precisions", p.tune_precisions, KNOBS["precision"].values)
    _one_of(src, "tune_compile_modes", p.tune_compile_modes, KNOBS["compile"].values)
    if p.tune_min_batch_size > p.tune_max_batch_size:
        raise ParamsError(
            f"{src}: key 'tune_min_batch_size' ({p.tune_min_batch_size}) exceeds tune_max_batch_size "
            f"({p.tune_max_batch_size})"
        )
    if p.tune_eta < 2:
        raise ParamsError(f"{src}: key 'tune_eta' must be at least 2, got {p.tune_eta}")
    if p.tune_confirm_warmup_steps < 1:
        raise ParamsError(
            f"{src}: key 'tune_confirm_warmup_steps' must be at least 1, got {p.tune_confirm_warmup_steps}"
        )
    if "07_tuning" in p.notebooks and (need := tuning_cell_s(p)) > p.cell_timeout_s:
        raise ParamsError(
            f"{src}: key 'cell_timeout_s' {p.cell_timeout_s} is less than 07's cell takes at least: "
            f"{len(p.tune_models) * len(p.tune_phases)} searches (tune_models x tune_phases) x "
            f"{need / (len(p.tune_models) * len(p.tune_phases)):.0f} s (tune_budget_s, then the "
            f"confirmation windows) = {need:.0f} s; raise cell_timeout_s or search less"
        )


def tuning_cell_s(p: Params) -> float:
    """The least time 07's one cell takes: per search, its race's budget and the confirmation's measured windows."""
    confirm = p.processes * (p.tune_confirm_top + 1) * p.repeats * p.tune_confirm_window_s
    return len(p.tune_models) * len(p.tune_phases) * (p.tune_budget_s + confirm)


class _YamlLimit(Exception):
    """A params document past a bound: a duplicate key, too many values once aliases expand, a cycle, too deep."""


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's safe loader that first walks the composed document and refuses a repeated key, a recursive
    alias, nesting past :data:`MAX_YAML_DEPTH` and more than :data:`MAX_YAML_NODES` values, each alias counted
    every time it is used."""

    def construct_document(self, node):
        sizes: dict[int, int] = {}
        self._expanded(node, sizes, set(), 0)
        return super().construct_document(node)

    def _expanded(self, node, sizes: dict[int, int], open_: set[int], depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        where = f"line {node.start_mark.line + 1}"
        if key in open_:
            raise _YamlLimit(f"the value at {where} refers to itself (a recursive alias)")
        if depth > MAX_YAML_DEPTH:
            raise _YamlLimit(f"the value at {where} is nested deeper than {MAX_YAML_DEPTH} levels")
        open_.add(key)
        size, children = 1, node.value if isinstance(node, yaml.SequenceNode) else ()
        if isinstance(node, yaml.MappingNode):
            self._no_duplicates(node)
            children = (c for pair in node.value for c in pair)
        for child in children:
            size += self._expanded(child, sizes, open_, depth + 1)
            if size > MAX_YAML_NODES:
                raise _YamlLimit(
                    f"the value at {where} expands to more than {MAX_YAML_NODES} values (aliases counted "
                    "each time they are used)"
                )
        open_.discard(key)
        sizes[key] = size
        return size

    def _no_duplicates(self, node) -> None:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # refused later; '<<' (below) merges keys that explicit ones may override
            merge = key_node.tag == "tag:yaml.org,2002:merge"
            try:
                key = "<<" if merge else self.construct_object(key_node)
                hash(key)
            except Exception:  # noqa: BLE001 - construction reports it with its position afterwards
                key = (key_node.tag, key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _YamlLimit(
                    f"duplicate key {_show(key)} at lines {seen[key]} and {line} ("
                    + ("merge several with '<<: [*a, *b]'" if merge else "the last would silently win")
                    + ")"
                )
            seen[key] = line


def _load_yaml(text: str) -> Any:
    """``text`` read as YAML by :class:`_ParamsLoader`. Raises :class:`yaml.YAMLError` or :class:`_YamlLimit`."""
    loader = _ParamsLoader(text)
    try:
        return loader.get_single_data()
    # the composer itself recurses per level: thousands of '[' nest past Python's stack
    except RecursionError:
        raise _YamlLimit(f"the document is nested deeper than {MAX_YAML_DEPTH} levels") from None
    except ValueError as err:  # PyYAML's int() past Python's 4300 digits, a timestamp such as 2024-13-45
        raise _YamlLimit(f"a value cannot be read: {_show(str(err).splitlines()[0])}") from None
    finally:
        loader.dispose()


def parse_overrides(pairs: typing.Iterable[str], src: str = "--set") -> dict[str, Any]:
    """``["batch_size=64", "models=[resnet18]"]`` -> a dict; each value is read as YAML."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"{src} {_show(pair)}: expected key=value")
        if key.strip() in out:
            raise ParamsError(f"{src} {_show(pair)}: key {key.strip()!r} is given twice (the last would win)")
        try:
            out[key.strip()] = _load_yaml(value)
        except yaml.YAMLError as err:
            raise ParamsError(
                f"{src} {_show(pair)}: value is not valid YAML ({err.__class__.__name__})"
            ) from None
        except _YamlLimit as err:
            raise ParamsError(f"{src} {_show(pair)}: {err}") from None
    return out


def _read_text(path: Path) -> str:
    """The params file's text: a regular file of at most :data:`MAX_PARAMS_BYTES` in UTF-8 (a BOM allowed)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO: no wait for a writer
    except FileNotFoundError:
        raise ParamsError(f"{path}: params file not found") from None
    except OSError as err:
        raise ParamsError(f"{path}: params file cannot be opened ({err.strerror or err})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ParamsError(
                f"{path}: is not a regular file (a device, FIFO or socket): give a .yaml file, "
                "e.g. params/local.yaml"
            )
        if st.st_size > MAX_PARAMS_BYTES:
            raise ParamsError(
                f"{path}: params file too large ({st.st_size} bytes; at most {MAX_PARAMS_BYTES})"
            )
        try:
            raw = f.read(MAX_PARAMS_BYTES + 1)
        except OSError as err:  # /proc/self/mem: a regular file whose read fails
            raise ParamsError(f"{path}: params file cannot be read ({err.strerror or err})") from None
    if len(raw) > MAX_PARAMS_BYTES:
        raise ParamsError(f"{path}: params file too large (more than {MAX_PARAMS_BYTES} bytes)")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw:
        raise ParamsError(f"{path}: is UTF-16 or UTF-32 text (it holds NUL bytes): save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ParamsError(
            f"{path}: is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}): save it as UTF-8"
        ) from None


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        raise ParamsError(
            f"{path}: is a folder, not a params file (give a .yaml file, e.g. params/local.yaml)"
        )
    text = _read_text(path)
    try:
        data = _load_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ParamsError(f"{path}: malformed YAML{where}: {problem}") from None
    except _YamlLimit as err:
        raise ParamsError(f"{path}: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParamsError(
            f"{path}: expected a mapping of key: value at the top level, got {type(data).__name__}"
        )
    return data


def resolved_path(option: str, given: str, resolve=lambda p: Path(p).expanduser().resolve()) -> Path:
    """``resolve(given)`` (the path option ``option`` names), or a one-line ParamsError."""
    try:
        return resolve(given)
    except (OSError, RuntimeError) as err:
        why = getattr(err, "strerror", None) or str(err)
        why = "a link that points back to itself" if "loop" in str(err).lower() else why
        raise ParamsError(f"{option} {_show(given)}: cannot be followed ({why})") from None


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line instead of the whole usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    """An argparse ``type``: a positive integer, else a one-line usage error."""
    if not re.fullmatch(r"\+?\d+", text.strip()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text[:40]}")
    return int(text)


_KEY_IN_ERROR = re.compile(r"key '([A-Za-z_0-9]+)")


def protocol(device: Any, hardware=None) -> dict:
    """The protocol of the device kind a run of ``device`` measures on (:meth:`cnnbench.devices.Backend.protocol_for`):
    of ``hardware`` where given (a device not at hand), else of the device ``device`` resolves to here, or, where it
    is not here, of its kind's device not at hand; {} for a value that names no device (validation says why)."""
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
    """Defaults, overridden by the protocol of the device kind (:func:`protocol`; ``hardware``: a device not at
    hand), by the YAML file at ``path``, by ``overrides``; validated once. An error about a key set by
    ``overrides`` names ``overrides_src`` (``--set`` on the command line), not the file, or the option the user
    typed for that key when ``override_names`` has one (``{"run_name": "--run-name"}``)."""
    overrides = overrides or {}
    # --set precision=bf16 (a knob set per variant): the run measures one variant, those knobs at those values
    variant = {k: v for k, v in overrides.items() if k in KNOBS and not KNOBS[k].run_wide}
    if variant and "variants" in overrides:
        raise ParamsError(f"{overrides_src} gives 'variants' and {', '.join(variant)}: give one or the other")
    keys = {k: v for k, v in overrides.items() if k not in variant}
    keys |= {"variants": [variant]} if variant else {}
    unknown = next((k for k in keys if k not in FIELDS), None)
    if unknown is not None:
        raise ParamsError(f"{overrides_src} {_unknown_key(unknown)}")
    given = {**read_yaml(path), **keys}
    try:
        base = protocol(given.get("device", Params().device), hardware) if given.get("protocol", True) else {}
        p = validate({**base, **given}, src=str(path), check_device=check_device)
    except ParamsError as err:
        rest = str(err).removeprefix(f"{path}: ")
        rest = rest.replace("'variants[0].", "'") if variant else rest
        found = _KEY_IN_ERROR.search(rest)
        key = found.group(1) if found else ""
        if key in overrides:
            label = (override_names or {}).get(key)
            if label and rest.startswith(f"key '{key}'"):
                raise ParamsError(f"{label}{rest.removeprefix(f'key {key!r}')}") from None
            raise ParamsError(f"{label or overrides_src} {rest}") from None
        if any(re.search(rf"(?<!\w){re.escape(k)}(?!\w)", rest) for k in overrides):  # another key it names
            raise ParamsError(f"{overrides_src} {rest}") from None
        raise
    per = _shadowing(p)
    if per and "batch_size" in overrides:  # a --set batch_size that no measurement would use
        raise ParamsError(
            f"{overrides_src} key 'batch_size' {p.batch_size} changes nothing: batch_size_per_model sets every "
            f"model this run measures ({per}); set batch_size_per_model instead"
        )
    if per and "batch_size" in read_yaml(path) and p.batch_size != Params().batch_size:
        # recorded as the default: nothing ran at it
        p = dataclasses.replace(p, batch_size=Params().batch_size)
    return p


def _shadowing(p: Params) -> str:
    """The models with their batch sizes when batch_size_per_model sets every model measured, else ""."""
    used = {*p.models, *p.tune_models, *p.profile_models}
    if not used or not used <= set(p.batch_size_per_model):
        return ""
    return ", ".join(f"{m}: {p.batch_size_per_model[m]}" for m in sorted(used))


def shadowed_note(path: str | Path, overrides: dict[str, Any] | None = None) -> str:
    """A one-line warning when the params file's own batch_size is used by no model measured, else ""."""
    overrides = overrides or {}
    raw = read_yaml(path)
    if "batch_size" not in raw or "batch_size" in overrides:
        return ""
    try:
        p = validate({**raw, **overrides}, src=str(path), check_device=False)
    except ParamsError:
        return ""
    per = _shadowing(p)
    if not per or p.batch_size == Params().batch_size:
        return ""
    return (
        f"warning: {Path(path).name} key 'batch_size' {p.batch_size} is used by no model this run measures "
        f"(batch_size_per_model sets every one: {per}); it is not recorded as this run's"
    )


def empty_file_note(path: str | Path) -> str:
    """A one-line note when the params file sets no keys (the run uses the defaults), else ""."""
    return f"{path} sets no keys: running with the defaults" if not read_yaml(path) else ""


def table(p: Params):
    """Every key with its value in force, its default, whether it differs, and what it means (a DataFrame)."""
    import pandas as pd

    docs, defaults = describe(), Params()
    rows = [(k, v := getattr(p, k), d := getattr(defaults, k), v != d, docs.get(k, "")) for k in FIELDS]
    return pd.DataFrame(rows, columns=["key", "value", "default", "changed", "meaning"]).set_index("key")
