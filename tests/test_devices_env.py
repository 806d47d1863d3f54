import json

import pytest
import torch

from cnnbench import devices, envinfo


def test_auto_prefers_cuda_then_mps_then_cpu():
    device = devices.resolve("auto")
    assert device.type == devices.available()[0]
    assert devices.available()[-1] == "cpu"


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cpu:0:1", ""])
def test_unknown_device_spec(spec):
    with pytest.raises(devices.DeviceError, match="unknown device"):
        devices.resolve(spec)


def test_cpu_threads_are_set_and_reported():
    before = torch.get_num_threads()
    try:
        assert devices.set_threads(1) == 1
        assert devices.set_threads(0) == devices.physical_cores()
    finally:
        torch.set_num_threads(before)


def test_synchronize_and_memory_on_cpu():
    cpu = torch.device("cpu")
    devices.synchronize(cpu)
    mem = devices.peak_memory_mib(cpu)
    assert set(mem) == {"peak_device_mem_mib", "peak_device_reserved_mib"}


def test_oom_detection():
    assert devices.is_oom(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert devices.is_oom(MemoryError())
    assert not devices.is_oom(RuntimeError("shape mismatch"))


def test_environment_capture_has_what_the_report_needs():
    env = envinfo.capture(torch.device("cpu"), {"batch_size": 8})
    for key in ("os", "python", "torch", "torchvision", "cuda_runtime", "cudnn", "device_kind", "device_name",
                "cpu_model", "cpu_physical_cores", "cpu_logical_cores", "torch_threads", "ram_gb", "mps_available",
                "git_commit", "schema_version"):
        assert key in env, key
    assert env["device_kind"] == "cpu" and env["ram_gb"] > 0 and env["cpu_logical_cores"] >= env["cpu_physical_cores"]
    assert env["params"] == {"batch_size": 8}
    json.dumps(env)  # serialisable as environment.json
    assert "params" not in envinfo.table(env).index


def test_git_dirty_ignores_regenerated_outputs(tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "wb"
    for folder in ("params", "notebooks", "outputs/run"):
        (repo / folder).mkdir(parents=True)
    (repo / "code.py").write_text("x = 1\n")
    (repo / "outputs" / "run" / "r.csv").write_text("a\n1\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=repo, check=True)
    monkeypatch.setenv("CNNBENCH_ROOT", str(repo))
    (repo / "outputs" / "run" / "r.csv").write_text("a\n2\n")
    assert envinfo.git_commit()["git_dirty"] is False
    (repo / "code.py").write_text("x = 2\n")
    assert envinfo.git_commit()["git_dirty"] is True
