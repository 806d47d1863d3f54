"""What would a model do on a device you don't have (``cnnbench predict``, 08's predictions.csv).
Each op takes max(FLOPs / (e x peak), bytes / (e x bandwidth)) plus a device overhead, e fitted per op class and
device kind on log step times (pulled toward their mean: SHRINK); the host's time to issue the step
(:func:`host_costs`) overlaps where the device queues work, adds on a CPU. Rates are predicted out of sample."""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cnnbench import devices, knobs, models, params, paths, published, results
from cnnbench.devices.base import normalise_name
from cnnbench.measure.engine import HOST_BOUND
from cnnbench.measure.reproducibility import measured_here
from cnnbench.results import runs

# CLASSES[:COMPUTE] are compute classes, their bytes at CLASSES[COMPUTE]'s (elementwise) efficiency; batch norm is
# normalisation in training (several passes), elementwise in eval
CLASSES = ("convolution", "convolution backward", "matmul", "elementwise", "normalisation", "pooling")
COMPUTE = 3
SHRINK, STEPS, LEARNING_RATE, START = 0.05, 600, 0.05, (0.3, 2e-5)  # Adam from 30% and 20 us per op
# seeds that timed steps; the others timed epochs with their loader: predicted, never fitted
STEP_TIMED = ("003",)
FAR_BELOW = 0.10  # a rate under this share of its roofline ceiling is bound by something else than the device
BOUND_ELSEWHERE, ABOVE_CEILING = "bound by something else", "above the ceiling"  # judged()'s verdicts of a
UNEXPLAINED = (BOUND_ELSEWHERE, ABOVE_CEILING)  # rate its roofs cannot explain: far below it or above it
HOST_SHARE = 0.5  # a queued device's step whose host takes this share of it is host-bound: no device evidence
# the device each params file's time estimates are predicted for (the M2 Pro: the newest Mac GPU with a published
# peak); 08's what-if devices: these and a datacenter GPU
PARAMS_DEVICES = {"colab_t4.yaml": "Tesla T4", "apple_m.yaml": "Apple M2 Pro (19-core GPU)"}
WHAT_IF = {
    **{d: f"params/{f}" for f, d in PARAMS_DEVICES.items()},
    "NVIDIA H100 80GB HBM3": "a current datacenter GPU",
}
ROOF = ["peak_gflops", "bandwidth_gbs", "level", "roof"]
KEYS = ["model", "batch_size", "image_size", "num_classes", "phase", "precision"]  # what ops() counts
_SAID = "rate_img_s predicted_img_s low_img_s high_img_s error_pct bound verdict reason ceiling_img_s".split()
COLUMNS = ["source", "device", "device_kind", *KEYS, *_SAID, "time_shares", *ROOF, "fit"]


class Refused(ValueError):
    """Bad input to a prediction: one line."""


@functools.cache
def ops(model: str, batch_size: int, image_size: int, num_classes: int, phase: str, precision: str):
    """FLOPs, bytes and class (index into CLASSES) of every op of one step, counted on the meta device."""
    from cnnbench.measure import traffic

    o = traffic.count_step(model, batch_size, image_size, num_classes, phase, precision)
    op, train = o.op.str.contains, phase == "train"
    conds = [op("conv") & ~op("backward"), op("conv"), o.flops > 0, op("batch_norm") & train, op("pool")]
    return o.flops.to_numpy(float), o.bytes.to_numpy(float), np.select(conds, [0, 1, 2, 4, 5], COMPUTE)


def _stack(rows: pd.DataFrame) -> list:
    """Tensors over every row's compute ops and memory bytes per class, with each row's roofs, ops, host, queue."""
    import torch

    keyed = rows[KEYS].astype(dict.fromkeys(KEYS[1:4], int)).itertuples(index=False)
    counted = [ops(*k) for k in keyed]
    parts = []
    for flops, nbytes, cls in counted:
        mem = cls >= COMPUTE
        summed = np.bincount(cls[mem] - COMPUTE, weights=nbytes[mem], minlength=len(CLASSES) - COMPUTE)
        memory_classes = np.arange(COMPUTE, len(CLASSES))
        parts.append(
            (np.r_[flops[~mem], 0 * summed], np.r_[nbytes[~mem], summed], np.r_[cls[~mem], memory_classes])
        )
    row = np.repeat(np.arange(len(parts)), [len(p[0]) for p in parts])
    flops, nbytes, cls = (np.concatenate([p[i] for p in parts]) for i in range(3))
    roofs = [rows[c].to_numpy(float)[row] * 1e9 for c in ("peak_gflops", "bandwidth_gbs")]
    count = np.array([len(c[0]) for c in counted], float)
    host = np.array(rows.host_s.fillna(0), float) if "host_s" in rows else np.zeros(len(rows))
    queued = np.array([_queued(k) for k in rows.device_kind], bool)
    return [torch.as_tensor(a) for a in (flops, nbytes, cls, row, *roofs, count, host, queued)]


def _queued(kind) -> bool:
    return isinstance(kind, str) and not devices.backend_class(kind).on_host


def _parts(log_params, stacked, n: int) -> tuple:
    """Seconds per step of each row: (compute-bound ops, memory-bound ops, device overhead, host time)."""
    import torch

    flops, nbytes, cls, row, peak, bandwidth, count, host, _ = stacked
    e = torch.exp(log_params[:-1])
    compute = flops / (e[cls] * peak)
    memory = nbytes / (torch.where(cls < COMPUTE, e[COMPUTE], e[cls]) * bandwidth)
    slower = torch.maximum(compute, memory)
    on = compute >= memory
    sums = [torch.zeros(n, dtype=slower.dtype).index_add_(0, row, slower * w) for w in (on, ~on)]
    return (*sums, count * torch.exp(log_params[-1]), host)


def _step(parts, stacked):
    """A step's seconds: the larger of host and device where the device queues work, their sum on a host device."""
    import torch

    device = parts[0] + parts[1] + parts[2]
    return torch.where(stacked[-1], torch.maximum(device, parts[3]), device + parts[3])


@dataclass(frozen=True)
class Fit:
    """Fitted efficiencies (one per class of CLASSES) and overhead of one device kind, and the rows they came from."""

    kind: str
    efficiency: tuple[float, ...]
    overhead_s: float
    rows: int
    models: tuple[str, ...]

    def text(self) -> str:
        eff = ", ".join(f"{c} {e:.0%}" for c, e in zip(CLASSES, self.efficiency, strict=True))
        return (
            f"{self.kind} efficiencies {eff}, overhead {self.overhead_s * 1e6:.1f} us per op, fitted on "
            f"{self.rows} row(s) of {', '.join(self.models)}"
        )


def fit(rows: pd.DataFrame, kind: str) -> Fit:
    """Efficiencies and overhead minimising the squared log error of ``rows``' step times (cached by input)."""
    import torch

    stacked, n = _stack(rows), len(rows)
    target = torch.log(torch.tensor((rows.batch_size / rows.rate_img_s).to_numpy(float)))
    inputs = hashlib.sha256(b"".join(t.numpy().tobytes() for t in (*stacked, target))).hexdigest()
    names = tuple(sorted(set(rows.model)))

    def compute() -> Fit:
        start = torch.tensor([START[0]] * len(CLASSES) + [START[1]], dtype=torch.float64)
        theta = torch.log(start).requires_grad_()
        opt = torch.optim.Adam([theta], lr=LEARNING_RATE)
        for _ in range(STEPS):
            opt.zero_grad()
            error = torch.log(_step(_parts(theta, stacked, n), stacked)) - target
            ((error**2).mean() + SHRINK * ((theta[:-1] - theta[:-1].mean()) ** 2).mean()).backward()
            opt.step()
        v = theta.detach().exp().tolist()
        return Fit(kind, tuple(v[:-1]), v[-1], n, names)

    return paths.cached("fit", [kind, names, n, inputs, torch.__version__], compute, (sys.modules[__name__],))


def predict(rows: pd.DataFrame, f: Fit | None) -> pd.DataFrame:
    """Per row (the keys of :func:`ops` and the ROOF): the ceiling (images/s, no overhead); with ``f``, the
    predicted images/s, the part of the step taking most of its time (``bound``) and each part's share."""
    import torch

    rows = rows.astype({"batch_size": int})
    stacked, n, batch = _stack(rows), len(rows), rows.batch_size.to_numpy(float)
    roofline = torch.tensor([0.0] * len(CLASSES) + [-math.inf], dtype=torch.float64)
    out = pd.DataFrame(
        {"ceiling_img_s": batch / sum(_parts(roofline, stacked, n)[:3]).numpy()}, index=rows.index
    )
    if f is None:
        return out
    log_params = torch.log(torch.tensor([*f.efficiency, f.overhead_s], dtype=torch.float64))
    parts = _parts(log_params, stacked, n)
    total = _step(parts, stacked).numpy()
    parts = np.stack([p.numpy() for p in parts], axis=1)
    names, device = ("compute", "memory", "overhead", "host"), parts[:, :3]
    worst = np.array(names, dtype=object)[device.argmax(1)]
    worst = np.where(stacked[-1].numpy() & (parts[:, 3] > device.sum(1)), HOST_BOUND, worst)
    bound = np.where(worst == "memory", "memory (" + rows.level.astype(str) + ")", worst)
    shares = [
        ", ".join(f"{w} {x:.0%}" for w, x in zip(names, s, strict=True) if x)
        for s in parts / parts.sum(axis=1)[:, None]
    ]
    return out.assign(predicted_img_s=batch / total, bound=bound, time_shares=shares, fit=f.text())


def host_costs(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's host time per step (``host_s``) and its source: 04's, else its run's other models', else
    :func:`default_host`."""
    ops_of, out = _op_counts(rows), []
    for i, r in rows.iterrows():
        line, why = (math.nan, math.nan), ""
        if not _queued(r.device_kind):
            line, why = (0.0, 0.0), "a host device: its fitted overhead stands for the host"
        elif pd.notna(r.get("host_step_s")):
            line, why = (0.0, r.host_step_s / r.host_ops), f"measured by 04 in {r.run_name}"
        elif pd.notna(r.get("run_name")):
            others = rows[(rows.run_name == r.run_name) & (rows.phase == r.phase) & (rows.model != r.model)]
            others = others.drop_duplicates(KEYS)  # a configuration 02 and 03 share counts once
            line = _host_line(others.batch_size / others.rate_img_s, ops_of[others.index])
            why = f"through {r.run_name}'s other models' {r.phase} steps"
        if math.isnan(line[0]):  # a published row or a device not at hand, or too few other models
            line, why = default_host(r.device_kind, r.phase)
        out.append((line[0] + line[1] * ops_of[i], why))
    return pd.DataFrame(out, index=rows.index, columns=["host_s", "host_source"])


def _host_line(seconds: pd.Series, op_counts: pd.Series) -> tuple[float, float]:
    """(seconds per step, per op) of a Theil-Sen line through steps' times against ops, >= 0; NaN under two counts."""
    t, n = seconds.to_numpy(float), op_counts.to_numpy(float)
    i, j = np.triu_indices(len(t), 1)
    apart = n[j] != n[i]
    if not apart.any():
        return math.nan, math.nan
    c = max(float(np.median((t[j] - t[i])[apart] / (n[j] - n[i])[apart])), 0.0)
    return max(float(np.median(t - c * n)), 0.0), c


@functools.cache
def default_host(kind: str, phase: str) -> tuple[tuple[float, float], str]:
    """The host line and its source for a ``kind`` device not measured, from the committed example of its kind."""
    rows = _examples()
    for k in [kind, *sorted(k for k in set(rows.device_kind) if _queued(k))]:
        mine = rows[(rows.device_kind == k) & (rows.phase == phase)].drop_duplicates(KEYS)
        if mine.host_step_s.notna().any():
            per_op = (mine.host_step_s / mine.host_ops).median()
            return (0.0, per_op), f"measured by 04 in {mine.run_name.iloc[0]}"
        if len(mine) and not math.isnan(
            (line := _host_line(mine.batch_size / mine.rate_img_s, _op_counts(mine)))[0]
        ):
            return line, f"through {mine.run_name.iloc[0]}'s {phase} steps"
    return (math.nan, math.nan), f"no measurement of a {kind} host"


@functools.cache
def _examples() -> pd.DataFrame:
    """The committed examples' 02 and 03 rows (examples/, each a run on its device), as :func:`measured_rows`."""
    return measured_rows(
        runs.load(sorted(e.parent for e in (paths.repo_root() / "examples").glob(f"*/{paths.ENVIRONMENT}")))
    )


def _op_counts(rows: pd.DataFrame) -> pd.Series:
    """The ops :func:`ops` counts in each row's step."""
    return rows[KEYS].astype(dict.fromkeys(KEYS[1:4], int)).apply(lambda r: len(ops(*r)[0]), axis=1)


def spec_roof(device: str, precision: str = "fp32") -> dict:
    """The roof of a device of device_specs.csv at ``precision``; :class:`Refused` naming the closest names."""
    from cnnbench.roofline import peaks

    t = peaks.specs()
    t = t.assign(label=t.device + t.gpu_cores.map(lambda c: f" ({c:.0f}-core GPU)" if pd.notna(c) else ""))
    key = normalise_name(device)
    hit = t[t.label.map(normalise_name) == key]
    hit = hit if len(hit) else t[t.device.map(normalise_name) == key]
    if hit.empty:
        names = {normalise_name(n): n for n in t.label}
        close = ", ".join(map(names.get, difflib.get_close_matches(key, list(names), n=3, cutoff=0)))
        raise Refused(f"device {device!r} is not in device_specs.csv; closest: {close}")
    rows = t[(t.label == hit.label.iloc[0]) & t.peak_gflops.notna()]
    if precision not in set(rows.precision):
        has = f"its peaks: {', '.join(rows.precision)}" if len(rows) else hit.source.iloc[0]
        raise Refused(f"{hit.label.iloc[0]} has no {precision} peak in device_specs.csv ({has})")
    r = rows[rows.precision == precision].iloc[0]
    roof = (r.peak_gflops, r.bandwidth_gbs, r.memory_level, f"spec: {r.source}")
    return {"device": r.label, "device_kind": r.device_kind, **dict(zip(ROOF, roof, strict=True))}


def published_rows() -> pd.DataFrame:
    """The seeds' training and eval rates of named models (fp32), with their device and configuration."""
    s0, s2, s3, mnist = (*map(published.setup, ("000", "002", "003")), models.spec("mnist_cnn"))
    rows = []  # (seed, device class, model, phase, batch, size, classes, rate, configuration)
    for r in published.THROUGHPUT_000.itertuples():
        for ph in ("train", "eval"):
            shape = (r.batch_size, s0["image_px"], s0["classes"], getattr(r, f"{ph}_img_s"))
            rows.append(("000", r.device_class, r.model, ph, *shape, r.configuration))
    for r in published.THROUGHPUT_003.itertuples():
        shape = (r.batch_size, s3["image_px"], s3["classes_head"], r.train_img_s)
        rows.append(("003", r.device_class, r.model, "train", *shape, r.configuration))
    for r in published.BACKENDS_001[published.BACKENDS_001.backend.str.startswith("torch")].itertuples():
        shape = (published.setup("001")["batch_size"], mnist.reference_size, mnist.reference_classes)
        rows.append(("001", r.backend, "mnist_cnn", "train", *shape, r.throughput_img_s, r.configuration))
    for r in published.TIMES_002.itertuples():  # its epochs' images over its training hours; cats vs dogs
        rate = s2["epochs"] * s2["train_images"] / (r.train_20_epochs_h * 3600)
        shape = (r.batch_size, s2["image_px"], 2, rate)
        rows.append(("002", r.device_class, "densenet121", "train", *shape, r.configuration))
    columns = ["seed", "cls", "model", "phase", *KEYS[1:4], "rate_img_s", "configuration"]
    df = pd.DataFrame(rows, columns=columns)
    device, kind = zip(*(published.DEVICES[k] for k in zip(df.seed, df.cls, strict=True)), strict=True)
    source = "published by " + df.seed.map(published.SEEDS)
    df = df.assign(source=source, device=device, device_kind=kind, precision="fp32")
    return df.assign(candidate=df.seed.isin(STEP_TIMED))


def measured_rows(merged) -> pd.DataFrame:
    """The merged runs' ok 02 and 03 rows with their 04 roofs, each measurement once (03's rows copied from 02's,
    ``measured_in``, are 02's); candidates: the default variant, device data."""
    from cnnbench.roofline import roof_for

    frames, peaks = [pd.DataFrame(columns=["run_name", "precision"])], merged["device_peaks"]
    for table, nb in results.RATES.items():
        df = measured_here(merged[table])
        ok = knobs.columns(df[df.status == "ok"])
        if len(ok):
            plain = ok.index.isin(knobs.default_variant(ok).index) & (ok.data_mode == "device")
            said = [f"{knobs.label(r)}, measured by {nb}" for r in ok.to_dict("records")]
            src = ok.run_name + f" ({nb})"
            ok = ok.assign(source=src, device=ok.device_name, rate_img_s=ok.throughput_img_s)
            frames.append(ok.assign(configuration=said, candidate=plain))
    rows, roofs = pd.concat(frames, ignore_index=True), {}
    for run, p in set(zip(rows.run_name, rows.precision, strict=True)):
        mine = peaks[(peaks.run_name == run) & (peaks.kind == "measured")]
        if len(mine):
            r = roof_for(mine, p)
            roofs[run, p] = [*r[ROOF[:3]], f"measured {r.name} roofs of {run} (04)"]
    keys = zip(rows.run_name, rows.precision, strict=True)
    rows = rows.join(pd.DataFrame([roofs.get(k, [math.nan] * 4) for k in keys], rows.index, ROOF))
    host, keys = merged["host_steps"], ["run_name", "model", "phase"]
    if host.empty:  # no run measured its host (04 on a CPU, or before it did)
        return rows.assign(host_step_s=math.nan, host_ops=math.nan)
    measured = host[host.status == "ok"].groupby(keys)[["host_step_s", "ops"]].median()
    return rows.join(measured.rename(columns={"ops": "host_ops"}), on=keys)


def judged(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row with its roofs (measured, else its spec's), ceiling, verdict ("device": fitted and scored, "above
    the ceiling", "bound by something else", "not fitted", "no prediction") and its evidence in ``reason``."""
    rows, extra = rows.reset_index(drop=True), []
    for r in rows.itertuples():
        try:
            if pd.isna(r.batch_size):
                raise Refused("batch size not stated")
            measured = pd.notna(getattr(r, "peak_gflops", math.nan))
            extra.append({} if measured else spec_roof(r.device, r.precision))
        except Refused as why:
            extra.append({"reason": f"no prediction: {why}"})
    extra = pd.DataFrame(extra, index=rows.index, columns=[*ROOF, "reason"])
    rows = rows.assign(**{c: rows[c].combine_first(extra[c]) if c in rows else extra[c] for c in extra})
    ok = rows.reason.isna()
    rows.loc[ok, "ceiling_img_s"] = predict(rows[ok], None).ceiling_img_s
    rows.loc[ok, ["host_s", "host_source"]] = host_costs(rows[ok])
    share, step = rows.rate_img_s / rows.ceiling_img_s, rows.batch_size / rows.rate_img_s
    conds = {  # the first that holds; else "device"
        "no prediction": ~ok,
        ABOVE_CEILING: share > 1,
        HOST_BOUND: rows.host_s >= HOST_SHARE * step,
        BOUND_ELSEWHERE: share < FAR_BELOW,
        "not fitted": ~rows.candidate.astype(bool),
    }
    rows["verdict"] = np.select(list(conds.values()), list(conds), "device")
    said = {
        HOST_BOUND: "the host issues its ops in {r.host_s:.4g} s ({r.host_source}), {h:.0%} of the measured step",
        ABOVE_CEILING: "{r.rate_img_s:,.0f} img/s is {s:.2f}x what its roofs allow ({r.ceiling_img_s:,.0f} "
        "img/s: every op at {r.peak_gflops:,.0f} GFLOP/s and {r.bandwidth_gbs:,.0f} GB/s, no overhead) at {r.precision}",
        BOUND_ELSEWHERE: "{s:.1%} of what its roofs allow ({r.ceiling_img_s:,.0f} img/s); {r.configuration}",
        "not fitted": "predicted, not fitted: {r.configuration}",
    }
    for i, r in rows[rows.verdict.isin(said)].iterrows():
        rows.loc[i, "reason"] = said[r.verdict].format(r=r, s=share[i], h=r.host_s / step[i])
    return rows


def _fit_rows(rows: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, str]:
    """The device-bound rows a ``kind`` prediction is fitted on (its own, else every queued kind's), and kinds."""
    if ((rows.verdict == "device") & (rows.device_kind == kind)).any():
        return rows[(rows.verdict == "device") & (rows.device_kind == kind)], kind
    kinds = set(rows.device_kind.dropna())  # a row of no known kind (a run without it) is predicted by none
    off = sorted(k for k in kinds if k != kind and not devices.backend_class(k).on_host)
    return rows[(rows.verdict == "device") & rows.device_kind.isin(off)], "+".join(off)


def _span(rows: pd.DataFrame, kind: str, host_bound: bool, model=None) -> tuple[float, float]:
    """The range of rate / predicted: the worst out-of-sample error of rows bound alike, ``model``'s left out."""
    kinds = set(_fit_rows(rows, kind)[1].split("+"))
    others = rows.device_kind.isin(kinds) & (rows.model != model)
    errors = np.log(rows.rate_img_s / rows.predicted_img_s)[others]
    alike = errors[rows.verdict == (HOST_BOUND if host_bound else "device")]
    worst = (alike if alike.notna().any() else errors[rows.verdict == "device"]).abs().max()
    return math.exp(-worst), math.exp(worst)


def scored(rows: pd.DataFrame) -> pd.DataFrame:
    """``judged`` rows predicted out of sample (a fit on the other models' rows of their kind), with a range."""
    parts = [pd.DataFrame(columns=["predicted_img_s"])]
    for (kind, model), held in rows[rows.verdict != "no prediction"].groupby(["device_kind", "model"]):
        base, fitted_on = _fit_rows(rows, kind)
        train = base[base.model != model]
        if len(train):
            parts.append(predict(held, fit(train, fitted_on)).drop(columns="ceiling_img_s"))
        else:
            rows.loc[held.index, ["verdict", "reason"]] = ("no prediction", f"no other model's {kind} rows")
    rows = rows.join(pd.concat(parts).astype({"predicted_img_s": float}))
    rows["error_pct"] = 100 * (rows.predicted_img_s / rows.rate_img_s - 1)
    keys = zip(rows.device_kind, rows.verdict == HOST_BOUND, rows.model, strict=True)
    span = pd.DataFrame(
        [_span(rows, *k) if pd.notna(k[0]) else (math.nan,) * 2 for k in keys], index=rows.index
    )
    return rows.assign(low_img_s=rows.predicted_img_s * span[0], high_img_s=rows.predicted_img_s * span[1])


def what_if(rows: pd.DataFrame, targets=None, on=WHAT_IF, precision: str = "fp32") -> pd.DataFrame:
    """``targets`` (None: each workload the runs' 02 measured, once, beside its rate in ``precision`` where it has
    one) predicted in ``precision`` on each device of ``on`` (name -> why) from ``rows``."""
    if targets is None:
        mine = rows[rows.source.str.endswith("(02)")]
        same = mine.precision == precision
        mine = mine.assign(measured_in=mine.source, measured_img_s=mine.rate_img_s.where(same), same=same)
        workload = ["measured_in", "model", "phase", "batch_size", "image_size", "num_classes"]
        first = (
            mine.sort_values("same", ascending=False, kind="stable").drop_duplicates(workload).sort_index()
        )
        targets = first[[*workload, "measured_img_s"]]
    out = [targets.assign(source=None, device=None)]
    for device, why in on.items() if len(targets) else ():
        roof = spec_roof(device, precision)
        t = targets.assign(**roof, precision=precision, source=f"predicted for {why}")
        t = t.join(host_costs(t))
        p = predict(t, fit(*_fit_rows(rows, roof["device_kind"])))
        lo, hi = np.array([_span(rows, roof["device_kind"], b == HOST_BOUND) for b in p.bound]).T
        out.append(t.join(p).assign(low_img_s=p.predicted_img_s * lo, high_img_s=p.predicted_img_s * hi))
    return pd.concat(out[1:] or out, ignore_index=True)


def step_times(configs, device: str) -> list[float]:
    """Predicted seconds of one step of each configuration on ``device`` (fp32 roofs where it lacks one)."""
    fp32 = spec_roof(device)
    roofs = {}
    for c in configs:
        try:
            roofs[c.precision] = roofs.get(c.precision) or spec_roof(device, c.precision)
        except Refused:
            roofs[c.precision] = fp32
    t = pd.DataFrame([{**roofs[c.precision], **{k: getattr(c, k) for k in KEYS}} for c in configs])
    p = predict(t.join(host_costs(t)), fit(*_fit_rows(known(), fp32["device_kind"])))
    return list(t.batch_size / p.predicted_img_s)


@functools.cache
def known() -> pd.DataFrame:
    """What a prediction for a device not at hand stands on: the seeds' and the committed examples' rows."""
    return scored(judged(pd.concat([published_rows(), _examples()], ignore_index=True)))


def table(merged) -> pd.DataFrame:
    """predictions.csv: every seed's rate and every merged run's 02 and 03 rate, predicted out of sample."""
    return scored(judged(pd.concat([published_rows(), measured_rows(merged)], ignore_index=True)))[COLUMNS]


def goals(t: pd.DataFrame) -> pd.DataFrame:
    """Median absolute error and share inside the range, per kind of source of a predictions table."""
    queued = t.device_kind.map(_queued).astype(bool)
    groups = {
        "measured by 02 on a CPU, out of sample": t.source.str.endswith("(02)") & ~queued,
        "measured by 02 and 03 on an accelerator, out of sample": t.source.str.endswith(("(02)", "(03)"))
        & queued,
        "published, device-bound": t.source.str.startswith("published") & (t.verdict == "device"),
    }
    err, pred, inside = t.error_pct.abs(), t.predicted_img_s, t.rate_img_s.between(t.low_img_s, t.high_img_s)
    rows = [(k, m.sum(), pred[m].count(), err[m].median(), 100 * inside[m].mean()) for k, m in groups.items()]
    return pd.DataFrame(
        rows, columns=["rows", "count", "predicted", "median_abs_error_pct", "inside_range_pct"]
    )


def figure(t: pd.DataFrame, path=None):
    """Predicted against published or measured images/s, log-log; hollow where the verdict is not "device"."""
    from cnnbench import plots

    p = t[t.predicted_img_s.notna()]
    fig, ax = plots.subplots(figsize=(7, 6))
    for i, (source, g) in enumerate(p.groupby("source")):
        for device, h in g.groupby(g.verdict == "device"):
            tag = "" if device else f" ({', '.join(sorted(set(h.verdict)))})"
            face = f"C{i}" if device else "none"
            style = dict(marker="osD^vP*Xh"[i % 9], edgecolors=f"C{i}", facecolors=face)
            ax.scatter(h.rate_img_s, h.predicted_img_s, label=source + tag, **style)
    both = p[["rate_img_s", "predicted_img_s"]].stack()
    ax.plot([both.min() / 2, both.max() * 2], [both.min() / 2, both.max() * 2], "k--", lw=1, label="y = x")
    title = f"{len(p)} of {len(t)} rows predicted (the rest: no peak or batch size, in predictions.csv)"
    ax.set(xscale="log", yscale="log", xlabel="published or measured (img/s)", ylabel="predicted (img/s)")
    ax.set_title(title)
    plots.legend_below(fig, ax, ncol=2, fontsize=7)
    return plots.save(fig, path)


def one(model: str, device: str, phase="train", batch_size=None, image_size=None, precision="fp32") -> dict:
    """``cnnbench predict``: one prediction from :func:`known`; :class:`Refused` for bad input, before any work."""
    try:
        spec = models.spec(model)
    except ValueError as err:
        raise Refused(str(err)) from None
    p = params.Params()
    _, _, size, classes = spec.data_for(p.dataset, image_size or p.image_size, p.num_classes)
    batch = batch_size or p.batch_size_for(model)
    if why := params._too_small(model, size, batch, phase == "train"):  # a step that cannot run
        raise Refused(f"{model} {phase} at {size} px, batch {batch} cannot run ({why})")
    roof = spec_roof(device, precision)
    target = pd.DataFrame([[model, phase, batch, size, classes]], columns=[*KEYS[:1], "phase", *KEYS[1:4]])
    r = what_if(known(), target, {roof["device"]: "cnnbench"}, precision).iloc[0]
    keys = "model device phase batch_size image_size precision bound fit roof host_source".split()
    out = {k: r[k].item() if hasattr(r[k], "item") else r[k] for k in keys}
    return {**out, "img_s": r.predicted_img_s, "low": r.low_img_s, "high": r.high_img_s}


def main(argv: list[str]) -> int:
    """``cnnbench predict MODEL --device NAME [...]``: exit 2 with one line for bad input."""
    ap = params.Parser(prog="cnnbench predict", description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", required=True, help="a device of device_specs.csv, e.g. 'Tesla T4'")
    ap.add_argument("--phase", choices=("train", "eval"), default="train")
    ap.add_argument("--batch-size", type=params.positive_int)
    ap.add_argument("--image-size", type=params.positive_int)
    ap.add_argument("--precision", choices=knobs.KNOBS["precision"].values, default="fp32")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    a = ap.parse_args(argv)
    try:
        r = one(a.model, a.device, a.phase, a.batch_size, a.image_size, a.precision)
    except Refused as err:
        print(f"cnnbench predict: {err}", file=sys.stderr)
        return 2
    text = (
        "{model} {phase} on {device} (batch {batch_size}, {image_size} px, {precision}): {img_s:,.0f} img/s "
        "({low:,.0f} to {high:,.0f}), bound: {bound}\nmethod: each op's FLOPs and bytes (forward, backward, "
        "optimizer) against the roofs ({roof}) at fitted efficiencies, plus a per-op overhead; the larger of that "
        "and the host's time to issue the step where the device queues work\nfit: {fit}\nhost: {host_source}"
    )
    print(json.dumps(r) if a.json else text.format(**r))
    return 0
