"""Transfer learning (06, seed 002): ``check(run)`` (where the weights come from, before any work) and
``finetune(run)``: a torchvision classifier with a new head fine-tuned over lr x batch size on every present device
-> transfer.csv (per epoch: losses, validation accuracy, synced epoch time); its tables, plots and telemetry."""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import time
import urllib.request
from itertools import product
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import psutil
import torch
import torchvision
from matplotlib.ticker import MaxNLocator
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset
from torchvision import datasets as tvd
from torchvision import transforms as T

from cnnbench import data, devices, knobs, models, progress, published, results
from cnnbench.measure import engine, flops
from cnnbench.plots import experiment_timeline, save


def check(run) -> str:
    """Before any work: the one line on where the weights come from, or a one-line TransferError."""
    p = run.params
    devices_here = [d.type for d in present_devices(p.transfer_devices, run.device)]
    line = check_weights(p.transfer_model, p.pretrained)
    print(line)
    print(
        f"fine-tuning {p.transfer_model} ({p.optimizer}) on {p.transfer_dataset} at {p.transfer_image_size} px, "
        f"lr {p.transfer_lrs} x batch {p.transfer_batch_sizes}, {p.transfer_epochs} epochs on {', '.join(devices_here)}"
    )
    return line


def finetune(run) -> pd.DataFrame:
    """The lr x batch-size grid on every present device of ``transfer_devices`` -> transfer.csv."""
    run_grid(run, log=lambda *_: None)
    return results.read(run.dir, "transfer")


def telemetry(run, path=None):
    """The series sampled during fine-tuning (transfer_telemetry.csv), over time, one panel per metric."""
    return experiment_timeline(results.read(run.dir, "transfer_telemetry"), "transfer", path)


CHECKPOINT_DIR = Path(torch.hub.get_dir()) / "checkpoints"


class TransferError(ValueError):
    """Bad input for the transfer-learning run: the message is one line."""


# --- model ---------------------------------------------------------------------------------------------------


def weights_for(model: str):
    """torchvision's default ImageNet weights enum of ``model`` (None when it has none)."""
    try:
        return torchvision.models.get_model_weights(model).DEFAULT
    except (ValueError, KeyError):
        return None


def weights_reachable(url: str, timeout_s: float = 5.0) -> bool:
    """True when the weights server answers (a HEAD request, no download)."""
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s).close()
        return True
    except Exception:  # noqa: BLE001 - any network failure means "not reachable"
        return False


def check_weights(model: str, pretrained: bool, reachable=weights_reachable) -> str:
    """Where the initial weights come from, in one line; :class:`TransferError` where they cannot be had."""
    if not pretrained:
        return f"pretrained: false -> {model} fine-tuned from random initialisation (no ImageNet weights)"
    w = weights_for(model)
    if w is None:
        raise TransferError(
            f"key 'pretrained': torchvision has no ImageNet weights for '{model}'; set pretrained: false"
        )
    path = CHECKPOINT_DIR / Path(w.url).name  # where torch.hub keeps it once downloaded
    if path.is_file():
        return f"pretrained: ImageNet weights of {model} from {path}"
    if not reachable(w.url):
        raise TransferError(
            f"key 'pretrained': ImageNet weights of {model} are not in {CHECKPOINT_DIR} and "
            f"{w.url} cannot be reached (offline?); set pretrained: false to start from random weights"
        )
    return f"pretrained: ImageNet weights of {model} downloaded from {w.url}"


def build(model: str, num_classes: int, pretrained: bool, freeze_backbone: bool = False) -> nn.Module:
    """``model`` with ImageNet weights (when ``pretrained``) or random ones, its classifier's last Linear or
    Conv2d swapped for a fresh one of ``num_classes`` outputs."""
    if pretrained:
        net = torchvision.models.get_model(model, weights=weights_for(model))
    else:
        net = models.build(model, num_classes=models.spec(model).reference_classes)
    name, layer = [(n, m) for n, m in net.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d)) and n][-1]
    if isinstance(layer, nn.Linear):
        head = nn.Linear(layer.in_features, num_classes)
    else:
        head = nn.Conv2d(layer.in_channels, num_classes, layer.kernel_size, layer.stride)
    parent, _, attr = name.rpartition(".")
    setattr(net.get_submodule(parent), attr, head)
    if freeze_backbone:
        net.requires_grad_(False)
        head.requires_grad_(True)
    return net


# --- data ----------------------------------------------------------------------------------------------------


class TwoClassImages(TensorDataset):
    """A learnable offline stand-in for cats vs dogs: class 0 brighter on the left, class 1 on the right, by a
    ramp a twelfth of the pixel noise (no single pixel tells them apart). Deterministic from ``seed``."""

    def __init__(self, n: int, size: int, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 2, (n,), generator=gen)
        ramp = torch.linspace(-1, 1, size).view(1, 1, size).expand(3, size, size) / 12
        self.images = torch.randn(n, 3, size, size, generator=gen)
        self.images += torch.where(self.labels.view(-1, 1, 1, 1) == 0, -ramp, ramp)
        super().__init__(self.images, self.labels)


def transforms(size: int, train: bool):
    """ImageNet-style preprocessing at ``size``: random resized crop + flip for training, resize + centre crop."""
    crop = [T.Resize(int(round(size * 256 / 224)), antialias=True), T.CenterCrop(size)]
    crop = [T.RandomResizedCrop(size, antialias=True), T.RandomHorizontalFlip()] if train else crop
    rgb = operator.methodcaller("convert", "RGB")  # picklable, for loader workers
    return T.Compose([T.Lambda(rgb), *crop, T.ToTensor(), T.Normalize(data.MEAN, data.STD)])


def _subset(ds: Dataset, n: int, seed: int) -> Dataset:
    if not n or n >= len(ds):
        return ds
    idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(seed))[:n]
    return Subset(ds, idx.tolist())


def _imagefolder(root: Path, size: int, seed: int) -> tuple[Dataset, Dataset]:
    """root/train + root/val (or root/test); a single folder of class folders is split 80/20."""
    splits = [root / s for s in ("train", "val", "test") if (root / s).is_dir()]
    if len(splits) >= 2:
        return tuple(tvd.ImageFolder(str(s), transform=transforms(size, s == splits[0])) for s in splits[:2])
    train_all, val_all = (tvd.ImageFolder(str(root), transform=transforms(size, t)) for t in (True, False))
    order = torch.randperm(len(train_all), generator=torch.Generator().manual_seed(seed)).tolist()
    cut = max(1, len(order) // 5)
    return Subset(train_all, order[cut:]), Subset(val_all, order[:cut])


def datasets(p) -> tuple[Dataset, Dataset, int]:
    """(train, validation, classes) of the run's transfer dataset, cut to the requested sizes."""
    size, root = p.transfer_image_size, Path(p.transfer_data_path).expanduser()
    try:
        if p.transfer_dataset == "synthetic":
            train = TwoClassImages(p.transfer_train_images or 512, size, p.seed)
            val = TwoClassImages(p.transfer_val_images or 128, size, p.seed + 1)
        elif p.transfer_dataset == "oxford_pet":
            kw = dict(root=str(root), target_types="binary-category", download=p.download)
            train = tvd.OxfordIIITPet(split="trainval", transform=transforms(size, True), **kw)
            val = tvd.OxfordIIITPet(split="test", transform=transforms(size, False), **kw)
        else:
            train, val = _imagefolder(root, size, p.seed)
    except (RuntimeError, OSError) as err:
        raise TransferError(
            f"transfer_dataset {p.transfer_dataset} at '{root}': {err}".splitlines()[0]
        ) from None
    classes = len(getattr(train, "dataset", train).classes) if p.transfer_dataset == "imagefolder" else 2
    return (
        _subset(train, p.transfer_train_images, p.seed),
        _subset(val, p.transfer_val_images, p.seed + 1),
        classes,
    )


# --- training ------------------------------------------------------------------------------------------------


def train_epoch(work, loader) -> tuple[float, int, float]:
    """(synced seconds, images, mean loss) of one training epoch; :class:`engine.UnstableLoss` on a NaN."""
    work.model.train()
    total, n, steps = torch.zeros((), device=work.device), 0, 0
    work.backend.synchronize()
    start = time.perf_counter()
    for x, y in loader:
        work.train_step(work.to_device(x, y))
        total += work.last_loss
        n, steps = n + x.shape[0], steps + 1
    work.backend.synchronize()
    seconds, mean = time.perf_counter() - start, float(total) / max(steps, 1)
    if not math.isfinite(mean):
        raise engine.UnstableLoss(f"loss became {mean}")
    return seconds, n, mean


@torch.inference_mode()
def evaluate(work, loader) -> tuple[float, float]:
    """(accuracy 0..1, mean loss) of ``work``'s model over ``loader``."""
    work.model.eval()
    correct, total, n = 0, 0.0, 0
    for x, y in loader:
        x, y = x.to(work.device), y.to(work.device)
        out = models.logits(work.model(x))
        total += float(work.loss_fn(out, y)) * x.shape[0]
        correct += int((out.argmax(1) == y).sum())
        n += x.shape[0]
    return correct / max(n, 1), total / max(n, 1)


# --- the grid ------------------------------------------------------------------------------------------------


def present_devices(specs: list[str], fallback: torch.device) -> list[torch.device]:
    """The devices of ``specs`` present on this machine, in order (``fallback`` when none is)."""
    found = []
    for spec in specs:
        with contextlib.suppress(devices.DeviceError):
            found.append(devices.resolve(spec))
    return list(dict.fromkeys(found)) or [fallback]


def fit(p, device, lr: float, bs: int, sets, base: dict, file) -> None:
    """Fine-tune one grid point (its configuration's Workload, as in 02), a row per epoch to ``file``."""
    train_ds, val_ds, classes = sets
    setting = knobs.for_params(p, batch_size=bs)
    cfg = engine.Config(p.transfer_model, "train", p.transfer_image_size, classes, setting=setting)
    net = functools.partial(build, p.transfer_model, classes, p.pretrained, p.transfer_freeze_backbone)
    with engine.Workload(cfg, device, p, optimizer=p.optimizer, model=net, lr=lr) as work:
        pin = work.backend.pin(p.pin_memory)
        kw = dict(num_workers=p.workers, persistent_workers=p.workers > 0, pin_memory=pin)
        train_dl, val_dl = (
            DataLoader(ds, bs, shuffle=train, generator=torch.Generator().manual_seed(p.seed), **kw)
            for ds, train in ((train_ds, True), (val_ds, False))
        )
        elapsed = 0.0
        for epoch in range(1, p.transfer_epochs + 1):
            seconds, n, train_loss = train_epoch(work, train_dl)
            elapsed += seconds
            if not p.pretrained:  # random weights' batch-norm statistics, recomputed over the images
                torch.optim.swa_utils.update_bn(train_dl, work.model, work.device)
            acc, val_loss = evaluate(work, val_dl)
            row = dict(epoch=epoch, timestamp=engine.now(), status="ok", error="", train_loss=train_loss)
            row |= dict(val_loss=val_loss, val_accuracy=acc, epoch_time_s=seconds)
            row["throughput_img_s"] = n / seconds
            row |= dict(elapsed_train_s=elapsed, rss_mib=psutil.Process().memory_info().rss / 2**20)
            file.append({**base, **row, **work.backend.peak_memory_mib()})


# share of the device's memory a grid point may plan to use (the allocator, cuDNN workspaces)
MEMORY_HEADROOM = 0.9


def oversized(batch_sizes: list[int], per_image: int, fixed: int, memory: int) -> dict[int, str]:
    """The batch sizes whose planned memory exceeds ``MEMORY_HEADROOM`` of ``memory`` bytes, with the reason."""
    gib, out = 2**30, {}
    for bs in batch_sizes:
        need = bs * per_image + fixed
        if memory and need > MEMORY_HEADROOM * memory:
            out[bs] = (
                f"needs ~{need / gib:.1f} GiB ({bs} x {per_image / 2**20:.0f} MiB of saved activations + "
                f"{fixed / gib:.2f} GiB of weights, gradients and Adam state), more than "
                f"{MEMORY_HEADROOM:.0%} of this device's {memory / gib:.1f} GiB: skipped"
            )
    return out


def run_grid(run, sampler_cls=None, log=print) -> None:
    """Every (device, batch size, lr) grid point of the run not already finished in transfer.csv."""
    from cnnbench.measure import telemetry  # here: this package's telemetry() is 06's plot

    p, sampler_cls = run.params, sampler_cls or telemetry.Sampler
    log(check_weights(p.transfer_model, p.pretrained))
    sets = datasets(p)
    table = results.table("transfer")
    file = table.file(run.dir)
    here = [devices.backend(d) for d in present_devices(p.transfer_devices, run.device)]  # passed down
    grid = list(product(p.transfer_batch_sizes, p.transfer_lrs))
    # a grid point's key (the table's): its transfer_<key> or <key> param, or as it runs here
    keys = [k for k in table.plan_columns if k != results.files.HOST]
    fixed = {k: getattr(p, f"transfer_{k}" if hasattr(p, f"transfer_{k}") else k, None) for k in keys}
    # the images each epoch uses (0 asks for every image)
    fixed |= dict(threads=torch.get_num_threads(), train_images=len(sets[0]), val_images=len(sets[1]))

    def point(b, lr, bs) -> dict:
        return {**fixed, "device_kind": b.kind, "lr": lr, "batch_size": bs, "pin_memory": b.pin(p.pin_memory)}

    planned = [point(b, lr, bs) for b in here for bs, lr in grid]
    table.plan(run.dir, planned, "transfer")
    kept = sum(file.done({**c, "epoch": p.transfer_epochs}) for c in planned)
    for b in here:
        too_big = {}  # a grid point that cannot fit (flops.training_memory) is a row saying so
        if memory := b.total_memory_bytes():  # counted only for a device with its own memory
            cx = flops.counted(p.transfer_model, p.transfer_image_size, sets[2], with_fvcore=False)
            too_big = oversized(p.transfer_batch_sizes, *flops.training_memory(cx), memory)
        about = {"device_name": b.name(), "classes": sets[2], "target_accuracy": p.transfer_target_accuracy}
        for bs, lr in grid:
            base = {**point(b, lr, bs), **about}
            if file.done({**base, "epoch": p.transfer_epochs}):
                continue
            conf = f"{b.kind} lr={lr:g} bs={bs}"
            if bs in too_big:
                log(f"transfer {conf}: {too_big[bs]}")
                skipped = {"status": "skipped", "error": too_big[bs]}
                file.append({**base, "epoch": 0, "timestamp": engine.now(), **skipped})
                continue
            progress.note(f"transfer: {p.transfer_model} {conf}, {p.transfer_epochs} epochs")
            b.reset_peak_memory()
            with sampler_cls(b, p.telemetry_interval_s) as sampler:
                try:
                    fit(p, b, lr, bs, sets, base, file)
                except Exception as err:  # noqa: BLE001 - a failed grid point is a row, the grid goes on
                    file.append({**base, "epoch": 0, "timestamp": engine.now(), **engine.failure(err, b)})
            telemetry.record(run.dir, sampler.series(), "transfer", conf, b.kind, base["device_name"])
    progress.resumed(kept, len(planned), file.path.name, "grid points")


GRID = ["device_kind", "device_name", "model", "image_size", "optimizer", "pretrained", "lr", "batch_size"]


def time_to_target(df: pd.DataFrame, target: float | None = None) -> pd.DataFrame:
    """Per grid point: epochs, final and best accuracy, images/s, training time to ``target`` (NaN: never)."""
    ok = df[df.status == "ok"]
    rows = []
    for key, g in ok.groupby(GRID, sort=False):
        g = g.sort_values("epoch")
        t = target if target is not None else float(g.target_accuracy.iloc[0])
        hit = g[g.val_accuracy >= t]
        row = dict(zip(GRID, key, strict=True)) | dict(epochs=int(g.epoch.max()))
        row |= dict(final_val_accuracy=g.val_accuracy.iloc[-1], best_val_accuracy=g.val_accuracy.max())
        row |= dict(throughput_img_s=g.train_images.sum() / g.epoch_time_s.sum())
        row |= dict(epoch_time_mean_s=g.epoch_time_s.mean(), target_accuracy=t)
        row["epoch_reached"] = int(hit.epoch.iloc[0]) if len(hit) else math.nan
        rows.append(row | {"time_to_target_s": hit.elapsed_train_s.iloc[0] if len(hit) else math.nan})
    return pd.DataFrame(rows)


def learning_curves(df: pd.DataFrame, path: str | Path | None = None):
    """Training loss per epoch and validation accuracy against elapsed training time, per grid point."""
    ok = df[df.status == "ok"]
    if ok.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(13, 4))
    for key, g in ok.groupby(["device_kind", "lr", "batch_size"], sort=False):
        label = f"{key[0]} lr={key[1]:g} bs={key[2]}"
        axes[0].plot(g.epoch, g.train_loss, marker="o", label=label)
        axes[1].plot(g.elapsed_train_s, 100 * g.val_accuracy, marker="o", label=label)
    axes[0].set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    axes[0].set_xlim(ok.epoch.min() - 0.5, ok.epoch.max() + 0.5)  # a single epoch too at a whole epoch
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole epochs, never epoch 1.2
    axes[1].set(xlabel="elapsed training time (s)", ylabel="validation accuracy (%)", xlim=(0, None))
    target = ok.target_accuracy.iloc[0]
    axes[1].axhline(100 * target, ls="--", color="grey", lw=1, label=f"target {100 * target:g}%")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the panel, over no point
    fig.tight_layout()
    return save(fig, path, dpi=110)


def beside_seed(ttt: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's training times (and implied images/s) beside our grid point of the same device kind and batch
    size (any, where the seed states none) whose validation accuracy went highest: its lr, accuracy, images/s."""
    seed, epochs = published.SEED_002, published.setup("002")["epochs"]
    images = epochs * published.setup("002")["train_images"]
    rows = []
    for r in published.TIMES_002.itertuples():
        kind, seconds = r.device_class, r.train_20_epochs_h * 3600
        bs = None if pd.isna(r.batch_size) else int(r.batch_size)
        ours = ttt[(ttt.device_kind == kind) & ((ttt.batch_size == bs) if bs else True)] if len(ttt) else ttt
        best = ours.loc[ours.best_val_accuracy.idxmax()] if len(ours) else pd.Series(dtype=object)
        rates = {"lr": math.nan, "best_val_accuracy": math.nan, "throughput_img_s": math.nan}
        what = {"device_name": "", "model": "", "image_size": ""}
        row = {"device_kind": kind, "batch_size": bs if bs else "not stated"}
        row[f"published by {seed}: {epochs}-epoch training (h)"] = seconds / 3600
        row[f"published by {seed}: implied img/s"] = images / seconds
        rows.append(row | {f"ours: {c}": best.get(c, empty) for c, empty in (rates | what).items()})
    return pd.DataFrame(rows)
