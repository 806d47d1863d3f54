import pandas as pd
import pytest
import torch

from cnnbench import engine

CPU = torch.device("cpu")
FAST = engine.Protocol(warmup_steps=1, measured_steps=2, repeats=2, workers=0, synthetic_images=32)


def cfg(**kw):
    base = dict(model="mnist_cnn", phase="train", batch_size=8, image_size=28, num_classes=10, in_channels=1)
    return engine.Config(**{**base, **kw})


def test_train_and_eval_rows_carry_every_column():
    for phase in ("train", "eval"):
        row = engine.measure(cfg(phase=phase), CPU, FAST)
        assert row["status"] == "ok", row["error"]
        for col in ("model", "device_kind", "device_name", "phase", "data_mode", "batch_size", "image_size",
                    "precision", "memory_format", "compile", "threads", "status", "n_steps", "throughput_img_s",
                    "throughput_ci95_img_s", "step_time_median_s", "step_time_std_s", "achieved_tflops",
                    "peak_device_mem_mb", "peak_rss_mb", "util_cpu_mean", "util_device_mean", "noisy"):
            assert col in row, col
        assert row["n_steps"] == 4 and len(row["step_times_s"]) == 4
        flops = row["gflops_per_image"] * 1e9
        assert row["achieved_gflops"] == pytest.approx(row["throughput_img_s"] * flops / 1e9)
    assert row["gflops_per_image"] < engine.measure(cfg(), CPU, FAST)["gflops_per_image"]  # eval < train


def test_variants_and_loader_mode():
    row = engine.measure(cfg(precision="bf16", memory_format="channels_last", data_mode="loader"), CPU, FAST)
    assert row["status"] == "ok", row["error"]
    assert (row["precision"], row["memory_format"], row["data_mode"]) == ("bf16", "channels_last", "loader")


def test_out_of_memory_is_a_row(monkeypatch):
    def oom(self):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(engine.Workload, "train_step", oom)
    row = engine.measure(cfg(), CPU, FAST)
    assert row["status"] == "oom" and "out of memory" in row["error"]


def test_nan_loss_is_unstable(monkeypatch):
    init = engine.Workload.__init__

    def nan_loss(self, *a, **k):
        init(self, *a, **k)
        self.loss_fn = lambda out, y: out.sum() * float("nan")

    monkeypatch.setattr(engine.Workload, "__init__", nan_loss)
    row = engine.measure(cfg(), CPU, FAST)
    assert row["status"] == "unstable" and "nan" in row["error"]


def test_other_failures_are_rows_and_the_run_goes_on(tmp_path, monkeypatch):
    real = engine.measure
    calls = []

    def flaky(c, *a, **k):
        calls.append(c.batch_size)
        if c.batch_size == 8:
            return {**real(c, *a, **k), "status": "error", "error": "ValueError: boom"}
        return real(c, *a, **k)

    monkeypatch.setattr(engine, "measure", flaky)
    rows = engine.run_configs([cfg(batch_size=8), cfg(batch_size=16)], CPU, FAST, tmp_path / "r.csv", tmp_path / "s.csv")
    assert [r["status"] for r in rows] == ["error", "ok"]
    steps = pd.read_csv(tmp_path / "s.csv")
    assert len(steps) == 8 and set(steps.batch_size) == {8, 16}


def test_interrupted_run_resumes_without_redoing_finished_configs(tmp_path, monkeypatch):
    real = engine.measure
    calls = []

    def interrupt_second(c, *a, **k):
        calls.append(c.batch_size)
        if c.batch_size == 16 and calls.count(16) == 1:
            raise KeyboardInterrupt
        return real(c, *a, **k)

    monkeypatch.setattr(engine, "measure", interrupt_second)
    configs = [cfg(batch_size=8), cfg(batch_size=16), cfg(batch_size=4)]
    with pytest.raises(KeyboardInterrupt):
        engine.run_configs(configs, CPU, FAST, tmp_path / "r.csv")
    assert [r["batch_size"] for r in pd.read_csv(tmp_path / "r.csv").to_dict("records")] == [8]
    engine.run_configs(configs, CPU, FAST, tmp_path / "r.csv")
    assert calls == [8, 16, 16, 4]  # 8 was not measured again
    assert sorted(pd.read_csv(tmp_path / "r.csv").batch_size) == [4, 8, 16]


def test_compile_time_is_recorded_and_kept_out_of_the_window():
    row = engine.measure(cfg(compile=True), CPU, FAST)
    assert row["status"] == "ok", row["error"]
    assert row["compile_s"] > 10 * row["step_time_median_s"]  # compilation happened, outside the window
    assert row["window_time_s"] < row["first_step_s"]


def test_window_length_chooses_the_step_count():
    auto = engine.Protocol(measured_steps=0, window_s=3.0)
    assert engine.steps_for_window([0.1, 0.1, 0.2], auto) == 30
    assert engine.steps_for_window([10.0], auto) == 5  # never fewer than 5
    assert engine.steps_for_window([0.1], engine.Protocol(measured_steps=7)) == 7
    row = engine.measure(cfg(), CPU, engine.Protocol(warmup_steps=3, measured_steps=0, window_s=0.05, repeats=2))
    assert row["status"] == "ok" and row["measured_steps"] >= 5 and row["n_steps"] == 2 * row["measured_steps"]


def test_device_mode_keeps_a_real_batch_on_the_device():
    from torch.utils.data import TensorDataset

    real = TensorDataset(torch.zeros(32, 1, 28, 28), torch.full((32,), 3))
    work = engine.Workload(cfg(data_mode="device"), CPU, FAST, dataset=real)
    x, y = work.next_batch()
    assert x.shape == (8, 1, 28, 28) and bool((x == 0).all()) and bool((y == 3).all())
    assert work.next_batch()[0] is x  # made once, reused every step
