"""Issue 41: the protocol is sized for the device kind by the same `make report` (params/local.yaml, device auto):
a CPU keeps its protocol, a GPU measures what a GPU user compares. Declared once per kind (Backend.protocol)."""

import dataclasses

import pytest
from fakes import FakeGPU, using

from cnnbench import devices, params
from cnnbench.devices.base import CPU_PROTOCOL
from cnnbench.devices.cuda import FILL_BYTES, FILLING
from conftest import ROOT

LOCAL = ROOT / "params" / "local.yaml"
H100 = dict(cc=(9, 0), sms=132, memory_bytes=80 * 2**30, gpu_name="NVIDIA H100 80GB HBM3")
T4 = dict(cc=(7, 5), sms=40, memory_bytes=15 * 2**30, gpu_name="Tesla T4")


def _variants(p):
    return [(v["precision"], v.get("memory_format", "nchw")) for v in p.variants]


def test_a_cpu_keeps_its_protocol():
    p = params.load(LOCAL)
    assert {k: getattr(p, k) for k in CPU_PROTOCOL} == CPU_PROTOCOL
    assert (p.image_size, _variants(p)) == (64, [("fp32", "nchw")])


def test_a_gpu_gets_the_accelerator_protocol_from_the_same_params_file():
    with using(FakeGPU.fresh(**H100)):
        p = params.load(LOCAL)
    assert p.image_size == 224 and p.warmup_steps >= 10 and p.min_window_s >= 1.0 and p.cudnn_benchmark
    assert _variants(p) == [("fp32", "nchw"), ("tf32", "nchw"), ("bf16", "channels_last")]
    assert p.batch_size_for("resnet50") == 256 and p.batch_size_for("resnet18") == 128
    assert p.batch_size_for("squeezenet1_1") == 64 and p.transfer_devices == ["cuda"]


def test_a_t4_gets_fp16_no_tf32_and_keeps_resnet50_at_the_seeds_batch():
    with using(FakeGPU.fresh(**T4)):
        p = params.load(LOCAL)
    assert _variants(p) == [("fp32", "nchw"), ("fp16", "channels_last")]
    assert p.batch_size_for("resnet50") == 128 and p.image_size == 224


def test_the_params_file_and_set_override_the_protocol(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("device: auto\nwarmup_steps: 12\nvariants: [{precision: fp32}]\n")
    with using(FakeGPU.fresh(**H100)):
        p = params.load(mine, {"image_size": 96})
    assert (p.warmup_steps, p.image_size, _variants(p)) == (12, 96, [("fp32", "nchw")])


def test_a_precision_the_gpu_lacks_is_refused_in_one_line_before_work(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("device: auto\nvariants: [{precision: tf32}]\n")
    with using(FakeGPU.fresh(**T4)), pytest.raises(params.ParamsError) as err:
        params.load(mine)
    assert "variants[0].precision" in str(err.value) and "\n" not in str(err.value)


def test_a_gpu_not_at_hand_gets_its_kind_protocol_from_hardware_given():
    hw = devices.Hardware(kind="cuda", name="NVIDIA H100 80GB HBM3", cores=16, capability=(9, 0), sms=132,
                          memory_bytes=80 * 2**30)  # fmt: skip
    p = params.load(LOCAL, check_device=False, hardware=hw)
    assert p.image_size == 224 and ("bf16", "channels_last") in _variants(p)
    assert dataclasses.asdict(p) == dataclasses.asdict(params.load(LOCAL, check_device=False, hardware=hw))


def test_the_filling_batch_fits_the_gpus_it_is_given_and_not_a_24_gib_one():
    """FILL_BYTES against the workbook's own activation memory (fp32 training, 224 px): the filling batch's saved
    activations take at most 3/4 of FILL_BYTES and more than 3/4 of a 24 GiB GPU."""
    from cnnbench.measure import flops

    for model, batch in FILLING.items():
        need = flops.complexity(model, 224, 200, with_fvcore=False).activation_mib * 2**20 * batch
        assert 0.75 * 24 * 2**30 < need <= 0.75 * FILL_BYTES


def test_the_gpu_check_is_estimated_within_its_minutes_on_the_committed_h200():
    """Issue 41: `--estimate --device-kind cuda` says how long the check's run takes on the H200, from the complete
    committed example's device and the rates predicted for it: the workbook part within five and a half minutes
    (the check's install, GPU tests and timm peer take the rest of six)."""
    from cnnbench import eta

    hw = eta.example_hardware("cuda")
    assert hw is not None and "H200" in hw.name and hw.capability == (9, 0)
    p = params.load(ROOT / "params" / "gpu_check.yaml", check_device=False, hardware=hw)
    assert p.image_size == 224 and ("bf16", "channels_last") in _variants(p) and p.min_window_s >= 1.0
    budgets = eta.Budgets(p, "cuda", eta.params_device(p, "cuda", hw.name, "gpu_check.yaml"))
    assert "predicted for NVIDIA H200" in budgets.source("02_scenario_a")
    assert sum(budgets[n] for n in p.notebooks) <= 5.5 * 60


def test_a_file_that_sets_protocol_false_keeps_the_defaults_whatever_the_device(tmp_path):
    """The seeds' files (seeds_full.yaml, seeds_t4.yaml) and smoke.yaml reproduce their own configuration: the
    schema's defaults under their keys, not the device kind's protocol."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("device: auto\nprotocol: false\n")
    with using(FakeGPU.fresh(**H100)):
        gpu = params.load(mine)
    cpu = params.load(mine)
    assert (
        dataclasses.asdict(gpu)
        == dataclasses.asdict(cpu)
        == dataclasses.asdict(params.Params(protocol=False))
    )
    for name in ("seeds_full.yaml", "seeds_t4.yaml", "smoke.yaml"):
        assert params.read_yaml(ROOT / "params" / name)["protocol"] is False
