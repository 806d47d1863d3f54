"""The pipeline: execute the numbered notebooks in order with papermill, then build the HTML report.

    cnnbench --params params/local.yaml [--set batch_size=64 ...] [--run-name NAME] [--outputs DIR]
    python -m cnnbench.pipeline --params params/smoke.yaml

Parameters are validated before anything runs. A failing notebook stops the pipeline with the notebook and
cell named; everything written before it stays.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from cnnbench import params as params_mod
from cnnbench import paths, report


def _notebook_path(name: str) -> Path:
    path = paths.repo_root() / "notebooks" / f"{name}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"notebook {path} is missing")
    return path


def run_name_for(p: params_mod.Params) -> str:
    from cnnbench import devices
    from cnnbench.run import run_name

    return run_name(p, devices.resolve(p.device, p.expect_device))


def execute(
    params_file: Path, overrides: dict, run_dir: Path, notebooks: list[str], timeout_s: int, log=print
) -> list[Path]:
    """Run ``notebooks`` into ``run_dir/notebooks/``. Raises :class:`NotebookFailed`."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    os.environ["CNNBENCH_HEADLESS"] = "1"  # quiet progress bars, static plots instead of widgets
    os.environ["CNNBENCH_ROOT"] = str(paths.repo_root())
    out_dir = run_dir / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    done = []
    for i, name in enumerate(notebooks, 1):
        source, target = _notebook_path(name), out_dir / f"{name}.ipynb"
        log(f"[{i}/{len(notebooks)}] {name} ...", end=" ", flush=True)
        start = time.perf_counter()
        try:
            papermill.execute_notebook(
                str(source),
                str(target),
                parameters={"params_file": str(params_file), "overrides": overrides, "run_dir": str(run_dir)},
                kernel_name="python3",
                cwd=str(paths.repo_root()),
                execution_timeout=timeout_s,
                progress_bar=False,
                log_output=False,
            )
        except PapermillExecutionError as err:
            log("failed")
            first_line = (err.source or "").strip().splitlines()[0][:80] if (err.source or "").strip() else ""
            raise NotebookFailed(name, err.exec_count, f"{err.ename}: {err.evalue}", target, first_line) from None
        log(f"done in {time.perf_counter() - start:.1f} s")
        done.append(target)
    return done


class NotebookFailed(RuntimeError):
    """A notebook raised: ``cell`` is its execution count as shown in the executed copy."""

    def __init__(self, notebook: str, cell: int | None, error: str, executed: Path, source: str = ""):
        self.notebook, self.cell, self.error, self.executed = notebook, cell, error, executed
        where = f"cell [{cell}]" + (f" `{source}`" if source else "")
        super().__init__(f"notebook {notebook} failed in {where}: {error} (executed copy kept: {executed})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cnnbench", description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/local.yaml", help="params YAML (default: params/local.yaml)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one parameter (value read as YAML); repeatable",
    )
    ap.add_argument("--run-name", help="override run_name: results go to <outputs>/<run-name>")
    ap.add_argument("--outputs", help="folder holding the runs (default: outputs/ of the workbook)")
    ap.add_argument("--no-report", action="store_true", help="execute the notebooks only")
    args = ap.parse_args(argv)

    try:
        overrides = params_mod.parse_overrides(args.set)
        if args.run_name:
            overrides["run_name"] = args.run_name
        params_file = paths.resolve(args.params)
        p = params_mod.load(params_file, overrides)
    except params_mod.ParamsError as err:
        print(f"cnnbench: {err}", file=sys.stderr)
        return 2

    missing = [n for n in p.notebooks if not (paths.repo_root() / "notebooks" / f"{n}.ipynb").is_file()]
    if missing:
        print(f"cnnbench: notebooks missing from {paths.repo_root() / 'notebooks'}: {', '.join(missing)}", file=sys.stderr)
        return 2
    outputs = Path(args.outputs).resolve() if args.outputs else paths.outputs_root()
    run_dir = outputs / run_name_for(p)
    print(f"cnnbench: run '{run_dir.name}' with {params_file.name} -> {run_dir}")
    try:
        executed = execute(params_file, overrides, run_dir, p.notebooks, p.cell_timeout_s)
    except NotebookFailed as err:
        print(f"cnnbench: {err}", file=sys.stderr)
        return 1
    if not args.no_report:
        html = report.build_run_report(run_dir, executed)
        print(f"cnnbench: report {html}")
        runs, _ = report.combined_runs(outputs)
        if len(runs) >= 2 and "08_analysis" in p.notebooks:  # the same 08, over every user run
            try:
                analysed = execute(params_file, {**overrides, "analysis_runs": ["*"]}, outputs / report.COMBINED,
                                   ["08_analysis"], p.cell_timeout_s)
            except NotebookFailed as err:
                print(f"cnnbench: combined analysis: {err}", file=sys.stderr)
                return 1
            combined = report.build_combined_report(outputs, analysed[0])
            print(f"cnnbench: combined report of {combined[1]} runs {combined[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
