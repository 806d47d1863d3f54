"""The pipeline: execute the numbered notebooks in order with papermill, then build the HTML report.

    cnnbench --params params/local.yaml [--set batch_size=64 ...] [--run-name NAME] [--outputs DIR]
    python -m cnnbench.pipeline --params params/smoke.yaml

Parameters are validated before anything runs. A failing notebook stops the pipeline with the notebook and
cell named; everything written before it stays. While it runs, ``<run>/.lock`` keeps a second writer of the
same run out and the console shows one line per measured configuration. Only a successful run writes
report.html: a failed or interrupted one leaves ``FAILED.txt`` (when, why, with which parameters) and renames a
previous report to ``report.stale.html``. The kernels' own console chatter goes to ``<run>/kernel.log``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

from cnnbench import params as params_mod
from cnnbench import paths
from cnnbench.progress import PROGRESS_ENV

FAILED, STALE_REPORT = "FAILED.txt", "report.stale.html"


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
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    os.environ["CNNBENCH_HEADLESS"] = "1"  # quiet progress bars, static plots instead of widgets
    os.environ["CNNBENCH_ROOT"] = str(paths.repo_root())
    out_dir = run_dir / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    progress_file = run_dir / "progress.log"
    progress_file.write_text("")
    os.environ[PROGRESS_ENV] = str(progress_file)
    done = []
    for i, name in enumerate(notebooks, 1):
        source, target = _notebook_path(name), out_dir / f"{name}.ipynb"
        log(f"[{i}/{len(notebooks)}] {name} ...", flush=True)
        start = time.perf_counter()
        try:
            with _Tail(progress_file, log), _logs_to(run_dir / "kernel.log"):
                papermill.execute_notebook(
                str(source),
                str(target),
                    parameters={"params_file": str(params_file), "overrides": overrides, "run_dir": str(run_dir)},
                    kernel_name="python3",
                    cwd=str(paths.repo_root()),
                    execution_timeout=timeout_s,
                    progress_bar=False,
                    log_output=False,
                    kernel_manager_class=_quiet_kernel_manager(run_dir / "kernel.log"),
                )
        except PapermillExecutionError as err:
            log(f"[{i}/{len(notebooks)}] {name} failed")
            first_line = (err.source or "").strip().splitlines()[0][:80] if (err.source or "").strip() else ""
            raise NotebookFailed(name, err.exec_count, f"{err.ename}: {err.evalue}", target, first_line) from None
        except DeadKernelError:
            log(f"[{i}/{len(notebooks)}] {name} failed")
            raise NotebookFailed(name, None, "the kernel died (killed, or out of memory?)", target) from None
        log(f"[{i}/{len(notebooks)}] {name} done in {time.perf_counter() - start:.1f} s")
        done.append(target)
    return done


# Loggers of the notebook machinery: their records ("Kernel died while waiting for execute reply.", an
# execution task's unretrieved exception after Ctrl-C) go to kernel.log, not between the pipeline's own lines.
MACHINERY_LOGGERS = ("traitlets", "nbclient", "papermill", "asyncio")


@contextlib.contextmanager
def _logs_to(path: Path):
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in MACHINERY_LOGGERS]
    saved = [lg.propagate for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
    try:
        yield
    finally:
        for lg, propagate in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.propagate = propagate
        handler.close()


def _silence_machinery() -> None:
    """After Ctrl-C the process exits: an execution task that dies with the kernel must not log at exit."""
    for name in MACHINERY_LOGGERS:
        logging.getLogger(name).disabled = True


class _Tail(threading.Thread):
    """Prints the lines appended to ``path`` (one per measured configuration) while a notebook runs."""

    def __init__(self, path: Path, log, interval_s: float = 0.5):
        super().__init__(daemon=True)
        self.path, self.log, self.interval_s, self.stop = path, log, interval_s, threading.Event()
        self.offset = path.stat().st_size if path.is_file() else 0

    def poll(self) -> None:
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                text = f.read()
        except OSError:
            return
        complete = text[: text.rfind("\n") + 1]
        self.offset += len(complete.encode())
        for line in complete.splitlines():
            self.log(f"    {line}", flush=True)

    def run(self) -> None:
        while not self.stop.wait(self.interval_s):
            self.poll()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join()
        self.poll()


def _quiet_kernel_manager(log_path: Path):
    """A kernel manager whose kernels write their console output (ipykernel's TCP warning, torch's USDT and
    profiler lines) to ``log_path`` instead of the pipeline's console; errors still reach the notebook."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            log = open(log_path, "ab")  # noqa: SIM115 - the kernel process owns it from here
            kw.update(stdout=log, stderr=log)
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return QuietKernelManager


class NotebookFailed(RuntimeError):
    """A notebook raised: ``cell`` is its execution count as shown in the executed copy."""

    def __init__(self, notebook: str, cell: int | None, error: str, executed: Path, source: str = ""):
        self.notebook, self.cell, self.error, self.executed = notebook, cell, error, executed
        where = (f" in cell [{cell}]" if cell is not None else "") + (f" `{source}`" if source else "")
        super().__init__(f"notebook {notebook} failed{where}: {error} (executed copy kept: {executed})")


def _outputs_problem(outputs: Path) -> str:
    """Why ``--outputs`` cannot hold runs (a file, not creatable, not writable), or ""."""
    if outputs.exists() and not outputs.is_dir():
        return f"--outputs {outputs} is a file, not a folder"
    try:
        outputs.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"--outputs {outputs} cannot be created ({err.strerror or err})"
    if not os.access(outputs, os.W_OK | os.X_OK):
        return f"--outputs {outputs} is not writable"
    return ""


def _mark_started(run_dir: Path) -> None:
    """A rerun starts: the previous report no longer describes the folder until this run succeeds."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / FAILED).unlink(missing_ok=True)
    if (run_dir / "report.html").is_file():
        (run_dir / "report.html").replace(run_dir / STALE_REPORT)


def _mark_failed(run_dir: Path, why: str, params_file: Path, overrides: dict) -> None:
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    stale = f"\nThe previous report was renamed {STALE_REPORT}.\n" if (run_dir / STALE_REPORT).is_file() else ""
    (run_dir / FAILED).write_text(
        f"This run did not finish: {why}\nwhen: {when}\nparams file: {params_file}\n"
        f"overrides: {json.dumps(overrides, default=str)}\nResults written before the failure are kept; rerun "
        f"the same command to resume.{stale}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cnnbench", description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params/local.yaml", help="params YAML (default: params/local.yaml)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override one parameter (value read as YAML); repeatable")
    ap.add_argument("--run-name", help="override run_name: results go to <outputs>/<run-name>")
    ap.add_argument("--outputs", help="folder holding the runs (default: outputs/ of the workbook)")
    ap.add_argument("--no-report", action="store_true", help="execute the notebooks only")
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except KeyboardInterrupt:
        _silence_machinery()
        print("cnnbench: interrupted; results written so far are kept (run again to resume)", file=sys.stderr)
        return 130


def _run(args) -> int:
    try:
        overrides = params_mod.parse_overrides(args.set)
        names = {}
        if args.run_name is not None:  # '' is not "the file's name": it is refused, not silently ignored
            if not args.run_name.strip():
                raise params_mod.ParamsError("--run-name is empty: give a name, or leave the option out to use "
                                             "the params file's run_name")
            overrides["run_name"], names["run_name"] = args.run_name, "--run-name"
        params_file = paths.resolve(args.params)
        p = params_mod.load(params_file, overrides, overrides_src="--set", override_names=names)
        note = params_mod.empty_file_note(params_file)
    except params_mod.ParamsError as err:
        print(f"cnnbench: {err}", file=sys.stderr)
        return 2
    missing = [n for n in p.notebooks if not (paths.repo_root() / "notebooks" / f"{n}.ipynb").is_file()]
    if missing:
        print(f"cnnbench: notebooks missing from {paths.repo_root() / 'notebooks'}: {', '.join(missing)}", file=sys.stderr)
        return 2
    outputs = Path(args.outputs).expanduser().resolve() if args.outputs else paths.outputs_root()
    problem = _outputs_problem(outputs)
    if problem:
        print(f"cnnbench: {problem}", file=sys.stderr)
        return 2
    run_dir = outputs / run_name_for(p)
    try:
        lock = paths.RunLock(run_dir).acquire()
    except paths.RunLocked as err:
        print(f"cnnbench: {err}", file=sys.stderr)
        return 2
    try:
        return _execute_run(args, p, params_file, overrides, outputs, run_dir, note)
    finally:
        lock.release()


def _execute_run(args, p, params_file: Path, overrides: dict, outputs: Path, run_dir: Path, note: str) -> int:
    print(f"cnnbench: run '{run_dir.name}' with {params_file.name} -> {run_dir}")
    if note:
        print(f"cnnbench: {note}")
    cores = os.cpu_count() or 1
    if p.threads > cores:
        print(f"cnnbench: warning: threads {p.threads} is above the {cores} CPU cores here (oversubscribed)")
    _mark_started(run_dir)
    try:
        executed = execute(params_file, overrides, run_dir, p.notebooks, p.cell_timeout_s)
    except NotebookFailed as err:
        _mark_failed(run_dir, str(err), params_file, overrides)
        print(f"cnnbench: {err}; kernel output in {run_dir / 'kernel.log'}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _mark_failed(run_dir, "interrupted (Ctrl-C)", params_file, overrides)
        raise
    if not args.no_report:
        from cnnbench import report

        html = report.build_run_report(run_dir, executed)
        (run_dir / STALE_REPORT).unlink(missing_ok=True)
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
