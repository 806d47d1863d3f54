"""``cnnbench compare RUN_A [RUN_B ...]``: what did my change do? (as ``pyperf compare_to`` does).
Each run beside the first (:func:`.compare.one_knob`), one run alone its variants, ``seeds`` seed 000's devices
("not matched"); rows to ``compare.csv``. Exit 0, or 2 refused in one line."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from cnnbench import params, paths, published, results
from cnnbench.analysis import compare
from cnnbench.analysis.seeds import beside
from cnnbench.measure import reproducibility
from cnnbench.results.runs import config_differences, is_run, load, machine_label, verdict

SEEDS = "seeds"  # the pseudo-run: every device the seeds measured
PROBE_SAYS_PCT = 5.0  # a row names the CPU's own speed change (probe) from this size on
SEED_COLUMNS = (
    "run_a run_b host_id_a host_a device_a device_b table model phase rate_a_img_s rate_a_ci95_img_s "
    "rate_b_img_s ratio_b_over_a verdict comparison differs_in"
).split()


def _run_dir(name: str, outputs: Path) -> Path:
    """A run given by a plain name (under ``outputs``, as the pipeline names runs) or by its folder's path,
    and readable (results.runs.verdict, as ``cnnbench report`` judges it); else a ParamsError."""
    path = Path(name).expanduser()
    unsafe = params.safe_name_error(name)
    for d in ([path] if path.is_absolute() or path.exists() else []) + ([] if unsafe else [outputs / name]):
        if is_run(d):
            if why := verdict(d):
                raise params.ParamsError(f"{d.name}: {why}")
            return d.resolve()
    where = f"{path}" if unsafe else f"{outputs / name} or {path}"  # an unsafe name: a path only
    unzip = f" (unzip it into {outputs} first: a zip is not read in place)" if path.suffix == ".zip" else ""
    raise params.ParamsError(f"unknown run {name!r}: no folder with {paths.ENVIRONMENT} at {where}{unzip}")


def _line(r: dict) -> str:
    """One configuration as a console line."""
    what = f"{r['model']} {r['phase']} ({r['table']}, batch {r['batch_size']})"
    if r["comparison"] == "not matched":
        ours = reproducibility.rate_text(r["rate_a_img_s"], reproducibility.number(r["rate_a_ci95_img_s"]))
        theirs = f"{r['rate_b_img_s']:,.1f} img/s (published, no interval)"
        return f"{what} vs {r['device_b']}: {ours} -> {theirs}: {compare.times(r['ratio_b_over_a'])}x; {r['differs_in']}"
    if r["verdict"] == "not divided":
        return f"{what}: not divided, differs in {r['differs_in']}"
    knob = f" [{r['knob']} {r['value_a']} -> {r['value_b']}]" if r["knob"] else ""
    rates = (
        f"{reproducibility.rate_text(r['rate_a_img_s'], r['rate_a_ci95_img_s'])} -> "
        f"{reproducibility.rate_text(r['rate_b_img_s'], r['rate_b_ci95_img_s'])}"
    )
    ratio = compare.ratio_text(r["ratio_b_over_a"], r["ratio_ci95_low"], r["ratio_ci95_high"])
    moved = reproducibility.number(r["probe_change_pct"])
    machine = f" (CPU's own speed {moved:+.0f}%)" if abs(moved) >= PROBE_SAYS_PCT else ""  # NaN: nothing said
    return f"{what}{knob}: {rates}: {ratio} {r['verdict']}{machine}"


def seeds_beside(m, run: str) -> pd.DataFrame:
    """The seeds as a pseudo-run: ``run`` beside every device seed 000 measured, for the same model and phase
    (:func:`~cnnbench.analysis.seeds.beside` ``speedups_000``), labelled "not matched" with the differences named."""
    sa = m["scenario_a"]
    table = beside("speedups_000", {"scenario_a": sa[sa.run_name == run]})
    if "a_img_s" not in table:
        return pd.DataFrame(columns=[*SEED_COLUMNS, "batch_size"])
    ours = table[table.source.astype(str).str.startswith("ours") & table.a_img_s.notna()]
    env, named = m.environments.get(run, {}), {"a_img_s": "rate_a_img_s", "b_img_s": "rate_b_img_s"}
    out = ours.rename(columns={**named, "differences": "differs_in"}).assign(
        run_a=run,
        run_b=SEEDS,
        **{f"{k}_a": env.get(c) for k, c in compare.MACHINE.items()},
        device_b=ours.b.astype(str),
        table="scenario_a",
        rate_a_ci95_img_s=ours.a_ci95_img_s,  # the interval and batch of the very row divided
        batch_size=ours.batch_size.astype("Int64"),
        ratio_b_over_a=ours.b_img_s / ours.a_img_s,
        verdict="not matched",
    )
    return out.reset_index(drop=True)[[*SEED_COLUMNS, "batch_size"]]


def compare_runs(names: list[str], outputs: Path, keys: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The table ``cnnbench compare`` prints and writes; a ParamsError for bad input."""
    if names[0] == SEEDS:
        raise params.ParamsError("the first run is the reference: give a run of yours first, then 'seeds'")
    dirs = {n: _run_dir(n, outputs) for n in dict.fromkeys(names) if n != SEEDS}
    folders = list(dict.fromkeys(dirs.values()))  # one folder given by its name and by its path: one run
    if clash := [str(d) for d in folders if [e.name for e in folders].count(d.name) > 1]:
        raise params.ParamsError(
            f"runs {params.listed(clash)} share the name {Path(clash[0]).name!r} (compare knows a run by its "
            "folder's name): rename or copy one of them under another name"
        )
    m = load(folders)
    ok, named = compare.rates(m), [dirs[n].name if n != SEEDS else SEEDS for n in names]
    first, frames = named[0], []
    for b in named[1:] or named:  # one run: its variants one knob apart
        part = seeds_beside(m, first) if b == SEEDS else compare.one_knob(ok, first, b, keys)
        if part.empty or not part.ratio_b_over_a.notna().any():
            raise params.ParamsError(_nothing_comparable(ok, part, first, b, keys))
        frames.append(part)
    df = pd.concat(frames, ignore_index=True)
    df.insert(0, "compared", compared(named))
    state = compare.machine(m).set_index("run_name")  # how quiet each run's machine was, by its own report
    busy = state.busy.astype(str) + " of " + state.configurations.astype(str)
    for side in ("a", "b"):
        df[f"busy_{side}"] = df[f"run_{side}"].map(busy).fillna("")
        df[f"machine_{side}"] = df[f"run_{side}"].map(state.verdict).fillna("")
    by_name = {d.name: d for d in dirs.values()}
    df["params_differ"] = [
        _differ(by_name.get(a), by_name.get(b)) for a, b in zip(df.run_a, df.run_b, strict=True)
    ]
    return df


def _nothing_comparable(ok: pd.DataFrame, part: pd.DataFrame, a: str, b: str, keys) -> str:
    """Why ``a`` and ``b`` (``a`` alone, or ``seeds``) gave no ratio, and what would give one."""
    if len(part):
        apart = "keys other than --keys" if keys else "more than one key"
        why = f"every pair differs in {apart} ({'; '.join(sorted(set(part.knob)))})"
    elif b == a:
        why = "no two of its variants are one knob apart (give a second run to compare it with)"
    elif b == SEEDS:
        seeded = params.listed(sorted(set(published.THROUGHPUT_000.model)))
        why = f"it has no ok Scenario A row in the seeds' variant (fp32, NCHW, eager) of a model seed 000 measured ({seeded})"
    else:
        have = {r: params.listed(sorted(set(g.model + " " + g.phase))) for r, g in ok.groupby("run_name")}
        why = f"no model and phase in common ('{a}' measured {have.get(a, 'no ok row')}; '{b}' measured "
        why += f"{have.get(b, 'no ok row')})"
    return f"nothing comparable in '{a}' {'alone' if b == a else f'and {b!r}'}: {why}"


def _differ(a: Path | None, b: Path | None) -> str:
    """The parameters that differ between two runs ("key A -> B; ..."), "" for none or a pseudo-run."""
    if a is None or b is None or a == b:
        return ""
    diff = config_differences([a, b]).to_dict("records")
    return "; ".join(f"{r['key']} {r[a.name]} -> {r[b.name]}" for r in diff)


def compared(names: list[str]) -> str:
    """The set of runs one ``cnnbench compare`` compared, as compare.csv's ``compared`` column spells it (sorted,
    so the same runs in another order are the same comparison)."""
    return " ".join(sorted(set(names)))


def write(df: pd.DataFrame, out: Path) -> Path:
    """Add this comparison to ``out``/compare.csv, atomically: the rows of the same set of runs replaced, every
    other comparison kept (a row written before rows named their comparison counts as one of its two runs)."""
    file = results.file(out, "compare")
    rows = file.rows()
    if any(not r.get("compared") for r in rows):
        pairs = [r.get("compared") or compared([r.get("run_a", ""), r.get("run_b", "")]) for r in rows]
        results.write_rows(file.path, [{**r, "compared": c} for r, c in zip(rows, pairs, strict=True)])
    file.extend(df.to_dict("records"), group=("compared",))
    return file.path


def report(df: pd.DataFrame) -> str:
    """The console text: per pair of runs a header, then one line per configuration."""
    lines = []
    for (a, b), g in df.groupby(["run_a", "run_b"], sort=False):
        r = g.iloc[0]
        side_b = "the seeds' published devices" if b == SEEDS else machine_label(r.device_b, r.host_b)
        moved = compare.probe_change(g)
        busy = [
            f"{run}: {verdict[0].lower()}{verdict[1:]}"
            for run, verdict in ((a, r.machine_a), (b, r.machine_b))
            if str(verdict).startswith("The machine was busy")
        ]
        said = f"the CPU's own speed (probe) moved {moved:+.0f}% from {a} to {b} (median over the rows): a ratio "
        probe = [said + "near that is the machine, not the change"] if math.isfinite(moved) and a != b else []
        head = f"{a} ({machine_label(r.device_a, r.host_a)}) -> {b} ({side_b}); rates in images/s with 95% "
        differ = [f"parameters that differ: {r.params_differ}"] if r.params_differ else []
        lines += [
            f"{head}intervals, ratio = B / A",
            *differ,
            *probe,
            *busy,
            *map(_line, g.to_dict("records")),
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cnnbench compare", description=__doc__.split("\n")[0])
    known = ", ".join(("machine", *compare.knob_keys()))
    ap.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run names under the outputs root, run folders, "
        "or 'seeds' (every device seed 000 measured); the first is the reference",
    )
    ap.add_argument("--outputs", help="folder holding the runs (default: outputs/ of the workbook)")
    ap.add_argument("--out", help="folder for compare.csv (default: the outputs root)")
    ap.add_argument("--keys", help=f"divide rows differing only in these comma-separated keys (of {known})")
    args = ap.parse_args(argv)
    try:
        outputs = params.resolved_folder("--outputs", args.outputs) if args.outputs else paths.outputs_root()
        out = params.resolved_folder("--out", args.out, create=True) if args.out else outputs
        results.file(out, "compare").rows()  # a cut or older compare.csv: refused before any work
        keys = tuple(k.strip() for k in args.keys.split(",") if k.strip()) if args.keys else None
        bad = [k for k in keys or () if k not in ("machine", *compare.knob_keys())]
        if bad or keys == ():
            raise params.ParamsError(f"--keys {args.keys!r}: not keys of a configuration; known: {known}")
        df = compare_runs(args.runs, outputs, keys)
    except (params.ParamsError, results.CorruptResults) as err:
        print(f"cnnbench compare: {err}", file=sys.stderr)
        return 2
    try:
        path = write(df, out)
    except OSError as err:
        print(f"cnnbench compare: {out / 'compare.csv'} cannot be written ({err.strerror})", file=sys.stderr)
        return 1
    print(report(df))
    kept = len({r.get("compared") for r in results.read_rows(path)} - {df.compared.iloc[0]})
    print(
        f"cnnbench compare: {len(df)} row(s) comparing {' and '.join(dict.fromkeys(args.runs))} -> {path} "
        f"(added to the {kept} other comparison(s) there; a compare of the same runs replaces its rows)"
    )
    return 0
