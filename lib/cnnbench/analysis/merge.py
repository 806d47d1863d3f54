"""Which runs an analysis merges, from which hosts, and which it left out (the merge itself is the results
layer's: :mod:`cnnbench.results.runs`)."""

from __future__ import annotations

import pandas as pd

from cnnbench.results.runs import Merged, machine_label


def runs_table(m: Merged) -> pd.DataFrame:
    """Which runs, from which hosts, this analysis merges (and which it left out, with the reason)."""
    said = "device_kind device_name host host_id threads torch captured_at".split()  # threads: torch_threads
    rows = [
        {"run_name": r, "merged": "yes", **{k: e.get("torch_threads" if k == "threads" else k) for k in said}}
        for r, e in m.environments.items()
    ]
    rows += [{"run_name": r, "merged": f"no: {why}"} for r, why in m.excluded.items()]
    return pd.DataFrame(rows)


def merged_statement(m: Merged) -> str:
    """One sentence: how many runs, which, from how many hosts."""
    if not m.runs:
        return "This analysis merges no run."
    hosts = {e.get("host_id") for e in m.environments.values()}
    names = ", ".join(
        f"{r} ({machine_label(e.get('device_name'), e.get('host'))})" for r, e in m.environments.items()
    )
    return f"This analysis merges {len(m.runs)} run(s) from {len(hosts)} host(s): {names}."
