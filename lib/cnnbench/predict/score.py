"""The rows a prediction can be checked against (the seeds' published rates, the merged runs' measured 02 and 03
rates), each with its device's roofs and a verdict; the leave-one-model-out scoring; the predictions of a run's
models on other devices."""

from __future__ import annotations

import difflib
import math

import numpy as np
import pandas as pd

from cnnbench import devices, knobs, models, published
from cnnbench.devices.base import normalise_name
from cnnbench.predict.model import fit, predict

# Seeds whose rates are timed steps (warm-up, then timed iterations). The others timed whole epochs or trainings with
# their data pipeline: their rows are predicted and scored, never fitted.
STEP_TIMED = ("003",)
# A rate under this share of what its roofs allow (every op at the peak and the bandwidth, no overhead) is bound by
# something other than the device.
FAR_BELOW = 0.10
# The devices 08 predicts a run's models on: the params files' and one current datacenter GPU. apple_m.yaml's Macs
# (M3/M4) have no published GPU peak: the M2 Pro is the newest Pro chip with one.
WHAT_IF = {
    "Tesla T4": "params/colab_t4.yaml",
    "Apple M2 Pro (19-core GPU)": "params/apple_m.yaml (an M-series Mac)",
    "NVIDIA H100 80GB HBM3": "a current datacenter GPU",
}
COLUMNS = [
    "source", "device", "device_kind", "model", "phase", "batch_size", "image_size", "num_classes", "precision",
    "rate_img_s", "predicted_img_s", "low_img_s", "high_img_s", "error_pct", "bound", "verdict", "reason",
    "ceiling_img_s", "time_shares", "peak_gflops", "bandwidth_gbs", "level", "roof", "fit",
]  # fmt: skip


class Refused(ValueError):
    """Bad input to a prediction: one line."""


def _specs() -> pd.DataFrame:
    from cnnbench.roofline import peaks

    t = peaks.specs()
    return t.assign(label=t.device + t.gpu_cores.map(lambda c: f" ({c:.0f}-core GPU)" if pd.notna(c) else ""))


def spec_roof(device: str, precision: str = "fp32") -> dict:
    """The roof of a device of device_specs.csv at ``precision`` (a chip named bare: its first row); :class:`Refused`
    naming the closest names, or why it has no peak at that precision (knobs: what no device of its kind runs)."""
    t = _specs()
    hit = t[t.label.map(normalise_name) == normalise_name(device)]
    hit = hit if len(hit) else t[t.device.map(normalise_name) == normalise_name(device)]
    if hit.empty:
        names = {normalise_name(n): n for n in t.label}
        close = difflib.get_close_matches(normalise_name(device), list(names), n=3, cutoff=0)
        raise Refused(
            f"device {device!r} is not in device_specs.csv; closest: {', '.join(names[c] for c in close)}"
        )
    rows = t[t.label == hit.label.iloc[0]]
    r, peaked = rows.iloc[0], rows[rows.peak_gflops.notna()]
    if precision not in set(peaked.precision):
        capable = devices.Hardware(r.device_kind, r.label, cores=0, capability=(9, 0), macos=(99, 0))
        why = knobs.lacks("precision", precision, capable)
        has = f"its peaks: {', '.join(peaked.precision)}" if len(peaked) else r.source
        raise Refused(
            f"{r.label} has no {precision} peak in device_specs.csv ({has})" + (f": {why}" if why else "")
        )
    r = peaked[peaked.precision == precision].iloc[0]
    return {
        "device": r.label,
        "device_kind": r.device_kind,
        "peak_gflops": r.peak_gflops,
        "bandwidth_gbs": r.bandwidth_gbs,
        "level": r.memory_level,
        "roof": f"spec: {r.source}",
    }


def published_rows() -> pd.DataFrame:
    """The seeds' training and eval rates of named models (fp32), with their device and configuration."""
    s0, s2, s3, mnist = (*map(published.setup, ("000", "002", "003")), models.spec("mnist_cnn"))
    rows = []

    def add(seed, cls, model, phase, batch, size, classes, rate, configuration):
        device, kind = published.DEVICES[seed, cls]
        candidate = seed in STEP_TIMED
        rows.append(
            dict(source=f"published by seed {seed}", device=device, device_kind=kind, model=model, phase=phase,
                 batch_size=batch, image_size=size, num_classes=classes, precision="fp32", rate_img_s=rate,
                 configuration=configuration, candidate=candidate)
        )  # fmt: skip

    for r in published.THROUGHPUT_000.itertuples():
        for phase in ("train", "eval"):
            rate, size = getattr(r, f"{phase}_img_s"), s0["image_px"]
            add(
                "000",
                r.device_class,
                r.model,
                phase,
                r.batch_size,
                size,
                s0["classes"],
                rate,
                r.configuration,
            )
    for r in published.THROUGHPUT_003.itertuples():
        size, classes = s3["image_px"], s3["classes_head"]
        add(
            "003",
            r.device_class,
            r.model,
            "train",
            r.batch_size,
            size,
            classes,
            r.train_img_s,
            r.configuration,
        )
    for r in published.BACKENDS_001[published.BACKENDS_001.backend.str.startswith("torch")].itertuples():
        size, classes, batch = (
            mnist.reference_size,
            mnist.reference_classes,
            published.setup("001")["batch_size"],
        )
        add("001", r.backend, "mnist_cnn", "train", batch, size, classes, r.throughput_img_s, r.configuration)
    for r in (
        published.TIMES_002.itertuples()
    ):  # its epochs' images over its training hours; cats vs dogs: 2 classes
        rate = s2["epochs"] * s2["train_images"] / (r.train_20_epochs_h * 3600)
        add("002", r.device_class, "densenet121", "train", r.batch_size, 224, 2, rate, r.configuration)
    return pd.DataFrame(rows)


def measured_rows(merged) -> pd.DataFrame:
    """The merged runs' ok rows of 02 and 03 with their run's measured roofs (04); fitted only in the seeds' variant
    (fp32, NCHW, eager) with batches made on the device."""
    from cnnbench.roofline import roof_for

    frames, peaks = [], merged["device_peaks"]
    for table, notebook in (("scenario_a", "02"), ("batch_sweep", "03")):
        df = merged[table]
        ok = knobs.columns(df[df.status == "ok"]) if len(df) and "status" in df else pd.DataFrame()
        if ok.empty:
            continue
        plain = ok.index.isin(knobs.default_variant(ok).index) & (ok.data_mode == "device")
        frames.append(
            ok.assign(
                source=ok.run_name + f" ({notebook})",
                device=ok.device_name,
                rate_img_s=ok.throughput_img_s,
                configuration=[f"{knobs.label(r)}, measured by {notebook}" for r in ok.to_dict("records")],
                candidate=plain,
            )
        )
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_name", "precision"])
    roofs = {}
    for run, precision in set(zip(rows.run_name, rows.precision, strict=True)):
        mine = peaks[(peaks.run_name == run) & (peaks.kind == "measured")] if len(peaks) else peaks
        roof = roof_for(mine, precision) if len(mine) else pd.Series(dtype=object)
        roofs[run, precision] = {k: roof.get(k, math.nan) for k in ("peak_gflops", "bandwidth_gbs", "level")}
        roofs[run, precision]["roof"] = f"measured {roof.name} roofs of {run} (04)" if len(mine) else math.nan
    keys = zip(rows.run_name, rows.precision, strict=True)
    return rows.join(pd.DataFrame([roofs[k] for k in keys], index=rows.index))


def _with_roofs(rows: pd.DataFrame) -> pd.DataFrame:
    """Spec roofs where a row has none measured; ``reason`` says why a row has none at all."""
    extra = []
    for r in rows.itertuples():
        try:
            if pd.isna(r.batch_size):
                raise Refused("batch size not stated")
            extra.append(
                {} if pd.notna(getattr(r, "peak_gflops", math.nan)) else spec_roof(r.device, r.precision)
            )
        except Refused as why:
            extra.append({"reason": f"no prediction: {why}"})
    extra = pd.DataFrame(
        extra, index=rows.index, columns=["peak_gflops", "bandwidth_gbs", "level", "roof", "reason"]
    )
    return rows.assign(**{c: rows[c].fillna(extra[c]) if c in rows else extra[c] for c in extra})


def judged(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's ceiling and verdict: "device" (a fitted, scored row), "above the ceiling", "bound by something
    else" (under FAR_BELOW of the ceiling), "not fitted" (not a timed step, another variant or the loader) or "no
    prediction", with the evidence in ``reason``."""
    rows = _with_roofs(rows.reset_index(drop=True))
    ok = rows.reason.isna()
    rows.loc[ok, "ceiling_img_s"] = predict(rows[ok].astype({"batch_size": int}), None).ceiling_img_s
    share = rows.rate_img_s / rows.ceiling_img_s
    rows["verdict"] = np.select(
        [~ok, share > 1, share < FAR_BELOW, ~rows.candidate.astype(bool)],
        ["no prediction", "above the ceiling", "bound by something else", "not fitted"],
        "device",
    )
    said = {
        "above the ceiling": "{rate:,.0f} img/s is {share:.2f}x what its roofs allow ({ceiling:,.0f} img/s: every op "
        "at {peak:,.0f} GFLOP/s and {bw:,.0f} GB/s, no overhead) at {precision}",
        "bound by something else": "{share:.1%} of what its roofs allow ({ceiling:,.0f} img/s); {configuration}",
        "not fitted": "predicted, not fitted: {configuration}",
    }
    for i, r in rows[rows.verdict.isin(said)].iterrows():
        rows.loc[i, "reason"] = said[r.verdict].format(
            rate=r.rate_img_s, share=share[i], ceiling=r.ceiling_img_s, peak=r.peak_gflops, bw=r.bandwidth_gbs,
            precision=r.precision, configuration=r.configuration,
        )  # fmt: skip
    return rows


def _fit_rows(rows: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, str]:
    """The device-bound rows a ``kind`` prediction is fitted on: its own, else those of every other device kind that
    is not the host CPU (named in the second item)."""
    own = rows[(rows.verdict == "device") & (rows.device_kind == kind)]
    if len(own):
        return own, kind
    off_host = [k for k in set(rows.device_kind) if k != kind and not devices.backend_class(k).on_host]
    return rows[(rows.verdict == "device") & rows.device_kind.isin(off_host)], "+".join(sorted(off_host))


_FITS: dict = {}


def _fitted(train: pd.DataFrame, kind: str):
    key = (
        kind,
        tuple(map(tuple, train[["source", "model", "phase", "batch_size", "rate_img_s"]].to_numpy())),
    )
    if key not in _FITS:
        _FITS[key] = fit(train.astype({"batch_size": int}), kind)
    return _FITS[key]


def scored(rows: pd.DataFrame) -> pd.DataFrame:
    """Every predictable row of ``judged`` rows predicted out of sample: each model's rows from a fit on the other
    models' device-bound rows of its kind (the held-out model's rows never enter its own fit); its range spans the
    out-of-sample ratios rate / predicted of its kind's device-bound rows."""
    parts = []
    for (kind, model), held in rows[rows.verdict != "no prediction"].groupby(["device_kind", "model"]):
        base, fitted_on = _fit_rows(rows, kind)
        train = base[base.model != model]
        if train.empty:
            rows.loc[held.index, ["verdict", "reason"]] = [
                "no prediction",
                f"no other model's {kind} rows to fit",
            ]
            continue
        parts.append(
            predict(held.astype({"batch_size": int}), _fitted(train, fitted_on)).drop(columns="ceiling_img_s")
        )
    rows = rows.join(pd.concat(parts)) if parts else rows.assign(predicted_img_s=math.nan)
    rows["error_pct"] = 100 * (rows.predicted_img_s / rows.rate_img_s - 1)
    for kind in set(rows.device_kind):
        base, fitted_on = _fit_rows(rows, kind)
        ratio = (base.rate_img_s / base.predicted_img_s).dropna()
        mine = rows.device_kind == kind
        rows.loc[mine, "low_img_s"] = rows.predicted_img_s[mine] * (ratio.min() if len(ratio) else math.nan)
        rows.loc[mine, "high_img_s"] = rows.predicted_img_s[mine] * (ratio.max() if len(ratio) else math.nan)
    return rows


def what_if(rows: pd.DataFrame, targets=None, on=WHAT_IF, precision: str = "fp32") -> pd.DataFrame:
    """``targets`` (model, phase, batch_size, image_size, num_classes; None: the merged runs' 02 rows, their rate
    beside as ``measured_img_s``) predicted on each device of ``on`` (name -> why), from a fit on all ``scored``
    device-bound rows of its kind, the range from their out-of-sample ratios."""
    if targets is None:
        mine = rows[rows.source.str.endswith("(02)")].rename(columns={"rate_img_s": "measured_img_s"})
        targets = mine[["model", "phase", "batch_size", "image_size", "num_classes", "measured_img_s"]]
    out = [targets.assign(source=None, device=None)] if targets.empty else []
    for device, why in on.items() if len(targets) else ():
        roof = spec_roof(device, precision)
        base, fitted_on = _fit_rows(rows, roof["device_kind"])
        ratio = (base.rate_img_s / base.predicted_img_s).dropna()
        t = targets.assign(**roof, precision=precision, source=f"predicted for {why}")
        p = predict(t.astype({"batch_size": int}), _fitted(base, fitted_on))
        out.append(
            t.join(p).assign(
                low_img_s=p.predicted_img_s * ratio.min(), high_img_s=p.predicted_img_s * ratio.max()
            )
        )
    return pd.concat(out, ignore_index=True)


def table(merged) -> pd.DataFrame:
    """predictions.csv: every seed's rate and every merged run's 02 and 03 rate, predicted out of sample."""
    return scored(judged(pd.concat([published_rows(), measured_rows(merged)], ignore_index=True)))[COLUMNS]


def goals(t: pd.DataFrame) -> pd.DataFrame:
    """Issue 32's goal figures from a predictions table: median absolute error (%) of the merged runs' 02 rows and
    of the published device-bound rows, with the rows each covers (none dropped: a row not predicted is counted)."""
    groups = {
        "measured by 02, out of sample": t.source.str.endswith("(02)"),
        "published, device-bound": t.source.str.startswith("published") & (t.verdict == "device"),
    }
    return pd.DataFrame(
        [{"rows": k, "count": m.sum(), "predicted": t.predicted_img_s[m].notna().sum(),
          "median_abs_error_pct": t.error_pct[m].abs().median()} for k, m in groups.items()]
    )  # fmt: skip


def figure(t: pd.DataFrame, path=None):
    """Predicted against published or measured images/s, log-log, with y = x; one marker per source, hollow where
    the verdict is not "device"."""
    from cnnbench import plots

    p = t[t.predicted_img_s.notna()]
    fig, ax = plots.subplots(figsize=(7, 6))
    for i, (source, g) in enumerate(p.groupby("source")):
        for device, h in g.groupby(g.verdict == "device"):
            tag = "" if device else f" ({', '.join(sorted(set(h.verdict)))})"
            ax.scatter(h.rate_img_s, h.predicted_img_s, marker="osD^vP*Xhp<>"[i % 12], edgecolors=f"C{i}",
                       facecolors=f"C{i}" if device else "none", label=source + tag)  # fmt: skip
    both = p[["rate_img_s", "predicted_img_s"]].stack()
    lo, hi = both.min() / 2, both.max() * 2
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax.set(xscale="log", yscale="log", xlabel="published or measured (img/s)", ylabel="predicted (img/s)",
           title=f"{len(p)} of {len(t)} rows predicted (the rest: no peak or batch size, in predictions.csv)")  # fmt: skip
    ax.legend(fontsize=7)
    return plots.save(fig, path)


def one(model: str, device: str, phase="train", batch_size=None, image_size=None, precision="fp32") -> dict:
    """``cnnbench predict``: one prediction (the workbook's defaults where a size is None) fitted on the seeds'
    device-bound rows; :class:`Refused` (one line) for an unknown model, device or precision before any work."""
    from cnnbench.params import Params

    try:
        spec = models.spec(model)
    except ValueError as err:
        raise Refused(str(err)) from None
    roof, p = spec_roof(device, precision), Params()
    _, _, size, classes = spec.data_for(p.dataset, image_size or p.image_size, p.num_classes)
    target = pd.DataFrame([dict(model=model, phase=phase, batch_size=batch_size or p.batch_size_for(model),
                                image_size=size, num_classes=classes)])  # fmt: skip
    r = what_if(
        scored(judged(published_rows())), target, {roof["device"]: "cnnbench predict"}, precision
    ).iloc[0]
    return {"model": model, "device": r.device, "phase": phase, "batch_size": int(r.batch_size),
            "image_size": int(r.image_size), "precision": precision, "img_s": r.predicted_img_s,
            "low": r.low_img_s, "high": r.high_img_s, "bound": r.bound, "fit": r.fit, "roof": r.roof}  # fmt: skip


def main(argv: list[str]) -> int:
    """``cnnbench predict MODEL --device NAME [...]``; exit 2 with one line for bad input."""
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(prog="cnnbench predict", description="predicted images/s of MODEL on a device of "
                                 "device_specs.csv, from its roofs at efficiencies fitted on the seeds' rows")  # fmt: skip
    ap.add_argument("model")
    ap.add_argument("--device", required=True)
    ap.add_argument("--phase", choices=("train", "eval"), default="train")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--image-size", type=int)
    ap.add_argument("--precision", choices=knobs.KNOBS["precision"].values, default="fp32")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        r = one(a.model, a.device, a.phase, a.batch_size, a.image_size, a.precision)
    except Refused as err:
        print(f"cnnbench predict: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{r['model']} {r['phase']} on {r['device']} (batch {r['batch_size']}, {r['image_size']} px, "
              f"{r['precision']}): {r['img_s']:,.0f} img/s ({r['low']:,.0f} to {r['high']:,.0f}), bound: {r['bound']}\n"
              f"method: each op's FLOPs and bytes (forward, backward, optimizer) against the roofs ({r['roof']}) "
              f"at fitted efficiencies, plus a per-op overhead\nfit: {r['fit']}")  # fmt: skip
    return 0
