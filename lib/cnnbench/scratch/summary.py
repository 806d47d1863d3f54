"""Tables and figures of experiment 05, read from its tidy CSVs (so they work on merged runs too)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from cnnbench import published, results
from cnnbench.plots import save

SPEED_GOALS = [  # (model, backend, reference, ratio of, goal): issue 10's speed goals on a 2-core CPU
    ("mnist_cnn", "numba_cpu", "torch_cpu", "throughput_img_s", 0.5),
    ("mnist_cnn", "numpy", "torch_cpu", "throughput_img_s", 0.2),
    ("mlp", "numpy", "torch_cpu", "step_s", 1.5),
]


def status(df: pd.DataFrame) -> pd.DataFrame:
    """Backends that did not run, with the reason (status unavailable, error, oom, unstable)."""
    bad = df[df.status != "ok"]  # the columns every 05 table declares
    return bad[results.table("backends").columns.split()].drop_duplicates().reset_index(drop=True)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per backend and network: throughput = images / synced time over every epoch but the first (the first
    carries first-call costs; with one epoch it is used), its 95% interval over epochs, accuracy, JIT time."""
    from cnnbench.measure.timing import ci95_half_width  # imports torch: not for a report built from disk

    rows = []
    ok = df[df.status == "ok"]
    keys = [k for k in ("run_name", "run") if k in ok.columns] + ["backend", "model"]  # runs stay apart
    for key, g in ok.groupby(keys, sort=False):
        g = g.sort_values("epoch")
        m = g.iloc[1:] if len(g) > 1 else g
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "device_name": g.device_name.iloc[0],
                "threads": g.threads.iloc[0],
                "epochs_or_blocks": len(g),
                "epoch_s_mean": m.epoch_s.mean(),
                "step_s": m.epoch_s.sum() / m.steps.sum(),
                "throughput_img_s": m.images.sum() / m.epoch_s.sum(),
                "throughput_ci95_img_s": ci95_half_width(list(m.images / m.epoch_s)),
                "first_epoch_s": g.epoch_s.iloc[0],
                "jit_s": g.jit_s.iloc[0],
                "final_train_loss": g.train_loss.iloc[-1],
                "final_test_accuracy": g.test_accuracy.iloc[-1],
                "max_test_accuracy": g.test_accuracy.max(),
            }
        )
    return pd.DataFrame(rows)


def speed_goals(summ: pd.DataFrame) -> pd.DataFrame:
    """Issue 10's goals: CNN throughput ratios to torch_cpu, and the MLP's step-time ratio (lower is better), each
    with its 95% interval: Fieller's of the two throughputs (their 95% intervals over epochs); a step-time ratio
    is the inverse throughput ratio times the ratio of images per step (throughput x step_s), so its interval is
    Fieller's of the reference's throughput over ours, scaled alike. ``met``: "met" where the whole interval meets
    the goal, "not met" where it misses it, else "undecided"; "no interval" where a rate has none."""
    from cnnbench.measure.reproducibility import ratio  # imports torch: not for a report built from disk

    rows = []
    for model, backend, ref, col, goal in SPEED_GOALS:
        ours, theirs = (summ[(summ.model == model) & (summ.backend == name)] for name in (backend, ref))
        if ours.empty or theirs.empty:
            continue
        o, t = ours.iloc[0], theirs.iloc[0]
        rates = o.throughput_img_s, o.throughput_ci95_img_s, t.throughput_img_s, t.throughput_ci95_img_s
        higher = col == "throughput_img_s"
        if higher:
            _, low, high = ratio(*rates[2:], *rates[:2])
        else:  # our step time over theirs: their throughput over ours, times our images per step over theirs
            scale = (o.step_s * o.throughput_img_s) / (t.step_s * t.throughput_img_s)
            low, high = (scale * v for v in ratio(*rates)[1:])
        sign = 1 if higher else -1  # the goal met where sign * (ratio - goal) >= 0
        worst, best = sorted(sign * (v - goal) for v in (low, high))
        met = "met" if worst >= 0 else "not met" if best < 0 else "undecided"
        row = dict(model=model, backend=backend, versus=ref, measure=col, ratio=float(o[col] / t[col]))
        row |= {"ratio_ci95_low": low, "ratio_ci95_high": high, "goal": f"{'>=' if higher else '<='} {goal}"}
        rows.append({**row, "met": "no interval" if pd.isna(low + high) else met})
    return pd.DataFrame(rows)


def gradcheck_table(gc: pd.DataFrame) -> pd.DataFrame:
    """Relative error of every tensor (rows) on every backend (columns), and whether each backend passed."""
    ok = gc[gc.status == "ok"]
    if ok.empty:
        return pd.DataFrame()
    table = ok.pivot_table(index=["model", "tensor"], columns="backend", values="rel_err", sort=False)
    passed = ok.groupby(["model", "backend"]).passed.all().unstack("backend")
    passed.index = pd.MultiIndex.from_product([passed.index, ["ALL PASSED"]], names=table.index.names)
    out = pd.concat([table.map(lambda v: f"{v:.1e}" if pd.notna(v) else ""), passed.astype(object)])
    models = list(dict.fromkeys(table.index.get_level_values(0)))  # each model's row after its own tensors
    return out.loc[[row for m in models for row in out.index if row[0] == m]]


def beside_seed_001(summ: pd.DataFrame) -> pd.DataFrame:
    """Our CNN throughput and accuracy beside seed 001's Table I (published by its file, other hardware)."""
    ours = summ[summ.model == "mnist_cnn"].set_index("backend")
    pub = published.BACKENDS_001.set_index("backend")
    cols = ["throughput_img_s", "epoch_s", "final_test_accuracy_pct"]
    ours = ours.assign(epoch_s=ours.epoch_s_mean, final_test_accuracy_pct=ours.final_test_accuracy * 100)
    out = pd.concat(
        [ours[cols].add_prefix("ours_"), pub[cols].add_prefix(f"published by {published.SEED_001}: ")], axis=1
    )
    # seed 001's Table I is the CNN: the MLP's (seed 004's) are not beside it
    return out.reindex(pub.index.union(ours.index, sort=False)).assign(model="mnist_cnn")[["model", *out]]


def op_kinds(ops: pd.DataFrame) -> pd.DataFrame:
    """Milliseconds per step by op kind (seed 004's Table 4 grouping), per backend and network."""
    ok = ops[ops.status == "ok"]
    return ok.pivot_table(index=["model", "op_kind"], columns="backend", values="median_ms", aggfunc="sum")


def beside_seed_004(ops: pd.DataFrame) -> pd.DataFrame:
    """The MLP's ms per step by op kind beside seed 004's Table 4 (published by its file, one unsynced run)."""
    kinds = op_kinds(ops)
    if "mlp" not in kinds.index.get_level_values(0):
        return pd.DataFrame()
    ours = kinds.loc["mlp"].add_prefix("ours_ms: ")
    pub = published.OPS_004.set_index("operation")[["cpu_ms", "gpu_ms"]].rename_axis("op_kind")
    pub.columns = [f"published by {published.SEED_004}: {c}" for c in ("numpy_ms", "cupy_ms")]  # CPU = NumPy
    return ours.join(pub, how="outer")


def forward_backward(ops: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's Table 3: the MLP's ms per step in forward, backward and update (sums of per-op medians, device
    synced per op), per backend, beside its published NumPy and CuPy figures."""
    ok = ops[(ops.status == "ok") & (ops.model == "mlp")]
    if ok.empty:
        return pd.DataFrame()
    ours = ok.pivot_table(index="phase", columns="backend", values="median_ms", aggfunc="sum")
    ours.loc["step"] = ours.sum()
    ours = ours.rename(index=lambda phase: f"{phase}_ms").add_prefix("ours: ")  # forward_ms ... step_ms
    rows = {"iteration": "step_ms", "forward": "forward_ms", "backward": "backward_ms"}  # total: TIMES_004
    pub = published.TIMES_004.set_index("what").loc[list(rows), ["cpu_ms", "gpu_ms"]].rename(index=rows)
    pub.columns = [f"published by {published.SEED_004}: {c}" for c in ("numpy", "cupy")]  # CPU = NumPy
    return ours.join(pub, how="outer")


def memory_table(mem: pd.DataFrame) -> pd.DataFrame:
    """Computed and measured MiB per component, per backend and network."""
    ok = mem[mem.status == "ok"]
    return ok.pivot_table(
        index=["model", "component"], columns="backend", values=["computed_mib", "measured_mib"], sort=False
    ).round(3)


# --- figures -------------------------------------------------------------------------------------------------


def figure_1(df: pd.DataFrame, path=None):
    """Seed 001's Figure 1 for the CNN: (a) time per epoch, (b) throughput per epoch, (c) test accuracy per
    epoch, (d) throughput per backend (images / synced time, first epoch excluded, 95% interval)."""
    cnn = df[(df.model == "mnist_cnn") & (df.status == "ok")]
    if cnn.empty:
        return None
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    order = list(dict.fromkeys(cnn.backend))  # side by side at each epoch: equal values never hide each other
    dodged = cnn.assign(
        epoch=cnn.epoch + cnn.backend.map({b: 0.1 * (i - (len(order) - 1) / 2) for i, b in enumerate(order)})
    )
    for ax, col, label, scale in [
        (axes[0, 0], "epoch_s", "time per epoch (s)", "log"),
        (axes[0, 1], "throughput_img_s", "throughput (images/s)", "log"),
        (axes[1, 0], "test_accuracy", "test accuracy (fraction)", "linear"),
    ]:
        sns.lineplot(data=dodged, x="epoch", y=col, hue="backend", style="backend", markers=True, ax=ax)
        ax.set(
            ylabel=label, xlabel="epoch", xlim=(cnn.epoch.min() - 0.5, cnn.epoch.max() + 0.5), yscale=scale
        )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    s = summarize(cnn)
    axes[1, 1].bar(s.backend, s.throughput_img_s, yerr=s.throughput_ci95_img_s.fillna(0), capsize=3)
    axes[1, 1].set(
        ylabel="throughput (images/s)",
        ylim=(0, None),  # bars on a linear axis from zero
        title="images / synced time, epochs 2.. (95% interval)" if cnn.epoch.max() > 1 else "epoch 1",
    )
    axes[1, 1].tick_params(axis="x", rotation=30)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    for ax in axes.flat[:3]:  # one legend for the three line panels, below them, over no line
        ax.get_legend().remove()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), title="backend")
    fig.suptitle(f"MNIST CNN, batch {int(cnn.batch_size.iloc[0])}, full backprop on every backend")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save(fig, path)


def convergence(df: pd.DataFrame, path=None):
    """Seed 004's convergence figure for the MLP: training accuracy and loss against steps, per backend."""
    mlp = df[(df.model == "mlp") & (df.status == "ok")]
    if mlp.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    sns.lineplot(data=mlp, x="epoch", y="train_accuracy", hue="backend", style="backend", ax=axes[0])
    axes[0].set(xlabel="full-batch steps", ylabel="training accuracy (fraction)")
    sns.lineplot(data=mlp, x="epoch", y="train_loss", hue="backend", style="backend", ax=axes[1])
    axes[1].set(xlabel="full-batch steps", ylabel="training loss (cross-entropy)", yscale="log")
    fig.tight_layout()
    return save(fig, path)


def op_breakdown(ops: pd.DataFrame, path=None):
    """Seed 004's op breakdown for both networks: each op kind's share of a backend's step (ms per step summed
    over synced per-op medians), stacked, that step's ms under its name: a 1 ms step as visible as a 100 ms one."""
    kinds = op_kinds(ops)
    if kinds.empty:
        return None
    models = list(dict.fromkeys(kinds.index.get_level_values(0)))
    every = sorted(set(kinds.index.get_level_values(1)))  # one colour per op kind, the same in every panel
    colour = dict(zip(every, plt.get_cmap("tab10").colors * (len(every) // 10 + 1), strict=False))
    width = max(6, 1.5 * kinds.shape[1])  # inches per panel: a backend's name and time fit under its bar
    fig, axes = plt.subplots(1, len(models), figsize=(width * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        k = kinds.loc[model].T.fillna(0)
        k = k.loc[:, (k != 0).any()]  # kinds this network has
        share = k.div(k.sum(axis=1), axis=0) * 100
        names = [f"{b}\n{t:,.2f} ms" for b, t in k.sum(axis=1).items()]
        bottom = np.zeros(len(k))
        for kind in k.columns:
            ax.bar(names, share[kind], bottom=bottom, label=kind, color=colour[kind])
            bottom += share[kind].to_numpy()
        ax.set(ylabel="share of the training step (%)", title=f"{model} (ms per step, median, under each)")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside: over no bar
    fig.tight_layout()
    return save(fig, path)
