"""Hardware detection and the search space the knob declarations allow on it, with every skipped value carrying
its reason (the same reason validation gives)."""

import pytest

from cnnbench import devices, knobs
from cnnbench.devices import Hardware
from cnnbench.knobs import Setting
from cnnbench.params import Params

ALL_P = ["fp32", "tf32", "bf16", "fp16"]
ALL_C = list(knobs.KNOBS["compile"].values)
AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})


def build(hw, data_mode="device", default=None, precisions=ALL_P, modes=ALL_C, lo=32, hi=512):
    p = Params(
        data_mode=data_mode,
        tune_precisions=precisions,
        tune_compile_modes=modes,
        tune_min_batch_size=lo,
        tune_max_batch_size=hi,
    )
    return knobs.space(hw, default or Setting(batch_size=128, threads=hw.cores, data_mode=data_mode), p)


def reasons(sp):
    return {(k, v): why for k, v, why in sp.skipped}


def test_cpu_isa_and_native_bf16_from_flags():
    flags = {"fpu", "avx2", "fma", "avx512f", "avx512_bf16", "sse4_2"}
    assert devices.cpu_isa(flags) == {"avx2", "fma", "avx512f", "avx512_bf16", "sse4_2"}
    assert devices.native_bf16(devices.cpu_isa(flags))
    assert devices.native_bf16({"amx_bf16", "amx_tile"}) and devices.native_bf16({"asimd", "bf16"})
    assert not devices.native_bf16(AVX2) and not devices.native_bf16({"avx512f", "avx512bw"})
    assert devices.backend("cpu").hardware().capability is None


def test_avx2_only_cpu_leaves_bf16_out_with_the_reason():
    hw = Hardware("cpu", "AMD EPYC", cores=2, isa=AVX2)
    sp = build(hw)
    assert sp.values["precision"] == ["fp32"]
    r = reasons(sp)
    assert "AVX2-only" in r[("precision", "bf16")] and "emulated and slow" in r[("precision", "bf16")]
    assert "Ampere" in r[("precision", "tf32")] and "CUDA and MPS" in r[("precision", "fp16")]
    assert sp.values["compile"] == ["off", "default"]  # max-autotune: out of a 2-core host's compile budget
    assert "CUDA graphs" in r[("compile", "reduce-overhead")]
    assert sp.values["threads"] == [1, 2] and sp.values["memory_format"] == ["nchw", "channels_last"]
    assert sp.values["batch_size"] == [32, 64, 128, 256, 512]
    assert ("workers", "other values") in r and ("pin_memory", "other values") in r  # device mode: no loader


def test_native_bf16_cpu_searches_bf16_and_many_cores_get_power_of_two_threads():
    hw = Hardware("cpu", "Xeon", cores=12, isa=frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16"}))
    sp = build(hw, default=Setting(threads=12))
    assert sp.values["precision"] == ["fp32", "bf16"]
    assert sp.values["threads"] == [1, 2, 4, 8, 12]


def test_cuda_capability_decides_tf32_and_bf16():
    ampere = build(Hardware("cuda", "NVIDIA H100", cores=16, capability=(9, 0), triton=True))
    assert ampere.values["precision"] == ALL_P
    assert ampere.values["compile"] == ALL_C
    assert ampere.values["threads"] == [16]  # not searched on a GPU, with the reason
    assert "runs on cuda" in reasons(ampere)[("threads", "other values")]
    turing = build(Hardware("cuda", "Tesla T4", cores=2, capability=(7, 5), triton=True))
    assert turing.values["precision"] == ["fp32", "fp16"]
    assert "(7, 5)" in reasons(turing)[("precision", "tf32")]
    no_triton = build(Hardware("cuda", "T4", cores=2, capability=(7, 5), triton=False))
    assert no_triton.values["compile"] == ["off"]


def test_mps_and_missing_compiler():
    sp = build(Hardware("mps", "Apple M3 GPU (MPS)", cores=8))
    assert sp.values["precision"] == ["fp32", "bf16", "fp16"]
    assert sp.values["compile"] == ["off", "default"]
    sp = build(Hardware("cpu", "cpu", cores=2, isa=AVX2, cxx=False))
    assert sp.values["compile"] == ["off"]
    assert "C++ compiler" in reasons(sp)[("compile", "default")]


def test_params_restrict_the_space_and_say_so():
    hw = Hardware("cuda", "H100", cores=16, capability=(9, 0), triton=True)
    sp = build(hw, precisions=["fp32", "bf16"], modes=["off"])
    assert sp.values["precision"] == ["fp32", "bf16"] and sp.values["compile"] == ["off"]
    r = reasons(sp)
    assert r[("precision", "fp16")] == "not in tune_precisions"
    assert r[("compile", "max-autotune")] == "not in tune_compile_modes"


def test_loader_mode_searches_workers_and_pinning_on_cuda():
    sp = build(
        Hardware("cuda", "H100", cores=4, capability=(9, 0), triton=True),
        data_mode="loader",
        default=Setting(workers=2, pin_memory=True, threads=4, data_mode="loader"),
    )
    assert sp.values["workers"] == [0, 1, 2, 4] and sorted(sp.values["pin_memory"]) == [False, True]
    sp = build(
        Hardware("cpu", "cpu", cores=2, isa=AVX2),
        data_mode="loader",
        default=Setting(pin_memory=False, threads=2, data_mode="loader"),
    )
    assert sp.values["pin_memory"] == [False] and "CUDA" in reasons(sp)[("pin_memory", "other values")]


def test_default_is_always_in_and_rows_are_tidy():
    hw = Hardware("cpu", "AMD EPYC", cores=2, isa=AVX2)
    sp = build(hw, default=Setting(batch_size=100, threads=2), precisions=["fp32"], modes=["off"], hi=128)
    assert 100 in sp.values["batch_size"]
    rows = sp.rows(hw)
    assert {r["knob"] for r in rows} >= {"precision", "compile", "batch_size"}
    assert all(r["reason"] for r in rows if not r["searched"])
    assert all(r["device_name"] == "AMD EPYC" for r in rows)


@pytest.mark.parametrize("kind", ["cpu"])
def test_detect_reads_this_machine(kind):
    hw = devices.backend(kind).hardware()
    assert hw.kind == "cpu" and hw.cores >= 1 and hw.isa == devices.cpu_isa()


def test_max_autotune_is_out_of_the_compile_budget_on_a_small_gpu_or_a_two_core_host():
    """Issue 19: on Colab's T4 (40 SMs, 2 vCPUs = 1 core) max-autotune compiles for minutes and, below Inductor's
    68 SMs, autotunes no GEMM: skipped with the reason; a big GPU on a big host keeps it."""
    t4 = build(Hardware("cuda", "Tesla T4", cores=1, capability=(7, 5), triton=True, sms=40))
    assert t4.values["compile"] == ["off", "default", "reduce-overhead"]
    reason = reasons(t4)[("compile", "max-autotune")]
    assert "68+ SMs" in reason and "40-SM" in reason
    cpu = build(Hardware("cpu", "AMD EPYC", cores=2, isa=AVX2))
    assert "max-autotune" not in cpu.values["compile"]
    assert "2 host core(s)" in reasons(cpu)[("compile", "max-autotune")]
    h100 = build(Hardware("cuda", "NVIDIA H100", cores=16, capability=(9, 0), triton=True, sms=132))
    assert "max-autotune" in h100.values["compile"]


def test_cudnn_benchmark_is_searched_on_cuda_only_and_defaults_on():
    assert Setting().cudnn_benchmark is True
    cuda = build(Hardware("cuda", "NVIDIA H100", cores=8, capability=(9, 0), triton=True))
    assert cuda.values["cudnn_benchmark"] == [True, False]
    cpu = build(Hardware("cpu", "AMD EPYC", cores=2, isa=AVX2))
    assert cpu.values["cudnn_benchmark"] == [True]
    assert "cuDNN" in reasons(cpu)[("cudnn_benchmark", "other values")]
    assert "cudnn.benchmark=off" in Setting(cudnn_benchmark=False).label


@pytest.mark.parametrize(
    "torch_v, macos, precision, needle",
    [
        ((2, 4), (15, 0), "fp16", "torch 2.5"),  # MPS fp16 autocast
        ((2, 7), (15, 0), "fp16", "torch 2.8"),  # GradScaler("mps")
        ((2, 5), (15, 0), "bf16", "torch 2.6"),
        ((2, 8), (13, 6), "bf16", "macOS 14"),
    ],
)
def test_mps_precisions_the_installed_torch_or_macos_lacks_are_skipped_with_the_reason(
    torch_v, macos, precision, needle
):
    hw = Hardware("mps", "Apple M3 Pro GPU (MPS)", cores=6, torch_version=torch_v, macos=macos)
    sp = build(hw)
    assert precision not in sp.values["precision"]
    assert needle in reasons(sp)[("precision", precision)]
    new = build(Hardware("mps", "Apple M4 GPU (MPS)", cores=6, torch_version=(2, 8), macos=(15, 0)))
    assert {"fp16", "bf16"} <= set(new.values["precision"])


def test_engine_row_of_a_precision_this_torch_lacks_is_unavailable_not_error():
    from cnnbench.measure import engine

    mps = Hardware("mps", "Apple M3 GPU (MPS)", cores=6, torch_version=(2, 4), macos=(15, 0))
    f = engine.failure(devices.Unavailable(knobs.lacks("precision", "fp16", mps)))
    assert f["status"] == "unavailable" and "torch 2.5" in f["error"]
    assert knobs.lacks("precision", "fp16", Hardware("cuda", "T4", cores=2, capability=(7, 5))) == ""
    assert knobs.lacks("precision", "fp32", devices.backend("cpu").hardware()) == ""
