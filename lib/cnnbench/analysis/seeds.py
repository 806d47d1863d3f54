"""Every seed's published numbers beside ours, with the differences of configuration named."""

from __future__ import annotations

import pandas as pd

from cnnbench import knobs, published
from cnnbench.analysis.beside import cnn_extras_001
from cnnbench.analysis.compare import configured, match_keys
from cnnbench.scratch import summary as scratch_summary


def _differences(seed: str, s, r) -> str:
    ours = (
        f"ours: {r.dataset} {r.image_size}x{r.image_size}, batch {r.batch_size}, {r.data_mode} data mode, "
        "synchronised windows"
    )
    if seed == "000":
        return f"000: {s.configuration}; {ours}"
    return f"003: {s.configuration}, batch {s.batch_size}; {ours}"


def published_beside_ours(scenario_a: pd.DataFrame) -> pd.DataFrame:
    """The seeds' published throughputs beside ours, every run and configuration (fp32 NCHW eager) shown."""
    if scenario_a.empty:
        return pd.DataFrame()
    ok = knobs.default_variant(configured(scenario_a))
    if ok.empty:
        return pd.DataFrame()
    ok = ok.assign(
        device_class=[
            published.device_class(k, n) for k, n in zip(ok.device_kind, ok.device_name, strict=True)
        ]
    )
    index = ["run_name", "device_class", "device_name", *[k for k in match_keys() if k != "phase"]]
    ours = ok.pivot_table(
        index=index, columns="phase", values="throughput_img_s", aggfunc="first"
    ).reset_index()
    cis = ok.pivot_table(index=index, columns="phase", values="throughput_ci95_img_s", aggfunc="first")
    ours = ours.merge(cis.add_suffix("_ci95").reset_index(), on=index, how="left")
    rows = []
    for r in ours.itertuples():
        for seed, table in (("000", published.THROUGHPUT_000), ("003", published.THROUGHPUT_003)):
            for s in table[(table.model == r.model) & (table.device_class == r.device_class)].itertuples():
                rows.append(
                    {
                        "model": r.model,
                        "device_class": r.device_class,
                        "source": f"published by {seed}",
                        "published_batch_size": s.batch_size,
                        "published_train_img_s": s.train_img_s,
                        "published_eval_img_s": getattr(s, "eval_img_s", None),
                        "ours_run": r.run_name,
                        "ours_device": r.device_name,
                        "ours_batch_size": r.batch_size,
                        "ours_train_img_s": getattr(r, "train", None),
                        "ours_train_ci95_img_s": getattr(r, "train_ci95", None),
                        "ours_eval_img_s": getattr(r, "eval", None),
                        "differences": _differences(seed, s, r),
                    }
                )
    return pd.DataFrame(rows)


def epoch_times(epochs: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 2 across runs: train and validation epoch times and throughputs."""
    cols = [
        "run_name",
        "device_name",
        "host",
        "model",
        "batch_size",
        "dataset",
        "status",
        "epoch_images",
        "train_epoch_s",
        "train_images",
        "train_throughput_img_s",
        "val_epoch_s",
        "val_images",
        "val_throughput_img_s",
    ]
    return epochs[[c for c in cols if c in epochs.columns]] if len(epochs) else pd.DataFrame()


def epochs_beside_published(epochs: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's epoch times (6,400-image 'epochs') beside ours, per model, with each epoch's images."""
    pub = published.EPOCHS_000.assign(
        source=f"published by {published.SEED_000}", images=published.EPOCH_IMAGES_000
    )
    pub.loc[(pub.model == "squeezenet1_1") & (pub.device_class == "t4"), "images"] = (
        published.EPOCH_IMAGES_000 // 2
    )
    pub = pub.rename(columns={"device_class": "device"})[
        ["source", "model", "device", "images", "train_epoch_s", "val_epoch_s"]
    ]
    if epochs.empty or "train_epoch_s" not in epochs:
        return pub
    ok = epochs[epochs.status == "ok"]
    ours = pd.DataFrame(
        {
            "source": "ours: " + ok.run_name,
            "model": ok.model,
            "device": ok.device_name,
            "images": ok.train_images,
            "train_epoch_s": ok.train_epoch_s,
            "val_epoch_s": ok.val_epoch_s,
        }
    )
    return pd.concat([pub, ours], ignore_index=True).sort_values(["model", "source"], kind="stable")


def beside(published_table: pd.DataFrame, ours: pd.DataFrame, key: str, label: str) -> pd.DataFrame:
    """A seed's table and ours stacked with a ``source`` column (ours per run); the seed's alone, labelled,
    when no run produced ``label``'s CSV."""
    pub = published_table.assign(source=f"published by {published_table.source.iloc[0]}")
    if ours.empty:
        return pub.assign(note=f"no run of this analysis wrote {label}.csv: the published table alone")
    ok = ours[ours.status == "ok"] if "status" in ours else ours
    mine = ok.assign(source="ours: " + ok.run_name.astype(str))
    cols = ["source", *[c for c in [key, *pub.columns] if c in mine.columns and c != "source"]]
    cols = list(dict.fromkeys(cols))
    extra = [c for c in mine.columns if c not in cols and c.endswith(("_s", "_img_s", "_pct", "_mib", "_mb"))]
    return pd.concat([pub, mine[cols + extra]], ignore_index=True)


def backends_beside_001(backends: pd.DataFrame, memory: pd.DataFrame | None = None) -> pd.DataFrame:
    """Seed 001's Table I (the MNIST CNN per backend) beside our CNN, like with like: one row per run and
    backend from ``backends.csv``'s ``mnist_cnn`` rows only (the MLP's rows are seed 004's experiment), summarised
    as 05 does (:func:`cnnbench.scratch.summary.summarize`: every epoch but the first), a ``model`` column on both
    sides; the seed's table alone, labelled, when no run wrote the CNN's rows. Ours also carries its total
    training time (every epoch, the first included, as the seed's), the process RSS after a step from
    ``backend_memory.csv`` (``memory``) and the ``differences`` that explain the accuracy gap (our data, our
    epochs)."""

    pub = published.BACKENDS_001.assign(model="mnist_cnn")
    cnn = (
        backends[backends.model == "mnist_cnn"]
        if {"model", "status"} <= set(backends.columns)
        else backends.iloc[:0]
    )
    summ = scratch_summary.summarize(cnn) if len(cnn) else pd.DataFrame()
    if summ.empty:
        return beside(pub, pd.DataFrame(), "backend", "backends")
    ours = pd.DataFrame(
        {
            "source": "ours: " + summ.run_name.astype(str) if "run_name" in summ else "ours",
            "model": summ.model,
            "backend": summ.backend,
            "device_name": summ.device_name,
            "epoch_s": summ.epoch_s_mean,
            "throughput_img_s": summ.throughput_img_s,
            "throughput_ci95_img_s": summ.throughput_ci95_img_s,
            "final_test_accuracy_pct": summ.final_test_accuracy * 100,
            "max_test_accuracy_pct": summ.max_test_accuracy * 100,
        }
    )
    ours = cnn_extras_001(ours, cnn, memory)
    pub = pub.rename(columns={"configuration": "differences"}).assign(source=f"published by {published.SEED_001}")
    cols = [
        "source",
        "model",
        "backend",
        *[c for c in pub.columns if c not in ("source", "model", "backend")],
    ]
    return pd.concat([pub[cols], ours], ignore_index=True)


MB_TO_MIB = 1e6 / 2**20  # seed 004 prints MB; read as 10^6 bytes (as inconsistencies() does), shown in MiB


def memory_beside_004(mem: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 5 (the MLP's memory, CPU = NumPy and GPU = CuPy, in MB) beside our
    ``backend_memory.csv``, every value in MiB (the seed's MB read as 10^6 bytes and converted: x 0.9537), each
    block labelled by source, backend and model: the seed's two blocks first, then ours per run, MLP first."""
    pub = pd.concat(
        [
            pd.DataFrame(
                {
                    "source": f"published by {published.SEED_004}",
                    "backend": backend,
                    "model": "mlp",
                    "component": published.MEMORY_004.component,
                    "published_mib": published.MEMORY_004[col] * MB_TO_MIB,
                    "note": f"seed 004's {col[:3].upper()} column: MB x 10^6 / 2^20",
                }
            )
            for backend, col in (("numpy", "cpu_mb"), ("cupy", "gpu_mb"))
        ],
        ignore_index=True,
    )
    if mem.empty or "component" not in mem:
        return pub.assign(note="no run of this analysis wrote backend_memory.csv: the published table alone")
    ok = mem[(mem.status == "ok") & (mem.component.astype(str) != "")] if "status" in mem else mem
    run = ok.run_name.astype(str) if "run_name" in ok else pd.Series("", index=ok.index)
    ours = ok.assign(source="ours: " + run, order=(ok.model != "mlp").astype(int))
    ours = ours.sort_values(["source", "order"], kind="stable")
    cols = [
        c
        for c in (
            "source",
            "backend",
            "model",
            "component",
            "computed_mib",
            "measured_mib",
            "measured_status",
            "method",
        )
        if c in ours.columns
    ]
    return pd.concat([pub, ours[cols]], ignore_index=True)


def ops_beside_published(ops: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 4 beside ours: the MLP's ms per step by op kind (sums of per-op medians), one column
    per backend, one block of rows per run, the seed's NumPy and CuPy figures beside each; the seed's table
    alone, labelled, when no run wrote backend_ops.csv with the MLP."""

    blocks = {}
    for run, g in (
        ops.groupby("run_name") if len(ops) and {"op_kind", "median_ms"} <= set(ops.columns) else []
    ):
        block = scratch_summary.beside_seed_004(g)
        if len(block):
            blocks[run] = block
    if not blocks:
        return beside(published.OPS_004, pd.DataFrame(), "operation", "backend_ops")
    return pd.concat(blocks, names=["run_name", "op_kind"]).reset_index()


_TELEMETRY_CONFIG = (
    "source",
    "model",
    "phase",
    "batch_size",
    "image_size",
    "precision",
    "memory_format",
    "compile",
    "data_mode",
)

_GPU_SUMMARY = {
    ("mean", "util_device_pct"): "gpu_util_mean_pct",
    ("max", "util_device_pct"): "gpu_util_max_pct",
    ("mean", "gpu_power_w"): "gpu_power_w_mean",
    ("max", "gpu_power_w"): "gpu_power_w_max",
    ("mean", "gpu_temp_c"): "gpu_temp_c_mean",
    ("max", "gpu_temp_c"): "gpu_temp_c_max",
    ("max", "gpu_mem_used_mib"): "gpu_mem_used_max_mib",
}


def telemetry_summary(tele: pd.DataFrame) -> pd.DataFrame:
    """Our sampled GPU telemetry, one row per run, configuration and GPU (``gpu``: its index): utilisation,
    power and temperature (mean and max over the measured windows) and memory used (max), with the sample count."""
    metrics = {m for _, m in _GPU_SUMMARY}
    g = tele[tele.metric.isin(metrics)] if len(tele) and "metric" in tele else pd.DataFrame()
    if g.empty:
        return pd.DataFrame()
    keys = ["run_name", "device_name", *[c for c in _TELEMETRY_CONFIG if c in g], "device_index"]
    wide = (
        g.groupby([*keys, "metric"], dropna=False, sort=False)
        .value.agg(["mean", "max", "size"])
        .unstack("metric")
    )
    samples = wide["size"].max(axis=1).rename("samples")
    wide = wide[[c for c in _GPU_SUMMARY if c in wide.columns]]
    wide.columns = [_GPU_SUMMARY[c] for c in wide.columns]
    return wide.join(samples).reset_index().rename(columns={"device_index": "gpu"})


def telemetry_beside_published(tele: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's single nvidia-smi snapshots beside our GPU telemetry summarised per run, configuration and GPU
    (:func:`telemetry_summary`); the seed's table alone, labelled, when no run sampled a GPU."""
    ours = telemetry_summary(tele)
    pub = published.TELEMETRY_002.assign(source=f"published by {published.SEED_002}")
    if ours.empty:
        return pub.assign(
            note="no run of this analysis sampled a GPU (telemetry.csv): the published table alone"
        )
    ours = ours.rename(columns={"source": "measured_in"}).assign(source="ours: " + ours.run_name.astype(str))
    return pd.concat([pub, ours], ignore_index=True)
