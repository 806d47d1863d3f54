"""What only a real GPU can answer, through the package's API (``pytest -m gpu``; skipped where torch.cuda is not
available, so the suite on a machine without one skips them; `make gpu-check` runs them). Together well under a
minute on an H100."""

import math

import pytest
import torch

from cnnbench import devices, knobs
from cnnbench.devices import cuda
from cnnbench.devices.energy import Unavailable
from cnnbench.measure import engine, timing
from cnnbench.params import Params

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")


def test_a_training_steps_cuda_events_agree_with_the_synced_wall_time():
    cfg = engine.Config.of("resnet18", "train", 224, 1000, batch_size=64)
    with engine.Workload(cfg, CUDA, Params()) as work:
        for _ in range(3):
            work.step()
        timer = timing.StepTimer(CUDA)
        times, wall = timer.window(work.step, 20)
    assert timer.source == "cuda_events" and len(times) == 20
    assert sum(times) == pytest.approx(wall, rel=0.05)


def _tf32_flags() -> tuple:
    """The flags CudaBackend.math sets: fp32_precision where torch has it, else the legacy allow_tf32."""
    b = torch.backends
    if hasattr(getattr(b.cudnn, "conv", None), "fp32_precision"):
        return b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision
    return b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32


def test_cuda_math_sets_tf32_on_the_device_and_restores_it():
    backend = devices.backend(CUDA)
    if knobs.lacks("precision", "tf32", backend.hardware()):
        pytest.skip("no TF32 before compute capability 8.0")
    gen = torch.Generator(device=CUDA).manual_seed(0)
    x, y = (torch.randn(2048, 2048, device=CUDA, generator=gen) for _ in range(2))
    exact = x.double() @ y.double()

    def error() -> float:
        return float(((x @ y).double() - exact).abs().max() / exact.abs().max())

    before = _tf32_flags()
    with backend.math("tf32"):
        assert _tf32_flags() in (("tf32", "tf32"), (True, True))
        tf32 = error()
    with backend.math("fp32"):
        assert _tf32_flags() in (("ieee", "ieee"), (False, False))
        fp32 = error()
    assert _tf32_flags() == before
    assert fp32 < 1e-5 < 1e-4 < tf32  # TF32 keeps 10 bits of mantissa: its products are coarser by 2**13


@pytest.mark.parametrize(
    "model, image_size, batch, bound",
    [("squeezenet1_1", 64, 8, engine.HOST_BOUND), ("resnet50", 224, 64, "device")],
    ids=["tiny-step", "large-step"],
)
def test_the_busy_share_of_a_launch_bound_step_is_under_half_and_of_a_large_step_over(
    model, image_size, batch, bound
):
    cfg = engine.Config.of(model, "train", image_size, 1000, batch_size=batch)
    row = engine.measure(cfg, CUDA, Params(warmup_steps=3, measured_steps=5, repeats=1))
    assert row["status"] == "ok", row["error"]
    assert row["step_bound"] == bound, f"busy {row['device_busy_pct']:.1f}% of the step"


def test_a_window_of_at_least_a_second_gets_nvml_energy():
    counter = devices.backend(CUDA).energy_counter()
    if isinstance(counter, Unavailable):
        pytest.skip(counter.note)
    cfg = engine.Config.of("resnet18", "train", 224, 1000, batch_size=64)
    row = engine.measure(cfg, CUDA, Params(warmup_steps=3, measured_steps=3, min_window_s=1.0, repeats=1))
    assert row["status"] == "ok", row["error"]
    assert row["window_time_s"] >= 1.0 and row["energy_source"] == "nvml"
    assert math.isfinite(row["energy_j"]) and row["energy_j"] > 0, row["energy_note"]


def test_a_bf16_channels_last_autocast_training_step_runs():
    backend = devices.backend(CUDA)
    if why := knobs.lacks("precision", "bf16", backend.hardware()):
        pytest.skip(why)
    cfg = engine.Config.of(
        "resnet18", "train", 224, 1000, batch_size=32, precision="bf16", memory_format="channels_last"
    )
    seen = []

    def hook(module, args, out):
        seen.append((out.dtype, out.is_contiguous(memory_format=torch.channels_last)))

    with engine.Workload(cfg, CUDA, Params()) as work:
        work.model.conv1.register_forward_hook(hook)
        work.step()
        work.step()
        loss = work.check_loss()
        weights_channels_last = work.model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    assert seen == [(torch.bfloat16, True)] * 2 and weights_channels_last and math.isfinite(loss)


def test_a_batch_that_cannot_fit_is_an_oom_row_not_an_exception():
    # ResNet-50's training step at 224 px keeps 82 MiB of activations per image (01's count, the H100's peaks)
    batch = math.ceil(2 * devices.backend(CUDA).total_memory_bytes() / (82 * 2**20))
    cfg = engine.Config.of("resnet50", "train", 224, 1000, batch_size=batch, cudnn_benchmark=False)
    row = engine.measure(cfg, CUDA, Params(warmup_steps=1, measured_steps=1, repeats=1), busy=False)
    assert row["status"] == "oom", row["error"]
    assert torch.cuda.memory_allocated(CUDA) < 2**30  # the failed workload's memory is released


def test_the_l2_levels_working_sets_lie_above_the_total_l1_of_the_sms():
    backend = devices.backend(CUDA)
    props = torch.cuda.get_device_properties(CUDA)
    (l2,) = backend.cache_levels()
    l1 = props.multi_processor_count * cuda.L1_PER_SM_KIB.get((props.major, props.minor), 256) * 2**10
    assert (l2["capacity_bytes"], l2["above_bytes"]) == (props.L2_cache_size, l1)
    measured = cuda.reread_sizes(backend.sweep_sizes([l2], 4 * props.L2_cache_size, 1), l2)
    assert measured and min(measured) > l1, f"L2 {props.L2_cache_size} B, L1 of all SMs {l1} B"
