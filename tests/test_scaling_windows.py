"""Issue 17, single runs: the example's scaling.png showed each world size's throughput without a spread,
because 06 launched every world size with ``repeats`` windows, and local.yaml's ``repeats: 1`` (one window per
process for 02/03, which measure several processes) left the scaling run a single measurement."""

import json
import math
from pathlib import Path

import cnnbench
from cnnbench import scaling as launch
from cnnbench.scaling import ddp
from conftest import ROOT


def test_every_world_size_is_measured_over_several_windows_whatever_repeats_says(tmp_path):
    run = cnnbench.open_run(ROOT / "params" / "local.yaml", {"scaling_world_sizes": [1, 2]}, tmp_path / "r")
    assert run.params.repeats == 1 and run.params.scaling_repeats >= 3
    windows = []

    def fake(cmd, out, **_):
        windows.append(json.loads(Path(cmd[-1]).read_text())["params"]["scaling_repeats"])
        world = int(cmd[cmd.index("--nproc_per_node") + 1])
        return {
            "device_kind": "cpu",
            "device_name": "cpu",
            **ddp.throughput([0.30, 0.31, 0.29], 16 * world, 4),
            "loss_last": 1.0,
            "check_losses": [2.0, 1.0],
            "reference_losses": {"32": [2.0, 1.0]},
            "ranks": [],
        }

    rows = launch.run_all(run, launcher=fake, log=lambda *_: None)
    assert windows == [run.params.scaling_repeats] * 2
    assert all(r["repeats"] == run.params.scaling_repeats for r in rows)
    assert all(math.isfinite(r["throughput_ci95_img_s"]) and r["throughput_ci95_img_s"] > 0 for r in rows)
