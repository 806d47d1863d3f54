"""Every panel of a figure draws data: plots.empty_axes finds the panels that do not, plots.save records them."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.legend import Legend

from cnnbench import plots, results
from cnnbench.measure import telemetry


def test_empty_axes_finds_panels_without_finite_data():
    fig = Figure()
    axes = fig.subplots(2, 3).ravel()
    axes[0].plot([0, 1], [1, 2])
    axes[0].set_title("line")
    axes[1].plot([0, 1], [np.nan, np.nan])
    axes[1].set_title("only NaN")
    axes[2].axvline(0.5)  # decoration, not data
    axes[2].set_ylabel("only a vline")
    axes[3].bar(["a", "b"], [np.nan, 3.0])
    axes[3].set_title("bars")
    axes[4].scatter([np.nan], [np.nan])
    axes[4].set_title("NaN scatter")
    axes[5].set_axis_off()  # deliberately off (a legend-only panel)
    assert plots.empty_axes(fig) == ["only NaN", "only a vline", "NaN scatter"]


def _telemetry(tmp_path):
    """telemetry.csv as the sampler writes it: per-core rows carry a device index, host-wide rows a blank one."""
    rows = []
    for t in np.arange(0.0, 2.0, 0.5):
        rows += [
            {"t_s": t, "metric": "util_cpu_core_pct", "value": 50.0 + i, "device_index": i} for i in (0, 1)
        ]
        rows += [
            {"t_s": t, "metric": m, "value": v, "device_index": None}
            for m, v in (("util_cpu_pct", 60.0), ("util_process_cpu_pct", 90.0), ("rss_mib", 500.0 + t))
        ]
    df = pd.DataFrame(rows).assign(source="scenario_a", model="m", phase="train")
    df.to_csv(tmp_path / "telemetry.csv", index=False)
    return results.read(tmp_path, "telemetry").query("source == 'scenario_a'")


def test_telemetry_timeline_draws_the_host_wide_metrics(tmp_path):
    df = _telemetry(tmp_path)
    assert df.device_index.isna().sum() == 12
    fig = plots.telemetry_timeline(df, tmp_path / "t.png")
    assert [ax.get_ylabel() for ax in fig.axes] == [
        plots.axis_label(m, wrap=True)
        for m in ("util_cpu_core_pct", "util_cpu_pct", "util_process_cpu_pct", "rss_mib")
    ]
    assert plots.empty_axes(fig) == []
    assert not (tmp_path / plots.EMPTY_PANELS).exists()


def test_save_records_empty_panels_beside_the_figure(tmp_path):
    fig = Figure()
    a, b = fig.subplots(1, 2)
    a.plot([0, 1], [0, 1])
    b.set_title("nothing")
    with pytest.warns(UserWarning, match="nothing"):
        plots.save(fig, tmp_path / "f.png")
    assert (tmp_path / "f.png").is_file()
    log = pd.read_csv(tmp_path / plots.EMPTY_PANELS)
    assert log.to_dict("records") == [{"figure": "f.png", "panel": "nothing"}]
    b.plot([0, 1], [1, 0])
    plots.save(fig, tmp_path / "f.png")  # whole again: its row goes
    assert not (tmp_path / plots.EMPTY_PANELS).exists()


def test_a_log_axis_spanning_less_than_a_decade_still_shows_tick_labels(tmp_path):
    """Issue 17/20: batch_sweep.png's achieved-rate panel (values within one decade) had a log axis with no tick
    label at all."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [120.0, 180.0, 260.0])
    ax.set_yscale("log")
    ax.minorticks_off()  # as the sweep's panels do, for their batch-size axis
    plots.save(fig, tmp_path / "f.png")
    fig.canvas.draw()
    labels = [
        t.get_text()
        for t in ax.yaxis.get_majorticklabels() + ax.yaxis.get_minorticklabels()
        if t.get_visible() and t.get_text() and ax.get_ylim()[0] <= t.get_position()[1] <= ax.get_ylim()[1]
    ]
    plt.close(fig)
    assert len(labels) >= 2, labels


@pytest.mark.parametrize("low, high", [(2.25, 2.31), (1.9, 2.4), (0.5, 2.3), (120.0, 260.0)])
def test_the_tick_labels_of_a_narrow_log_axis_are_all_different(tmp_path, low, high):
    """A short MLP run's convergence figure (loss 2.25 to 2.31 on a log axis) labelled each of its ticks "2": a
    label's digits came from the value's magnitude alone, not from how far apart the ticks are."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [low, (low + high) / 2, high])
    ax.set_yscale("log")
    plots.save(fig, tmp_path / "f.png")
    fig.canvas.draw()
    lo, hi = ax.get_ylim()
    labels = [
        t.get_text()
        for t in ax.yaxis.get_majorticklabels() + ax.yaxis.get_minorticklabels()
        if t.get_visible() and t.get_text() and lo <= t.get_position()[1] <= hi
    ]
    plt.close(fig)
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels


def _points_under_legends(fig) -> int:
    """Data points (line vertices) drawn under a legend of ``fig``, in display coordinates."""
    fig.canvas.draw()
    boxes = [lg.get_window_extent() for lg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if lg]
    hidden = 0
    for ax in fig.axes:
        for line in ax.get_lines():
            for x, y in ax.transData.transform(line.get_xydata()):
                hidden += any(b.contains(x, y) for b in boxes)
    return hidden


def test_the_sweep_legend_covers_no_data(tmp_path):
    """Issue 17/20: analysis_sweep.png's legends sat over the eval lines of two panels."""
    from conftest import ROOT

    sweep = pd.read_csv(
        ROOT / "examples" / "example-cpu-2core" / "batch_sweep.csv"
    )  # the figure as committed
    sweep = sweep.assign(model=sweep.model + " @ example-cpu-2core")  # as 08 labels each run's lines
    fig = plots.batch_sweep(sweep, None, tmp_path / "sweep.png")
    assert _points_under_legends(fig) == 0


def test_the_complexity_figure_draws_points_not_bars_on_its_log_axes_and_no_legend_over_them(tmp_path):
    """Issue 17/20: complexity.png drew bars on log axes (no length to read) under legends covering DenseNet."""
    from matplotlib.patches import Rectangle

    from conftest import ROOT

    fig = plots.complexity(
        pd.read_csv(ROOT / "examples" / "example-cpu-2core" / "complexity.csv"), tmp_path / "c.png"
    )
    fig.canvas.draw()
    bars = [p for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    assert bars == []
    boxes = [lg.get_window_extent() for lg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if lg]
    points = [xy for ax in fig.axes for c in ax.collections for xy in ax.transData.transform(c.get_offsets())]
    assert points and not any(b.contains(x, y) for b in boxes for x, y in points)


def test_axis_labels_are_words_with_units_not_column_names(tmp_path):
    """Issue 20: figures labelled their axes with raw column names (util_cpu_core_pct, peak_rss (MiB))."""
    from conftest import ROOT

    example = ROOT / "examples" / "example-cpu-2core"
    figures = [
        plots.telemetry_timeline(
            results.read(example, "telemetry").query("source == 'scenario_a'"), tmp_path / "t.png"
        ),
        plots.batch_sweep(pd.read_csv(example / "batch_sweep.csv"), None, tmp_path / "s.png"),
        *(
            plots.experiment_timeline(
                pd.read_csv(example / "transfer_telemetry.csv"), e, tmp_path / f"{e}.png"
            )
            for e in ("transfer", "scaling")
        ),
    ]
    raw = [ax.get_ylabel() for fig in figures for ax in fig.axes if "_" in ax.get_ylabel()]
    assert raw == []


def test_the_device_roofline_names_its_points_without_labels_over_each_other_or_over_data(tmp_path):
    """Issue 20: roofline_device.png drew resnet18's and resnet50's labels over each other (and over points)."""
    from conftest import ROOT

    example = ROOT / "examples" / "example-cpu-2core"
    placed = pd.read_csv(example / "roofline.csv")
    placed = placed[placed.source == "scenario_a"]
    fig = plots.roofline(pd.read_csv(example / "device_peaks.csv"), placed, "Scenario A", tmp_path / "r.png")
    fig.canvas.draw()
    texts = [t.get_window_extent() for ax in fig.axes for t in ax.texts]
    assert not any(a.overlaps(b) for i, a in enumerate(texts) for b in texts[i + 1 :])
    legend = fig.axes[0].get_legend().get_window_extent()
    points = [xy for c in fig.axes[0].collections for xy in fig.axes[0].transData.transform(c.get_offsets())]
    assert points and not any(legend.contains(x, y) for x, y in points)


def test_the_batch_sweep_trajectory_names_batch_sizes_without_labels_over_each_other(tmp_path):
    """Issue 18: roofline_sweep.png wrote each point's batch size beside it, drawn over each other where the
    sweep's points crowd (intensity barely moves with the batch)."""
    from conftest import ROOT

    example = ROOT / "examples" / "example-cpu-2core"
    placed = pd.read_csv(example / "roofline.csv")
    placed = placed[placed.source == "batch_sweep"]
    fig = plots.trajectory(
        pd.read_csv(example / "device_peaks.csv"), placed, "Batch sweep", tmp_path / "s.png"
    )
    fig.canvas.draw()
    ax = fig.axes[0]
    texts = [t.get_window_extent() for a in fig.axes for t in a.texts if t.get_text()]
    assert not any(a.overlaps(b) for i, a in enumerate(texts) for b in texts[i + 1 :])
    legends = [lg for lg in (*ax.artists, ax.get_legend(), *fig.legends) if isinstance(lg, Legend)]
    shown = " ".join(t.get_text() for lg in legends for t in lg.get_texts())
    assert all(str(b) in shown.split() for b in placed.batch_size.unique())  # every batch size is named
    boxes = [lg.get_window_extent() for lg in legends]
    points = [xy for c in ax.collections for xy in ax.transData.transform(c.get_offsets())]
    assert points and not any(b.contains(x, y) for b in boxes for x, y in points)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_the_tuning_figures_legend_covers_no_bar_or_point():
    """Issue 20: tuning.png's legend sat over the confirmed bars (the example's nchw bar ran under it)."""
    import pandas as pd

    from cnnbench import tuning
    from conftest import ROOT

    df = pd.read_csv(ROOT / "examples" / "example-cpu-2core" / "tuning.csv")
    fig = tuning.plot(df)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent(renderer)
        data = [p.get_window_extent(renderer) for p in ax.patches] + [
            line.get_window_extent(renderer) for line in ax.lines if len(line.get_xdata())
        ]
        assert not any(legend.overlaps(d) for d in data)


def test_a_models_roofline_tells_its_train_point_from_its_eval_point(tmp_path):
    """The example's roofline_model_*.png drew train and eval as two identical dots: a reader could not tell
    which was which. Each phase has its own marker, named in the legend."""
    import pandas as pd

    from cnnbench import plots

    pts = pd.DataFrame(
        {
            "run_name": "r",
            "device_name": "cpu",
            "model": "m",
            "phase": ["train", "eval"],
            "intensity_flop_per_byte": [10.0, 9.0],
            "achieved_gflops": [50.0, 40.0],
        }
    )
    roofs = pd.DataFrame(
        {
            "run_name": ["r"],
            "kind": "measured",
            "precision": "fp32",
            "level": "dram",
            "peak_gflops": 180.0,
            "bandwidth_gbs": 40.0,
        }
    )
    fig = plots.per_model_rooflines(pts, roofs, tmp_path, min_runs=1)["m"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("train" in t for t in labels) and any("eval" in t for t in labels)
    markers = {c.get_label(): c.get_paths()[0].vertices.round(3).tobytes() for c in fig.axes[0].collections}
    assert len(set(markers.values())) == 2


def test_a_sweep_drawn_without_knees_promises_no_circle():
    """analysis_sweep.png's title read "circle: smallest batch within 5% of best" and drew no circle (08 passes
    no knees)."""
    import pandas as pd

    from cnnbench import plots, results

    df = pd.DataFrame(
        {
            "model": "m",
            "phase": "train",
            "batch_size": [32, 64],
            "status": "ok",
            "throughput_img_s": [10.0, 12.0],
            "throughput_ci95_img_s": 0.5,
            "achieved_gflops": [1.0, 1.2],
            "peak_rss_mib": [100.0, 120.0],
        }
    )
    df = results.schema.declared(df, "batch_sweep")  # as read: no device memory (NA)
    assert "circle" not in plots.batch_sweep(df).axes[0].get_title()
    knees = pd.DataFrame({"model": ["m"], "phase": ["train"], "knee_batch_size": [64]})
    assert "circle" in plots.batch_sweep(df, knees).axes[0].get_title()


def test_the_bandwidth_sweep_names_cache_sizes_in_its_legend_not_over_the_data():
    """The example's bandwidth_sweep.png wrote "l1: 32 KiB each, 64 KiB in use" (and l2, l3) vertically across
    the measured lines."""
    import pandas as pd

    from cnnbench import plots
    from conftest import ROOT

    ex = ROOT / "examples" / "example-cpu-2core"
    fig = plots.bandwidth_sweep(
        pd.read_csv(ex / "bandwidth_sweep.csv"), pd.read_csv(ex / "device_peaks.csv"), "t"
    )
    ax = fig.axes[0]
    assert not ax.texts
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("KiB in use" in t for t in legend) == 3


def test_the_scaling_telemetry_tells_its_two_ranks_apart(tmp_path):
    """The example's scaling_telemetry.png drew world=2's rank 0 and rank 1 in one colour and one line style,
    and its legend (taken from the per-core panel, which has no ranks) named neither rank."""

    from cnnbench import results

    for rank in (0, 1):
        samples = [
            {"t_s": t, "metric": "util_process_cpu_pct", "value": 90.0 + rank + t} for t in (0.1, 0.2, 0.3)
        ]
        samples += (
            [
                {"t_s": t, "metric": "util_cpu_core_pct", "value": 99.0, "device_index": i}
                for t in (0.1, 0.2)
                for i in (0, 1)
            ]
            if rank == 0
            else []
        )
        telemetry.record(tmp_path, samples, "scaling", "gloo world=2", "cpu", "cpu", rank)
    df = results.read(tmp_path, "transfer_telemetry")
    fig = plots.experiment_timeline(df, "scaling", tmp_path / "t.png")
    process = next(ax for ax in fig.axes if "process" in ax.get_ylabel())
    styles = {(line.get_color(), line.get_linestyle(), line.get_linewidth()) for line in process.get_lines()}
    assert len(styles) == 2
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("rank 1" in t for t in labels)


def test_a_memory_level_keeps_its_marker_from_one_layer_roofline_to_the_next():
    """The example's layer rooflines marked l3 by a square beside DRAM's circles (mobilenet_v2, densenet121) and
    by a circle where every layer fitted in l3 (resnet18, mnist_cnn): the marker was given by sorted order."""
    import pandas as pd

    from cnnbench import plots

    def marker_of(fig, label):
        coll = next(c for c in fig.axes[0].collections if c.get_label() == label)
        return coll.get_paths()[0].vertices.round(3).tobytes()

    peaks = pd.DataFrame(
        {
            "kind": ["measured"],
            "precision": "fp32",
            "level": "dram",
            "peak_gflops": 180.0,
            "bandwidth_gbs": 40.0,
        }
    )
    only_l3 = pd.DataFrame(
        {"op": "conv", "level": ["l3"], "intensity_flop_per_byte": [10.0], "achieved_gflops": [50.0]}
    )
    both = pd.DataFrame(
        {
            "op": "conv",
            "level": ["dram", "l3"],
            "intensity_flop_per_byte": [10.0, 20.0],
            "achieved_gflops": [50.0, 60.0],
        }
    )
    a = plots.roofline(peaks, only_l3, "a", label="op", hue="level")
    b = plots.roofline(peaks, both, "b", label="op", hue="level")
    assert marker_of(a, "conv l3") == marker_of(b, "conv l3") != marker_of(b, "conv dram")


def test_telemetry_legends_give_each_colour_and_style_one_label_and_no_axis_label_overflows_its_panel(
    tmp_path,
):
    """The example's scaling_telemetry.png listed 'gloo world=1 #0' and 'gloo world=1' with the same solid blue
    line (and '#0' did not say it was a core); telemetry_timeline.png's 'this process's CPU' label ran past its
    panel into the next."""
    from conftest import ROOT

    example = ROOT / "examples" / "example-cpu-2core"
    df = pd.read_csv(example / "transfer_telemetry.csv")
    figs = [plots.experiment_timeline(df, e, tmp_path / f"{e}.png") for e in ("transfer", "scaling")]
    for fig in figs:
        legend = fig.legends[0]
        keys = [(h.get_color(), h.get_linestyle()) for h in legend.legend_handles]
        labels = [t.get_text() for t in legend.get_texts()]
        assert len(set(keys)) == len(keys), labels
        assert not any("#" in t for t in labels), labels
    timeline = plots.telemetry_timeline(
        results.read(example, "telemetry").query("source == 'scenario_a'"), tmp_path / "t.png"
    )
    for f in (*figs, timeline):
        f.canvas.draw()
        renderer = f.canvas.get_renderer()
        for ax in f.axes:
            label, panel = ax.yaxis.label.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert panel.y0 - 2 <= label.y0 and label.y1 <= panel.y1 + 2, ax.get_ylabel()


def test_the_timelines_core_legend_sits_beside_its_panel_never_over_the_data(tmp_path):
    """The example's telemetry_timeline.png put its 'core 0 / core 1' legend in the top panel's upper right, on the
    lines at 100%."""
    from conftest import ROOT

    df = results.read(ROOT / "examples" / "example-cpu-2core", "telemetry").query("source == 'scenario_a'")
    fig = plots.telemetry_timeline(df, tmp_path / "t.png")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend()]
    assert legends
    for ax, legend in legends:
        assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1 - 1


def test_no_roof_of_the_device_roofline_lies_under_another():
    """The example's roofline_device.png drew each cache level's slope once per precision: fp32's dotted roofs lay
    under bf16's (the same bandwidth) and showed only where they met fp32's flat roof. A level's slope is drawn
    once; each precision's compute roof stays its own."""
    from conftest import ROOT

    example = ROOT / "examples" / "example-cpu-2core"
    peaks = pd.read_csv(example / "device_peaks.csv")
    fig = plots.roofline(peaks, pd.DataFrame(columns=["intensity_flop_per_byte", "achieved_gflops"]), "t")
    assert _roofs_over_each_other(fig.axes[0]) == []


def _markers_over_each_other(ax) -> list:
    """Pairs of scatter markers of ``ax`` drawn over each other: closer, in display space, than the sum of their
    radii."""
    ax.figure.canvas.draw()
    marks = []
    for c in ax.collections:
        xy = ax.transData.transform(c.get_offsets()) if len(c.get_offsets()) else []
        sizes = np.broadcast_to(c.get_sizes() if len(c.get_sizes()) else [36.0], (len(xy),))
        marks += [
            (p, np.sqrt(s) * ax.figure.dpi / 144, c.get_label()) for p, s in zip(xy, sizes, strict=True)
        ]
    return [
        (a[2], b[2])
        for i, a in enumerate(marks)
        for b in marks[i + 1 :]
        if np.hypot(*(a[0] - b[0])) < a[1] + b[1] - 0.5
    ]


def _roofs_over_each_other(ax) -> list:
    """Pairs of labelled lines of ``ax`` that share a stretch: two or more vertices of one lie on the other (log
    space), so one hides the other there."""
    lines = [
        line for line in ax.get_lines() if len(line.get_xdata()) > 1 and not line.get_label().startswith("_")
    ]

    def on(a, b) -> int:
        xa, ya, xb, yb = (np.log10(np.asarray(v, float)) for v in (*a.get_data(), *b.get_data()))
        inside = (xa >= xb.min() - 1e-9) & (xa <= xb.max() + 1e-9)
        return int((inside & np.isclose(ya, np.interp(xa, xb, yb), atol=1e-6)).sum())

    return [
        (a.get_label(), b.get_label())
        for i, a in enumerate(lines)
        for b in lines[i + 1 :]
        if max(on(a, b), on(b, a)) >= 2
    ]


def _example(name):
    from conftest import ROOT

    return pd.read_csv(ROOT / "examples" / "example-cpu-2core" / name)


def test_the_device_roofline_shows_every_roof_and_every_point(tmp_path):
    """Issue 44: roofline_device.png hid resnet18 eval under its train point (and mnist_cnn's train under
    mobilenet_v2's), and the fp32 DRAM slope under bf16's (the same 34 GB/s), the cache slopes along bf16's flat
    roof. Each slope is drawn once, each compute roof once, and markers that would overlap are set apart."""
    placed = _example("roofline.csv")
    fig = plots.roofline(
        _example("device_peaks.csv"), placed[placed.source == "scenario_a"], "Scenario A", tmp_path / "r.png"
    )
    ax = fig.axes[0]
    assert _roofs_over_each_other(ax) == []
    assert _markers_over_each_other(ax) == []
    legend = " | ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "measured fp32" in legend and "measured bf16" in legend and "measured dram" in legend, legend


def test_the_sweep_trajectory_shows_every_squeezenet_point(tmp_path):
    """Issue 44: roofline_sweep.png drew SqueezeNet's four batch sizes of a phase over each other (the batch barely
    moves its intensity or rate)."""
    placed = _example("roofline.csv")
    fig = plots.trajectory(
        _example("device_peaks.csv"),
        placed[placed.source == "batch_sweep"],
        "Batch sweep",
        tmp_path / "s.png",
    )
    assert _markers_over_each_other(fig.axes[0]) == []


def test_a_models_roofline_says_the_seeds_points_are_published_from_their_own_devices(tmp_path):
    """Issue 44: roofline_model_resnet18.png drew seed 003's RTX 4080 and T4 points far above our CPU roof and said
    only "open markers: the seeds"; the figure must say they are published, measured on other devices, and
    whose roof is drawn."""
    pts = pd.DataFrame(
        {
            "run_name": "cpu-vm",
            "device_name": "Xeon",
            "model": "resnet18",
            "phase": ["train", "eval"],
            "intensity_flop_per_byte": [47.6, 47.7],
            "achieved_gflops": [210.0, 248.0],
        }
    )
    roofs = pd.DataFrame(
        {"run_name": ["cpu-vm"], "kind": "measured", "precision": "fp32", "level": "dram"}
        | {"peak_gflops": 393.0, "bandwidth_gbs": 34.0}
    )
    theirs = pd.DataFrame(
        {
            "seed": ["003_x", "000_y"],
            "device": ["rtx4080", "t4"],
            "phase": "train",
            "model": "resnet18",
            "intensity_flop_per_byte": [60.0, 48.0],
            "corrected": [11.5, 0.27],
        }
    )
    fig = plots.per_model_rooflines(pts, roofs, tmp_path, min_runs=1, theirs=theirs)["resnet18"]
    legend = fig.axes[0].get_legend()
    shown = " | ".join([legend.get_title().get_text(), *(t.get_text() for t in legend.get_texts())])
    assert "published" in shown and "their own devices" in shown, shown
    assert "cpu-vm" in shown and "roof" in shown
    assert _markers_over_each_other(fig.axes[0]) == []


def _log_tick_labels(fig) -> list:
    """The visible tick labels of every log axis of ``fig`` (major and minor), and any offset text."""
    fig.canvas.draw()
    labels = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                ticks = axis.get_majorticklabels() + axis.get_minorticklabels()
                labels += [t.get_text() for t in ticks if t.get_visible() and t.get_text()]
                labels += [axis.get_offset_text().get_text()] if axis.get_offset_text().get_text() else []
    return labels


def test_the_backends_figure_writes_plain_numbers_on_its_log_axes(tmp_path):
    """Issue 44: backends_cnn.png labelled its log axes "6e-01", "4e-01" and "2e+04" beside "10^0" and "10^4"."""
    import re

    from cnnbench.scratch import summary

    fig = summary.figure_1(_example("backends.csv"), tmp_path / "b.png")
    labels = _log_tick_labels(fig)
    assert len(labels) >= 4 and all(re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?", t) for t in labels), labels


def test_every_panel_of_the_batch_sweep_is_titled(tmp_path):
    """Issue 44: analysis_sweep.png (and 03's batch_sweep.png) titled one panel of three."""
    fig = plots.batch_sweep(_example("batch_sweep.csv"), None, tmp_path / "s.png")
    assert len(fig.axes) == 3 and all(ax.get_title() for ax in fig.axes)


def test_08_draws_the_sweeps_side_by_side_only_when_it_merged_several_runs(tmp_path, capsys):
    """Issue 44: a one-run report's analysis_sweep.png was 03's batch_sweep.png again."""
    import json
    from types import SimpleNamespace

    from cnnbench import analysis
    from conftest import ROOT

    cells = json.loads((ROOT / "notebooks" / "08_analysis.ipynb").read_text())["cells"]
    code = next("".join(c["source"]) for c in cells if "analysis_sweep.png" in "".join(c["source"]))
    run = SimpleNamespace(figure_path=lambda name: tmp_path / name)
    one = _example("batch_sweep.csv").assign(run_name="a")
    exec(code, {"analysis": analysis, "run": run, "merged": {"batch_sweep": one}})
    assert not (tmp_path / "analysis_sweep.png").exists() and "batch_sweep.png" in capsys.readouterr().out
    two = pd.concat([one, one.assign(run_name="b")])
    exec(code, {"analysis": analysis, "run": run, "merged": {"batch_sweep": two}})
    assert (tmp_path / "analysis_sweep.png").exists()


def test_the_scaling_telemetry_counts_no_rank_of_the_run_as_another_process(tmp_path):
    """Issue 44: scaling_telemetry.png drew world 2's 'other processes' CPU' near 50% of two cores: rank 0's
    sampler counted rank 1, the run's own second process, as another process (and rank 1 counted rank 0)."""
    from cnnbench import results
    from cnnbench import scaling as launch

    def rank(r, other, own):
        series = [{"t_s": t, "metric": "util_other_cpu_pct", "value": other} for t in (0.1, 0.2, 0.3)]
        series += [{"t_s": t + 0.01, "metric": "util_process_cpu_pct", "value": own} for t in (0.1, 0.2, 0.3)]
        summary = {"util_other_cpu_mean_pct": other, "util_process_cpu_mean_pct": own}
        return {"rank": r, "series": series, "summary": summary}

    ranks = launch.own_ranks([rank(0, 60.0, 95.0), rank(1, 55.0, 95.0)], cores=2)
    assert [r["summary"]["util_other_cpu_mean_pct"] for r in ranks] == [12.5, 7.5]
    for r in ranks:
        telemetry.record(tmp_path, r["series"], "scaling", "gloo world=2", "cpu", "cpu", r["rank"])
    fig = plots.experiment_timeline(
        results.read(tmp_path, "transfer_telemetry"), "scaling", tmp_path / "t.png"
    )
    other = next(ax for ax in fig.axes if "other processes" in ax.get_ylabel())
    assert max(y for line in other.get_lines() for y in line.get_ydata()) == 12.5


H200 = "example-cuda-h200"


def _h200(name):
    from cnnbench import results
    from conftest import ROOT

    return results.read(ROOT / "examples" / H200, name.removesuffix(".csv"))


def _visible_ticks(ax, axis="y"):
    """The texts of the tick labels ``ax`` shows on ``axis`` (major and minor, inside the view, non-empty)."""
    ax.figure.canvas.draw()
    a = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    ticks = [*a.get_major_ticks(), *a.get_minor_ticks()]
    return [
        t.label1.get_text()
        for t in ticks
        if t.label1.get_visible() and t.label1.get_text() and lo <= t.get_loc() <= hi
    ]


def test_the_complexity_figure_names_each_counted_row_and_repeats_no_tick_label(tmp_path):
    """The H200 example's complexity.png: resnet50's two rows (1000 and 200 classes, 0.01 GFLOP apart) shared
    one column and its log axes read "24", "24", "24" and "82", "82", "82"."""
    fig = plots.complexity(_h200("complexity.csv"), tmp_path / "c.png")
    for ax in fig.axes:
        ys, xs = _visible_ticks(ax, "y"), _visible_ticks(ax, "x")
        assert ys and len(set(ys)) == len(ys), ys
        assert len(xs) == 2 and len(set(xs)) == 2, xs


def test_one_epoch_is_drawn_at_a_whole_epoch_with_every_backends_marker_in_sight(tmp_path):
    """The H200 example's backends_cnn.png and transfer_curves.png (one epoch): the epoch axis read 0.945 ..
    1.050, and the three backends' equal test accuracies (0.195) were one marker."""
    from cnnbench import transfer
    from cnnbench.scratch import summary

    fig = summary.figure_1(_h200("backends.csv"), tmp_path / "b.png")
    curves = transfer.learning_curves(_h200("transfer.csv"), tmp_path / "t.png")
    for ax in [*fig.axes[:3], curves.axes[0]]:
        assert _visible_ticks(ax, "x") == ["1"], ax.get_ylabel()
    accuracy = fig.axes[2]
    points = [
        ax_xy for line in accuracy.get_lines() for ax_xy in accuracy.transData.transform(line.get_xydata())
    ]
    assert len(points) == 3
    assert all(np.hypot(*(p - q)) > 6 for i, p in enumerate(points) for q in points[:i])  # pixels apart


def test_the_scaling_telemetry_title_is_over_no_panel_and_its_numbers_are_plain(tmp_path):
    """The H200 example's scaling_telemetry.png: its title sat on the first panel, and resident memory read
    0.2 .. 0.8 under a "+1.8e3" offset."""
    from cnnbench import results
    from conftest import ROOT

    df = results.read(ROOT / "examples" / H200, "transfer_telemetry")
    fig = plots.experiment_timeline(df, "scaling", tmp_path / "s.png")
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    assert not any(title.overlaps(ax.get_tightbbox(renderer)) for ax in fig.axes)
    offsets = [a.get_offset_text().get_text() for ax in fig.axes for a in (ax.xaxis, ax.yaxis)]
    assert not any(offsets), offsets


def test_every_backends_op_bars_are_in_sight(tmp_path):
    """The H200 example's backend_ops.png: the GPU backends' CNN bars (1-3 ms) were slivers beside NumPy's
    104 ms on one linear axis."""
    from cnnbench.scratch import summary

    fig = summary.op_breakdown(_h200("backend_ops.csv"), tmp_path / "o.png")
    fig.canvas.draw()
    for ax in fig.axes:
        stacks = {}
        for p in ax.patches:
            stacks[round(p.get_x(), 6)] = stacks.get(round(p.get_x(), 6), 0) + p.get_height()
        top = ax.get_ylim()[1]
        assert len(stacks) == 3 and all(h > top / 2 for h in stacks.values()), (ax.get_title(), stacks)
        assert all("ms" in t.get_text() for t in ax.get_xticklabels()), "each backend's step time named"


def _colours(artists) -> set:
    """The colours (hex) ``artists`` draw in: a collection's faces, a line's colour."""
    from matplotlib.colors import to_hex, to_rgba_array

    drawn = [a.get_facecolor() if hasattr(a, "get_offsets") else a.get_color() for a in artists]
    return {to_hex(c) for colour in drawn for c in to_rgba_array(colour)}


def test_the_rooflines_name_each_points_variant_in_a_colour_no_roof_uses(tmp_path):
    """The H200 example's roofline_device.png and roofline_model_resnet50.png labelled its fp32, tf32 and
    bf16+channels_last points alike ("resnet50 train"), in the red of the measured bf16 roof (or the run's roof
    colour): the tf32 point read as above the fp32 roof. Each point names its variant, in a colour no roof uses."""
    placed = _h200("roofline")
    placed = placed[placed.source == "scenario_a"]
    peaks = _h200("device_peaks")
    fig = plots.roofline(peaks, placed, "Scenario A", tmp_path / "r.png")
    pts = _h200("roofline").query("source == 'scenario_a'").assign(run_name="h200")
    model = plots.per_model_rooflines(pts, peaks.assign(run_name="h200"), tmp_path, min_runs=1)["resnet50"]
    for ax, key in ((fig.axes[0], "resnet50"), (model.axes[0], "h200 (NVIDIA H200)")):
        labels = {c.get_label() for c in ax.collections}
        for variant in ("fp32 nchw", "tf32 nchw", "bf16 channels_last"):
            assert {f"{key} {variant} train", f"{key} {variant} eval"} <= labels, labels
        points = [c for c in ax.collections if not c.get_label().startswith("_")]
        assert len(_colours(points)) == 3 and not _colours(points) & _colours(ax.lines)


def test_per_model_rooflines_draw_runs_whose_roofs_were_never_measured(tmp_path):
    """roofline.across_runs gives a frame without columns when no run measured its peaks: per_model_rooflines
    raised AttributeError ('precision') on it instead of drawing the points without a roof."""
    import pandas as pd

    from cnnbench import plots

    pts = pd.DataFrame(
        {
            "run_name": ["a", "b"],
            "device_name": "cpu",
            "model": "m",
            "phase": "train",
            "precision": "fp32",
            "intensity_flop_per_byte": [10.0, 12.0],
            "achieved_gflops": [50.0, 60.0],
        }
    )
    fig = plots.per_model_rooflines(pts, pd.DataFrame(), tmp_path)["m"]
    assert len(fig.axes[0].collections) == 2 and not fig.axes[0].lines  # both runs' points, no roof
