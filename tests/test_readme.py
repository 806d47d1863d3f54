"""The README and its docs pages: the figures from the committed example run are the example's own numbers,
and a newcomer reads the README in minutes."""

import json
import re

import pandas as pd
import pytest

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "example-cpu-2core"
DOCS = ROOT / "docs"


def _words(path):
    return " ".join(path.read_text().split())


def test_readme_cnn_backend_rates_are_the_medians_of_the_example_epochs():
    # issue 17: the README called epoch 3's rates (14,889 / 16,034 / 5,668 img/s) the "median epoch"; the
    # sentence lives in docs/example.md since issue 31
    text = _words(DOCS / "example.md")
    found = re.search(
        r"the MNIST CNN trains at ([\d,]+) img/s on numba_cpu, ([\d,]+) on torch_cpu and ([\d,]+) on "
        r"numpy \(([^)]*)\)",
        text,
    )
    assert found, "docs/example.md's sentence on the from-scratch backends is gone or reworded"
    quoted = dict(
        zip(
            ("numba_cpu", "torch_cpu", "numpy"),
            (int(g.replace(",", "")) for g in found.groups()[:3]),
            strict=True,
        )
    )
    b = pd.read_csv(EXAMPLE / "backends.csv")
    cnn = b[(b.model == "mnist_cnn") & (b.status == "ok")]
    assert cnn.groupby("backend").epoch.count().loc[list(quoted)].eq(3).all()
    medians = cnn.groupby("backend").throughput_img_s.median()
    assert quoted == {k: round(medians[k]) for k in quoted}
    assert "median" in found.group(4) and "backends.csv" in found.group(4)  # says what and from which file


def test_click_explorer_never_deletes_a_clones_runs_unasked(tmp_path):
    """Issue 20: tools/click_explorer.py deleted the given clone's outputs/ without warning."""
    import subprocess
    import sys

    from conftest import ROOT

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "08_analysis.ipynb").write_text("{}")
    (tmp_path / "outputs" / "my-run").mkdir(parents=True)
    (tmp_path / "outputs" / "my-run" / "scenario_a.csv").write_text("model\\nresnet18\\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "click_explorer.py"), "--clone", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "--clear-outputs" in done.stderr and "my-run" in done.stderr
    assert (tmp_path / "outputs" / "my-run" / "scenario_a.csv").is_file()


def test_readme_times_are_the_examples_record_and_it_names_no_path_outside_the_clone():
    """Issue 20: the README's times must be the times measured here; `../shared/seeds/` is not in a clone."""
    import json

    from cnnbench import eta

    took = sum(
        json.loads(nb.read_text())["metadata"]["papermill"]["duration"]
        for nb in (EXAMPLE / "notebooks").glob("*.ipynb")
    )
    text, example = _words(ROOT / "README.md"), _words(DOCS / "example.md")
    # "Two commands" in the README, "What the example shows" in docs/example.md (the README's before issue 31)
    assert text.count(f"took {eta.duration(took)}") == 1 and example.count(f"took {eta.duration(took)}") == 1
    for page in (text, *(_words(p) for p in DOCS.glob("*.md"))):
        assert "20-27 minutes" not in page and "20m22s" not in page and "../shared/" not in page
    assert "lib/cnnbench/data/seed_numbers.csv" in text


def test_a_newcomer_reads_the_readme_in_minutes_and_finds_every_page_it_moved_to():
    """Issue 31: the README was 7,600 words of reference and history; the reference lives in docs/, linked."""
    import json

    text = _words(ROOT / "README.md")
    assert len(text.split()) < 2000
    assert "make report" in text and "make test" in text and "docs/seeds.md" in text
    linked = set(re.findall(r"\]\(docs/([a-z_]+\.md)", text))
    written_here = {
        "measurement.md",
        "outputs.md",
        "running.md",
        "devices.md",
        "compare.md",
        "example.md",
        "development.md",
    }  # seeds.md comes from its own branch
    assert written_here | {"seeds.md"} <= linked and all((DOCS / page).is_file() for page in written_here)
    for page in (ROOT / "README.md", *DOCS.glob("*.md")):  # no machine's path, no session's story
        words = _words(page)
        assert "/tmp/" not in words and "session" not in words.lower(), page.name
    env = json.loads((EXAMPLE / "environment.json").read_text())
    example = _words(DOCS / "example.md")  # which commit and day made the committed example
    assert f"commit {env['git_commit'][:7]}" in example and env["captured_at"][:10] in example
    assert "## Layout" in (DOCS / "development.md").read_text()


def _more_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text[text.index("## More commands") :]
    block = block[block.index("```bash") + 7 : block.index("```", block.index("```bash") + 7)]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def _help(capsys, *argv) -> str:
    from cnnbench import pipeline

    with pytest.raises(SystemExit) as done:
        pipeline.main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.slow
def test_every_more_commands_line_works_as_written_after_make_report(capsys, monkeypatch):
    """Issue 44: every "More commands" line used `cnnbench`, which is not on PATH after `make report`; `--set
    precision=bf16` was refused; `cnnbench --help` did not list `predict`. Each line is a make target or the
    command `make report` installs (.venv/bin/cnnbench: the Makefile's BIN and pyproject's script), each option
    it names is one its subcommand takes, and the lines that name no placeholder run here as written."""
    import shlex

    from cnnbench import pipeline

    makefile = (ROOT / "Makefile").read_text()
    assert "BIN    := $(VENV)/bin" in makefile and "VENV   ?= .venv" in makefile
    assert 'cnnbench = "cnnbench.pipeline:main"' in (ROOT / "pyproject.toml").read_text()
    lines = _more_commands()
    assert len(lines) >= 6 and all(line.startswith(("make report", ".venv/bin/cnnbench ")) for line in lines)
    main_help = _help(capsys)
    for sub in ("compare", "report", "predict"):
        assert f"cnnbench {sub}" in main_help, sub
    monkeypatch.chdir(ROOT)
    for line in lines:
        argv = shlex.split(line)
        if argv[0] == "make":
            overrides = [a.split("=", 1)[1] for a in argv if a.startswith("ARGS=")][0].split()
            assert pipeline.params_mod.load(
                ROOT / "params" / "local.yaml",
                pipeline.params_mod.parse_overrides(overrides[1::2]),
                False,
                "--set",
            ), line
            continue
        sub = argv[1] if argv[1] in ("compare", "report", "predict") else None
        options = _help(capsys, *([sub] if sub else []))
        for option in [a.strip("[]|") for a in argv if a.lstrip("[").startswith("--")]:
            assert option in options, (line, option)
        if not re.search(r"\[|[A-Z]_[A-Z]|RUN_", line):  # no placeholder: it runs here, measuring nothing
            assert pipeline.main(argv[1:]) == 0, line
            capsys.readouterr()


def test_the_docs_numbers_for_local_yaml_are_its_own():
    """Issue 44: docs/measurement.md gave 4 processes and +-5% for params/local.yaml, which sets 3 and 8%, and
    named an AMD VM where the README and the committed example name an Intel one."""
    from cnnbench import params

    default, local = params.Params(), params.load(ROOT / "params" / "local.yaml", check_device=False)
    text = _words(DOCS / "measurement.md")

    def said(key: str, unit: str = "") -> str:
        d, v = (f"{getattr(p, key):g}{unit}" for p in (default, local))
        return (
            f"{d} by default and in `params/local.yaml`"
            if d == v
            else f"{d} by default, {v} in `params/local.yaml`"
        )

    assert f"fresh worker processes ({said('processes')})" in text
    assert f"`ci_target_pct` (+-{said('ci_target_pct', '%').replace(', ', ', +-')})" in text
    assert f"`max_processes` ({said('max_processes')})" in text
    assert f"`params/local.yaml`'s {local.measured_steps} steps" in text
    example = _words(DOCS / "example.md")
    assert f"`min_window_s` ({local.min_window_s:g} s in `params/local.yaml`)" in example
    assert f"local.yaml's {local.tune_budget_s:g} s `tune_budget_s`" in example
    env = json.loads((EXAMPLE / "environment.json").read_text())
    amd = pd.read_csv(ROOT / "examples" / "benchmarks" / "repeat_agreement.csv")
    assert env["cpu_model"].startswith("Intel(R) Xeon(R)") and env["captured_at"] >= "2026-11-26"
    assert amd.host.str.startswith("AMD EPYC").all() and amd.timestamp.max() < "2026-11-25"
    assert "2-core VM had an AMD EPYC CPU up to 2026-11-24 and an Intel Xeon from 2026-11-26 on" in text
    readme = _words(ROOT / "README.md")
    assert "Only the CPU path has run on real hardware" not in readme and "about 2 minutes" not in readme
