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
