"""The configuration search of a run: every model of ``tune_models``, every phase of ``tune_phases``, into
``tuning.csv`` (row by row, resumable) and ``tuning_space.csv`` (every knob value, searched or skipped)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from cnnbench import heap, progress, results, roofline, scenarios
from cnnbench.measure import engine, telemetry
from cnnbench.results import ResultsFile
from cnnbench.results.tables import SEARCH_KEYS, TUNING_PARAM_KEYS
from cnnbench.tuning import guard, search, space
from cnnbench.tuning.knobs import applied, shape_of
from cnnbench.tuning.racing import Outcome
from cnnbench.tuning.space import Candidate, Hardware

# What decides a search's outcome (its data, the default configuration it is compared with, the protocol and
# every tune_* key) is declared with the table: results.tables.SEARCH_KEYS. A rerun whose params change any of
# them searches again, into new rows.
PARAM_KEYS = TUNING_PARAM_KEYS


def base_config(p, model: str, phase: str) -> engine.Config:
    dataset, channels, size, classes = scenarios.model_data(p, model)
    return engine.Config(model=model, phase=phase, batch_size=p.batch_size_for(model), image_size=size,
                         num_classes=classes, in_channels=channels, data_mode=p.data_mode, dataset=dataset)


def default_candidate(p, model: str, threads: int, device_kind: str) -> Candidate:
    """The seeds' configuration: fp32, NCHW, eager, their batch size, the run's threads and loader settings."""
    return Candidate(batch_size=p.batch_size_for(model), threads=threads, workers=p.workers,
                     pin_memory=p.pin_memory and device_kind == "cuda" and p.data_mode == "loader",
                     cudnn_benchmark=p.cudnn_benchmark)


NO_PEAKS = ("No device_peaks.csv in this run: the search runs, but its roofline columns stay empty; run "
            "04_roofline first (same run) to place each best configuration on the roofline.")


def read_peaks(run) -> pd.DataFrame | None:
    peaks = results.read(run.dir, "device_peaks")
    return peaks if len(peaks.columns) else None


def roof_columns(peaks: pd.DataFrame | None, cfg: engine.Config, c: Candidate, achieved_gflops: float) -> dict:
    """Where a measurement sits on the roofline: counted intensity, the measured roof of its precision,
    attainable GFLOP/s, the bound, and the efficiency against the compute roof and against the attainable."""
    try:
        intensity = roofline.step_intensity(cfg.model, c.batch_size, cfg.image_size, cfg.num_classes, cfg.phase,
                                            c.precision)["intensity_flop_per_byte"]
    except Exception as err:  # noqa: BLE001 - the search's result stands without its placement
        intensity, note = math.nan, f"intensity not counted: {type(err).__name__}: {err}"[:200]
    else:
        note = ""
    out = {"intensity_flop_per_byte": intensity}
    measured = None if peaks is None else peaks[peaks.kind == "measured"]
    if measured is None or measured.empty:
        return {**out, "roof_precision": "", "roof_peak_gflops": math.nan, "roof_bandwidth_gbs": math.nan,
                "attainable_gflops": math.nan, "bound": "", "compute_roof_pct": math.nan, "attainable_pct": math.nan,
                "roof_note": note or "no measured roofs in this run (04_roofline did not run): efficiency not computed"}
    roof = roofline.roof_for(measured, c.precision)
    att = roofline.attainable(intensity, roof.peak_gflops, roof.bandwidth_gbs) if math.isfinite(intensity) else math.nan
    fallback = "" if roof.name == c.precision else f"no measured {c.precision} roof: the {roof.name} roof is used"
    return {**out, "roof_precision": roof.name, "roof_peak_gflops": roof.peak_gflops,
            "roof_bandwidth_gbs": roof.bandwidth_gbs, "attainable_gflops": att,
            "bound": "" if not math.isfinite(intensity) else
            ("memory" if intensity < roof.ridge_flop_per_byte else "compute"),
            "compute_roof_pct": 100 * achieved_gflops / roof.peak_gflops,
            "attainable_pct": 100 * achieved_gflops / att if att == att and att else math.nan,
            "roof_note": "; ".join(x for x in (note, fallback) if x)}


def confirm(base: engine.Config, c: Candidate, device, protocol: engine.Protocol, settings: search.Settings,
            steps: int) -> dict:
    """The full protocol (``engine.measure``) on candidate ``c``: warm-up, repeated windows, 95% interval."""
    proto = replace(search.protocol_for(protocol, c), warmup_steps=settings.confirm_warmup_steps,
                    measured_steps=steps, window_s=settings.confirm_window_s, repeats=settings.confirm_repeats)
    with applied(c.threads, c.compile_mode, shape_of(search.config_for(base, c), c.threads)):
        row = engine.measure(search.config_for(base, c), device, proto)
    row.pop("step_times_s", None)
    return row


def identity_of(run, model: str, phase: str, hw: Hardware) -> dict:
    """The columns every row of one search carries: ``SEARCH_KEY`` (and the device's name)."""
    p = run.params
    base = base_config(p, model, phase)
    default = default_candidate(p, model, run.threads, run.device.type)
    return {"model": model, "phase": phase, "device_kind": run.device.type, "device_name": hw.name,
            "image_size": base.image_size, "num_classes": base.num_classes, "in_channels": base.in_channels,
            "dataset": base.dataset, "data_mode": p.data_mode, "default_batch_size": default.batch_size,
            "default_threads": default.threads, "default_workers": default.workers,
            "default_pin_memory": default.pin_memory,
            **{k: ",".join(v) if isinstance(v := getattr(p, k), list) else v for k in PARAM_KEYS},
            "host_heap": heap.effective(p.host_heap)}


def beyond_memory(base: engine.Config, c: Candidate, device,
                  _counts: dict = {}) -> Outcome | None:  # noqa: B006 - the counts of each model, once
    """An out-of-memory outcome, not tried, for a batch whose footprint exceeds the memory available now on
    a device sharing the host's (CPU, MPS), where an allocation may succeed and the step then overcommit
    until the OOM killer takes the kernel; None where it fits (or the device has memory of its own). The
    footprint is the workbook's own count (cnnbench.measure.flops: the activations a training step saves per
    image, an upper bound for eval) times the batch, plus 4 x the weights (gradients, optimizer state)."""
    if device.type == "cuda":
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


def tune_one(run, model: str, phase: str, hw: Hardware, sink, peaks) -> dict:
    p, device = run.params, run.device
    base = replace(base_config(p, model, phase), phase=phase)
    default = default_candidate(p, model, run.threads, device.type)
    sp = space.build(hw, default, p.tune_precisions, p.tune_compile_modes, p.tune_min_batch_size,
                     p.tune_max_batch_size, p.data_mode)
    settings = search.Settings.from_params(p)
    protocol = engine.Protocol.from_params(p)
    guard_cfg = replace(base, batch_size=settings.guard_batch_size)
    identity = identity_of(run, model, phase, hw)
    s = search.Search(
        base, sp, settings, identity,
        evaluate=lambda c, w: beyond_memory(base, c, device) or search.window(base, c, device, protocol, w),
        guard_loss=lambda n: guard.loss_after(guard_cfg, device, protocol, n, settings.guard_steps, default.threads),
        confirm=lambda c, steps: confirm(base, c, device, protocol, settings, steps),
        sink=sink,
        explain=lambda c, row: roof_columns(peaks, base, c, row.get("achieved_gflops", math.nan)),
        probe=telemetry.speed_probe if device.type == "cpu" else None,
    )
    return s.run(), sp


def plain(row: dict) -> dict:
    """numpy scalars as Python values: results' CSV cells would otherwise read 'np.float64(...)'."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}


def search_line(model: str, phase: str, row: dict) -> str:
    """One console line per row of the search (a window of a rung, the guard, a confirmation)."""
    rate = row.get("throughput_img_s")
    told = f"{rate:,.1f} img/s" if isinstance(rate, (int, float)) and math.isfinite(rate) else row.get("status", "")
    words = [str(row.get(k, "")) for k in ("row_kind", "stage", "config") if row.get(k, "") != ""]
    what = " ".join(w for i, w in enumerate(words) if i == 0 or w != words[i - 1])  # "guard", not "guard guard"
    return f"  tuning {model} {phase}: {what} {told}".rstrip()


def tune(run) -> pd.DataFrame:
    """Search every model of ``tune_models`` in every phase of ``tune_phases``; returns this run's searches'
    rows of tuning.csv.

    A rerun with the same run name skips the searches that already have their 'best' row with the same
    ``SEARCH_KEY`` (same data, default configuration, protocol and tune_* params); changed params search again.
    """
    p, device = run.params, run.device
    hw = Hardware.detect(device)
    table = results.table("tuning")
    rows = table.file(run.dir)
    finished = ResultsFile(rows.path, (*SEARCH_KEYS, "row_kind"))
    space_file = results.file(run.dir, "tuning_space")
    peaks = read_peaks(run)
    if peaks is None:  # 07 opened alone (a fresh Colab VM): the search stands, its roofline columns stay empty
        print(NO_PEAKS)
    searches = [(model, phase, identity_of(run, model, phase, hw)) for model in p.tune_models
                for phase in p.tune_phases]
    table.plan(run.dir, [identity for *_, identity in searches], "tuning")
    kept = sum(finished.done({**identity, "row_kind": "best"}) for *_, identity in searches)
    for model, phase, identity in searches:
        if finished.done({**identity, "row_kind": "best"}):
            continue
        progress.note(f"tuning: {model} {phase}, {p.tune_budget_s:g} s of racing, then guard and confirmation")

        def sink(row, model=model, phase=phase):
            rows.append(plain(row))
            progress.note(search_line(model, phase, row))

        _, sp = tune_one(run, model, phase, hw, sink, peaks)
        space_file.extend({"model": model, **r} for r in sp.rows(hw))
    progress.resumed(kept, len(searches), rows.path.name, "searches (model and phase)")
    return results.read(run.dir, "tuning")
