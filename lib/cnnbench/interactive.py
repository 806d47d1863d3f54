"""08's explorer: ipywidgets controls that measure one configuration and redraw; headless or with
``interactive: false``, one static measurement with the run's parameters."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import io
import math
import os
import threading
import time
import traceback
from collections.abc import Callable

import pandas as pd

from cnnbench import devices, knobs, params, plots, results, tables
from cnnbench.measure import engine, telemetry, timing
from cnnbench.progress import headless

MIN_WINDOWS = 3  # windows before the interval is trusted
MAX_WINDOWS = 30


def adaptive_windows(
    window: Callable[[], tuple[list[float], float]],
    steps: int,
    batch_size: int,
    target_pct: float,
    max_s: float,
    clock: Callable[[], float] = time.perf_counter,
    on_window: Callable[[dict, float], None] | None = None,
) -> dict:
    """Measured windows (``window()`` -> (step times, synced wall time)) until the 95% interval is within
    ``target_pct`` (3 windows at least) or ``max_s`` has passed (``noisy``); ``on_window(summary, share of max_s)``."""
    start, step_times, walls = clock(), [], []
    while True:
        times, wall = window()
        step_times.extend(times)
        walls.append(wall)
        if len(walls) < 2:
            continue
        summary = timing.summarize(step_times, walls, [steps] * len(walls), batch_size)
        rel_pct = 100 * summary["throughput_ci95_img_s"] / max(summary["throughput_img_s"], 1e-12)
        summary.update(
            throughput_ci95_rel_pct=rel_pct, target_ci95_rel_pct=target_pct, noisy=rel_pct > target_pct
        )
        elapsed = clock() - start
        if on_window:
            on_window(summary, min(elapsed / max_s, 1.0))
        precise = len(walls) >= MIN_WINDOWS and not summary["noisy"]
        if precise or elapsed >= max_s or len(walls) >= MAX_WINDOWS:
            return summary


def quick_measure(
    run,
    model: str,
    batch_size: int,
    precision: str,
    data_mode: str,
    device: str,
    on_progress: Callable[[float, str], None] | None = None,
) -> dict:
    """One measurement: ``explore_warmup_s`` of warm-up, windows of ``explore_window_s`` until the 95% interval is
    within ``explore_ci_pct`` % or ``explore_max_s`` passed (``noisy``); appended to ``explore.csv``."""
    p, dev = run.params, devices.resolve(device)
    b = devices.backend(dev)
    say = on_progress or (lambda fraction, text: None)
    knobs_set = {"batch_size": batch_size, "data_mode": data_mode, "threads": run.threads}
    cfg = engine.config(p, model, "train", {"precision": precision}, **knobs_set)
    p = dataclasses.replace(p, synthetic_images=max(p.synthetic_images, batch_size))
    row = {
        **cfg.replace(**knobs.in_force(cfg.setting, b)).columns(),
        "device_kind": b.kind,
        "device_name": b.name(),
        "status": "ok",
        "error": "",
        "timestamp": engine.now(),
    }
    try:
        if why := knobs.lacks("precision", precision, b.hardware()):  # the answer validation and 07 give
            raise devices.Unavailable(why)
        say(0.0, f"building {model} on {b.kind}")
        with engine.Workload(cfg, dev, p) as work:
            warm, start = [], time.perf_counter()  # at least two steps; the first one's time is dropped
            while len(warm) < 2 or time.perf_counter() - start < p.explore_warmup_s:
                t0 = time.perf_counter()
                work.step()
                devices.synchronize(dev)
                warm.append(time.perf_counter() - t0)
                say(0.0, f"warming up {min((time.perf_counter() - start) / p.explore_warmup_s, 1.0):.0%}")
            steps = max(2, math.ceil(p.explore_window_s / max(min(warm[1:]), 1e-6)))
            row.update(warmup_steps=len(warm) - 1, measured_steps=steps)
            timer = timing.StepTimer(dev)

            def progress(summary, fraction):
                rate, pct = summary["throughput_img_s"], summary["throughput_ci95_rel_pct"]
                say(fraction, f"{summary['repeats']} windows: {rate:,.1f} +- {pct:.0f}% img/s")

            with telemetry.Sampler(dev, p.telemetry_interval_s) as machine:  # judged as the pipeline judges
                window = functools.partial(timer.window, work.step, steps)
                windows = adaptive_windows(
                    window, steps, batch_size, p.explore_ci_pct, p.explore_max_s, on_window=progress
                )
            row.update(windows, **machine.summary())
            row["machine_state"], row["machine_note"] = telemetry.judge(row)
            work.check_loss()
            train_flops, _ = engine.flops_per_image(model, cfg.image_size, cfg.num_classes)
            row.update(achieved_gflops=row["throughput_img_s"] * train_flops / 1e9)
            row["achieved_tflops"] = row["achieved_gflops"] / 1e3
    except Exception as err:  # noqa: BLE001 - a failed measurement is a row with its status
        row.update(engine.failure(err, dev))
    busy = f"; the machine was busy: {row['machine_note']}" if row.get("machine_state") == "busy" else ""
    say(1.0, ("noisy: the interval stayed wide" if row.get("noisy") else f"done ({row['status']})") + busy)
    results.file(run.dir, "explore").append(row)
    return row


def _bundles(history: list[dict], run) -> list[dict]:
    """Every measurement so far as Jupyter mime bundles: the table, the throughput plot and, when 04 measured
    this device's roofs, the roofline, each figure drawn to PNG here (out of reach of pyplot's hooks)."""
    import base64

    from cnnbench import roofline
    from cnnbench.measure.reproducibility import rate_text

    def shown(data: dict, **meta) -> dict:
        return {"output_type": "display_data", "data": data, "metadata": {"cnnbench": meta}}

    def figure(draw, *args, points: int) -> dict:
        with plots.detached():
            fig = draw(*args)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=100, bbox_inches="tight")
        image = base64.b64encode(png.getvalue()).decode()
        return shown({"image/png": image, "text/plain": f"<figure: {points} configurations>"}, points=points)

    def rate_cell(rate: float, half: float) -> str:  # "5,840 ± 560 img/s" on one line; "about 5 img/s (...)"
        if not math.isfinite(half) or half <= 0 or half >= rate:
            return rate_text(rate, half).replace(" ", "\u00a0")
        return f"{tables.with_interval(rate, half)}\u00a0img/s"

    df = pd.DataFrame(history)
    if "throughput_img_s" in df:  # the raw figures stay in explore.csv
        df["rate"] = [
            rate_cell(r, c) if pd.notna(r) else ""
            for r, c in zip(df.throughput_img_s, df.throughput_ci95_img_s, strict=True)
        ]
    cols = "model device_name batch_size image_size precision data_mode status machine_state rate achieved_tflops error"
    table = df[[c for c in [*cols.split(), "machine_note"] if c in df]].round(3)
    html, text = table.to_html(index=False), table.to_string(index=False)
    out = [shown({"text/html": html, "text/plain": text}, rows=len(table))]
    ok = df[df.status == "ok"]
    if ok.empty:
        return out
    pts = plots.explorer_points(ok)  # a configuration clicked twice is one point
    out.append(figure(plots.explorer_throughput, pts, points=len(pts)))
    peaks = results.read(run.dir, "device_peaks")
    if len(peaks):
        keys = ["model", "phase", "batch_size", "image_size", "precision"]  # each point's step, counted
        placed = pts.merge(roofline.intensities_for(pts)[[*keys, "intensity_flop_per_byte"]], on=keys)
        out.append(figure(plots.explorer_roofline, peaks, placed, points=len(pts)))
    else:
        note = f"No roofline yet: this run has no device_peaks.csv; run {params.NUMBERED['04']} to measure its roofs."
        out.append({"output_type": "stream", "name": "stdout", "text": note + "\n"})
    return out


def _show(history: list[dict], run) -> None:
    """The bundles of :func:`_bundles` displayed in the running cell (the headless, static explorer)."""
    from IPython.display import display

    for b in _bundles(history, run):
        if b["output_type"] == "stream":
            print(b["text"], end="")
        else:
            display(b["data"], raw=True, metadata=b["metadata"])


def on_main_thread(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` made to run on the kernel's main thread, between cells, when called from another thread; call
    this on the main thread (outside a running event loop ``fn`` runs where it is called)."""
    try:
        loop, owner = asyncio.get_running_loop(), threading.get_ident()  # the kernel's, while a cell runs
    except RuntimeError:
        loop = owner = None

    def call() -> None:
        if loop is None or threading.get_ident() == owner:
            fn()
            return
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:  # the loop has closed
            fn()

    return call


NO_MEASURE_ENV = "CNNBENCH_NO_MEASURE"  # set by `cnnbench report`: the static explorer shows, never measures


def explorer(run):
    """Controls for model, batch size, precision, data mode and device; static single run when headless."""
    p = run.params
    model, bs = p.models[0], p.batch_size_for(p.models[0])
    precision = p.variants[0].get("precision", "fp32")
    try:
        import ipywidgets as w
    except ImportError:
        w = None
        if not headless() and p.interactive:
            fix = "pip install ipywidgets (7.x or 8.x) and rerun this cell for the controls."
            print(f"No ipywidgets here, so one static measurement: {fix}")
    if w is None or headless() or not p.interactive:
        df = results.read(run.dir, "explore")  # this configuration's latest finished measurement, if any
        mine = (df.model == model) & (df.batch_size == bs) & (df.precision == precision)
        kept = df[mine & (df.data_mode == p.data_mode) & df.status.isin(results.DONE_STATUSES)].tail(1)
        kept = kept.to_dict("records")
        if kept or os.environ.get(NO_MEASURE_ENV):
            why = "`cnnbench report` measures nothing (open 08 in JupyterLab to measure)"
            _show(kept, run) if kept else print(f"no explorer measurement in this run; {why}")
        else:
            _show([quick_measure(run, model, bs, precision, p.data_mode, str(run.device))], run)
        return None
    from IPython.display import display

    hw = devices.backend(run.device).hardware()
    precisions = [x for x in knobs.KNOBS["precision"].values if not knobs.lacks("precision", x, hw)]
    choices = {  # each control's options, value and label
        "model": (list(p.models), model, "model"),
        "batch_size": (sorted({*plots.EXPLORER_BATCHES, bs}), bs, "batch"),
        "precision": (precisions, precision, "precision"),
        "data_mode": (list(knobs.KNOBS["data_mode"].values), p.data_mode, "data"),
        "device": (devices.available(), run.device.type, "device"),
    }
    controls = {k: w.Dropdown(options=o, value=v, description=d) for k, (o, v, d) in choices.items()}
    button, out, history = w.Button(description="measure", button_style="primary"), w.Output(), []
    bar, label = w.FloatProgress(value=0.0, min=0.0, max=1.0), w.Label("")

    def on_progress(fraction: float, text: str) -> None:
        bar.value, label.value = fraction, text

    def measure():
        try:
            chosen = {k: c.value for k, c in controls.items()}
            history.append(quick_measure(run, **chosen, on_progress=on_progress))
            out.outputs = tuple(_bundles(history, run))  # every click's result beside the earlier ones
        except Exception as err:  # noqa: BLE001 - run from the event loop, a raised error reaches only its log
            label.value = f"failed: {type(err).__name__}: {err}"
            out.append_stderr(traceback.format_exc())
        finally:
            button.disabled = False

    measure_between_cells = on_main_thread(measure)

    def on_click(_):
        button.disabled = True
        label.value = "waiting for the running cells to finish"
        measure_between_cells()

    button.on_click(on_click)
    c = list(controls.values())
    display(w.VBox([w.HBox(c[:3]), w.HBox([*c[3:], button]), w.HBox([bar, label]), out]))
    return dict(controls, measure=button, history=history, progress=bar, status=label, output=out)
