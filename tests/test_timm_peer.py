"""benchmarks/timm_peer.py driven by a stand-in for timm's benchmark.py (a script that prints its output format),
so neither timm nor its benchmark.py is needed: peer, engine, peer, one row per phase and engine model."""

import importlib.util
import math
import sys
import textwrap
import types

import pytest
import torchvision

from cnnbench import models, results
from conftest import ROOT

# What timm's benchmark.py prints (its logging, then "--result" and the JSON of its results), with the rates of
# each call taken from RATES in turn; every call is logged to the file named by argv's --log-to
STUB = textwrap.dedent(
    """
    import argparse, json, os, sys
    RATES = {rates!r}
    ap = argparse.ArgumentParser()
    for flag in ("--model", "--bench", "--batch-size", "--img-size", "--num-warm-iter", "--num-bench-iter",
                 "--device", "--amp-dtype", "--precision"):
        ap.add_argument(flag)
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--no-retry", action="store_true")
    args = ap.parse_args()
    log = os.environ["PEER_LOG"]
    with open(log, "a") as f:
        f.write("peer " + " ".join(sys.argv[1:]) + "\\n")
    calls = sum(1 for line in open(log) if line.startswith("peer"))
    rate = RATES[calls - 1]
    if rate == "crash":
        sys.exit("RuntimeError: CUDA error: an illegal memory access was encountered")
    print("Benchmarking in float32 precision. NCHW layout. torchscript disabled", file=sys.stderr)
    result = {{"model": args.model}}
    for prefix in ("infer", "train"):
        result.update({{
            f"{{prefix}}_samples_per_sec": rate[prefix], f"{{prefix}}_step_time": 1.0,
            f"{{prefix}}_batch_size": rate.get("batch", int(args.batch_size)), f"{{prefix}}_img_size": int(args.img_size),
        }})
    result["param_count"] = 1.24
    print("--result\\n" + json.dumps(result, indent=4))
    """
)


def _bench():
    spec = importlib.util.spec_from_file_location("bench_timm_peer", ROOT / "benchmarks" / "timm_peer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def peer(tmp_path, monkeypatch):
    """``peer(*rates)``: (the stand-in, giving these rates call by call; the log of peer and engine calls)."""
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PEER_LOG", str(log))

    def write(*rates):
        path = tmp_path / "benchmark.py"
        path.write_text(STUB.format(rates=list(rates)))
        return path, log

    return write


@pytest.fixture
def fake_timm(monkeypatch):
    """A ``timm`` module whose create_model builds torchvision's model, and the workbook's models left as found."""
    created = []

    def create_model(name, num_classes, in_chans, drop_rate):
        created.append(name)
        return torchvision.models.get_model(name, num_classes=num_classes)

    monkeypatch.setitem(sys.modules, "timm", types.SimpleNamespace(create_model=create_model))
    monkeypatch.setattr(models, "LOCAL_MODELS", dict(models.LOCAL_MODELS))
    yield created
    models.spec.cache_clear()


SMALL = ["--device", "cpu", "--model", "squeezenet1_1", "--batch-size", "2", "--image-size", "32"]
SMALL += ["--precision", "fp32", "--warmup", "1", "--steps", "5"]


def test_peer_engine_peer_records_both_rates_and_the_ratio_per_phase_and_model(
    peer, fake_timm, tmp_path, monkeypatch
):
    bench = _bench()
    stub, log = peer({"infer": 400.0, "train": 100.0}, {"infer": 440.0, "train": 110.0})
    measure = bench.engine.measure

    def logged(cfg, *args, **kwargs):
        with open(log, "a") as f:
            f.write(f"engine {cfg.model} {cfg.phase}\n")
        return measure(cfg, *args, **kwargs)

    monkeypatch.setattr(bench.engine, "measure", logged)
    out = tmp_path / "timm_peer.csv"
    assert bench.main(["--timm-benchmark", str(stub), *SMALL, "--out", str(out)]) == 0

    calls = log.read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["peer", "engine", "engine", "engine", "engine", "peer"]
    first = calls[0].split()
    assert first[first.index("--batch-size") + 1] == "2" and first[first.index("--img-size") + 1] == "32"
    assert (
        "--channels-last" in first and "--no-retry" in first and first[first.index("--device") + 1] == "cpu"
    )
    assert set(fake_timm) == {"squeezenet1_1"}  # the engine's timm model is timm.create_model's

    rows = results.frame(results.read_rows(out))
    assert sorted(zip(rows.engine_model, rows.phase, strict=True)) == [
        ("timm", "eval"),
        ("timm", "train"),
        ("torchvision", "eval"),
        ("torchvision", "train"),
    ]
    for row in rows.itertuples():
        before, after = (400.0, 440.0) if row.phase == "eval" else (100.0, 110.0)
        assert (row.timm_before_img_s, row.timm_after_img_s, row.timm_img_s) == (
            before,
            after,
            420.0 * (before / 400),
        )
        assert row.engine_status == "ok" and row.engine_img_s > 0
        assert math.isclose(row.engine_over_timm, row.engine_img_s / row.timm_img_s)
        assert bool(row.within_goal) == (0.95 <= row.engine_over_timm <= 1.05)
        assert math.isclose(row.timm_drift_pct, 10.0)
        assert (row.model, row.batch_size, row.image_size, row.precision) == ("squeezenet1_1", 2, 32, "fp32")
        assert (row.memory_format, row.device_kind, row.timm_params_m) == ("channels_last", "cpu", 1.24)
        assert math.isclose(row.engine_params_m, 1.235496)  # torchvision's squeezenet1_1 at 1000 classes
        assert row.git_commit and row.torch and row.timestamp


def test_a_failed_peer_run_is_a_row_with_its_error_and_the_exit_code_says_so(peer, tmp_path):
    bench = _bench()
    stub, _ = peer({"infer": 400.0, "train": 100.0}, "crash")
    out = tmp_path / "timm_peer.csv"
    args = ["--timm-benchmark", str(stub), *SMALL, "--engine-models", "torchvision", "--out", str(out)]
    assert bench.main(args) == 1
    rows = results.frame(results.read_rows(out))
    assert len(rows) == 2 and set(rows.engine_status) == {"ok"}
    assert rows.timm_after_img_s.isna().all() and rows.engine_over_timm.isna().all()
    assert rows.error.str.contains("exited with 1: RuntimeError: CUDA error: an illegal memory access").all()


def test_the_peers_result_is_read_from_its_last_lines_and_checked_against_the_configuration():
    bench = _bench()
    printed = (
        'Train [40/40]. 2790.1 samples/sec.\n--result\n{\n    "model": "resnet50",\n    "error": "x"\n}\n'
    )
    assert bench.parse_result(printed) == {"model": "resnet50", "error": "x"}
    with pytest.raises(bench.PeerError, match="no '--result'"):
        bench.parse_result("Traceback (most recent call last):\n")
    with pytest.raises(bench.PeerError, match="not JSON"):
        bench.parse_result("--result\n{cut")


def test_a_smaller_batch_from_the_peer_is_refused(peer):
    bench = _bench()
    stub, _ = peer({"infer": 1.0, "train": 1.0, "batch": 1})  # as timm's retry after an error would
    args = bench.parse_args(["--timm-benchmark", str(stub), *SMALL, "--engine-models", "torchvision"])
    with pytest.raises(bench.PeerError, match="ran batch 1 at 32 px, not 2 at 32"):
        bench.run_peer(args, bench.devices.resolve("cpu"))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--steps", "4"], "needs 5 or more"),
        (["--engine-models", "keras"], "timm and/or torchvision"),
        (["--batch-size", "0"], "--batch-size must be at least 1"),
    ],
)
def test_bad_options_are_refused_in_one_line_before_any_work(peer, capsys, extra, message):
    bench = _bench()
    stub, log = peer()
    with pytest.raises(SystemExit):
        bench.parse_args(["--timm-benchmark", str(stub), *extra])
    assert message in capsys.readouterr().err and not log.exists()


def test_the_engines_timm_model_without_timm_is_refused(peer, capsys, monkeypatch):
    bench = _bench()
    monkeypatch.delitem(sys.modules, "timm", raising=False)
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit):
        bench.parse_args(["--timm-benchmark", str(peer()[0]), "--engine-models", "torchvision,timm"])
    assert "--engine-models timm: timm is not installed here" in capsys.readouterr().err


@pytest.mark.parametrize("cc, precision", [((9, 0), "bf16"), ((7, 5), "fp16")])
def test_the_precision_is_bf16_where_the_gpu_runs_it_else_fp16(cc, precision):
    from fakes import FakeGPU, using

    bench = _bench()
    with using(FakeGPU.fresh(cc=cc)):
        assert bench.auto_precision(bench.devices.resolve("cpu")) == precision


def test_a_missing_peer_script_is_refused(capsys, tmp_path):
    with pytest.raises(SystemExit):
        _bench().parse_args(["--timm-benchmark", str(tmp_path / "benchmark.py")])
    assert "no such file (timm's benchmark.py)" in capsys.readouterr().err
