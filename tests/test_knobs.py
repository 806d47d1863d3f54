"""Knobs and device kinds declared once (issue 28): a toy knob and a toy device backend are each one declaration,
and everything else (validation, the engine, keys, compare, 07's search, labels) follows from it."""

import contextlib
import copy
import json
import pickle
import re

import pandas as pd
import pytest
import torch
from fakes import using

from cnnbench import devices, knobs, params, results
from cnnbench.devices import Backend
from cnnbench.knobs import Knob, Setting
from cnnbench.measure import engine, runner
from cnnbench.params import Params, ParamsError
from cnnbench.results.runs import Merged
from conftest import ROOT


@contextlib.contextmanager
def registered(knob: Knob):
    """``knob`` is a knob inside the block (one declaration, nothing else changed)."""
    knobs.KNOBS[knob.name] = knob
    try:
        yield knob
    finally:
        knobs.KNOBS.pop(knob.name, None)


CPU = torch.device("cpu")
FAST = dict(
    warmup_steps=1,
    measured_steps=2,
    repeats=1,
    processes=2,
    max_processes=2,
    adapt_budget_s=0,
    workers=0,
    models=["mnist_cnn"],
    phases=["train"],
    notebooks=["00_setup", "02_scenario_a"],
)


def test_a_toy_knob_is_one_declaration_validated_applied_undone_keyed_compared_searched_and_labelled(
    tmp_path,
):
    applied = []

    @contextlib.contextmanager
    def apply(value, backend, shape):
        applied.append(f"toy {value}")
        yield
        applied.append(f"toy {value} undone")

    toy = Knob(
        "toy",
        int,
        1,
        "a toy knob",
        values=(1, 2, 3),
        run_wide=False,
        label=lambda v: f"toy{v}",
        apply=apply,
        stage="host",
        search=lambda default, hw, p: [1, 2, 3],
        lacks=lambda value, hw: "toy 3 needs a toy device" if value == 3 else "",
    )
    with registered(toy):
        with pytest.raises(ParamsError, match=r"variants\[0\]\.toy' is 9; allowed: 1, 2, 3"):
            params.validate({"variants": [{"toy": 9}]})
        with pytest.raises(ParamsError, match="toy 3 needs a toy device"):
            params.validate({"variants": [{"toy": 3}]})
        p = params.validate({**FAST, "variants": [{"toy": 1}, {"toy": 2}]})
        configs = [engine.config(p, "mnist_cnn", "train", v) for v in p.variants]
        rows = runner.run_configs(configs, CPU, p, tmp_path / "r.csv")
        assert sorted(r["toy"] for r in rows) == ["1", "2"] and "toy" in results.config_keys()  # keyed
        assert sorted(applied) == sorted(
            ["toy 1", "toy 1 undone", "toy 2", "toy 2 undone"] * 2
        )  # 2 rounds each
        assert all(applied[i + 1] == f"{applied[i]} undone" for i in range(0, len(applied), 2))
        df = results.frame(rows).assign(run_name="r", host_id="h", host="h", device_name="cpu")
        ratio = pd.DataFrame(
            __import__("cnnbench.analysis.compare", fromlist=["x"]).ratios(
                Merged(["r"], {"r": {"torch": "x"}}, {"scenario_a": df})
            )
        )
        assert (
            ratio.knob.tolist() == ["toy"]
            and ratio.value_a.tolist() == ["1"]
            and ratio.value_b.tolist() == ["2"]
        )
        sp = knobs.space(devices.backend("cpu").hardware(), knobs.for_params(p), p)
        assert (
            sp.values["toy"] == [1, 2] and ("toy", "3", "toy 3 needs a toy device") in sp.skipped
        )  # searched
        assert knobs.label(Setting(toy=2)).endswith("toy2") and "toy1" not in knobs.label(
            Setting()
        )  # labelled
    assert "toy" not in knobs.KNOBS and "toy" not in results.config_keys()


class ToyDevice(Backend):
    """A device kind in one class: it claims the host device, runs fp16, has no threads of its own."""

    kind = "toy"
    on_host = False

    def name(self):
        return "Toy Accelerator"

    @classmethod
    def lacks(cls, knob, value, hw):
        return "" if knob != "compile" else "the toy device compiles nothing"


def test_a_toy_device_backend_is_one_module_and_every_question_goes_to_it(tmp_path):
    with using(ToyDevice):
        p = params.validate(
            {**FAST, "device": "cpu", "variants": [{"precision": "fp16"}]}
        )  # the toy runs fp16
        with pytest.raises(ParamsError, match="the toy device compiles nothing"):
            params.validate({**FAST, "device": "cpu", "variants": [{"compile": "default"}]})
        (row,) = runner.run_configs(
            [engine.config(p, "mnist_cnn", "train", p.variants[0])], CPU, p, tmp_path / "r.csv"
        )
        assert (
            row["device_kind"] == "toy" and row["device_name"] == "Toy Accelerator" and row["status"] == "ok"
        )
        assert row.get("probe_img_s", "") == ""  # the host's speed is not this device's: no probe
        sp = knobs.space(devices.backend("cpu").hardware(), Setting(threads=2), Params())
        assert ("threads", "other values", "the step runs on toy: host threads stay as set") in sp.skipped
    with pytest.raises(ParamsError, match="fp16 autocast \\+ grad scaler runs on CUDA and MPS"):
        params.validate(
            {**FAST, "device": "cpu", "variants": [{"precision": "fp16"}]}
        )  # the real CPU does not


@pytest.mark.parametrize(
    "variant, why",
    [
        ({"precision": "tf32"}, "tf32 is an NVIDIA Ampere+ tensor-core mode"),
        ({"precision": "fp16"}, "CPUs have no fast fp16 training kernels"),
    ],
)
def test_a_precision_gets_the_same_answer_in_validation_07_and_the_explorer(tmp_path, variant, why):
    """02 accepted tf32 on a CPU or T4 (computing fp32 and labelling it tf32) and attempted fp16 on a CPU while 07
    skipped both with a reason; the explorer offered both. One answer now, from the knob's declaration."""
    from cnnbench import interactive

    with pytest.raises(ParamsError, match=re.escape(why)):
        params.validate({"device": "cpu", "variants": [variant]})
    hw = devices.backend("cpu").hardware()
    sp = knobs.space(hw, Setting(threads=2), Params(tune_precisions=[variant["precision"]]))
    assert (
        variant["precision"] not in sp.values["precision"]
        and why in dict(((k, v), r) for k, v, r in sp.skipped)[("precision", variant["precision"])]
    )
    run = cnnbench_run(tmp_path)
    row = interactive.quick_measure(run, "mnist_cnn", 8, variant["precision"], "device", "cpu")
    assert row["status"] == "unavailable" and why in row["error"]


def cnnbench_run(tmp_path):
    import cnnbench

    return cnnbench.open_run(ROOT / "params" / "smoke.yaml", {}, tmp_path / "run")


def test_identical_variants_are_measured_as_an_a_a_comparison_said_once_before_work():
    p = params.validate({"variants": [{"precision": "fp32"}, {"precision": "fp32"}, {}]})
    assert [v.get("replica", 0) for v in p.variants] == [0, 1, 2]
    notes = params.variant_notes(p)
    assert len(notes) == 2 and "A/A" in notes[0] and "replica 1" in notes[0]
    assert knobs.label(Setting(replica=1)).endswith("copy1")


def test_two_runs_differing_only_in_cudnn_benchmark_are_a_one_knob_ratio():
    from cnnbench.analysis import compare

    base = {
        "status": "ok",
        "model": "resnet18",
        "phase": "train",
        "batch_size": 32,
        "image_size": 64,
        "num_classes": 200,
        "dataset": "synthetic",
        "device_name": "NVIDIA H100",
        "device_kind": "cuda",
        "host_id": "h",
        "host": "h",
        "throughput_img_s": 100.0,
        "throughput_ci95_img_s": 1.0,
        "threads": 8,
    }
    a = pd.DataFrame([{**base, "run_name": "a", "cudnn_benchmark": True}])
    b = pd.DataFrame([{**base, "run_name": "b", "cudnn_benchmark": False, "throughput_img_s": 90.0}])
    m = Merged(["a", "b"], {"a": {"torch": "2.9"}, "b": {"torch": "2.9"}}, {"scenario_a": pd.concat([a, b])})
    r = compare.ratios(m).iloc[0]
    assert (
        r.comparison == "one knob" and r.knob == "cudnn_benchmark" and r.ratio_b_over_a == pytest.approx(0.9)
    )
    assert compare.speedups(m["scenario_a"]).empty  # not called the same configuration


def test_variants_of_any_knob_are_measured_interleaved_and_their_ratio_is_paired_over_rounds(tmp_path):
    """threads 1 and 2 in one run: measured round by round in a shuffled order, the ratio's interval over the
    rounds both were measured in (the machine's drift cancels in each round's ratio)."""
    from cnnbench.analysis import compare

    p = params.validate(
        {**FAST, "processes": 3, "max_processes": 3, "variants": [{"threads": 1}, {"threads": 2}]}
    )
    rows = runner.run_configs(
        [engine.config(p, "mnist_cnn", "train", v) for v in p.variants], CPU, p, tmp_path / "r.csv"
    )
    assert sorted(r["threads"] for r in rows) == ["1", "2"]
    assert all(len(json.loads(r["process_rates_img_s"])) == 3 for r in rows)
    df = results.frame(rows).assign(run_name="r", host_id="h", host="h")
    (r,) = compare.ratios(Merged(["r"], {"r": {"torch": "x"}}, {"scenario_a": df})).itertuples()
    assert r.knob == "threads" and r.interval == "paired over 3 rounds"
    assert r.ratio_ci95_low <= r.ratio_b_over_a <= r.ratio_ci95_high


def test_a_threads_variant_from_the_command_line_reaches_the_report_as_a_ratio(tmp_path):
    from cnnbench.params import parse_overrides

    raw = parse_overrides(["variants=[{threads: 1}, {threads: 2}]"])
    assert params.validate(raw).variants == [{"threads": 1}, {"threads": 2}]


def test_no_line_outside_the_device_package_tests_a_device_kind_without_saying_why():
    pattern = re.compile(
        r"""\.type\s*(==|!=|in\b)|\bkind\s*(==|!=)\s*["'](cpu|cuda|mps|rocm)|"""
        r"""==\s*["'](cuda|mps|rocm)["']|torch\.(cuda|mps)\."""
    )
    found = []
    for path in (ROOT / "lib" / "cnnbench").rglob("*.py"):
        if "devices" in path.relative_to(ROOT / "lib" / "cnnbench").parts:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and '"meta"' not in line:  # the meta device is no device kind
                found.append((f"{path.name}:{i}", "# device kind:" in line, line.strip()))
    assert len(found) <= 10, found
    assert all(why for _, why, _ in found), [f for f in found if not f[1]]


def test_settings_a_workload_applies_are_restored_after_it_so_a_kernel_records_what_ran(fake_gpu):
    """Workload entered its math (TF32, cuDNN) and never left it: a notebook kernel's later rows ran under
    settings they did not record. Every knob is now applied around the workload and restored when it ends."""
    cfg = engine.Config.of(
        "mnist_cnn", "train", 28, 10, 1, batch_size=4, precision="tf32", cudnn_benchmark=False
    )
    with engine.Workload(cfg, CPU, Params()):
        inside = list(fake_gpu.log)
    assert "math tf32" in inside and "math tf32 restored" not in inside
    assert fake_gpu.log[-2:] == ["autotune False restored", "math tf32 restored"]


def test_a_setting_cannot_be_changed_in_place_and_rebuilds_from_its_pairs():
    """Setting became a dict in issue 43's fifth round: assigning to one changed its hash while it was a key of 07's
    search tables; dataclasses.asdict of a Config rebuilds it from its (knob, value) pairs."""
    import dataclasses

    from cnnbench.measure.engine import Config

    s = knobs.Setting(precision="bf16")
    for change in (lambda: s.__setitem__("precision", "fp32"), lambda: s.update(precision="fp32"), s.clear):
        with pytest.raises(TypeError, match="with_"):
            change()
    assert s.precision == "bf16" and knobs.Setting(list(s.items())) == s and s.with_(precision="fp32") != s
    cfg = Config("resnet18", "train", 64, 10, setting=s)
    assert dataclasses.asdict(cfg)["setting"] == s
    assert pickle.loads(pickle.dumps(s)) == s and copy.deepcopy(s) == s  # to a worker process, and copied


def test_the_seeds_variant_in_words_is_derived_from_the_knobs_defaults(monkeypatch):
    """08 named the seeds' variant by a literal ("fp32 NCHW eager") in two modules, apart from the knobs'
    defaults it stands for: a changed default now changes the words."""
    import dataclasses

    import pandas as pd

    from cnnbench.analysis import findings, overview

    assert knobs.default_label() == findings._variant({}) == "fp32 nchw eager"
    assert "(02: fp32 nchw eager;" in overview._rates(pd.DataFrame({"model": ["m"]}))
    monkeypatch.setitem(
        knobs.KNOBS,
        "memory_format",
        dataclasses.replace(knobs.KNOBS["memory_format"], default="channels_last"),
    )
    # read when the words are written, not frozen when the module was first imported (a knob registered then
    # would stay in every later sentence)
    assert knobs.default_label() == findings._variant({}) == "fp32 channels_last eager"
    assert "(02: fp32 channels_last eager;" in overview._rates(pd.DataFrame({"model": ["m"]}))
