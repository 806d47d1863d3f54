"""The explorer as a new user meets it: labels shown literally, the same model measured twice, a quick
measurement that is meaningful or says it is noisy, and the button clicked in a real kernel."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from cnnbench import plots  # noqa: E402


def _rows(**over):
    base = {"model": "mnist_cnn", "phase": "train", "device_name": "CPU", "precision": "fp32",
            "memory_format": "nchw", "compile": False, "status": "ok", "batch_size": 128,
            "throughput_img_s": 100.0, "throughput_ci95_img_s": 5.0}
    return {**base, **over}


def test_throughput_plot_shows_dollar_signs_literally():
    df = pd.DataFrame([_rows(model="net$$v2", device_name="CPU $$ edition")])
    fig = plots.throughput(df)
    assert fig is not None
    assert "$" in fig.axes[0].get_title() and fig.axes[0].get_xticklabels()[0].get_text().startswith("net")


def test_throughput_plot_same_model_at_two_batch_sizes_and_twice_the_same():
    df = pd.DataFrame([_rows(batch_size=128), _rows(batch_size=256, throughput_img_s=150.0),
                       _rows(batch_size=256, throughput_img_s=160.0)])
    fig = plots.throughput(df)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["mnist_cnn bs=128", "mnist_cnn bs=256"]
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == [100.0, 160.0]  # the last measurement of a repeated configuration


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _windows(walls, clock):
    """A window function returning the given wall times in turn (2 steps each), advancing the fake clock."""
    it = iter(walls)

    def window():
        wall = next(it)
        clock.now += wall
        return [wall / 2, wall / 2], wall

    return window


def test_quick_measurement_stops_once_the_interval_is_tight():
    from cnnbench.interactive import adaptive_windows

    clock, seen = FakeClock(), []
    out = adaptive_windows(_windows([1.0, 1.01, 0.99, 1.0, 1.0], clock), 2, 10, target_pct=10, max_s=60,
                           clock=clock, on_window=lambda s, f: seen.append((s["repeats"], f)))
    assert out["repeats"] == 3 and not out["noisy"] and out["throughput_ci95_rel_pct"] < 10
    assert [r for r, _ in seen] == [2, 3] and all(0 < f <= 1 for _, f in seen)


def test_quick_measurement_says_noisy_when_the_time_cap_is_reached():
    from cnnbench.interactive import adaptive_windows

    clock = FakeClock()
    out = adaptive_windows(_windows([1.0, 4.0, 0.5, 3.0, 1.0, 5.0, 1.0], clock), 2, 10, target_pct=10, max_s=8,
                           clock=clock)
    assert out["noisy"] and out["repeats"] == 4 and out["throughput_ci95_rel_pct"] > 10  # 8.5 s >= 8 s after 4 windows


def test_quick_measure_row_is_written_with_its_interval(tmp_path):
    import cnnbench
    from cnnbench import interactive
    from conftest import ROOT

    run = cnnbench.open_run(ROOT / "params" / "smoke.yaml", {}, tmp_path / "run")
    steps = []
    row = interactive.quick_measure(run, "mnist_cnn", 8, "fp32", "device", "cpu",
                                    on_progress=lambda f, t: steps.append((f, t)))
    assert row["status"] == "ok" and row["repeats"] >= 2 and "throughput_ci95_rel_pct" in row
    assert steps[0][0] == 0.0 and steps[-1][0] == 1.0 and len(steps) >= 4
    assert pd.read_csv(tmp_path / "run" / "explore.csv").batch_size.tolist() == [8]


def _collect(kc, msg_id, timeout=120):
    """iopub messages answering ``msg_id`` until the kernel is idle again."""
    out = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
        out.append(msg)


def _figures_and_errors(msgs):
    figures = sum("image/png" in m["content"].get("data", {}) for m in msgs if m["msg_type"] == "display_data")
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"
              or (m["msg_type"] == "stream" and "Traceback" in m["content"]["text"])]
    return figures, errors


def test_explorer_button_in_a_real_kernel_with_the_inline_backend(tmp_path):
    """The callbacks as a browser triggers them: a comm message from the front end, then button.click(), same
    model and a new batch size each time; every click displays a figure and no error."""
    import os

    from jupyter_client.manager import start_new_kernel

    from conftest import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("CNNBENCH_HEADLESS", "MPLBACKEND")}
    env.update(CNNBENCH_ROOT=str(ROOT), PYTHONPATH=str(ROOT / "lib"))
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        setup = (f"%matplotlib inline\nimport cnnbench\nfrom cnnbench import interactive\n"
                 f"run = cnnbench.open_run({str(ROOT / 'params' / 'smoke.yaml')!r}, {{}}, {str(tmp_path / 'run')!r})\n"
                 "c = interactive.explorer(run)\nc['model'].value = 'mnist_cnn'\nc['batch_size'].value = 8\n"
                 "print('BUTTON', c['measure'].model_id)")
        msgs = _collect(kc, kc.execute(setup))
        assert _figures_and_errors(msgs)[1] == []
        button_id = next(m["content"]["text"] for m in msgs if m["msg_type"] == "stream").split()[-1]
        click = kc.session.msg("comm_msg", {"comm_id": button_id,
                                            "data": {"method": "custom", "content": {"event": "click"}}})
        kc.shell_channel.send(click)
        clicks = [_collect(kc, click["header"]["msg_id"])]
        for bs in (8, 16):
            clicks.append(_collect(kc, kc.execute(f"c['batch_size'].value = {bs}\nc['measure'].click()")))
        for msgs in clicks:
            figures, errors = _figures_and_errors(msgs)
            assert errors == [] and figures >= 1
        done = _collect(kc, kc.execute("print(len(c['history']), c['progress'].value, c['status'].value)"))
        text = next(m["content"]["text"] for m in done if m["msg_type"] == "stream")
        assert text.startswith("3 1.0")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
