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
