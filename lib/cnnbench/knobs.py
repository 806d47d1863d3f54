"""The knobs of a measurement, each declared once in :data:`KNOBS`: validation, the engine (:func:`applied`), results
keys, ``compare``, 07's search space and labels derive from it. No torch at import: params validates with it."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cnnbench import heap

STAGES = ("numerics", "batch_size", "host")  # 07's race stages, in order
MAX_THREADS = 4096  # threads or processes: no machine torch runs on has more CPUs


@dataclass(frozen=True)
class Knob:
    name: str  # the params key, the variant key and the results column
    type: type  # bool | int | str
    default: Any
    doc: str  # one line, shown by params.describe() and 00's table
    values: tuple = ()  # the allowed values; () = any of ``type`` (int: ``low`` to ``high``)
    low: int = 0
    high: int = 2**63 - 1
    run_wide: bool = True  # a params key of its own; False: set only inside ``variants``
    # compare divides two runs' rows only where it is equal (threads: not across devices)
    matched: bool = True
    before: Any = None  # what a row written before the knob existed reads as (None: the default)
    label: Callable[[Any], str] = str  # how a table names a value ("" to leave it out)
    always: bool = False  # named in a setting's label even at its default (else only where it differs)
    apply: Callable[[Any, Any, Any], Any] | None = None  # (value, backend, shape) -> context manager around a
    # measurement; ``shape`` is the configuration (hashable) it is applied for, None when unknown
    lacks: Callable[[Any, Any], str] | None = None  # (value, Hardware) -> why not; None: the backend's answer
    effective: Callable[[Any, Any, Mapping], Any] | None = None  # (value, backend class, setting) -> in force
    stage: str = ""  # 07's stage that races it (STAGES), "" = not searched
    numerics: bool = False  # changes the arithmetic: 07's correctness guard checks it
    # (default, Hardware, params) -> 07's values (a bool's default: both)
    search: Callable[[Any, Any, Any], Iterable] = lambda d, hw, p: [d, not d]
    search_key: str = ""  # the params key listing the values 07 searches (the others: "not in <key>")
    # (a device backend's flag, why other values do nothing on a device without it; {kind}: the device kind)
    needs: tuple[str, str] | tuple = ()
    loader: bool = False  # changes something only where a DataLoader feeds the step (data_mode loader)
    parse: Callable[[Any], Any] = lambda v: v  # a given or written value (old spellings too) -> its value

    def read(self, value: Any) -> Any:
        """``value`` as this knob holds it: blank is :attr:`before`; CSV text and old spellings converted."""
        if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
            return self.default if self.before is None else self.before
        value = self.parse(value)
        if self.type is bool and isinstance(value, str):
            return value.strip().lower() in ("true", "1", "1.0")
        if self.type is int and not isinstance(value, bool):
            with contextlib.suppress(TypeError, ValueError):
                return int(float(value))
        return value


# --- how each knob is applied (lazy imports: validation runs without torch)
@contextlib.contextmanager
def _threads(value, backend, shape):
    import torch

    before = torch.get_num_threads()
    if value:
        torch.set_num_threads(value)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# dynamo's cache since the last reset: its compile mode (not in dynamo's key, so a new mode resets) and shapes
_compiled: dict = {"mode": None, "shapes": set()}
# distinct shapes compiled between resets; past dynamo's recompile limit (8) it falls back to eager silently
SHAPES_PER_RESET = 4


@contextlib.contextmanager
def compiling(mode: str, shape=None):
    """``torch.compile`` in ``mode`` within the block; dynamo's graphs of the same ``shape`` are reused, reset on a
    new mode, no shape, or past ``SHAPES_PER_RESET`` shapes."""
    if mode == "off":
        yield
        return
    import torch._dynamo as dynamo
    import torch._inductor as inductor
    import torch._inductor.config as inductor_config

    if (
        shape is None
        or _compiled["mode"] != mode
        or (shape not in _compiled["shapes"] and len(_compiled["shapes"]) >= SHAPES_PER_RESET)
    ):
        dynamo.reset()
        _compiled["mode"], _compiled["shapes"] = mode, set()
    if shape is not None:
        _compiled["shapes"].add(shape)
    with inductor_config.patch(inductor.list_mode_options(mode)):
        yield


def _compile_mode(value) -> Any:
    """``compile: true/false`` (02's variants, and rows written before modes) as a mode."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        value = value.strip().lower() == "true"
    return ("default" if value else "off") if isinstance(value, bool) else value


def _powers_of_two(lo: int, hi: int) -> list[int]:
    return [2**k for k in range(64) if lo <= 2**k <= hi]


def _threads_in_force(value, backend, setting) -> int:
    import torch

    return value or torch.get_num_threads()


KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob(
            "precision",
            str,
            "fp32",
            "fp32 (TF32 off) | tf32 | bf16 | fp16 (autocast; fp16 with a loss scaler)",
            values=("fp32", "tf32", "bf16", "fp16"),
            run_wide=False,
            always=True,
            apply=lambda value, backend, shape: backend.math(value),
            stage="numerics",
            numerics=True,
            search_key="tune_precisions",
        ),
        Knob(
            "memory_format",
            str,
            "nchw",
            "nchw | channels_last",
            values=("nchw", "channels_last"),
            run_wide=False,
            always=True,
            stage="numerics",
            numerics=True,
            search=lambda d, hw, p: ["nchw", "channels_last"],
        ),
        Knob(
            "compile",
            str,
            "off",
            "torch.compile mode: off | default | max-autotune | reduce-overhead (CUDA graphs); "
            "true/false mean default/off",
            values=("off", "default", "max-autotune", "reduce-overhead"),
            run_wide=False,
            parse=_compile_mode,
            label=lambda v: "" if v == "off" else f"compile={v}",
            apply=lambda value, backend, shape: compiling(value, shape),
            stage="numerics",
            numerics=True,
            search_key="tune_compile_modes",
        ),
        Knob(
            "cudnn_benchmark",
            bool,
            True,
            "cuDNN times its convolution algorithms per shape (CUDA; steps are fixed-shape)",
            label=lambda v: "" if v else "cudnn.benchmark=off",
            apply=lambda value, backend, shape: backend.autotune(value),
            stage="numerics",
            needs=(
                "autotunes",
                "cudnn.benchmark picks cuDNN's convolution algorithms: NVIDIA only, not {kind}",
            ),
        ),
        Knob(
            "host_heap",
            str,
            "keep",
            "keep: freed host memory stays in the process (glibc; no page faults in steady "
            "state) | system: the C library's defaults (see cnnbench.heap)",
            values=heap.HEAPS,
            before="system",
            label=lambda v: "" if v == "keep" else f"heap={v}",
            apply=lambda value, backend, shape: heap.applied(value),
            effective=lambda value, backend, setting: heap.effective(value),
        ),
        Knob(
            "data_mode",
            str,
            "device",
            "device: batches made once on the device | loader: DataLoader + copy per step",
            values=("device", "loader"),
            label=lambda v: "" if v == "device" else "loader",
        ),
        Knob(
            "batch_size",
            int,
            128,
            "images per step",
            low=1,
            high=1 << 16,
            label=lambda v: f"bs{v}",
            always=True,
            stage="batch_size",
            search=lambda d, hw, p: sorted(
                {*_powers_of_two(p.tune_min_batch_size, p.tune_max_batch_size), d}
            ),
        ),
        Knob(
            "threads",
            int,
            0,
            "CPU threads torch uses; 0 = the number of physical cores",
            high=MAX_THREADS,
            matched=False,
            label=lambda v: f"threads{v}",
            always=True,
            apply=_threads,
            effective=_threads_in_force,
            stage="host",
            search=lambda d, hw, p: sorted({*_powers_of_two(1, hw.cores), hw.cores, d}),
            needs=("on_host", "the step runs on {kind}: host threads stay as set"),
        ),
        Knob(
            "workers",
            int,
            2,
            "DataLoader worker processes (loader mode and epochs)",
            high=MAX_THREADS,
            label=lambda v: f"workers{v}",
            stage="host",
            search=lambda d, hw, p: sorted({0, *_powers_of_two(1, hw.cores), hw.cores, d}),
            loader=True,
        ),
        Knob(
            "pin_memory",
            bool,
            True,
            "pin host memory for the host-to-device copy (where the device gains: CUDA)",
            label=lambda v: "pinned" if v else "unpinned",
            effective=lambda value, backend, setting: (
                bool(value) and backend.pins and setting["data_mode"] == "loader"
            ),
            stage="host",
            needs=("pins", "pinned memory speeds host-to-CUDA copies; {kind} has none"),
            loader=True,
        ),
        Knob(
            "replica",
            int,
            0,
            "a copy of an identical variant, measured as an A/A comparison (0: the first)",
            run_wide=False,
            label=lambda v: f"copy{v}" if v else "",
        ),
    )
}


def keyed() -> tuple[str, ...]:
    """The knobs that are part of a configuration's key: every knob (two values are two measurements)."""
    return tuple(KNOBS)


def variant_only() -> tuple[str, ...]:
    return tuple(k for k, knob in KNOBS.items() if not knob.run_wide)


class Setting(dict):
    """A value for every knob, hashable (a configuration's knobs, a candidate of 07's search): not to be changed.
    ``setting.precision`` reads a knob; ``setting.with_(batch_size=64)`` is another setting."""

    def __init__(self, values: Mapping[str, Any] | None = None, **more):
        given = dict(values or (), **more)  # a mapping or (knob, value) pairs
        if unknown := [k for k in given if k not in KNOBS]:
            raise KeyError(f"unknown knob {unknown[0]!r}; knobs: {', '.join(KNOBS)}")
        super().__init__((k, v.read(given[k]) if k in given else v.default) for k, v in KNOBS.items())

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __hash__(self) -> int:
        return hash(tuple(self.items()))

    def _frozen(self, *args, **kwargs):
        raise TypeError("a Setting is hashable and never changes: make another with setting.with_(...)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _frozen

    def __reduce__(self):  # pickled (to a worker) and copied whole, not item by item
        return Setting, (dict(self),)

    def __repr__(self) -> str:
        return f"Setting({', '.join(f'{k}={v!r}' for k, v in self.items())})"

    def with_(self, **changes) -> Setting:
        return Setting({**self, **changes})

    @property
    def label(self) -> str:
        return label(self)

    @property
    def numerics(self) -> tuple:
        """The values of the knobs that change the arithmetic (the correctness guard's key)."""
        return tuple(v for k, v in self.items() if KNOBS[k].numerics)


def label(setting: Mapping[str, Any], only: Iterable[str] | None = None) -> str:
    """A setting in words, blanks left out: the knobs ``only`` names, or those always named and those away
    from their default ("fp16 channels_last bs64 threads2 compile=default")."""
    if only is None:
        only = [k for k in KNOBS if KNOBS[k].always or KNOBS[k].read(setting.get(k)) != KNOBS[k].default]
    names = [k for k in only if k in KNOBS and k in setting]
    return " ".join(t for k in names if (t := KNOBS[k].label(KNOBS[k].read(setting[k]))))


def for_params(p, variant: Mapping[str, Any] | None = None, **changes) -> Setting:
    """The setting a params set gives (its run-wide knobs, the other knobs' defaults) in ``variant``."""
    base = {k: getattr(p, k) for k, knob in KNOBS.items() if knob.run_wide and hasattr(p, k)}
    return Setting({**base, **(variant or {}), **changes})


def lacks(name: str, value: Any, hw) -> str:
    """Why ``hw`` cannot run knob ``name`` at ``value`` as labelled ("" when it can, as the default can)."""
    knob = KNOBS[name]
    value = knob.read(value)
    if value == knob.default:
        return ""
    if knob.lacks is not None:
        return knob.lacks(value, hw)
    if name == "compile" and sys.platform == "win32":
        return "torch.compile (Inductor) is not supported on Windows here"
    from cnnbench import devices

    return devices.backend_class(hw.kind).lacks(name, value, hw)


def inert(name: str, hw, p) -> str:
    """Why no value of knob ``name`` other than the run's changes anything on ``hw`` with params ``p``, or ""."""
    from cnnbench import devices

    knob = KNOBS[name]
    if knob.needs and not getattr(devices.backend_class(hw.kind), knob.needs[0]):
        return knob.needs[1].format(kind=hw.kind)
    return "data_mode is device: no DataLoader in the step" if knob.loader and p.data_mode != "loader" else ""


def in_force(setting: Setting, backend) -> Setting:
    """What ``setting`` puts in force on ``backend``'s device (pinning only where the device gains, the host heap
    only where the C library can keep): what a row records."""
    rules = {k: knob.effective for k, knob in KNOBS.items() if knob.effective is not None}
    return setting.with_(**{k: rule(setting[k], backend, setting) for k, rule in rules.items()})


@contextlib.contextmanager
def applied(setting: Mapping[str, Any], backend, shape=None):
    """Every knob of ``setting`` applied on ``backend``'s device for the block, each restored after it; ``shape``
    (hashable) names the configuration, so compiled graphs of the same one are reused."""
    with contextlib.ExitStack() as stack:
        for k, knob in KNOBS.items():
            if knob.apply is not None and k in setting:
                stack.enter_context(knob.apply(setting[k], backend, shape))
        yield


def columns(df):
    """``df`` (a results frame) with every keyed knob's column as the knob holds it: rows from before a knob
    read its :attr:`Knob.before`, old spellings are parsed (compile true/false). Returns a copy."""
    df = df.copy()
    for k in keyed():
        col = df[k] if k in df else [None] * len(df)
        df[k] = [KNOBS[k].read(v) for v in col]
    return df


def default_variant(df):
    """The rows of ``df`` in the seeds' variant: every knob set only in ``variants`` at its default (fp32, NCHW,
    eager, the first copy)."""
    df, names = columns(df), list(variant_only())
    return df[(df[names] == [KNOBS[k].default for k in names]).all(axis=1)]


def default_label() -> str:
    """The seeds' variant (:func:`default_variant`) in words, compile's blank "off" said as eager."""
    names = variant_only()
    return f"{label({k: KNOBS[k].default for k in names}, names)} eager"


@dataclass
class Space:
    """07's search space: each searched knob's values, the default setting, each value left out and why."""

    values: dict[str, list]
    default: Setting
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (knob, value, reason)

    def size(self) -> int:
        return math.prod(len(v) for v in self.values.values())

    def stage(self, name: str) -> list[str]:
        return [k for k in self.values if KNOBS[k].stage == name]

    def rows(self, hw) -> list[dict]:
        """tuning_space.csv rows: one per knob value, searched or skipped with the reason."""
        base = {"device_kind": hw.kind, "device_name": hw.name}
        return [
            {**base, "knob": k, "value": str(v), "searched": True, "reason": ""}
            for k, vs in self.values.items()
            for v in vs
        ] + [{**base, "knob": k, "value": v, "searched": False, "reason": r} for k, v, r in self.skipped]


def space(hw, default: Setting, p) -> Space:
    """07's space on ``hw``: each searched knob's values that the device can run and that change something, the
    rest skipped with the reason; the default setting is always in."""
    values, skipped = {}, []
    for k, knob in KNOBS.items():
        if not knob.stage:
            continue
        if why := inert(k, hw, p):
            values[k] = [default[k]]
            skipped.append((k, "other values", why))
            continue
        asked = (
            [default[k], *getattr(p, knob.search_key)] if knob.search_key else knob.search(default[k], hw, p)
        )
        asked = list(dict.fromkeys(knob.read(v) for v in asked))
        values[k] = [v for v in asked if not lacks(k, v, hw)]
        skipped += [(k, str(v), lacks(k, v, hw)) for v in asked if v not in values[k]]
        skipped += [
            (k, str(v), f"not in {knob.search_key}")
            for v in knob.values
            if knob.search_key and v not in asked
        ]
    return Space(values, default, skipped)
