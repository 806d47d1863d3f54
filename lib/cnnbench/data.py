"""Data: synthetic images shaped like the configured dataset (the embedded default) and real datasets.

Real datasets load from a folder given in the params: Tiny-ImageNet (including its validation annotations),
ImageNette, MNIST, CIFAR-10 and any ImageFolder. The public ones download over https with checksums when asked
(``download: true``). Extraction refuses, before writing anything, an archive with a member that would land
outside the target folder (absolute paths, ``..``) or that is a link or device, whatever its checksum.
"""

from __future__ import annotations

import contextlib
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets as tvd
from torchvision import transforms as T
from torchvision.datasets.folder import default_loader
from torchvision.datasets.utils import download_url

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class DataError(ValueError):
    """A dataset that is missing, malformed, or does not match the parameters."""


@dataclass(frozen=True)
class Shape:
    """What a dataset looks like to a model."""

    channels: int
    size: int
    classes: int


SHAPES = {
    "tiny_imagenet": Shape(3, 64, 200),
    "imagenette": Shape(3, 160, 10),
    "mnist": Shape(1, 28, 10),
    "cifar10": Shape(3, 32, 10),
}

# Public archives: url, md5. Tests point these at a loopback server.
TINY_IMAGENET_URL = ("https://cs231n.stanford.edu/tiny-imagenet-200.zip", "90528d7ca1a48142e341f4ef8d21d0de")


class SyntheticImages(Dataset):
    """``n`` deterministic random images (uint8, like decoded JPEGs) with labels, normalised on access."""

    def __init__(self, n: int, channels: int, size: int, classes: int, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (n, channels, size, size), dtype=torch.uint8, generator=gen)
        self.labels = torch.randint(0, classes, (n,), generator=gen)
        self.mean = torch.tensor(MEAN[:channels] if channels == 3 else (0.5,)).view(-1, 1, 1)
        self.std = torch.tensor(STD[:channels] if channels == 3 else (0.5,)).view(-1, 1, 1)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return (self.images[i].float() / 255 - self.mean) / self.std, self.labels[i]


class TinyImageNet(Dataset):
    """Tiny-ImageNet-200: ``train/<wnid>/images/*.JPEG``; ``val/images`` labelled by ``val/val_annotations.txt``."""

    def __init__(self, root: str | Path, split: str = "train", transform=None):
        root = Path(root)
        if (root / "tiny-imagenet-200").is_dir():
            root = root / "tiny-imagenet-200"
        wnids_file = root / "wnids.txt"
        if not wnids_file.is_file():
            raise DataError(f"{root}: not a Tiny-ImageNet folder (wnids.txt missing)")
        self.wnids = [w.strip() for w in wnids_file.read_text().split() if w.strip()]
        self.class_to_idx = {w: i for i, w in enumerate(self.wnids)}
        self.transform = transform
        if split == "train":
            self.samples = [
                (p, self.class_to_idx[wnid])
                for wnid in self.wnids
                for p in sorted((root / "train" / wnid / "images").glob("*.JPEG"))
            ]
        elif split == "val":
            annotations = root / "val" / "val_annotations.txt"
            if not annotations.is_file():
                raise DataError(f"{root}: val/val_annotations.txt missing")
            self.samples = []
            for line in annotations.read_text().splitlines():
                fields = line.split("\t")
                if len(fields) >= 2:
                    self.samples.append((root / "val" / "images" / fields[0], self.class_to_idx[fields[1]]))
        else:
            raise DataError(f"unknown split '{split}' (train or val)")
        if not self.samples:
            raise DataError(f"{root}: no {split} images found")

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, label = self.samples[i]
        image = default_loader(str(path))
        return (self.transform(image) if self.transform else image), label


_LAYOUTS = {
    "tiny_imagenet": ("wnids.txt, train/<wnid>/images/", lambda r: any(r.glob("wnids.txt")) or any(r.glob("*/wnids.txt"))),
    "imagenette": ("imagenette2-160/train/", lambda r: (r / "imagenette2-160" / "train").is_dir()),
    "mnist": ("MNIST/raw/", lambda r: (r / "MNIST" / "raw").is_dir()),
    "cifar10": ("cifar-10-batches-py/", lambda r: (r / "cifar-10-batches-py").is_dir()),
    "imagefolder": ("<class>/<image> or train/<class>/<image>",
                    lambda r: any(d.is_dir() and any(d.iterdir()) for d in ((r / "train") if (r / "train").is_dir() else r).iterdir())),
}


def layout_problem(name: str, root: str | Path) -> str:
    """Why the folder ``root`` does not hold dataset ``name`` (empty, or another layout), or "" if it looks
    right. Cheap: looks at a few paths, reads no image."""
    root = Path(root).expanduser()
    if not root.is_dir():
        return f"'{root}' is not a folder"
    if not any(root.iterdir()):
        return f"folder '{root}' is empty (set download: true to fetch {name}, or point data_path at the data)"
    expected, looks_right = _LAYOUTS.get(name, ("", lambda r: True))
    if not looks_right(root):
        return f"folder '{root}' does not look like {name}: expected {expected} inside it"
    return ""


def _unsafe(name: str) -> bool:
    path = PurePosixPath(name.replace("\\", "/"))
    return path.is_absolute() or ".." in path.parts or (len(name) > 1 and name[1] == ":")


def check_archive(archive: str | Path) -> None:
    """Raise :class:`DataError` if any member of the zip or tar ``archive`` would land outside the folder it is
    extracted into (absolute path, ``..``) or is a link or a device: the whole archive is refused."""
    archive = Path(archive)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            bad = [i.filename for i in zf.infolist() if _unsafe(i.filename) or (i.external_attr >> 16) & 0o170000 == 0o120000]
    else:
        with tarfile.open(archive) as tf:
            bad = [m.name for m in tf.getmembers() if _unsafe(m.name) or not (m.isfile() or m.isdir())]
    if bad:
        raise DataError(f"{archive.name}: refused, member '{bad[0]}' would land outside the target folder or is a "
                        f"link ({len(bad)} such members)")


def safe_extract(archive: str | Path, target: str | Path) -> Path:
    """Extract ``archive`` into ``target`` after :func:`check_archive` accepted every member."""
    check_archive(archive)
    target = Path(target)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(target)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(target, filter="data")
    return target


def _files_and_folders_only(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    if not (member.isfile() or member.isdir()) or _unsafe(member.name):
        raise tarfile.FilterError(f"refused archive member '{member.name}' (outside the target folder or a link)")
    return tarfile.data_filter(member, dest)


@contextlib.contextmanager
def _safe_tar_extraction():
    """torchvision's own downloads (ImageNette, CIFAR-10) extract tar members through the strict filter."""
    previous = tarfile.TarFile.extraction_filter
    tarfile.TarFile.extraction_filter = staticmethod(_files_and_folders_only)
    try:
        yield
    finally:
        tarfile.TarFile.extraction_filter = previous


def download_tiny_imagenet(root: str | Path) -> Path:
    url, md5 = TINY_IMAGENET_URL
    root = Path(root)
    download_url(url, str(root), md5=md5)
    return safe_extract(root / Path(url).name, root)


def transforms_for(channels: int, size: int, train: bool):
    """Tiny-ImageNet-style preprocessing at ``size``: random crop + flip for training, centre crop for val."""
    mean, std = (MEAN, STD) if channels == 3 else ((0.5,), (0.5,))
    head = [T.Grayscale(num_output_channels=channels)] if channels in (1, 3) else []
    if train:
        crop = [T.RandomResizedCrop(size, scale=(0.35, 1.0), antialias=True), T.RandomHorizontalFlip()]
    else:
        crop = [T.Resize(size, antialias=True), T.CenterCrop(size)]
    return T.Compose([*head, *crop, T.ToTensor(), T.Normalize(mean, std)])


def open_dataset(name: str, root: str | Path, split: str, channels: int, size: int, download: bool = False) -> Dataset:
    """A real dataset split with the model's channels and resolution. Raises :class:`DataError`."""
    root = Path(root).expanduser()
    train = split == "train"
    tf = transforms_for(channels, size, train)
    if not root.exists() and not download:
        raise DataError(f"dataset folder '{root}' does not exist (set download: true to fetch {name})")
    try:
        with _safe_tar_extraction():
            return _open(name, root, split, tf, download)
    except (RuntimeError, FileNotFoundError, OSError, tarfile.TarError, zipfile.BadZipFile) as err:
        raise DataError(f"{name} at '{root}': {err}") from None


def _open(name: str, root: Path, split: str, tf, download: bool) -> Dataset:
    train = split == "train"
    if name == "tiny_imagenet":
        if download and not any(root.glob("**/wnids.txt")):
            download_tiny_imagenet(root)
        return TinyImageNet(root, split, tf)
    if name == "imagenette":
        return tvd.Imagenette(str(root), split=split, size="160px", download=download and not _has_imagenette(root), transform=tf)
    if name == "mnist":
        return tvd.MNIST(str(root), train=train, download=download, transform=tf)
    if name == "cifar10":
        return tvd.CIFAR10(str(root), train=train, download=download, transform=tf)
    if name == "imagefolder":
        folder = root / split if (root / split).is_dir() else root
        return tvd.ImageFolder(str(folder), transform=tf)
    raise DataError(f"unknown dataset '{name}'")


def _has_imagenette(root: Path) -> bool:
    return (root / "imagenette2-160").is_dir()


def num_classes(ds: Dataset) -> int:
    if isinstance(ds, TinyImageNet):
        return len(ds.wnids)
    if isinstance(ds, tvd.Imagenette):
        return len(ds.wnids)
    return len(getattr(ds, "classes", [])) or int(max(int(y) for _, y in ds)) + 1


def synthetic_for(model_channels: int, size: int, classes: int, n: int, seed: int = 0) -> SyntheticImages:
    return SyntheticImages(n, model_channels, size, classes, seed)


def loader(ds: Dataset, batch_size: int, workers: int, pin_memory: bool, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A DataLoader as the seeds ran it: shuffled, ``workers`` processes, pinned memory when asked."""
    return DataLoader(
        ds,
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=workers,
        pin_memory=pin_memory,
        drop_last=True,
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(seed),
    )


def cycle(dl: DataLoader) -> Iterator:
    """Batches forever, starting a new epoch when one ends."""
    while True:
        yield from dl
