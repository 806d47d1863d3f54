"""Run parameters: one schema with documented defaults, overridden by a YAML file, then by overrides.

Every key a params file may hold is a field of :class:`Params`. Loading validates everything once, before
any work starts, and stops with a one-line :class:`ParamsError` naming the bad key: unknown keys, wrong
types, unknown model names (with the valid ones listed), non-positive batch sizes and unavailable devices.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
MEMORY_FORMATS = ("nchw", "channels_last")
DATASETS = ("synthetic", "tiny_imagenet", "imagenette", "mnist", "cifar10", "imagefolder")
DATA_MODES = ("device", "loader")
PHASES = ("train", "eval")
COMPILE_MODES = ("off", "default", "max-autotune", "reduce-overhead")  # torch.compile modes (07 searches them)
# The pipeline's notebooks in order; the analysis stays last and merges every experiment family before it.
NOTEBOOKS = (
    "00_setup",
    "01_complexity",
    "02_scenario_a",
    "03_batch_sweep",
    "04_roofline",
    # 05: from-scratch backends (cnnbench.scratch)

    # 06: transfer learning and scaling (cnnbench.transfer)

    # 07: configuration search (cnnbench.tuning)
    "07_tuning",

    "08_analysis",
)
VARIANT_KEYS = {"precision": str, "memory_format": str, "compile": bool}


class ParamsError(ValueError):
    """A bad parameter: the message is one line naming the source and the key."""


def _default_models() -> list[str]:
    return ["resnet18", "mobilenet_v2", "resnet50", "squeezenet1_1", "densenet121", "mnist_cnn"]


@dataclass(frozen=True)
class Params:
    """All parameters of a run. Field comments are the documentation shown by ``describe()``."""

    # --- identity and device
    run_name: str = ""  # results go to outputs/<run_name>; "" = <device kind>-<host name>
    device: str = "auto"  # auto (cuda, then mps, then cpu) | cpu | cuda | cuda:N | mps
    expect_device: str = ""  # text the device name must contain (e.g. "T4"); "" = any device
    threads: int = 0  # CPU threads torch uses; 0 = the number of physical cores
    seed: int = 0  # seed for model initialisation and synthetic data
    # --- models and data
    models: list[str] = field(
        default_factory=_default_models
    )  # models of the run (torchvision names or mnist_cnn)
    image_size: int = 64  # training resolution in pixels (square); Tiny-ImageNet is 64
    num_classes: int = 200  # classes of the classifier head; Tiny-ImageNet has 200
    dataset: str = "synthetic"  # synthetic | tiny_imagenet | imagenette | mnist | cifar10 | imagefolder
    data_path: str = ""  # root folder of a real dataset (required unless dataset is synthetic)
    download: bool = False  # download the dataset into data_path if it is missing (public datasets only)
    data_mode: str = "device"  # device: batches made once on the device | loader: DataLoader + copy per step
    workers: int = 2  # DataLoader worker processes (loader mode and epochs)
    pin_memory: bool = True  # pin host memory for the host-to-device copy (CUDA only)
    batch_size: int = 128  # images per step
    batch_size_per_model: dict[str, int] = field(
        default_factory=lambda: {"squeezenet1_1": 64, "mnist_cnn": 512}
    )  # per-model batch size overriding batch_size (seed 000 ran SqueezeNet at 64, seed 001 MNIST at 512)
    # --- measurement protocol
    phases: list[str] = field(default_factory=lambda: ["train", "eval"])  # which steps to time
    warmup_steps: int = 10  # steps run before the clock starts (seed 003 used 10)
    measured_steps: int = 0  # steps in one measured window; 0 = as many as fill window_s
    window_s: float = 3.0  # target length of a measured window when measured_steps is 0 (seconds)
    repeats: int = 3  # measured windows per configuration; their spread is reported
    variants: list[dict] = field(
        default_factory=lambda: [{"precision": "fp32", "memory_format": "nchw", "compile": False}]
    )  # precision (fp32|tf32|bf16|fp16), memory_format (nchw|channels_last), compile (bool)
    lr: float = 0.01  # SGD learning rate
    momentum: float = 0.9  # SGD momentum
    epoch_mode: bool = False  # also time full train and validation epochs over the dataset (seed 000)
    max_batches: int = 0  # batches per epoch in epoch mode; 0 = the whole dataset
    synthetic_images: int = 2048  # images in the synthetic dataset (loader mode and epochs)
    telemetry_interval_s: float = 0.1  # sampling period of CPU/GPU utilisation during measured windows
    # --- batch-size sweep (03)
    sweep: dict[str, list[int]] = field(
        default_factory=lambda: {"squeezenet1_1": [32, 64, 128, 256, 512], "resnet50": [32, 64, 128]}
    )  # model -> batch sizes
    # --- roofline (04)
    peak_repeats: int = 5  # repetitions of each peak micro-benchmark (the best one is kept)
    matmul_size: int = 4096  # square matmul size for the compute roof (0 = chosen by device)
    stream_mb: int = 512  # array size for the bandwidth roof, far above the last-level cache
    layer_top_k: int = 10  # layers shown on the per-layer roofline, by time
    # --- from-scratch backends (05, seeds 001 and 004): keys of cnnbench.scratch go here

    # --- transfer learning, step phases, telemetry, scaling (06, seed 002): keys of cnnbench.transfer go here

    # --- configuration search and energy (07): keys of cnnbench.tuning go here
    tune_models: list[str] = field(default_factory=lambda: ["resnet50"])  # models whose fastest configuration is searched
    tune_phases: list[str] = field(default_factory=lambda: ["train"])  # steps searched: train | eval
    tune_budget_s: float = 60.0  # racing time per model and phase, seconds (guard and confirmation come on top)
    tune_eta: int = 2  # successive halving keeps the best 1/tune_eta of the configurations at each rung
    tune_precisions: list[str] = field(
        default_factory=lambda: ["fp32", "tf32", "bf16", "fp16"]
    )  # precisions searched where the device supports them natively (the rest are skipped with the reason)
    tune_compile_modes: list[str] = field(
        default_factory=lambda: ["off", "default", "max-autotune", "reduce-overhead"]
    )  # torch.compile modes searched where supported (reduce-overhead = CUDA graphs, CUDA only)
    tune_min_batch_size: int = 32  # smallest batch size searched (powers of two up to tune_max_batch_size)
    tune_max_batch_size: int = 512  # largest batch size tried; out of memory backs off from it as timm does
    tune_confirm_top: int = 2  # best configurations of the race re-measured with the full protocol, beside the default
    tune_confirm_window_s: float = 3.0  # length of each confirmation window (repeats windows), seconds
    tune_confirm_warmup_steps: int = 2  # warm-up steps before the confirmation windows (the first one compiles)
    tune_guard_steps: int = 8  # training steps from the same initialisation whose loss the correctness guard compares
    tune_guard_batch_size: int = 8  # batch size of the correctness guard's steps
    tune_guard_tolerance: float = 0.10  # largest gap of the guard's last loss from fp32 eager's, as a share of its loss decrease

    # --- analysis (08)
    analysis_runs: list[str] = field(default_factory=list)  # run folders to merge; [] = every run in outputs/
    interactive: bool = True  # show ipywidgets controls in JupyterLab (papermill always renders statically)
    # --- pipeline
    notebooks: list[str] = field(default_factory=lambda: list(NOTEBOOKS))  # which notebooks the pipeline runs
    cell_timeout_s: int = 3600  # papermill's per-cell execution timeout

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def batch_size_for(self, model: str) -> int:
        return self.batch_size_per_model.get(model, self.batch_size)


FIELDS = {f.name: f for f in dataclasses.fields(Params)}
_HINTS = typing.get_type_hints(Params)


def describe() -> dict[str, str]:
    """Key -> the comment documenting it, read from this file (the schema is the documentation).

    A field's comment ends its definition: on its own line, or on the closing line of a multi-line default.
    """
    out: dict[str, str] = {}
    current = None
    for line in Path(__file__).read_text().splitlines():
        head, _, comment = line.partition("  # ")
        name = head.strip().split(":")[0]
        if line.startswith("    ") and not line.startswith("     ") and name in FIELDS:
            current = name
        if current and comment and current not in out:
            out[current] = comment.strip()
    return out


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _matches(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp is dict:
        return isinstance(value, dict)
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return isinstance(value, list) and all(item is Any or _matches(v, item) for v in value)
    if origin is dict:
        key_t, val_t = typing.get_args(tp)
        return isinstance(value, dict) and all(
            _matches(k, key_t) and _matches(v, val_t) for k, v in value.items()
        )
    return True


def _positive(src: str, key: str, value: int) -> None:
    if value <= 0:
        raise ParamsError(f"{src}: key '{key}' must be a positive integer, got {value}")


def _one_of(src: str, key: str, value: str, allowed: typing.Iterable[str]) -> None:
    if value not in allowed:
        raise ParamsError(f"{src}: key '{key}' is '{value}'; allowed: {', '.join(allowed)}")


def _check_models(src: str, key: str, names: typing.Iterable[str]) -> None:
    from cnnbench.models import model_names

    valid = model_names()
    for name in names:
        if name not in valid:
            raise ParamsError(
                f"{src}: key '{key}' names unknown model '{name}'; valid models: {', '.join(valid)}"
            )


def validate(raw: dict[str, Any], src: str = "params", check_device: bool = True) -> Params:
    """Check a merged mapping of parameters and build :class:`Params`. Raises :class:`ParamsError`."""
    if not isinstance(raw, dict):
        raise ParamsError(
            f"{src}: expected a mapping of key: value at the top level, got {type(raw).__name__}"
        )
    for key, value in raw.items():
        if key not in FIELDS:
            raise ParamsError(f"{src}: unknown key '{key}'; valid keys: {', '.join(FIELDS)}")
        tp = _HINTS[key]
        if not _matches(value, tp):
            raise ParamsError(
                f"{src}: key '{key}' must be {_type_name(tp)}, got {value!r} ({type(value).__name__})"
            )
    p = Params(**{k: (float(v) if _HINTS[k] is float else v) for k, v in raw.items()})

    if not p.models:
        raise ParamsError(f"{src}: key 'models' must name at least one model")
    _check_models(src, "models", p.models)
    _check_models(src, "batch_size_per_model", p.batch_size_per_model)
    _check_models(src, "sweep", p.sweep)
    _positive(src, "batch_size", p.batch_size)
    for model, bs in p.batch_size_per_model.items():
        _positive(src, f"batch_size_per_model.{model}", bs)
    for model, sizes in p.sweep.items():
        if not sizes:
            raise ParamsError(f"{src}: key 'sweep.{model}' must list at least one batch size")
        for bs in sizes:
            _positive(src, f"sweep.{model}", bs)
    for key in (
        "image_size",
        "num_classes",
        "repeats",
        "synthetic_images",
        "peak_repeats",
        "stream_mb",
        "layer_top_k",
        "cell_timeout_s",
    ):
        _positive(src, key, getattr(p, key))
    for key in ("warmup_steps", "measured_steps", "threads", "workers", "max_batches", "matmul_size"):
        if getattr(p, key) < 0:
            raise ParamsError(f"{src}: key '{key}' must be >= 0, got {getattr(p, key)}")
    for key in ("telemetry_interval_s", "lr", "window_s"):
        if getattr(p, key) <= 0:
            raise ParamsError(f"{src}: key '{key}' must be positive, got {getattr(p, key)}")
    if p.momentum < 0:
        raise ParamsError(f"{src}: key 'momentum' must be >= 0, got {p.momentum}")
    _one_of(src, "dataset", p.dataset, DATASETS)
    _one_of(src, "data_mode", p.data_mode, DATA_MODES)
    for phase in p.phases:
        _one_of(src, "phases", phase, PHASES)
    for nb in p.notebooks:
        _one_of(src, "notebooks", nb, NOTEBOOKS)
    _validate_tuning(src, p)
    if not p.variants:
        raise ParamsError(f"{src}: key 'variants' must list at least one variant")
    for i, variant in enumerate(p.variants):
        for vkey, vvalue in variant.items():
            if vkey not in VARIANT_KEYS:
                raise ParamsError(
                    f"{src}: key 'variants[{i}]' has unknown key '{vkey}'; valid: {', '.join(VARIANT_KEYS)}"
                )
            if not _matches(vvalue, VARIANT_KEYS[vkey]):
                raise ParamsError(
                    f"{src}: key 'variants[{i}].{vkey}' must be {VARIANT_KEYS[vkey].__name__}, got {vvalue!r}"
                )
        _one_of(src, f"variants[{i}].precision", variant.get("precision", "fp32"), PRECISIONS)
        _one_of(src, f"variants[{i}].memory_format", variant.get("memory_format", "nchw"), MEMORY_FORMATS)
    if p.dataset != "synthetic":
        if not p.data_path:
            raise ParamsError(f"{src}: key 'data_path' is required for dataset '{p.dataset}'")
        if not p.download and not Path(p.data_path).expanduser().exists():
            raise ParamsError(
                f"{src}: key 'data_path': folder '{p.data_path}' does not exist (set download: true to fetch it)"
            )
    if check_device:
        from cnnbench.devices import DeviceError, resolve

        try:
            device = resolve(p.device, expect=p.expect_device)
        except DeviceError as err:
            raise ParamsError(f"{src}: key 'device': {err}") from None
        if device.type != "cuda" and any(v.get("precision") == "tf32" for v in p.variants):
            raise ParamsError(
                f"{src}: key 'variants': precision tf32 needs a CUDA device, found {device.type}"
            )
    return p


def _validate_tuning(src: str, p: Params) -> None:
    """The configuration search's keys (07)."""
    _check_models(src, "tune_models", p.tune_models)
    for phase in p.tune_phases:
        _one_of(src, "tune_phases", phase, PHASES)
    for precision in p.tune_precisions:
        _one_of(src, "tune_precisions", precision, PRECISIONS)
    for mode in p.tune_compile_modes:
        _one_of(src, "tune_compile_modes", mode, COMPILE_MODES)
    for key in ("tune_min_batch_size", "tune_max_batch_size", "tune_confirm_top", "tune_guard_steps",
                "tune_guard_batch_size"):
        _positive(src, key, getattr(p, key))
    if p.tune_min_batch_size > p.tune_max_batch_size:
        raise ParamsError(f"{src}: key 'tune_min_batch_size' ({p.tune_min_batch_size}) exceeds tune_max_batch_size "
                          f"({p.tune_max_batch_size})")
    if p.tune_eta < 2:
        raise ParamsError(f"{src}: key 'tune_eta' must be at least 2, got {p.tune_eta}")
    if p.tune_confirm_warmup_steps < 1:
        raise ParamsError(f"{src}: key 'tune_confirm_warmup_steps' must be at least 1, got {p.tune_confirm_warmup_steps}")
    for key in ("tune_budget_s", "tune_confirm_window_s", "tune_guard_tolerance"):
        if getattr(p, key) <= 0:
            raise ParamsError(f"{src}: key '{key}' must be positive, got {getattr(p, key)}")


def parse_overrides(pairs: typing.Iterable[str]) -> dict[str, Any]:
    """``["batch_size=64", "models=[resnet18]"]`` -> a dict; each value is read as YAML."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"override '{pair}': expected key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ParamsError(
                f"override '{pair}': value is not valid YAML ({err.__class__.__name__})"
            ) from None
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ParamsError(f"{path}: malformed YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParamsError(
            f"{path}: expected a mapping of key: value at the top level, got {type(data).__name__}"
        )
    return data


def load(path: str | Path, overrides: dict[str, Any] | None = None, check_device: bool = True) -> Params:
    """Defaults, overridden by the YAML file at ``path``, overridden by ``overrides``; validated once."""
    merged = {**read_yaml(path), **(overrides or {})}
    return validate(merged, src=str(path), check_device=check_device)


def table(p: Params) -> pd.DataFrame:
    """Every key with its value in force, its default, whether it differs, and what it means."""
    docs, defaults = describe(), Params()
    rows = [
        (
            key,
            getattr(p, key),
            getattr(defaults, key),
            getattr(p, key) != getattr(defaults, key),
            docs.get(key, ""),
        )
        for key in FIELDS
    ]
    return pd.DataFrame(rows, columns=["key", "value", "default", "changed", "meaning"]).set_index("key")
