"""The pipeline: execute the numbered notebooks in order with papermill, then build the HTML report.

``cnnbench --params params/local.yaml [--set KEY=VALUE ...]`` and :data:`SUBCOMMANDS` (docs/running.md). FAILED.txt
marks a run from its start until it succeeds; any failure ends in one line. Exit codes: 0 done, 1 failed, 2 refused
before any work, 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import errno
import functools
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

from cnnbench import eta, paths, results
from cnnbench import params as params_mod
from cnnbench.progress import PROGRESS_ENV

STALE_REPORT = "report.stale.html"
# 08, executed again by `cnnbench report` unless current (_analysis_current)
ANALYSIS = params_mod.NOTEBOOKS[-1]


def _notebook_path(name: str) -> Path:
    return paths.repo_root() / "notebooks" / f"{name}.ipynb"


def execute(
    params_file: Path,
    run_dir: Path,
    notebooks: list[str],
    timeout_s: int,
    log=print,
    planned: dict | None = None,
    progress: Path | None = None,
    on_done=None,
    **sources,
) -> list[Path]:
    """Run ``notebooks`` into ``run_dir/notebooks/`` (each copy whole or not at all), raising
    :class:`NotebookFailed`; ``sources``: :func:`cnnbench.eta.expected_times`'s; ``on_done(done, took_s)``:
    after each notebook but the last."""
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    os.environ["CNNBENCH_HEADLESS"] = "1"  # quiet progress bars, static plots instead of widgets
    os.environ["CNNBENCH_ROOT"] = str(paths.repo_root())
    out_dir = run_dir / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    for left in out_dir.glob(".*.partial.ipynb"):  # of a run killed outright
        left.unlink(missing_ok=True)
    progress_file = progress or run_dir / "progress.log"
    paths.open_own(progress_file, "wb").close()  # emptied; a link planted there is replaced, never followed
    os.environ[PROGRESS_ENV] = str(progress_file)
    os.environ[paths.RESOLVED_ENV] = paths.fingerprint(params_file)  # each notebook checks it (run.open_run)
    done = []
    # params_file is the run's resolved params.json (run.write_resolved): it holds the overrides
    parameters = {"params_file": str(params_file), "overrides": {}, "run_dir": str(run_dir)}
    timings = results.file(run_dir, "timings")
    expected = eta.expected_times(notebooks, eta.record(run_dir), **{"budgets": {}, **sources})
    remaining = eta.Remaining(expected, planned=planned)
    for i, name in enumerate(notebooks, 1):
        source, target = _notebook_path(name), out_dir / f"{name}.ipynb"
        partial = out_dir / f".{name}.partial.ipynb"
        log(f"[{i}/{len(notebooks)}] {remaining.start(name)}", flush=True)  # its clock times the notebook
        try:
            tail = _Tail(progress_file, log, status=remaining.line, seen=remaining.seen)
            with tail, _logs_to(run_dir / "kernel.log"):
                papermill.execute_notebook(
                    str(source),
                    str(partial),
                    parameters=parameters,
                    kernel_name="python3",
                    cwd=str(paths.repo_root()),
                    execution_timeout=timeout_s,
                    progress_bar=False,
                    log_output=False,
                    kernel_manager_class=_quiet_kernel_manager(run_dir / "kernel.log"),
                )
        except BaseException as err:
            kept = _keep_whole(partial, target)
            if not isinstance(err, Exception):  # Ctrl-C, SIGTERM: the caller says so
                raise
            log(f"[{i}/{len(notebooks)}] {name} failed")
            if isinstance(err, PapermillExecutionError):
                first_line = ((err.source or "").strip().splitlines() or [""])[0][:80]
                error = f"{err.ename}: {err.evalue}"
                raise NotebookFailed(name, err.exec_count, error, kept, first_line) from None
            why = "the kernel died (killed, or out of memory?)"
            if not isinstance(err, DeadKernelError):
                why = _describe(err, {str(partial): target}, writing=target)
            raise NotebookFailed(name, None, why, kept) from None
        partial.replace(target)
        took = remaining.finish(name)
        timings.append({"notebook": name, "duration_s": round(took, 1), "finished_at": _now()})
        log(remaining.with_run(f"[{i}/{len(notebooks)}] {name} done in {took:.1f} s"))
        done.append(target)
        if on_done is not None and len(done) < len(notebooks):
            on_done(done, took)
    return done


# A notebook that took this long or more is followed by report.partial.html (a short one adds little to read).
PARTIAL_AFTER_S = 60.0


def _partial_report(run_dir: Path, total: int, done: list[Path], took_s: float) -> None:
    """report.partial.html over the notebooks ``done`` of ``total``, after one that took ``PARTIAL_AFTER_S`` or
    more; report.html, once written, removes it."""
    if took_s < PARTIAL_AFTER_S:
        return
    from cnnbench import report

    # built in this process (its imports paid once a run); the run never stops for it
    with (
        contextlib.suppress(Exception),
        open(os.devnull, "w") as quiet,
        contextlib.redirect_stdout(quiet),
        contextlib.redirect_stderr(quiet),
    ):
        report.build_run_report(run_dir, done, of=total)


def _keep_whole(partial: Path, target: Path) -> Path | None:
    """``partial`` renamed over ``target`` (returned) if it is a whole notebook, else removed."""
    import nbformat

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. cells without ids: still a notebook
            nbformat.read(partial, as_version=4)
        return partial.replace(target)
    except Exception:  # noqa: BLE001 - missing, cut short or not a notebook
        partial.unlink(missing_ok=True)
        return None


# errors of a write that names no file: the file being written is named for it
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def _describe(err: BaseException, names: dict | None = None, writing: Path | None = None) -> str:
    """One line for a failure: an OSError as its reason and file (``writing`` where it names none), else its type
    and first line."""
    if isinstance(err, OSError) and err.strerror:
        filename = (names or {}).get(str(err.filename), err.filename)
        filename = filename or (writing if err.errno in WRITE_ERRNOS else None)
        return f"{err.strerror}" + (f": {filename}" if filename else "")
    text = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {text}"[:300] if text else type(err).__name__


# Loggers of the notebook machinery: their records go to kernel.log, not between the pipeline's own lines.
MACHINERY_LOGGERS = ("traitlets", "nbclient", "papermill", "asyncio")


@contextlib.contextmanager
def _logs_to(path: Path):
    handler = logging.StreamHandler(paths.open_own(path, "a"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    with contextlib.closing(handler.stream), contextlib.closing(handler), contextlib.ExitStack() as undo:
        for lg in map(logging.getLogger, MACHINERY_LOGGERS):
            undo.callback(setattr, lg, "propagate", lg.propagate)
            undo.callback(lg.removeHandler, handler)
            lg.addHandler(handler)
            lg.propagate = False
        yield


class _Tail(threading.Thread):
    """Prints the lines appended to ``path`` while a notebook runs, and ``status()`` after them (at most every
    ``status_min_s``) or after ``STATUS_EVERY_S`` without any; ``seen`` gets every line."""

    STATUS_EVERY_S = 60.0

    def __init__(self, path: Path, log, interval_s=0.5, status=None, seen=None, status_min_s=10.0):
        super().__init__(daemon=True)
        self.path, self.log, self.interval_s, self.stop = path, log, interval_s, threading.Event()
        self.offset = path.stat().st_size if path.is_file() else 0
        self.status, self.status_min_s, self.said = status, status_min_s, time.monotonic()
        self.seen = seen or (lambda line: None)

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
            self.seen(line)
            self.log(f"    {line}", flush=True)
        quiet_s = time.monotonic() - self.said
        if self.status and quiet_s >= (self.status_min_s if complete else self.STATUS_EVERY_S):
            self.log(f"  ~ {self.status()}", flush=True)
            self.said = time.monotonic()

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
    """A kernel manager whose kernels write their console output to ``log_path``, not the console."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            log = paths.open_own(log_path, "ab")  # the kernel process owns it from here; never through a link
            kw.update(stdout=log, stderr=log)
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return QuietKernelManager


class NotebookFailed(RuntimeError):
    """A notebook failed in ``cell`` (its execution count; None: no cell raised); ``executed``: the copy kept."""

    def __init__(self, notebook: str, cell: int | None, error: str, executed: Path | None, source: str = ""):
        self.notebook, self.cell, self.error, self.executed = notebook, cell, error, executed
        where = (f" in cell [{cell}]" if cell is not None else "") + (f" `{source}`" if source else "")
        kept = f" (executed copy kept: {executed})" if executed else ""
        super().__init__(f"notebook {notebook} failed{where}: {error}{kept}")


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised as Ctrl-C raises KeyboardInterrupt; ``exit_code`` is 128 + the signal."""

    def __init__(self, signum: int):
        self.signum, self.exit_code = signum, 128 + signum
        super().__init__(signal.Signals(signum).name)


@contextlib.contextmanager
def _signals_stop_the_run():
    """SIGTERM and SIGHUP (unless ignored) raise :class:`Stopped` once in the block, a second ends the process;
    SIGINT raises KeyboardInterrupt even where inherited ignored (`cnnbench &`). Main thread only."""

    def stop(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        raise Stopped(signum)

    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None or (signal.getsignal(sig) is signal.SIG_IGN and sig != signal.SIGINT):
            continue
        try:
            saved[sig] = signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else stop)
        except ValueError:  # not the main thread
            break
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


class _Console:
    """A console stream whose lines are dropped once its reader has gone (BrokenPipeError): later lines go to
    /dev/null, so no "Exception ignored" at exit."""

    def __init__(self, stream):
        self.stream = stream

    def __getattr__(self, name):
        attr = getattr(self.stream, name)
        if name not in ("write", "flush"):
            return attr

        def dropped_on_broken_pipe(*args):
            try:
                return attr(*args)
            except BrokenPipeError:
                with contextlib.suppress(Exception):
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, self.stream.fileno())
                    os.close(devnull)

        return dropped_on_broken_pipe


@contextlib.contextmanager
def _console_may_close():
    """stdout and stderr as :class:`_Console`: `| head` drops the rest of the console, never the work."""
    with contextlib.redirect_stdout(_Console(sys.stdout)), contextlib.redirect_stderr(_Console(sys.stderr)):
        yield


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _mark(run_dir: Path, params_file: Path, overrides: dict, why: str = "", detail: str = "") -> str:
    """FAILED.txt, whole or not at all: the run did not finish ``why``, or ("") it starts, the previous report
    renamed stale; returns "" or, where a failure's cannot be written, why not (a start's OSError is raised)."""
    from cnnbench import report

    if not why and (run_dir / report.REPORT).is_file():
        (run_dir / report.REPORT).replace(run_dir / STALE_REPORT)
    running = "is running, or was stopped without a chance to say why (killed, out of memory, power lost)"
    started = f"has not finished: it started at {_now()} (process {os.getpid()}) and {running}"
    state = f"did not finish: {why}\nwhen: {_now()}" if why else started
    try:
        stale = (
            f"\nThe previous report was renamed {STALE_REPORT}.\n"
            if (run_dir / STALE_REPORT).is_file()
            else ""
        )
        results.atomic_write_text(
            run_dir / paths.FAILED,
            f"This run {state}\nparams file: {paths.shown(params_file)}\noverrides: {json.dumps(overrides, default=str)}"
            f"\nResults written so far are kept; rerun the same command to resume.{stale}\n"
            + (f"\n{detail}" if detail else ""),
        )
    except OSError as err:
        if not why:
            raise
        return f" ({paths.FAILED} not written: {err.strerror or err})"
    return ""


def _other_runs() -> list[str]:
    """Warnings: the left-over processes of runs whose pipeline has gone; the runs measuring now."""
    left, busy = {}, set()
    for pid, folder, cmd in paths.run_processes():
        if (holder := paths.RunLock(Path(folder)).holder()) is None:
            left[str(pid)] = f"{pid} of run '{Path(folder).name}' ({cmd[:60]})"
        else:
            busy.add(f"'{Path(folder).name}' (pipeline {holder})")
    stray = f"{', '.join(left.values())}; end them: kill {' '.join(left)}"
    said = {
        f"{len(left)} process(es) of a run whose pipeline has gone still run, taking CPU from this one: {stray}": left,
        f"another run is measuring on this machine: {', '.join(sorted(busy))}; both are judged busy": busy,
    }
    return [line for line, on in said.items() if on]


def finished(run_dir: Path, notebooks: list[Path] | None = None) -> Path | None:
    """The run is complete: its report.html built over the executed ``notebooks`` (returned; None: no report),
    FAILED.txt gone, and the run's zip, where 08 made one, made again."""
    html = None
    if notebooks is not None:
        from cnnbench import report

        html = report.build_run_report(run_dir, notebooks)
        (run_dir / STALE_REPORT).unlink(missing_ok=True)
    (run_dir / paths.FAILED).unlink(missing_ok=True)
    if (run_dir.parent / f"{run_dir.name}.zip").is_file():
        from cnnbench.results.runs import zip_run

        zip_run(run_dir)
    return html


# cnnbench NAME ...: its entry point and what it does, in words (no notebook runs)
SUBCOMMANDS = {
    "compare": ("cnnbench.analysis.cli:main", "compare RUN_A RUN_B [...]: what a change did"),
    "report": ("report_main", "report [RUN_DIR]: rebuild the reports, measuring nothing"),
    "predict": ("cnnbench.predict:main", "predict MODEL --device NAME: a rate predicted from the roofs"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in SUBCOMMANDS:
        module, _, name = SUBCOMMANDS[argv[0]][0].rpartition(":")
        with _console_may_close():
            return (getattr(importlib.import_module(module), name) if module else globals()[name])(argv[1:])
    ap = params_mod.Parser(
        prog="cnnbench",
        description=__doc__.split("\n")[0],
        epilog="; ".join(f"cnnbench {said} (cnnbench {name} -h)" for name, (_, said) in SUBCOMMANDS.items()),
    )
    ap.add_argument("--params", default="params/local.yaml", help="params YAML (default: params/local.yaml)")
    set_help = "override one parameter (value read as YAML); repeatable"
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=set_help)
    ap.add_argument("--run-name", help="override run_name: results go to <outputs>/<run-name>")
    ap.add_argument("--outputs", help="folder holding the runs (default: outputs/ of the workbook)")
    ap.add_argument("--no-report", action="store_true", help="execute the notebooks only")
    ap.add_argument(
        "--estimate", action="store_true", help="print each notebook's expected time; run nothing"
    )
    kind_help = "with --estimate: for this kind of device (cuda, mps, cpu), not here: its committed example's"
    ap.add_argument("--device-kind", help=kind_help)
    args = ap.parse_args(argv)
    # the packages of the [notebook] extra the batch runner needs
    if missing := [m for m in ("papermill", "nbconvert", "ipykernel") if importlib.util.find_spec(m) is None]:
        print(
            f"cnnbench: the batch runner needs {', '.join(missing)}: pip install 'cnnbench[notebook]' "
            "(make report installs it)",
            file=sys.stderr,
        )
        return 2
    with _console_may_close():  # a run's failures end in _execute_run: an OSError here came before any work
        return _one_line("cnnbench", "results so far are kept (run again to resume)", _run, args, OSError)


def _one_line(who: str, stopped: str, command, args, refusal=()) -> int:
    """``command(args)``'s exit code, any failure said in one line: 2 refused (also ``refusal``), else 1 (a bug too);
    130 Ctrl-C, 128 + the signal for SIGTERM (143) or SIGHUP (129), then saying ``stopped``."""
    try:
        with _signals_stop_the_run():
            return command(args)
    except KeyboardInterrupt as err:
        # the process exits: a task that dies with the kernel must not log at exit
        for name in MACHINERY_LOGGERS:
            logging.getLogger(name).disabled = True
        how = f"stopped by {err}" if isinstance(err, Stopped) else "interrupted"
        print(f"{who}: {how}; {stopped}", file=sys.stderr)
        return err.exit_code if isinstance(err, Stopped) else 130
    except Exception as err:  # noqa: BLE001 - one line, never a traceback
        refused = isinstance(err, (params_mod.ParamsError, paths.RunLocked, refusal))
        print(f"{who}: {_describe(err) if isinstance(err, OSError) or not refused else err}", file=sys.stderr)
        return 2 if refused else 1


def _run(args) -> int:
    """The run of ``args``; a bad parameter or an OSError before its lock is a refusal (:func:`_one_line`)."""
    overrides, names = params_mod.parse_overrides(args.set), {}
    if args.run_name is not None:  # '' is not "the file's name": it is refused, not silently ignored
        if not args.run_name.strip():
            raise params_mod.ParamsError("--run-name is empty: give a name, or leave the option out")
        overrides["run_name"], names["run_name"] = args.run_name, "--run-name"
    params_file = params_mod.resolved_path("--params", args.params, paths.resolve)
    hardware = eta.example_hardware(args.device_kind) if args.device_kind else None
    if args.device_kind and not (args.estimate and hardware):
        why = "no committed example ran on one" if args.estimate else "it goes with --estimate only"
        raise params_mod.ParamsError(f"--device-kind {args.device_kind}: {why}")
    p = params_mod.load(params_file, overrides, not args.estimate, "--set", names, hardware)
    note = "\n".join(filter(None, (*params_mod.notes(params_file, p), *params_mod.variant_notes(p))))
    if problem := params_mod.run_data_problem(p):  # before the notebooks ahead of 05 or 06 measure anything
        key = problem.split("'")[1]  # every run_data_problem names its key first: "key 'name': ..."
        in_file = key not in overrides and key in params_mod.read_yaml(params_file)
        said = "--set" if key in overrides else f"{params_file}:" if in_file else "by default,"
        raise params_mod.ParamsError(f"{said} {problem}")
    # relative dataset folders made absolute against the folder they were validated from
    keys = [key for key in ("data_path", "transfer_data_path") if getattr(p, key)]
    p = dataclasses.replace(p, **{k: os.path.abspath(os.path.expanduser(getattr(p, k))) for k in keys})
    notebooks = paths.repo_root() / "notebooks"
    if missing := [n for n in p.notebooks if not (notebooks / f"{n}.ipynb").is_file()]:
        raise params_mod.ParamsError(f"notebooks missing from {notebooks}: {', '.join(missing)}")
    outputs = params_mod.resolved_path("--outputs", args.outputs) if args.outputs else paths.outputs_root()
    from cnnbench import devices  # the device: --device-kind's, else the params' (named where it is here)

    here = hardware is None and p.device.split(":")[0] in ("auto", *devices.available())
    device = devices.resolve(p.device) if here else p.device
    kind = hardware.kind if hardware else devices.backend(device).kind
    name = hardware.name if hardware else devices.device_name(device) if here else ""
    run_dir = outputs / (p.run_name or paths.default_run_name(kind))
    if args.estimate:  # writes nothing, makes no folder
        return _estimate(p, params_file, run_dir, kind, name)
    if problem := paths.folder_problem(outputs):
        raise params_mod.ParamsError(problem)
    with paths.RunLock(run_dir):
        return _execute_run(args, p, params_file, overrides, outputs, run_dir, note, kind, name)


def _estimate(p: params_mod.Params, params_file: Path, run_dir: Path, kind: str, name: str) -> int:
    """``--estimate``: each notebook's expected time and its source, on a ``kind`` device named ``name``;
    measures and writes nothing."""
    expected = eta.expected_times(
        p.notebooks, eta.record(run_dir), **_estimate_sources(p, params_file, run_dir, kind, name)
    )
    print(f"cnnbench: expected times of {params_file.name} on {name or kind} (measures nothing)")
    for notebook, (seconds, source) in expected.items():
        print(f"{notebook:<16}{eta.duration(seconds):>8}  {source or 'no estimate'}")
    known = [s for s, _ in expected.values() if s is not None]
    least = " (at least: a notebook has no estimate)" if len(known) < len(expected) else ""
    print(f"{'total':<16}{eta.duration(sum(known)):>8}{least}")
    return 0


def _estimate_sources(p: params_mod.Params, params_file: Path, run_dir: Path, kind: str, name: str) -> dict:
    """What a run's expected times come from besides its own record (:func:`eta.expected_times`'s arguments)."""
    return {
        "budgets": eta.Budgets(p, kind, eta.params_device(p, kind, name, params_file.name)),
        "example": eta.example_record(p, kind, paths.repo_root() / eta.EXAMPLE_RUN),
        "sibling": eta.sibling_record(run_dir, params_file.name),
    }


def _execute_run(
    args, p, params_file: Path, overrides: dict, outputs: Path, run_dir: Path, note: str, *device
):
    """The run itself, on the device ``(kind, name)``: every way it can fail ends in one line and FAILED.txt (where
    it can be written)."""
    from cnnbench import run as run_mod

    print(f"cnnbench: run '{run_dir.name}' with {params_file.name} -> {run_dir}")
    for line in note.splitlines():
        print(f"cnnbench: {line}")
    cores = os.cpu_count() or 1
    if p.threads > cores:
        print(f"cnnbench: warning: threads {p.threads} is above the {cores} CPU cores here (oversubscribed)")
    for line in _other_runs():
        print(f"cnnbench: warning: {line}")
    try:
        _mark(run_dir, params_file, overrides)
        resolved = run_mod.write_resolved(run_dir, p, params_file, overrides)  # read by every notebook
        sources = _estimate_sources(p, params_file, run_dir, *device)
        planned = {name: eta.planned(p, name) for name in p.notebooks}
        partial = None if args.no_report else functools.partial(_partial_report, run_dir, len(p.notebooks))
        with _fingerprinting(run_dir, [run_dir]) if ANALYSIS in p.notebooks else contextlib.nullcontext():
            executed = execute(
                resolved, run_dir, p.notebooks, p.cell_timeout_s, planned=planned, on_done=partial, **sources
            )
        if html := finished(run_dir, None if args.no_report else executed):
            print(f"cnnbench: report {html}")
    except NotebookFailed as err:
        unwritten = _mark(run_dir, params_file, overrides, str(err))
        print(f"cnnbench: {err}; kernel output in {run_dir / 'kernel.log'}{unwritten}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:
        why = f"stopped by {err}" if isinstance(err, Stopped) else "interrupted (Ctrl-C)"
        _mark(run_dir, params_file, overrides, why)
        raise
    except Exception as err:
        why = _describe(err)
        unwritten = _mark(run_dir, params_file, overrides, why, traceback.format_exc())
        print(f"cnnbench: run '{run_dir.name}' failed: {why}{unwritten}", file=sys.stderr)
        return 1
    return 0 if args.no_report else _combined(p, params_file, overrides, outputs)


def _combined(
    p: params_mod.Params | None, params_file: Path | None, overrides: dict, outputs: Path, mine=None
):
    """With two or more user runs in ``outputs``: 08 over all of them, and the combined report; ``p`` None (`cnnbench
    report`): with the parameters of the run ``mine``, else of the last run."""
    from cnnbench import report

    if p is not None and ANALYSIS not in p.notebooks:  # the same 08, over every user run
        return 0
    folder = outputs / report.COMBINED
    try:
        runs, _ = report.combined_runs(outputs)
        if len(runs) < 2:
            if p is None:
                print(f"cnnbench report: {len(runs)} user run(s) in {outputs}: no combined report")
            return 0
        mine = mine or runs[-1]
        every = lambda: dataclasses.replace(p or _report_params(mine), analysis_runs=["*"])  # noqa: E731
        over, params_file = {**overrides, "analysis_runs": ["*"]}, params_file or mine / paths.RESOLVED
        analysed = _analysed(
            folder, [*runs, folder], "cnnbench: combined analysis", folder, every, params_file, over
        )
        combined = report.build_combined_report(outputs, analysed)
    # an earlier combined report no longer covers every run: never left as current
    except BaseException as err:
        why, stale = err if isinstance(err, NotebookFailed) else _describe(err), ""
        with contextlib.suppress(OSError):
            if (outputs / report.REPORT).is_file():
                (outputs / report.REPORT).replace(outputs / STALE_REPORT)
                stale = f"; the previous combined report was renamed {STALE_REPORT}"
            results.atomic_write_text(folder / paths.FAILED, f"The combined analysis did not finish: {why}\n")
        if not isinstance(err, Exception):
            raise
        print(f"cnnbench: combined analysis: {why}{stale}", file=sys.stderr)
        return 1
    (outputs / STALE_REPORT).unlink(missing_ok=True)
    (folder / paths.FAILED).unlink(missing_ok=True)
    print(f"cnnbench: combined report of {combined[1]} runs {combined[0]}")
    return 0


def report_main(argv: list[str]) -> int:
    """``cnnbench report [--run-name NAME | RUN_DIR] [--outputs DIR]``: rebuild a run's report.html (08 executed
    again unless current) and the combined report, measuring nothing. Exit 2 for an unknown or broken run."""
    ap = argparse.ArgumentParser(prog="cnnbench report", description=report_main.__doc__.split("\n")[0])
    ap.add_argument("run_dir", nargs="?", help="a run folder (e.g. one copied from another machine)")
    ap.add_argument("--run-name", help="the run <outputs>/<run-name>")
    outputs_help = "folder holding the runs (default: outputs/ of the workbook, or the run folder's parent)"
    ap.add_argument("--outputs", help=outputs_help)
    args = ap.parse_args(argv)
    if args.run_dir and args.run_name:
        ap.error("give a run folder or --run-name, not both")
    os.environ["CNNBENCH_NO_MEASURE"] = "1"  # interactive.NO_MEASURE_ENV: 08's static explorer never measures
    try:
        return _one_line("cnnbench report", "the reports were not rebuilt", _rebuild, args)
    finally:
        os.environ.pop("CNNBENCH_NO_MEASURE", None)


def _rebuild(args) -> int:
    """The reports of ``args`` (a run name or folder, else the combined one) built again; refuses, in one line,
    a run that is missing, broken, or stopped with more than 08 left (08 measures nothing: a run stopped with only
    08 left is finished here)."""
    from cnnbench.results import runs

    if args.run_name is not None and (unsafe := params_mod.safe_name_error(args.run_name)):
        raise params_mod.ParamsError(f"--run-name: {unsafe}")
    run_dir = params_mod.resolved_path("run folder", args.run_dir) if args.run_dir else None
    outputs = params_mod.resolved_folder("--outputs", args.outputs) if args.outputs else None
    outputs = outputs or (run_dir.parent if run_dir else paths.outputs_root())
    run_dir = run_dir or (outputs / args.run_name if args.run_name else None)
    if run_dir is None:
        return _combined(None, None, {}, outputs)
    if not run_dir.is_dir():
        there = (
            params_mod.listed(sorted(d.name for d in run_dir.parent.glob("*") if runs.is_run(d))) or "none"
        )
        raise params_mod.ParamsError(f"{run_dir.name}: no such run in {run_dir.parent} (runs there: {there})")
    why = runs.verdict(run_dir) or ""
    if why.startswith("failed"):
        listed = results.read_json(run_dir / paths.RESOLVED).get("notebooks", params_mod.NOTEBOOKS)
        done = {r["notebook"] for r in results.read_rows(results.file(run_dir, "timings").path)}
        why = "" if set(listed) - done == {ANALYSIS} else f"{why}; run the same command again to resume it"
    if why:
        raise params_mod.ParamsError(f"{run_dir.name}: {why}")
    # report.html over the executed 08 where current, else over 08 executed again over the run's results, its
    # params.json and progress.log going to a temporary folder (the run's own kept)
    with paths.RunLock(run_dir), tempfile.TemporaryDirectory(prefix="cnnbench-report-") as tmp:
        done = {n.stem: n for n in (run_dir / "notebooks").glob("[0-9][0-9]_*.ipynb")}
        who, p = f"cnnbench report: {run_dir.name}", lambda: _report_params(run_dir)
        done[ANALYSIS] = _analysed(run_dir, [run_dir], who, Path(tmp), p, run_dir / paths.RESOLVED, {})
        # a run stopped with only 08 left is now whole
        print(f"cnnbench report: {finished(run_dir, [done[n] for n in sorted(done)])}")
    return _combined(None, None, {}, outputs, run_dir)


def _report_params(run_dir: Path) -> params_mod.Params:
    """The run's params.json validated, not against this machine's device (the run may come from another)."""
    src = run_dir / paths.RESOLVED
    try:
        keys = {k: v for k, v in results.read_json(src).items() if k in params_mod.FIELDS}
        return params_mod.validate(
            {**keys, "device": "auto", "expect_device": ""}, str(src), check_device=False
        )
    except (ValueError, AttributeError) as err:
        raise params_mod.ParamsError(f"{src} is broken ({_describe(err)})") from None


# Beside an executed 08, written once it has finished: the SHA-256 of the results files it read and of the code
# that ran; a copy whose fingerprint is missing, unreadable or different is executed again. timings.csv is written
# by the pipeline after each notebook: never an input of the analysis.
FINGERPRINT, NOT_READ = ".inputs.json", (results.table("timings").filename,)


def _fingerprint_of(read: list[Path], notebook: Path) -> dict:
    """What an execution of ``notebook`` over the runs ``read`` read, and the code that ran: the notebook and every
    file of the installed ``cnnbench`` package (sources and data), in one hash."""
    package = Path(__file__).resolve().parent
    code = hashlib.sha256(Path(notebook).read_bytes())
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            code.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    files = {
        f"{Path(d).name}/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
        for d in read
        for p in sorted(Path(d).iterdir())
        if p.is_file() and p.suffix in (".csv", ".json") and p.name not in NOT_READ
    }
    return {"code": code.hexdigest(), "files": files}


def _analysis_current(folder: Path, read: list[Path], notebook: Path | None = None) -> bool:
    """Whether ``folder``'s executed 08 exists and ran over the very files (of ``read``) and code present now."""
    executed = folder / "notebooks" / f"{ANALYSIS}.ipynb"
    try:
        recorded = results.read_json(executed.with_suffix(FINGERPRINT))
        return executed.is_file() and recorded == _fingerprint_of(read, notebook or _notebook_path(ANALYSIS))
    except (OSError, ValueError):
        return False


def _analysed(
    folder: Path, read: list[Path], who: str, into: Path, params, params_file: Path, overrides: dict
):
    """``folder``'s executed 08: kept where current, else executed again over ``read`` (nothing is measured) with
    the parameters ``params()``, resolved into the folder ``into``."""
    if _analysis_current(folder, read):
        print(f"{who}: {ANALYSIS} kept: its results files and the workbook's code are unchanged since it ran")
        return folder / "notebooks" / f"{ANALYSIS}.ipynb"
    from cnnbench import run as run_mod  # imports torch: only where 08 runs

    p = params()  # validated only here: seconds, with torch
    print(f"{who}: {ANALYSIS} over the results on disk (nothing is measured)")
    resolved = run_mod.write_resolved(into, p, params_file, overrides)
    with _fingerprinting(folder, read):
        executed = execute(resolved, folder, [ANALYSIS], p.cell_timeout_s, progress=into / "progress.log")
    return executed[0]


@contextlib.contextmanager
def _fingerprinting(folder: Path, read: list[Path]):
    """08 executed into ``folder`` over ``read`` in the block: its fingerprint (:func:`_analysis_current`) removed
    first, written once the block has finished (a copy that failed stays, for reading, never current)."""
    path = (folder / "notebooks" / f"{ANALYSIS}.ipynb").with_suffix(FINGERPRINT)
    path.unlink(missing_ok=True)
    yield
    results.write_json(path, _fingerprint_of(read, _notebook_path(ANALYSIS)))


if __name__ == "__main__":
    sys.exit(main())
