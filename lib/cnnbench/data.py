"""Data: synthetic images, and real ones from a folder (Tiny-ImageNet, ImageNette, MNIST, CIFAR-10, any
ImageFolder), checked up front and downloaded when asked (an archive member outside the target: refused)."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import struct
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets as tvd
from torchvision import transforms as T
from torchvision.datasets.folder import default_loader
from torchvision.datasets.utils import download_url

from cnnbench import paths

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class DataError(ValueError):
    """A dataset that is missing, malformed, or does not match the parameters."""


CLASSES = {"tiny_imagenet": 200, "imagenette": 10, "mnist": 10, "cifar10": 10}  # each public dataset's own

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
    """Tiny-ImageNet-200 (train/<wnid>/images/, val/ by val_annotations.txt); DataError naming a gap."""

    def __init__(self, root: str | Path, split: str = "train", transform=None):
        root = Path(root)
        base, self.transform = _tiny_base(root), transform
        self.classes = _tiny_wnids(base) if (base / "wnids.txt").is_file() else []
        if not self.classes:
            found = sorted(p.parent for p in root.glob("*/wnids.txt"))
            where = f"; it is in '{found[0].name}/': point data_path at '{found[0]}'" if found else ""
            raise DataError(
                f"folder '{root}' does not look like tiny_imagenet: expected wnids.txt, train/<wnid>/images/ "
                f"inside it (wnids.txt missing or empty{where})"
            )
        if split == "train":
            found = {w: sorted((base / "train" / w / "images").glob("*.JPEG")) for w in self.classes}
            if missing := [w for w, images in found.items() if not images]:
                raise DataError(f"train/{missing[0]}/images/ in '{base}' is missing or holds no .JPEG")
            self.samples = [(p, i) for i, images in enumerate(found.values()) for p in images]
        else:
            annotations = base / "val" / "val_annotations.txt"
            if not annotations.is_file():
                raise DataError(f"'{base}' has no val/val_annotations.txt (the labels of val/images/)")
            index, self.samples = {w: i for i, w in enumerate(self.classes)}, []
            for i, line in enumerate(annotations.read_text(errors="replace").splitlines(), 1):
                if len(fields := line.split("\t")) < 2:
                    continue
                if fields[1] not in index:
                    raise DataError(f"'{annotations}' line {i}: class '{fields[1][:40]}' is not in wnids.txt")
                self.samples.append((base / "val" / "images" / fields[0], index[fields[1]]))

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, label = self.samples[i]
        image = default_loader(str(path))
        return (self.transform(image) if self.transform else image), label


IMAGE_EXTENSIONS = tuple(".jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp".split())  # ImageFolder's
MNIST_FILES = {  # split -> (images file, labels file) in MNIST/raw/, as torchvision reads them
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "val": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
CIFAR10_FILES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta")
NEEDS = {  # what a dataset's folder must hold, as torchvision reads it
    "imagenette": ("imagenette2-160/train", "imagenette2-160/val"),
    "cifar10": tuple(f"cifar-10-batches-py/{f}" for f in CIFAR10_FILES),
    "mnist": tuple(f"MNIST/raw/{f}" for pair in MNIST_FILES.values() for f in pair),
}


def layout_problem(name: str, root: str | Path) -> str:
    """Why ``root`` does not hold dataset ``name`` as :func:`open_dataset` reads it, or "" (no image read)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        return f"'{root}' is not a folder"
    if why := _unwalkable(root):
        return why
    if not any(root.iterdir()):  # an image folder has nothing to download it from
        fetch = "" if name == "imagefolder" else f"set download: true to fetch {name}, or "
        return f"folder '{root}' is empty ({fetch}point data_path at the data)"
    if missing := [n for n in NEEDS.get(name, ()) if not (root / n).exists()]:
        more = f" ({len(missing)} missing)" if len(missing) > 1 else ""
        return f"folder '{root}' does not look like {name}: expected {missing[0]} inside it{more}"
    try:
        if name == "tiny_imagenet":
            TinyImageNet(root, "train"), TinyImageNet(root, "val")
        raw = root / "MNIST" / "raw"  # each split's two idx files valid (:func:`_idx`) and agreeing
        for images, labels in MNIST_FILES.values() if name == "mnist" else ():
            if (n := _idx(raw / images, True)) != (m := _idx(raw / labels, False)):
                raise DataError(f"'{raw / images}' holds {n} images but '{raw / labels}' {m} labels")
    except DataError as err:
        return str(err)
    return _image_folder_problem(root) if name == "imagefolder" else ""


def _unwalkable(root: Path) -> str:
    """What in ``root`` a walk or read never ends (a link to a folder above, a FIFO, a device), or ""."""
    stack = [(root, frozenset())]
    while stack:
        folder, above = stack.pop()
        here = (folder.stat().st_dev, folder.stat().st_ino)
        if here in above:
            return f"'{folder}' links back to a folder above it: a loop that a directory walk never leaves"
        with os.scandir(folder) as entries:
            for e in entries:
                if e.is_dir():
                    stack.append((Path(e.path), above | {here}))
                elif not e.is_file() and os.path.exists(e.path):  # not a dangling link
                    return f"'{e.path}' is not a regular file (a FIFO, socket or device): a read would block"
    return ""


def download_problem(name: str, folder) -> str:
    """Why ``download: true`` cannot fetch dataset ``name`` (its host silent for 10 s), or ""."""
    url = {
        "tiny_imagenet": TINY_IMAGENET_URL[0],
        "imagenette": tvd.Imagenette._ARCHIVES["160px"][0],
        "mnist": tvd.MNIST.mirrors[0],
        "cifar10": tvd.CIFAR10.url,
        "oxford_pet": tvd.OxfordIIITPet._RESOURCES[0][0],
    }[name]
    where = urlsplit(url)
    host = (where.hostname or "", where.port or (443 if where.scheme == "https" else 80))
    try:
        socket.create_connection(host, timeout=10).close()
    except OSError as err:
        return (
            f"download: true cannot reach {host[0]}:{host[1]} ({err.strerror or err}) to fetch {name}; "
            f"put its files in '{folder}' by hand (from {url}), or run where that host answers"
        )
    return ""


def _class_dirs(folder: Path) -> list[Path]:
    """The class folders of an ImageFolder, as torchvision finds them (every sub-folder, sorted)."""
    try:
        return sorted((Path(e.path) for e in os.scandir(folder) if e.is_dir()), key=lambda d: d.name)
    except OSError:
        return []


def _images_under(folder: Path, at_most: int) -> int:
    """Image files below ``folder`` (links followed), counted up to ``at_most``."""
    n = 0
    for _, _, files in os.walk(folder, followlinks=True):
        n += sum(1 for f in files if f.lower().endswith(IMAGE_EXTENSIONS))
        if n >= at_most:
            return at_most
    return n


def _split_folder(root: Path, split: str) -> Path:
    return root / split if (root / split).is_dir() else root


def _image_folder_problem(root: Path) -> str:
    train, val = _split_folder(root, "train"), _split_folder(root, "val")
    if train != val and val == root:
        return f"folder '{root}' has train/ but no val/: the eval phase and validation epochs read val/<class>/<image>"
    counts = {}
    for folder in dict.fromkeys((train, val)):
        classes = _class_dirs(folder)
        if not classes:
            expected = "<class>/<image> or train/<class>/<image>"
            return f"folder '{root}' does not look like imagefolder: expected {expected} inside it"
        if empty := [d.name for d in classes if not _images_under(d, 1)]:
            return f"class folder '{folder / empty[0]}' holds no image ({len(empty)} of {len(classes)} are empty)"
        if len(classes) < 2:
            return f"folder '{folder}' holds one class ('{classes[0].name}'): a classifier needs at least two"
        counts[folder] = len(classes)
    if len(set(counts.values())) > 1:
        return f"'{train}' has {counts[train]} classes but '{val}' has {counts[val]} classes: they must match"
    return ""


def _tiny_base(root: Path) -> Path:
    return root / "tiny-imagenet-200" if (root / "tiny-imagenet-200").is_dir() else root


def _tiny_wnids(base: Path) -> list[str]:
    return (base / "wnids.txt").read_text(errors="replace").split()


def _idx(path: Path, images: bool) -> int:
    """The items of an MNIST idx file (28x28 images or labels 0-9, sized as its header says), or DataError."""
    magic, header, item = (2051, 16, 28 * 28) if images else (2049, 8, 1)
    with open(path, "rb") as f:
        head = f.read(header)
        fields = struct.unpack(f">{header // 4}I", head) if len(head) == header else (0, 0)
        n, shape = fields[1], fields[2:] if images else (28, 28)
        if (
            fields[0] != magic
            or shape != (28, 28)
            or path.stat().st_size != header + n * item
            or (not images and n and max(f.read(n)) > 9)
        ):
            what = "28x28 images" if images else "labels 0-9"
            raise DataError(
                f"'{path}' is not an MNIST idx file of {what} of the size its header announces (magic number "
                f"{magic}; truncated, or a compressed .gz not unpacked?)"
            )
    return n


def dataset_classes(name: str, root: str | Path) -> int | None:
    """The classes of dataset ``name`` at ``root`` (None: unknown), once :func:`layout_problem` found none."""
    root = Path(root).expanduser()
    if name == "tiny_imagenet" and (_tiny_base(root) / "wnids.txt").is_file():
        return len(_tiny_wnids(_tiny_base(root)))
    if name == "imagefolder":
        return len(_class_dirs(_split_folder(root, "train"))) if root.is_dir() else None
    return CLASSES.get(name)


def split_size(name: str, root: str | Path, split: str, at_most: int = 1 << 62) -> int | None:
    """Images of ``split`` of dataset ``name`` at ``root``, up to ``at_most``, none read (None: unknown)."""
    root = Path(root).expanduser()
    count = {
        "imagefolder": lambda: sum(
            _images_under(d, at_most) for d in _class_dirs(_split_folder(root, split))
        ),
        "imagenette": lambda: _images_under(root / "imagenette2-160" / split, at_most),
        "mnist": lambda: _idx(root / "MNIST" / "raw" / MNIST_FILES[split][0], True),
        "tiny_imagenet": lambda: len(TinyImageNet(root, split).samples),
    }
    try:
        return min(at_most, count[name]()) if name in count and root.is_dir() else None
    except (DataError, OSError):
        return None


def _unsafe(name: str) -> bool:
    path = PurePosixPath(name.replace("\\", "/"))
    return path.is_absolute() or ".." in path.parts or (len(name) > 1 and name[1] == ":")


def safe_extract(archive: str | Path, target: str | Path) -> Path:
    """Extract ``archive`` into ``target``; :class:`DataError`, writing nothing, if a member is unsafe."""
    archive, target = Path(archive), Path(target)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            bad = [
                i.filename
                for i in zf.infolist()
                if _unsafe(i.filename) or (i.external_attr >> 16) & 0o170000 == 0o120000  # a symbolic link
            ]
            if not bad:
                zf.extractall(target)
    else:
        with tarfile.open(archive) as tf:
            bad = [m.name for m in tf.getmembers() if _unsafe(m.name) or not (m.isfile() or m.isdir())]
            if not bad:
                tf.extractall(target, filter="data")
    if bad:
        raise DataError(f"{archive.name}: refused, member '{bad[0]}' is a link or lands outside the target")
    return target


@contextlib.contextmanager
def _safe_tar_extraction():
    """torchvision's own downloads (ImageNette, CIFAR-10) extract only files and folders inside the target."""

    def strict(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
        if not (member.isfile() or member.isdir()) or _unsafe(member.name):
            raise tarfile.FilterError(
                f"refused archive member '{member.name}' (outside the target folder or a link)"
            )
        return tarfile.data_filter(member, dest)

    previous = tarfile.TarFile.extraction_filter
    tarfile.TarFile.extraction_filter = staticmethod(strict)
    try:
        yield
    finally:
        tarfile.TarFile.extraction_filter = previous


def transforms_for(channels: int, size: int, train: bool):
    """Tiny-ImageNet-style preprocessing at ``size``: random crop + flip for training, centre crop for val."""
    mean, std = (MEAN, STD) if channels == 3 else ((0.5,), (0.5,))
    head = [T.Grayscale(num_output_channels=channels)] if channels in (1, 3) else []
    if train:
        crop = [T.RandomResizedCrop(size, scale=(0.35, 1.0), antialias=True), T.RandomHorizontalFlip()]
    else:
        crop = [T.Resize(size, antialias=True), T.CenterCrop(size)]
    return T.Compose([*head, *crop, T.ToTensor(), T.Normalize(mean, std)])


def open_dataset(
    name: str, root: str | Path, split: str, channels: int, size: int, download: bool = False
) -> Dataset:
    """A real dataset split with the model's channels and resolution. Raises :class:`DataError`."""
    root = Path(root).expanduser()
    tf = transforms_for(channels, size, split == "train")
    if not root.exists() and not download:
        raise DataError(f"dataset folder '{root}' does not exist (set download: true to fetch {name})")
    try:
        with _safe_tar_extraction():
            if name == "tiny_imagenet":
                if download and not any(root.glob("**/wnids.txt")):
                    url, md5 = TINY_IMAGENET_URL
                    download_url(url, str(root), md5=md5)
                    safe_extract(root / Path(url).name, root)
                return TinyImageNet(root, split, tf)
            if name == "imagenette":
                fetch = download and not (root / "imagenette2-160").is_dir()
                return tvd.Imagenette(str(root), split=split, size="160px", transform=tf, download=fetch)
            if name in ("mnist", "cifar10"):
                cls = tvd.MNIST if name == "mnist" else tvd.CIFAR10
                return cls(str(root), train=split == "train", download=download, transform=tf)
            if name == "imagefolder":
                return tvd.ImageFolder(str(_split_folder(root, split)), transform=tf)
    except (RuntimeError, FileNotFoundError, OSError, tarfile.TarError, zipfile.BadZipFile) as err:
        raise DataError(f"{name} at '{root}': {err}") from None
    raise DataError(f"unknown dataset '{name}'")


def loader(
    ds: Dataset, batch_size: int, workers: int, pin_memory: bool, shuffle: bool = True, seed: int = 0
) -> DataLoader:
    """A shuffled DataLoader dropping the last partial batch; :class:`DataError` below one batch of images."""
    if len(ds) < batch_size:
        raise DataError(
            f"the dataset has {len(ds)} images, fewer than one batch of {batch_size} "
            "(lower the batch size or use more images)"
        )
    kw = {"num_workers": workers, "pin_memory": pin_memory, "persistent_workers": workers > 0}
    seeded = torch.Generator().manual_seed(seed)
    # a worker dies with what it loads for
    return DataLoader(
        ds, batch_size, shuffle, drop_last=True, worker_init_fn=paths.die_with_parent, generator=seeded, **kw
    )


def cycle(dl: DataLoader) -> Iterator:
    """Batches forever, epoch after epoch; :class:`DataError` when a whole pass yields no batch."""
    while True:
        empty = True
        for batch in dl:
            empty = False
            yield batch
        if empty:
            raise DataError(f"a pass over {len(dl.dataset)} images yielded no batch of {dl.batch_size}")


def for_configs(p):
    """``Config -> Dataset`` for configurations on real data (None: synthetic, made by the engine)."""
    from cnnbench.models import spec  # a model's own head is allowed, as seed 003 trained one

    @functools.cache
    def opened(name: str, split: str, channels: int, size: int) -> Dataset:
        return open_dataset(name, p.data_path, split, channels, size, p.download)

    def dataset_for(cfg):
        if cfg.dataset == "synthetic":
            return None
        ds = opened(cfg.dataset, "train" if cfg.phase == "train" else "val", cfg.in_channels, cfg.image_size)
        if len(ds.classes) != cfg.num_classes != spec(cfg.model).reference_classes:
            raise DataError(f"{cfg.dataset} has {len(ds.classes)} classes; set num_classes to match")
        return ds

    return dataset_for
