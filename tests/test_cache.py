"""The workbook's cache (paths.cached): an entry is computed once, however many processes ask for it at once."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from cnnbench import paths


def test_two_askers_of_one_entry_at_once_compute_it_once(tmp_path, monkeypatch):
    """The two test workers each computed the same op counts at the same moment (10 s of CPU in every run)."""
    monkeypatch.setenv("CNNBENCH_CACHE", str(tmp_path))
    computed, both_asked = [], threading.Barrier(2)

    def compute():
        computed.append(1)
        time.sleep(0.5)  # the other asker arrives meanwhile
        return {"gflop": 4.1}

    def ask(_):
        both_asked.wait()
        return paths.cached("test", ("resnet18", 224), compute)

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(ask, range(2))) == [{"gflop": 4.1}] * 2
    assert len(computed) == 1
    assert paths.cached("test", ("resnet18", 224), lambda: 0) == {"gflop": 4.1}  # read back, not computed


def test_a_cache_that_cannot_be_written_is_computed_without_it(tmp_path, monkeypatch):
    """Issue 44: CNNBENCH_CACHE (or HOME and XDG_CACHE_HOME) unwritable: the run stopped with UnboundLocalError."""
    (tmp_path / "a_file").write_text("")
    for env in (
        {"CNNBENCH_CACHE": str(tmp_path / "a_file" / "cache")},
        {"XDG_CACHE_HOME": str(tmp_path / "a_file")},
    ):
        monkeypatch.delenv("CNNBENCH_CACHE", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert paths.cached("test", ("resnet18", 224), lambda: {"gflop": 4.1}) == {"gflop": 4.1}


def test_a_run_with_a_cache_that_cannot_be_written_runs(tmp_path, monkeypatch, capsys):
    from cnnbench import pipeline
    from conftest import ROOT

    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("CNNBENCH_CACHE", str(tmp_path / "a_file" / "cache"))
    args = ["--params", str(ROOT / "params" / "smoke.yaml"), "--outputs", str(tmp_path / "out"), "--estimate"]
    assert pipeline.main(args) == 0, capsys.readouterr().err  # was: UnboundLocalError ... 'run_dir'
