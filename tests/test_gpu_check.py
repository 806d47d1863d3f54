"""tools/gpu_check.py and tools/gpu_wheels.py without a GPU or pip's index: the run name from the GPU's name, what
is carried, an install from prepared wheels that leaves what is installed alone, a step stopped at the budget,
the run folder packed under the size a borrowed machine brings back."""

import base64
import hashlib
import importlib.util
import os
import sys
import tarfile
import time
import zipfile

import pytest

from conftest import ROOT


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f"tool_{name}", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name, short",
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("Tesla T4", "t4"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("NVIDIA L4", "l4"),
        ("", ""),
    ],
)
def test_the_run_is_named_after_the_gpus_short_name(name, short):
    assert _tool("gpu_check").gpu_short_name(name) == short


def test_torchs_stack_and_what_a_gpu_image_has_stay_behind_the_rest_travels():
    wheels = _tool("gpu_wheels")
    closure = [
        ("torch", "2.11"),
        ("nvidia-cudnn-cu13", "9"),
        ("cuda-bindings", "13"),
        ("triton", "3"),
        ("numpy", "2"),
        ("Jinja2", "3"),
        ("jupyterlab", "4"),
        ("nvidia-ml-py", "13"),
        ("papermill", "2.7"),
        ("fvcore", "0.1.5"),
    ]
    assert wheels.carried(closure) == [("nvidia-ml-py", "13"), ("papermill", "2.7"), ("fvcore", "0.1.5")]
    requirements = wheels.workbook_requirements()
    names = {wheels.requirement_name(r) for r in requirements}
    assert {"fvcore", "papermill", "nbconvert", "ipykernel", "nvidia-ml-py", "numpy"} <= names
    assert not names & {"torch", "torchvision", "jupyterlab"}


def test_preparing_needs_timms_benchmark_py_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _tool("gpu_wheels").main(
            ["--timm-benchmark", str(tmp_path / "none.py"), "--dest", str(tmp_path / "g")]
        )
    assert "not a file; give timm's benchmark.py" in capsys.readouterr().err and not (tmp_path / "g").exists()


def _wheel(folder, name: str, version: str, requires=()) -> None:
    """A minimal pure-Python wheel of one module ``name`` (no pip's index, no build)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": b"VALUE = 1\n",
        f"{dist}/METADATA": "\n".join(
            ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
            + [f"Requires-Dist: {r}" for r in requires]
        ).encode()
        + b"\n",
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{p},sha256={digest(d)},{len(d)}\n" for p, d in files.items()) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as whl:
        for path, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            whl.writestr(path, data)


class _Log(list):
    path = None

    def __call__(self, line=""):
        self.append(line)


@pytest.fixture
def prepared(tmp_path):
    """A .gpucheck/ of two hand-made wheels (a needs b) and its requirements.txt: a, and pyyaml (installed here)."""
    gpucheck = tmp_path / ".gpucheck"
    (gpucheck / "wheels").mkdir(parents=True)
    _wheel(gpucheck / "wheels", "cnnbench_probe_a", "1.0", ["cnnbench_probe_b>=1"])
    _wheel(gpucheck / "wheels", "cnnbench_probe_b", "1.2")
    _wheel(gpucheck / "wheels", "PyYAML", "0.1")  # older than the one installed here: never replaces it
    (gpucheck / "requirements.txt").write_text("cnnbench_probe_a>=1\npyyaml>=5\n")
    return gpucheck


def test_install_takes_the_wheels_of_what_is_missing_and_leaves_what_is_installed(prepared, tmp_path):
    check, target = _tool("gpu_check"), tmp_path / "site"
    log = _Log()
    assert check.install(prepared, log, dict(os.environ), None, target) == 0, "\n".join(log)
    assert sorted(p.name for p in target.iterdir() if p.suffix == ".py") == [
        "cnnbench_probe_a.py",
        "cnnbench_probe_b.py",
    ]
    assert not list(target.glob("*yaml*")) and not list(target.glob("*YAML*"))  # installed here: left alone
    assert "missing here: 2 packages: cnnbench_probe_a, cnnbench_probe_b" in log
    again = _Log()
    assert check.install(prepared, again, dict(os.environ), None, target) == 0
    assert "every prepared package is installed here already" in again


def test_an_install_folder_is_on_the_python_and_jupyter_paths(tmp_path, monkeypatch):
    check = _tool("gpu_check")
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert check.search_paths(tmp_path) == {
        "PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(tmp_path), "/elsewhere"]),
        "JUPYTER_PATH": str(tmp_path / "share" / "jupyter"),  # nbconvert's templates: the report's HTML
    }
    assert check.search_paths(None) == {"PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), "/elsewhere"])}


def test_install_fails_naming_a_requirement_the_machine_does_not_meet(prepared, tmp_path):
    (prepared / "requirements.txt").write_text("cnnbench_probe_a>=2\npyyaml>=5\nnot-a-package-here\n")
    log = _Log()
    assert _tool("gpu_check").install(prepared, log, dict(os.environ), None, tmp_path / "site") == 1
    assert log[-1] == (
        "requirements not met: cnnbench_probe_a>=2 (1.0 installed); not-a-package-here (not installed)"
    )


def test_install_without_a_prepared_folder_says_which_command_prepares_it(tmp_path):
    log = _Log()
    assert _tool("gpu_check").install(tmp_path / "none", log, dict(os.environ), None, None) == 2
    assert "run `make gpu-wheels`" in log[-1]


def test_a_step_still_running_at_the_budget_is_stopped(monkeypatch):
    check = _tool("gpu_check")
    monkeypatch.setattr(check, "STOP_GRACE_S", 5.0)
    log = _Log()
    t0 = time.monotonic()
    cmd = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    code, note = check.run(cmd, log, dict(os.environ), time.monotonic() + 1.0)
    assert time.monotonic() - t0 < 15 and code == -15 and "stopped at the check's budget" in note
    assert "started" in log


def test_the_run_folder_is_packed_under_the_limit_largest_files_left_out(tmp_path, monkeypatch):
    check = _tool("gpu_check")
    monkeypatch.setattr(check, "PACK_LIMIT_BYTES", 200_000)
    run = tmp_path / "outputs" / "cuda-h100"
    (run / "notebooks").mkdir(parents=True)
    (run / "scenario_a.csv").write_text("a,b\n1,2\n")
    (run / "notebooks" / "trace.json").write_bytes(os.urandom(300_000))  # incompressible, over the limit
    log = check.Log(run / "check" / "gpu_check.log")
    log("a line")
    out = tmp_path / "OUT"
    check.pack(run, log, out)
    with tarfile.open(out / "cuda-h100.tar.gz") as tar:
        names = set(tar.getnames())
    assert names == {"cuda-h100/scenario_a.csv", "cuda-h100/check/gpu_check.log"}
    assert "notebooks/trace.json" in (out / "gpu_check.log").read_text()


def test_without_a_gpu_the_check_stops_in_one_line_before_any_work(monkeypatch, capsys, tmp_path):
    check = _tool("gpu_check")
    monkeypatch.setattr(check, "gpu_name", lambda: "")
    with pytest.raises(SystemExit):
        check.main(["--gpucheck", str(tmp_path)])
    assert "no CUDA GPU here" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_an_unknown_step_is_refused():
    with pytest.raises(SystemExit, match="2"):
        _tool("gpu_check").main(["--steps", "tests,report"])


def test_the_log_is_written_as_it_goes(tmp_path):
    log = _tool("gpu_check").Log(tmp_path / "check" / "gpu_check.log")
    log("one")
    assert (tmp_path / "check" / "gpu_check.log").read_text() == "one\n"
