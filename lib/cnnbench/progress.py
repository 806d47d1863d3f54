"""Progress bars on every loop a person waits for; quiet when the pipeline runs headless, which instead reads
one line per finished configuration from the file named by ``CNNBENCH_PROGRESS_FILE``."""

from __future__ import annotations

import contextlib
import os

from cnnbench import paths

PROGRESS_ENV = "CNNBENCH_PROGRESS_FILE"


def headless() -> bool:
    return os.environ.get("CNNBENCH_HEADLESS") == "1"


def bar(iterable=None, **kwargs):
    """``tqdm`` that stays silent under the pipeline (``CNNBENCH_HEADLESS=1``)."""
    from tqdm.auto import tqdm

    kwargs["disable"] = kwargs.get("disable", False) or headless()
    kwargs.setdefault("leave", False)
    return tqdm(iterable, **kwargs)


def _what(row: dict) -> str:
    what = " ".join(str(row.get(k, "")) for k in ("model", "phase") if row.get(k, "") != "")
    return what + (f" bs={row['batch_size']}" if "batch_size" in row else "")


def row_line(row: dict) -> str:
    """One line for a finished configuration: model, phase, batch size, variant, throughput or status."""
    what = _what(row)
    if row.get("precision"):
        what += f" {row['precision']}"
    rate = row.get("throughput_img_s")
    if row.get("status", "ok") == "ok" and isinstance(rate, (int, float)):
        from cnnbench.measure.reproducibility import rate_text

        ci = row.get("throughput_ci95_img_s")
        line = f"{what}: " + rate_text(rate, float(ci) if isinstance(ci, (int, float)) else float("nan"))
        if row.get("processes_measured"):
            line += f" over {row['processes_measured']} processes ({row.get('stop_reason', '')})"
        if row.get("machine_state") == "busy":
            line += f" [machine busy: {row.get('machine_note', '')}]"
        return line + (" (noisy)" if row.get("noisy") is True else "")
    return f"{what}: {row.get('status', '?')} {str(row.get('error', ''))[:80]}".rstrip()


def process_done(row: dict, process: int, least: int) -> None:
    """Called once per finished process of a configuration (see :func:`row_done`): its rate, or its status, so
    the console moves every process."""
    rate, status = row.get("throughput_img_s"), row.get("status", "ok")
    told = f"{rate:,.1f} img/s" if status == "ok" and isinstance(rate, (int, float)) else status
    note(f"  {_what(row)}: process {process}/{least} {told}")


def say(line: str) -> None:
    """:func:`note` and print: the notebook shows the line too."""
    print(line)
    note(line)


def resumed(*args, **kwargs) -> str:
    """Prints, sends to the pipeline's console and returns :func:`kept_line` of these arguments."""
    line = kept_line(*args, **kwargs)
    say(line)
    return line


def kept_line(
    kept: int,
    planned: int,
    source: str,
    what: str = "configurations",
    unavailable: int = 0,
    taken: int = 0,
    taken_from: str = "",
) -> str:
    """ "kept 12 of 12 configurations from scenario_a.csv; measured 0": ``unavailable`` of them (cannot run here) and
    ``taken`` (copied from ``taken_from`` now) named apart."""
    here = planned - unavailable
    took = f", {taken} taken from {taken_from}" if taken else ""
    line = f"kept {kept} of {here} {what} from {source}{took}; measured {here - kept - taken}"
    return line + (f" ({unavailable} unavailable here, checked again)" if unavailable else "")


def row_done(row: dict) -> None:
    """Called once per finished configuration: appends its line to the pipeline's progress file, if any."""
    note(row_line(row))


def note(line: str) -> None:
    """A line in the pipeline's progress file, if any: its console shows every configuration, process and other
    step (04's micro-benchmarks, 05's backends, 06's grid points, 07's search), so no notebook is silent."""
    path = os.environ.get(PROGRESS_ENV)
    if path:  # a courtesy: a measurement never fails for it; open_own: never through a link at progress.log
        with contextlib.suppress(OSError), paths.open_own(path, "a") as f:
            f.write(line + "\n")
