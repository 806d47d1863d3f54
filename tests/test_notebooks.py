"""Every notebook is committed clean and thin, with exactly one parameters cell papermill can read."""

import json
import math
import re
import subprocess
import sys

import papermill
import pytest

from cnnbench import params
from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import check_notebooks  # noqa: E402


def test_the_numbered_notebooks_exist():
    names = [p.stem for p in NOTEBOOKS]
    assert names[:2] == ["00_setup", "01_complexity"]
    assert set(names) <= set(params.NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_hygiene(path):
    assert check_notebooks.problems(path) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_is_documented_and_papermill_readable(path):
    found = papermill.inspect_notebook(str(path))
    assert set(found) == {"params_file", "overrides", "run_dir"}
    assert all(p["help"] for p in found.values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_stay_thin(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    lengths = sorted(len("".join(c["source"]).splitlines()) for c in cells)
    assert lengths[len(lengths) // 2] <= 8, "median code cell over 8 lines: move logic into cnnbench"
    assert max(lengths) <= 30
    assert not any("sys.path" in "".join(c["source"]) or "%run" in "".join(c["source"]) for c in cells)


def test_checker_flags_outputs_and_missing_parameters(tmp_path):
    nb = json.loads(NOTEBOOKS[0].read_text())
    nb["cells"][3]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    for c in nb["cells"]:
        c["metadata"].pop("tags", None)
    bad = tmp_path / NOTEBOOKS[0].name
    bad.write_text(json.dumps(nb))
    found = " ".join(check_notebooks.problems(bad))
    assert "stores outputs" in found and "0 cells tagged 'parameters'" in found and "colab-setup" in found
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_notebooks.py"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1


def _copy_workbook(dest):
    import shutil

    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    for folder in ("notebooks", "tools", "docs"):
        if (ROOT / folder).is_dir():
            skip = shutil.ignore_patterns("barrage", "__pycache__")
            shutil.copytree(ROOT / folder, dest / folder, ignore=skip)


def _check(root, *args):
    return subprocess.run(
        [sys.executable, str(root / "tools" / "check_notebooks.py"), *args],
        cwd=root,
        capture_output=True,
        text=True,
    )


def test_the_badges_and_clone_urls_follow_the_one_declared_repository_and_a_fork_changes_them_in_one_command(
    tmp_path,
):
    """Issue 31: the Colab badges and the clone URL named github.com/cnnbench/cnnbench in nine notebooks, the
    README and pyproject.toml, with nothing saying where the workbook lives or how a fork changes them."""
    declared = check_notebooks.repository(ROOT)
    assert (
        declared.count("/") == 1
        and f'Repository = "https://github.com/{declared}"' in (ROOT / "pyproject.toml").read_text()
    )
    readme = (ROOT / "README.md").read_text()
    assert f"colab.research.google.com/github/{declared}/blob/main/notebooks/" in readme
    assert f"git clone https://github.com/{declared}" in readme and "--set-repo" in readme
    _copy_workbook(tmp_path)
    done = _check(tmp_path, "--set-repo", "someone/cnnbench-fork")
    assert done.returncode == 0, done.stderr
    assert check_notebooks.repository(tmp_path) == "someone/cnnbench-fork"
    texts = [
        p.read_text()
        for p in (
            tmp_path / "pyproject.toml",
            tmp_path / "README.md",
            *(tmp_path / "docs").glob("*.md"),
            *(tmp_path / "notebooks").glob("*.ipynb"),
        )
    ]
    assert not any(declared in t for t in texts)
    for nb in sorted((tmp_path / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        text = "".join("".join(c["source"]) for c in cells)
        assert f"colab.research.google.com/github/someone/cnnbench-fork/blob/main/notebooks/{nb.name}" in text
        assert '"https://github.com/someone/cnnbench-fork"' in text
    assert _check(tmp_path, "notebooks").returncode == 0
    nb = tmp_path / "notebooks" / "03_batch_sweep.ipynb"  # one notebook left pointing elsewhere is found
    nb.write_text(nb.read_text().replace("someone/cnnbench-fork", "other/place"))
    done = _check(tmp_path, "notebooks")
    assert done.returncode == 1 and "03_batch_sweep.ipynb" in done.stderr and "other/place" in done.stderr
    readme = tmp_path / "README.md"
    readme.write_text(
        readme.read_text().replace(
            "clone https://github.com/someone/cnnbench-fork", "clone https://github.com/other/place"
        )
    )
    assert "README.md" in _check(tmp_path, "notebooks").stderr
    refused = _check(tmp_path, "--set-repo", "not a repository")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "OWNER/NAME" in refused.stderr


def _markdown(path):
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def _documents():
    """(name, text) of every notebook's markdown, the README and the docs pages: what a reader is told."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(p.name, "\n".join(_markdown(p))) for p in NOTEBOOKS] + [(p.name, p.read_text()) for p in docs]


def _clauses(text):
    import re

    return re.split(r"[.;]\s|\n\s*\n|\n- ", " ".join(text.split(" ")))


def test_the_text_says_how_steps_are_timed_as_the_step_timer_does(monkeypatch):
    """Issue 31: 02's introduction said MPS steps were timed by device events; the code times MPS by
    windows."""
    import re

    import torch

    from cnnbench.measure import timing

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)  # CUDA events without a GPU
    source = {kind: timing.StepTimer(torch.device(kind)).source for kind in ("cpu", "cuda", "mps")}
    assert source == {"cpu": "host_clock", "cuda": "cuda_events", "mps": "window_mean"}
    said = {"host_clock": "host clock", "cuda_events": "event", "window_mean": "window"}
    claims = 0
    for name, text in _documents():
        for clause in _clauses(text):
            timed = re.search(r"\btimed by ([^,;()]*)", clause)
            if not timed:
                continue
            for kind in re.findall(r"\b(CPU|CUDA|MPS)\b", clause[: timed.start()]):
                claims += 1
                assert said[source[kind.lower()]] in timed.group(1), (name, clause)
    assert claims >= 3  # 02 says it for each device


def test_the_text_says_the_interval_is_over_processes_as_the_runner_computes_it(tmp_path):
    """Issue 31: 02's introduction said the interval was over windows; the runner's is over processes."""
    import re

    from cnnbench.measure import engine, runner, timing

    state = runner._Config.__new__(runner._Config)
    state.cfg = engine.Config.of("m", "train", 8, 2, batch_size=10)
    state.key, state.rows, state.failure, state.attempts = {"model": "m"}, {}, None, 2
    state.windows = [
        {"process": p, "repeat": r, "steps": 10, "images": 100, "window_time_s": t, "probe_img_s": math.nan}
        for p, times in ((1, (1.0, 1.0)), (2, (1.25, 1.25)))
        for r, t in enumerate(times)
    ]
    row = runner.merge(state, "processes", None)
    assert row["throughput_ci95_img_s"] == timing.ci95_half_width([100.0, 80.0])  # the processes' rates
    assert row["throughput_ci95_img_s"] != timing.ci95_half_width([100.0, 100.0, 80.0, 80.0])  # the windows'
    runner_docs = {"02_scenario_a.ipynb", "03_batch_sweep.ipynb", "README.md", "measurement.md"}
    claims = 0
    for name, text in _documents():
        if name not in runner_docs:
            continue
        for clause in _clauses(text):
            for over in re.finditer(r"\binterval\b[^;]*?\bover ([^.;,()]*)", clause):
                if "within" in over.group(0) or "difference" in over.group(0):
                    continue  # the one-process interval, for contrast; a ratio's interval
                claims += 1
                assert "process" in over.group(1), (name, clause)
    assert claims >= 2


def test_every_notebook_opens_with_what_it_answers_in_three_lines():
    """Issue 31: each opening was a page of protocol before the first cell; the protocol is folded now."""
    for path in NOTEBOOKS:
        lines = _markdown(path)[0].split("<details>")[0].strip().splitlines()
        assert lines[0].startswith("# ") and "colab-badge" in lines[1], path.name
        answer = [x for x in lines[2:] if x.strip()]
        assert 1 <= len(answer) <= 3 and answer[0].startswith("**"), (path.name, answer)
        assert "?**" in " ".join(answer), (path.name, answer)  # a question, answered in the lines after it


def _code(name: str, calls: str) -> str:
    """The source of notebook ``name``'s one code cell that contains ``calls``."""
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    (source,) = [
        "".join(c["source"]) for c in cells if c["cell_type"] == "code" and calls in "".join(c["source"])
    ]
    return source


def test_04_says_how_many_points_sit_above_their_roof_as_its_points_do(capsys):
    """04's heading "No point above its roof" stood over a table counting 10 such layer points (the CPU example)
    and 6 (the H200's): the heading states no count, the cell under it prints the count of the points it has."""
    import pandas as pd

    from cnnbench import roofline

    (heading,) = [
        line
        for t in _markdown(ROOT / "notebooks" / "04_roofline.ipynb")
        for line in t.splitlines()
        if line.startswith("## ") and "roof" in line and "above" in line
    ]
    assert not heading.startswith(("## No ", "## None", "## Every", "## All")), heading
    points = pd.DataFrame(
        {
            "source": ["layer"] * 3,
            "model": ["m"] * 3,
            "level": ["l3"] * 3,
            "achieved_gflops": [3.0, 1.0, 3.0],
            "attainable_gflops": [1.0] * 3,
            "above_roof": [True, False, True],
            "above_roof_reason": ["r", "", "r"],
        }
    )
    exec(_code("04_roofline", "roofline.flagged("), {"roofline": roofline, "roofline_csv": points})
    assert (
        f"2 of 3 points sit more than {roofline.ABOVE_ROOF_TOLERANCE:.0%} above their own roof"
        in capsys.readouterr().out
    )


def test_02_says_the_batch_and_image_size_the_run_measured_from_its_params(capsys, monkeypatch):
    """02's protocol said "batch 128 (64 for SqueezeNet), 64x64 images" over the H200 example, which ran ResNet-50
    at batch 256 and 224 px: the text names no batch or image size, the cell under the parameters prints the run's."""
    import re

    import cnnbench
    from cnnbench.params import Params

    text = _markdown(ROOT / "notebooks" / "02_scenario_a.ipynb")[0]
    assert not re.search(r"\bbatch \d|\d+x\d+ images", text), text
    p = Params(models=["resnet50", "mnist_cnn"], image_size=224, batch_size_per_model={"resnet50": 256})

    class Run:
        params, device_name, threads = p, "NVIDIA H200", 16

    monkeypatch.setattr(cnnbench, "open_run", lambda *args: Run)
    exec(_code("02_scenario_a", "scenario_a_configs("), {"params_file": "", "overrides": {}, "run_dir": ""})
    out = capsys.readouterr().out
    assert "batch 256, 3x224x224 images, 200 classes (synthetic): resnet50" in out
    assert f"batch {p.batch_size_for('mnist_cnn')}, 1x28x28 images, 10 classes" in out


@pytest.mark.parametrize(
    "shows", ["scenarios.measured(scenario_a)", "scenarios.performance_summary(scenario_a)"]
)
def test_02s_tables_round_each_number_once_from_the_measured_value(shows):
    """The H200's 02 showed tf32 training at 53.88 TFLOP/s where the row holds 53.874989: the notebook rounded
    to 4 decimals (53.8750) and the display to 4 figures again. Its tables reach the display unrounded."""
    from cnnbench import results, scenarios, tables

    rows = results.read(ROOT / "examples" / "example-cuda-h200", "scenario_a")
    assert rows.achieved_tflops.round(6).eq(53.874989).any()
    shown = _code("02_scenario_a", shows).splitlines()[-1]
    page = tables.trimmed_html(eval(shown, {"scenarios": scenarios, "scenario_a": rows}))
    assert ">53.87<" in page and ">53.88<" not in page


def test_no_notebook_rounds_a_table_before_the_display_does():
    """06's seed-002 table showed the CPU's best learning rate 0.003 as 0: the cell rounded to 2 decimals before the
    display's 4 significant figures (tables._cell). The display is the one rounding rule: no cell rounds a table."""
    from cnnbench import results, tables, transfer

    rounding = [
        f"{nb.stem}: {line.strip()}"
        for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))
        for c in json.loads(nb.read_text())["cells"]
        if c["cell_type"] == "code"
        for line in "".join(c["source"]).splitlines()
        if re.search(r"\.round\(\d*\)", line)
    ]
    assert not rounding, rounding
    rows = results.read(ROOT / "examples" / "example-cpu-2core", "transfer")
    shown = _code("06_transfer", "transfer.beside_seed").splitlines()[-1]
    page = tables.trimmed_html(eval(shown, {"transfer": transfer, "finetuned": rows}))
    assert ">0.003<" in page
