"""The configuration search of a run: every model of ``tune_models``, every phase of ``tune_phases``, into
``tuning.csv`` (row by row, resumable) and ``tuning_space.csv`` (every knob value, searched or skipped)."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from cnnbench import devices, knobs, progress, results, roofline
from cnnbench.knobs import Setting
from cnnbench.measure import engine, telemetry
from cnnbench.results import ResultsFile
from cnnbench.results.schema import TUNING_PARAM_KEYS, search_keys
from cnnbench.tuning import guard, search
from cnnbench.tuning.racing import Outcome


def default_setting(run, model: str) -> Setting:
    """The seeds' configuration (fp32, NCHW, eager, their batch size) with the run's threads, as in force here."""
    p = run.params
    setting = knobs.for_params(p, batch_size=p.batch_size_for(model), threads=run.threads)
    return knobs.in_force(setting, devices.backend(run.device))


NO_PEAKS = (
    "No device_peaks.csv in this run: the search runs, but its roofline columns stay empty; run "
    "04_roofline first (same run) to place each best configuration on the roofline."
)


def roof_columns(peaks: pd.DataFrame | None, cfg: engine.Config, c: Setting, achieved_gflops: float) -> dict:
    """Where a measurement sits on the roofline: counted intensity, the measured roof of its precision,
    attainable GFLOP/s, the bound, and the efficiency against the compute roof and against the attainable."""
    intensity, note = math.nan, ""
    try:
        args = (cfg.model, c.batch_size, cfg.image_size, cfg.num_classes, cfg.phase, c.precision)
        intensity = roofline.step_intensity(*args)["intensity_flop_per_byte"]
    except Exception as err:  # noqa: BLE001 - the search's result stands without its placement
        note = f"intensity not counted: {type(err).__name__}: {err}"[:200]
    out = {"intensity_flop_per_byte": intensity}
    measured = None if peaks is None else peaks[peaks.kind == "measured"]
    if measured is None or measured.empty:
        why = note or "no measured roofs in this run (04_roofline did not run): efficiency not computed"
        numbers = dict.fromkeys(("roof_peak_gflops", "roof_bandwidth_gbs", "attainable_gflops"), math.nan)
        unknown = dict(bound="", compute_roof_pct=math.nan, attainable_pct=math.nan, roof_note=why)
        return {**out, "roof_precision": "", **numbers, **unknown}
    roof = roofline.roof_for(measured, c.precision)
    finite = math.isfinite(intensity)
    att = roofline.attainable(intensity, roof.peak_gflops, roof.bandwidth_gbs) if finite else math.nan
    fallback = (
        "" if roof.name == c.precision else f"no measured {c.precision} roof: the {roof.name} roof is used"
    )
    return {
        **out,
        "roof_precision": roof.name,
        "roof_peak_gflops": roof.peak_gflops,
        "roof_bandwidth_gbs": roof.bandwidth_gbs,
        "attainable_gflops": att,
        "bound": ("memory" if intensity < roof.ridge_flop_per_byte else "compute") if finite else "",
        "compute_roof_pct": 100 * achieved_gflops / roof.peak_gflops,
        "attainable_pct": 100 * achieved_gflops / att if att == att and att else math.nan,
        "roof_note": "; ".join(x for x in (note, fallback) if x),
    }


def confirm(base: engine.Config, c: Setting, device, p, steps: int) -> dict:
    """The full protocol (``engine.measure``) on setting ``c``: warm-up, repeated windows, 95% interval."""
    protocol = replace(
        p, warmup_steps=p.tune_confirm_warmup_steps, measured_steps=steps, window_s=p.tune_confirm_window_s
    )
    row = engine.measure(base.replace(**c), device, protocol)
    return {k: v for k, v in row.items() if k not in ("step_times_s", "window_steps")}


def identity_of(run, model: str, phase: str, hw: devices.Hardware) -> dict:
    """The columns every row of one search carries (``search_keys``) and the device's name."""
    p = run.params
    base = engine.config(p, model, phase)
    default = default_setting(run, model)
    head = dict(model=model, phase=phase, device_kind=hw.kind, device_name=hw.name)
    shape = {k: getattr(base, k) for k in ("image_size", "num_classes", "in_channels", "dataset")}
    return {
        **head,
        **shape,
        **{f"default_{k}": default[k] for k in knobs.keyed()},
        **{k: ",".join(v) if isinstance(v := getattr(p, k), list) else v for k in TUNING_PARAM_KEYS},
    }


def beyond_memory(base: engine.Config, c: Setting, device, _counts: dict = {}) -> Outcome | None:  # noqa: B006 - the counts of each model, once
    """An out-of-memory outcome, not tried, for a batch whose footprint (saved activations x batch + 4 x the
    weights) exceeds the memory available now on a device sharing the host's; None where it fits."""
    if devices.backend(device).own_memory:
        return None
    import psutil

    from cnnbench.measure import flops

    key = (base.model, base.image_size, base.num_classes)
    if key not in _counts:
        cx = flops.complexity(*key, with_fvcore=False)
        _counts[key] = (cx.activation_mib * 2**20, cx.param_mib * 2**20)
    need, free = c.batch_size * _counts[key][0] + 4 * _counts[key][1], psutil.virtual_memory().available
    gib = f"{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
    return None if need <= free else Outcome("oom", error=f"not tried: batch {c.batch_size} needs {gib}")


def tune_one(run, model: str, phase: str, hw: devices.Hardware, sink, peaks) -> tuple[dict, knobs.Space]:
    p, device = run.params, run.device
    base = engine.config(p, model, phase)
    default = default_setting(run, model)
    sp = knobs.space(hw, default, p)
    names = [k for k in sp.values if knobs.KNOBS[k].numerics]

    def guard_loss(numerics):
        setting = default.with_(**dict(zip(names, numerics, strict=True)), batch_size=p.tune_guard_batch_size)
        return guard.loss_after(base.replace(**setting), device, p, p.tune_guard_steps)

    s = search.Search(
        base,
        sp,
        p,
        identity_of(run, model, phase, hw),
        evaluate=lambda c, w: beyond_memory(base, c, device) or search.window(base, c, device, p, w),
        guard_loss=guard_loss,
        confirm=lambda c, steps: confirm(base, c, device, p, steps),
        sink=sink,
        explain=lambda c, row: roof_columns(peaks, base, c, row.get("achieved_gflops", math.nan)),
        probe=telemetry.speed_probe if devices.backend(device).on_host else None,  # the host CPU's own speed
    )
    return s.run(), sp


def search_line(model: str, phase: str, row: dict) -> str:
    """One console line per row of the search (a window of a rung, the guard, a confirmation)."""
    rate = row.get("throughput_img_s")
    finite = isinstance(rate, (int, float)) and math.isfinite(rate)
    told = f"{rate:,.1f} img/s" if finite else row.get("status", "")
    words = [str(row.get(k, "")) for k in ("row_kind", "stage", "config") if row.get(k, "") != ""]
    what = " ".join(dict.fromkeys(words))  # "guard", not "guard guard"
    return f"  tuning {model} {phase}: {what} {told}".rstrip()


def tune(run) -> pd.DataFrame:
    """Search every model of ``tune_models`` in every phase of ``tune_phases``; returns this run's searches'
    rows of tuning.csv. A rerun skips searches that have their 'best' row with the same search key."""
    p = run.params
    hw = devices.backend(run.device).hardware()
    table = results.table("tuning")
    rows = table.file(run.dir)
    finished = ResultsFile(rows.path, (*search_keys(), "row_kind"))
    space_file = results.file(run.dir, "tuning_space")
    peaks = results.read(run.dir, "device_peaks")
    if not len(peaks):  # 07 opened alone (a fresh Colab VM): the search stands, without roofline columns
        print(NO_PEAKS)
        peaks = None
    searches = [(m, ph, identity_of(run, m, ph, hw)) for m in p.tune_models for ph in p.tune_phases]
    table.plan(run.dir, [identity for *_, identity in searches], "tuning")
    kept = sum(finished.done({**identity, "row_kind": "best"}) for *_, identity in searches)
    for model, phase, identity in searches:
        if finished.done({**identity, "row_kind": "best"}):
            continue
        progress.note(
            f"tuning: {model} {phase}, {p.tune_budget_s:g} s of racing, then guard and confirmation"
        )

        def sink(row, model=model, phase=phase):
            rows.append(row)
            progress.note(search_line(model, phase, row))

        _, sp = tune_one(run, model, phase, hw, sink, peaks)
        space_file.extend({"model": model, **r} for r in sp.rows(hw))
    progress.resumed(kept, len(searches), rows.path.name, "searches (model and phase)")
    return results.read(run.dir, "tuning")
