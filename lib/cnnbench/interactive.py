"""Interactive exploration: ipywidgets controls that run a quick measurement and redraw the plots.

In JupyterLab the controls measure live; under papermill (``CNNBENCH_HEADLESS=1``) or with
``interactive: false`` the same call measures once with the run's parameters and shows static output, so a
report needs no widget state.
"""

from __future__ import annotations

import pandas as pd
import torch

from cnnbench import devices, engine, params, plots, results, scenarios
from cnnbench.progress import headless


def quick_measure(run, model: str, batch_size: int, precision: str, data_mode: str, device: str,
                  steps: int = 5) -> dict:
    """One short measurement (2 warm-up steps, 2 windows of ``steps``), appended to ``explore.csv``."""
    p = run.params
    _, channels, size, classes = scenarios.model_data(p, model)
    cfg = engine.Config(model, "train", batch_size, size, classes, channels, precision, "nchw", False, data_mode)
    protocol = engine.Protocol(warmup_steps=2, measured_steps=steps, repeats=2, workers=p.workers,
                               synthetic_images=max(p.synthetic_images, batch_size), seed=p.seed)
    row = engine.measure(cfg, devices.resolve(device), protocol)
    engine.pop_side_data(row)
    results.ResultsFile(run.path("explore.csv"), ("timestamp", "model", "batch_size", "precision")).append(row)
    return row


def _show(history: list[dict], run) -> None:
    import matplotlib.pyplot as plt
    from IPython.display import display

    from cnnbench import roofline

    def show(fig):
        display(fig)
        plt.close(fig)

    df = pd.DataFrame(history)
    display(df[["model", "device_name", "batch_size", "precision", "data_mode", "status", "throughput_img_s",
                "throughput_ci95_img_s", "achieved_tflops"]].round(3))
    ok = df[df.status == "ok"]
    if ok.empty:
        return
    show(plots.throughput(ok))
    peaks_file = run.path("device_peaks.csv")
    if peaks_file.is_file():
        peaks = pd.read_csv(peaks_file)
        ints = [roofline.step_intensity(r.model, int(r.batch_size), int(r.image_size), int(r.num_classes), "train",
                                        r.precision)["intensity_flop_per_byte"] for r in ok.itertuples()]
        show(plots.roofline(peaks, ok.assign(intensity_flop_per_byte=ints), "explored configurations"))


def explorer(run):
    """Controls for model, batch size, precision, data mode and device; static single run when headless."""
    p = run.params
    model, bs = p.models[0], p.batch_size_for(p.models[0])
    precision = p.variants[0].get("precision", "fp32")
    if headless() or not p.interactive:
        _show([quick_measure(run, model, bs, precision, p.data_mode, run.device.type)], run)
        return None
    import ipywidgets as w
    from IPython.display import display

    controls = {
        "model": w.Dropdown(options=list(p.models), value=model, description="model"),
        "batch_size": w.Dropdown(options=sorted({8, 16, 32, 64, 128, 256, 512, bs}), value=bs, description="batch"),
        "precision": w.Dropdown(options=[x for x in params.PRECISIONS if x != "tf32" or torch.cuda.is_available()],
                                value=precision, description="precision"),
        "data_mode": w.Dropdown(options=list(params.DATA_MODES), value=p.data_mode, description="data"),
        "device": w.Dropdown(options=devices.available(), value=run.device.type, description="device"),
    }
    button, out, history = w.Button(description="measure", button_style="primary"), w.Output(), []

    def on_click(_):
        button.disabled = True
        try:
            history.append(quick_measure(run, **{k: c.value for k, c in controls.items()}))
            out.clear_output(wait=True)
            with out:
                _show(history, run)
        finally:
            button.disabled = False

    button.on_click(on_click)
    display(w.VBox([w.HBox(list(controls.values())[:3]), w.HBox([*list(controls.values())[3:], button]), out]))
    return {**controls, "measure": button, "history": history}
