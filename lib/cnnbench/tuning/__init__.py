"""The fastest way to train a model on this device (07): ``tune(run)`` searches every model and phase over the
knobs the hardware supports (:mod:`.search`) -> tuning.csv (resumable) and tuning_space.csv; the rest present them."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from importlib import resources

import matplotlib.pyplot as plt
import pandas as pd
import psutil
import torch

from cnnbench import devices, knobs, params, progress, results, roofline
from cnnbench.knobs import Setting
from cnnbench.measure import engine, flops, reproducibility, telemetry
from cnnbench.plots import save
from cnnbench.results import ResultsFile
from cnnbench.results.schema import TUNING_PARAM_KEYS, search_keys
from cnnbench.tables import with_interval
from cnnbench.tuning import search
from cnnbench.tuning.search import Outcome


def default_setting(run, model: str) -> Setting:
    """The seeds' configuration (fp32, NCHW, eager, their batch size) with the run's threads, as in force here."""
    p = run.params
    setting = knobs.for_params(p, batch_size=p.batch_size_for(model), threads=run.threads)
    return knobs.in_force(setting, devices.backend(run.device))


def roof_columns(peaks: pd.DataFrame | None, cfg: engine.Config, c: Setting, achieved_gflops: float) -> dict:
    """Where a measurement sits on the roofline: intensity, roof, attainable, bound and efficiencies."""
    intensity, notes = math.nan, []
    try:
        args = (cfg.model, c.batch_size, cfg.image_size, cfg.num_classes, cfg.phase, c.precision)
        intensity = roofline.step_intensity(*args)["intensity_flop_per_byte"]
    except Exception as err:  # noqa: BLE001 - the search's result stands without its placement
        notes.append(f"intensity not counted: {type(err).__name__}: {err}"[:200])
    measured = None if peaks is None else peaks[peaks.kind == "measured"]
    if measured is None or measured.empty:
        why = notes or [f"no roofs measured ({params.NUMBERED['04']} did not run): efficiency not computed"]
        roof = pd.Series({"peak_gflops": math.nan, "bandwidth_gbs": math.nan}, name="")
        att, bound = math.nan, ""
    else:
        roof = roofline.roof_for(measured, c.precision)
        finite = math.isfinite(intensity)
        att = roofline.attainable(intensity, roof.peak_gflops, roof.bandwidth_gbs) if finite else math.nan
        bound = ("memory" if intensity < roof.ridge_flop_per_byte else "compute") if finite else ""
        fallback = f"no measured {c.precision} roof: the {roof.name} roof is used"
        why = notes + ([] if roof.name == c.precision else [fallback])
    out = dict(intensity_flop_per_byte=intensity, roof_precision=roof.name, roof_peak_gflops=roof.peak_gflops)
    out |= dict(roof_bandwidth_gbs=roof.bandwidth_gbs, attainable_gflops=att, bound=bound)
    out["compute_roof_pct"] = 100 * achieved_gflops / roof.peak_gflops  # NaN without a measured roof
    out["attainable_pct"] = 100 * achieved_gflops / att if att == att and att else math.nan
    return out | {"roof_note": "; ".join(why)}


def confirm(base: engine.Config, c: Setting, device, p, steps: int) -> dict:
    """The full protocol (``engine.measure``) on setting ``c``: warm-up, repeated windows, 95% interval."""
    protocol = replace(
        p, warmup_steps=p.tune_confirm_warmup_steps, measured_steps=steps, window_s=p.tune_confirm_window_s
    )
    row = engine.measure(base.replace(**c), device, protocol)
    return {k: v for k, v in row.items() if k not in ("step_times_s", "window_steps")}


def identity_of(run, model: str, phase: str, hw: devices.Hardware) -> dict:
    """The columns every row of one search carries (``search_keys``) and the device's name."""
    p = run.params
    base = engine.config(p, model, phase)
    default = default_setting(run, model)
    head = dict(model=model, phase=phase, device_kind=hw.kind, device_name=hw.name)
    shape = {k: getattr(base, k) for k in ("image_size", "num_classes", "in_channels", "dataset")}
    lists = {k: ",".join(v) if isinstance(v := getattr(p, k), list) else v for k in TUNING_PARAM_KEYS}
    return head | shape | {f"default_{k}": default[k] for k in knobs.keyed()} | lists


def beyond_memory(base: engine.Config, c: Setting, device) -> Outcome | None:
    """An oom outcome, not tried, for a batch beyond a host-memory device's free memory; None if it fits."""
    if devices.backend(device).own_memory:
        return None
    cx = flops.counted(base.model, base.image_size, base.num_classes, with_fvcore=False)  # once per model
    per_image, fixed = flops.training_memory(cx)
    need = c.batch_size * per_image + fixed
    free = psutil.virtual_memory().available
    gib = f"{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
    return None if need <= free else Outcome("oom", error=f"not tried: batch {c.batch_size} needs {gib}")


def tune_one(run, model: str, phase: str, hw: devices.Hardware, sink, peaks) -> tuple[dict, knobs.Space]:
    p, device = run.params, run.device
    base = engine.config(p, model, phase)
    default = default_setting(run, model)
    sp = knobs.space(hw, default, p)
    names = [k for k in sp.values if knobs.KNOBS[k].numerics]

    def guard_loss(numerics):
        setting = default.with_(**dict(zip(names, numerics, strict=True)), batch_size=p.tune_guard_batch_size)
        return search.loss_after(base.replace(**setting), device, p, p.tune_guard_steps)

    s = search.Search(
        base,
        sp,
        p,
        identity_of(run, model, phase, hw),
        evaluate=lambda c, w: beyond_memory(base, c, device) or search.window(base, c, device, p, w),
        guard_loss=guard_loss,
        confirm=lambda c, steps: confirm(base, c, device, p, steps),
        sink=sink,
        explain=lambda c, row: roof_columns(peaks, base, c, row.get("achieved_gflops", math.nan)),
        probe=telemetry.speed_probe if devices.backend(device).on_host else None,  # the host CPU's own speed
    )
    return s.run(), sp


def search_line(model: str, phase: str, row: dict) -> str:
    """One console line per row of the search (a window of a rung, the guard, a confirmation)."""
    rate = row.get("throughput_img_s")
    finite = isinstance(rate, (int, float)) and math.isfinite(rate)
    told = f"{rate:,.1f} img/s" if finite else row.get("status", "")
    words = [str(row.get(k, "")) for k in ("row_kind", "stage", "config") if row.get(k, "") != ""]
    what = " ".join(dict.fromkeys(words))  # "guard", not "guard guard"
    return f"  tuning {model} {phase}: {what} {told}".rstrip()


def tune(run) -> pd.DataFrame:
    """Search every model and phase -> tuning.csv (a rerun keeps each search with its best row, redoes the rest)."""
    p = run.params
    hw = devices.backend(run.device).hardware()
    table = results.table("tuning")
    rows = table.file(run.dir)
    finished = ResultsFile(rows.path, (*search_keys(), "row_kind"))
    space_file = results.file(run.dir, "tuning_space")
    peaks = results.read(run.dir, "device_peaks")
    if not len(peaks):  # 07 opened alone (a fresh Colab VM): the search stands, without roofline columns
        print(f"No device_peaks.csv in this run: no roofline columns (run {params.NUMBERED['04']} first)")
    searches = [(m, ph, identity_of(run, m, ph, hw)) for m in p.tune_models for ph in p.tune_phases]
    table.plan(run.dir, [identity for *_, identity in searches], "tuning")
    todo = [(m, ph) for m, ph, identity in searches if not finished.done({**identity, "row_kind": "best"})]
    for model, phase in todo:
        progress.note(f"tuning: {model} {phase}, {p.tune_budget_s:g} s of racing, then guard and confirm")
        whole = [search_keys()]  # the search's first row replaces every row an interrupted attempt at it left

        def sink(row, model=model, phase=phase, whole=whole):
            rows.extend([row], whole.pop() if whole else None)  # each later row replaces its own key's
            progress.note(search_line(model, phase, row))

        _, sp = tune_one(run, model, phase, hw, sink, peaks)
        space_file.extend({"model": model, **r} for r in sp.rows(hw))
    progress.resumed(len(searches) - len(todo), len(searches), rows.path.name, "searches (model and phase)")
    return results.read(run.dir, "tuning")


BEST_COLUMNS = {
    "model": "model",
    "phase": "phase",
    "config": "best configuration",
    "throughput_img_s": "best img/s",
    "throughput_ci95_img_s": "± 95%",
    "default_throughput_img_s": "default img/s",
    "default_throughput_ci95_img_s": "default ± 95%",
    "speedup_x": "speedup (x)",
    "speedup_ci95_x": "speedup ± 95%",
    "achieved_gflops": "achieved GFLOP/s",
    "roof_precision": "roof",
    "compute_roof_pct": "% of compute roof",
    "bound": "bound",
    "attainable_pct": "% of attainable",
    "energy_j_per_image": "J/image",
    "default_energy_j_per_image": "default J/image",
    "configs_tried": "tried",
    "pruned": "pruned",
    "failed": "failed",
    "batch_size_limit": "batch limit",
}


PUBLISHED_COLUMNS = "who device precision batch_size throughput_img_s stack same_gpu checked".split()


def beside_published(
    df: pd.DataFrame, model: str = "resnet50", image_size: int = 224, read=None
) -> pd.DataFrame:
    """The best confirmed rate of ``model`` beside published_gpu.csv's (``same_gpu``: this GPU's family), and the
    faster rate the run's 02 or 03 measured (``read``, as :func:`findings`'), where one did."""
    ours = df[(df.row_kind == "best") & (df.model == model) & (df.phase == "train") & (df.status == "ok")]
    ours = ours[pd.to_numeric(ours.image_size, errors="coerce") == image_size]
    if ours.empty:
        return pd.DataFrame(columns=PUBLISHED_COLUMNS)
    best_row = ours.iloc[-1]
    with resources.files("cnnbench").joinpath("data/published_gpu.csv").open() as f:
        theirs = pd.read_csv(f).query("model == @model and image_size == @image_size")
    family = re.search(r"\b[A-Z]\d{1,3}\b", str(best_row.device_name))
    theirs = theirs.assign(
        who="published by " + theirs.source,
        same_gpu=theirs.device.str.contains(rf"\b{family.group(0)}\b") if family else False,
    )
    mine = {"who": f"measured here: {best_row.config} (95% interval +-{best_row.throughput_ci95_img_s:.0f})"}
    mine |= dict(device=best_row.device_name, precision=best_row.precision, batch_size=best_row.batch_size)
    mine |= dict(throughput_img_s=best_row.throughput_img_s, same_gpu=True, checked="measured in this run")
    mine["stack"] = (
        f"cnnbench, torch {torch.__version__}, eager or torch.compile, synthetic batch on the device"
    )
    ours = [mine]
    if (f := faster_rows(df, read).get(best_row.name)) is not None:
        who = (
            f"measured here by {f.notebook}: {knobs.label(f)} (95% interval +-{f.throughput_ci95_img_s:.0f})"
        )
        rate = dict(precision=f.precision, batch_size=f.batch_size, throughput_img_s=f.throughput_img_s)
        ours.append(mine | rate | {"who": who})
    return pd.concat([pd.DataFrame(ours), theirs], ignore_index=True)[PUBLISHED_COLUMNS]


def best(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and phase: the best confirmed configuration against the seeds' default, on the roofline."""
    rows = df[df.row_kind == "best"]
    rows = rows[[c for c in BEST_COLUMNS if c in rows]]
    return rows.rename(columns=BEST_COLUMNS).set_index(["model", "phase"])


def race(df: pd.DataFrame) -> pd.DataFrame:
    """Every race window: stage, rung, configuration, throughput and what became of it."""
    cols = (
        "model phase stage rung config status throughput_img_s throughput_ci95_img_s window_time_s "
        "measured_steps fate reused"
    ).split()
    rows = df[df.row_kind.isin(["race", "confirm"])].copy()
    rows.loc[rows.row_kind == "confirm", "fate"] = rows.get("role")
    rows["rung"] = pd.to_numeric(rows.rung, errors="coerce").astype("Int64")
    return rows[[c for c in cols if c in rows]]


def skipped(space: pd.DataFrame) -> pd.DataFrame:
    """Every knob value the search left out, with the reason (one row per device, knob and value)."""
    s = space[~space.searched.astype(str).str.lower().eq("true")]
    return s[["device_name", "knob", "value", "reason"]].drop_duplicates().set_index(["knob", "value"])


def plot(df: pd.DataFrame, path=None):
    """Race windows (dots, by rung) and confirmed throughputs (bars with 95% intervals), per model and phase."""
    groups = list(df[df.row_kind == "best"].groupby(["model", "phase"]))
    if not groups:
        return None
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1.2 + 0.35 * df.config.nunique()), squeeze=False)
    for ax, ((model, phase), _) in zip(axes[:, 0], groups, strict=True):
        g = df[(df.model == model) & (df.phase == phase)]
        conf = g[(g.row_kind == "confirm") & (g.status == "ok")]
        style = dict(color="tab:blue", alpha=0.4, label="confirmed (full protocol, 95% interval)")
        ax.barh(conf.config, conf.throughput_img_s, xerr=conf.throughput_ci95_img_s, **style)
        raced = g[(g.row_kind == "race") & (g.status == "ok")]
        for rung, r in raced.groupby("rung"):
            ax.plot(r.throughput_img_s, r.config, "o", ms=4, label=f"race window, rung {int(rung)}")
        ax.set(xlabel="throughput (images/s)", title=f"{model} {phase}: race and confirmation")
        # beside: over no bar
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.tight_layout()
    return save(fig, path)


def notes(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and phase, what qualifies the result: roof, energy, guard, batch-size limit, budget."""
    cols = {
        "roof_precision": "roof",
        "bound": "bound",
        "roof_note": "roof note",
        "energy_source": "energy source",
        "energy_note": "energy note",
        "guard_rejected": "rejected by the guard",
        "batch_size_limit_note": "batch-size limit",
        "budget_exhausted_in": "budget ran out in",
    }
    rows = df[df.row_kind == "best"].set_index(["model", "phase"])
    return rows[[c for c in cols if c in rows]].rename(columns=cols).fillna("")


def _said(tuned: pd.DataFrame, f: pd.Series, best_rate: float) -> str:
    """``f`` (a 02 or 03 row faster than 07's best, ``best_rate``) said, and what 07's search did with its numerics:
    raced them and lost, guarded them not (skipped or rejected, its reason), or never held them."""
    numerics = [k for k in knobs.KNOBS if knobs.KNOBS[k].numerics]
    t = knobs.columns(tuned)
    t = t[(t[numerics] == [f[k] for k in numerics]).all(axis=1) & (t.model == f.model) & (t.phase == f.phase)]
    guard, raced = t[t.row_kind == "guard"], t[t.row_kind == "race"]
    name = guard.config.iloc[0] if len(guard) else knobs.label(f, numerics)
    rate = f"{with_interval(f.throughput_img_s, f.throughput_ci95_img_s)} img/s ({f.throughput_img_s / best_rate:.2f}x)"
    said = f"{f.notebook} measured {knobs.label(f)} faster: {rate}: "
    if len(raced):
        return said + f"07 raced {name}, at most {raced.throughput_img_s.max():,.0f} img/s in its windows"
    if len(guard):
        return said + f"07's search did not race {name} ({guard.guard_reason.iloc[0]})"
    return said + f"07's search space did not hold {name}"


def faster_rows(tuned: pd.DataFrame, read) -> dict[int, pd.Series]:
    """Per best row of one run's 07 (``tuned``, by index) that its 02 or 03 (``read(table name)``, each measurement
    once; None, or a table it cannot read: {}) measured faster on its device, of the same model, phase and image
    size, both intervals apart (a row without one, 07's or theirs, is not compared): the fastest."""
    if read is None:
        return {}
    try:
        rows = [reproducibility.measured_here(read(t)).assign(notebook=nb) for t, nb in results.RATES.items()]
    except results.CorruptResults:  # 02 or 03 says what is wrong with its table
        return {}
    out, ok = {}, knobs.columns(pd.concat(rows, ignore_index=True)).query("status == 'ok'")
    for b in tuned[tuned.row_kind == "best"].itertuples():
        top = b.throughput_img_s + b.throughput_ci95_img_s  # a best without an interval is not compared
        same = ok[(ok.model == b.model) & (ok.phase == b.phase) & (ok.image_size == b.image_size)]
        same = same[
            (same.device_name == b.device_name) & (same.throughput_img_s - same.throughput_ci95_img_s > top)
        ]
        if len(same):
            out[b.Index] = same.loc[same.throughput_img_s.idxmax()]
    return out


def faster_measured(tuned: pd.DataFrame, read) -> list[str]:
    """Per best row of 07: :func:`faster_rows`' row said (:func:`_said`), "" where there is none."""
    faster, best_rates = faster_rows(tuned, read), tuned[tuned.row_kind == "best"].throughput_img_s
    return [_said(tuned, faster[i], rate) if i in faster else "" for i, rate in best_rates.items()]


def unconfirmed(df: pd.DataFrame, model: str, phase: str) -> str:
    """Why a search confirmed no configuration: its failed confirmations' errors, each once (the best row's own
    error where none failed)."""
    mine = df[(df.model == model) & (df.phase == phase)]
    failed = mine[(mine.row_kind == "confirm") & (mine.status != "ok")]
    said = dict.fromkeys(f"{r.status}: {r.error}" for r in failed.itertuples())
    return "; ".join(said) or str(mine[mine.row_kind == "best"].error.iloc[-1])


def findings(df: pd.DataFrame, read=None) -> list[str]:
    """One computed sentence per model and phase: the best configuration, its speedup, roofline and energy, and
    what the run's 02 or 03 (``read(table name)``: its rows; a run's ``read``) measured faster where given."""
    out = []
    for r, faster in zip(df[df.row_kind == "best"].itertuples(), faster_measured(df, read), strict=True):
        if r.status != "ok":
            out.append(
                f"{r.model} {r.phase}: no configuration confirmed ({unconfirmed(df, r.model, r.phase)})"
            )
            continue
        apart = str(getattr(r, "distinguishable_from_default", "True")).lower() != "false"
        default = with_interval(r.default_throughput_img_s, r.default_throughput_ci95_img_s)
        same = f"not distinguishable from the seeds' default ({default} img/s, inside the 95% interval)"
        verdict = f"{with_interval(r.speedup_x, r.speedup_ci95_x)}x the seeds' default" if apart else same
        verdict += ", its 95% interval unbounded" if apart and r.speedup_ci95_x == math.inf else ""
        text = (
            f"{r.model} {r.phase}: best {r.config} at {with_interval(r.throughput_img_s, r.throughput_ci95_img_s)} "
            f"img/s, {verdict} ({r.configs_tried:.0f} configurations tried, {r.pruned:.0f} pruned)"
        )
        roof = getattr(r, "compute_roof_pct", float("nan"))
        if pd.notna(roof):
            placed = f"{r.bound}-bound, {r.attainable_pct:.0f}% of the attainable"
            text += (
                f"; {r.achieved_gflops:.1f} GFLOP/s = {roof:.0f}% of the measured {r.roof_precision} compute roof, "
                f"{placed if isinstance(r.bound, str) and r.bound else f'bound not known ({r.roof_note})'}"
            )
        else:
            text += f"; not placed on the roofline ({r.roof_note})"
        energy = getattr(r, "energy_j_per_image", float("nan"))
        if pd.notna(energy):
            text += f"; {energy:.3f} J/image ({r.energy_source})"
        else:
            text += f"; no energy ({r.energy_note})"
        if unguarded := str(getattr(r, "guard_rejected", "")).count("not guarded"):
            text += f"; {unguarded} numerics never raced: the guard's budget (tune_guard_budget_s) ran out"
        out.append(f"{text}; {faster}" if faster else text)
    return out
