"""Every dataset layout, built small by the test, and downloads served from a loopback HTTP server."""

import gzip
import hashlib
import http.server
import pickle
import shutil
import struct
import tarfile
import threading
from functools import partial

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import datasets as tvd

from cnnbench import data


def jpeg(path, size=8, seed=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(path, "JPEG")


def md5(path):
    return hashlib.md5(path.read_bytes()).hexdigest()


def make_tiny_imagenet(root, wnids=("n01443537", "n01629819")):
    root.mkdir(parents=True)
    (root / "wnids.txt").write_text("\n".join(wnids) + "\n")
    for i, wnid in enumerate(wnids):
        for j in range(3):
            jpeg(root / "train" / wnid / "images" / f"{wnid}_{j}.JPEG", seed=i * 10 + j)
    lines = []
    for j in range(4):
        jpeg(root / "val" / "images" / f"val_{j}.JPEG", seed=100 + j)
        lines.append(f"val_{j}.JPEG\t{wnids[j % 2]}\t0\t0\t8\t8")
    (root / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return root


def idx_images(path, n, side=28):
    arr = np.random.default_rng(0).integers(0, 255, (n, side, side), dtype=np.uint8)
    path.write_bytes(struct.pack(">IIII", 2051, n, side, side) + arr.tobytes())


def idx_labels(path, n):
    path.write_bytes(struct.pack(">II", 2049, n) + bytes(i % 10 for i in range(n)))


def make_mnist_raw(raw):
    raw.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 12), ("t10k", 6)):
        idx_images(raw / f"{split}-images-idx3-ubyte", n)
        idx_labels(raw / f"{split}-labels-idx1-ubyte", n)


def make_cifar(root):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rng.integers(0, 255, (4, 3072), dtype=np.uint8), "labels": [0, 1, 2, 3]}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}))
    return folder


@pytest.fixture
def serve(tmp_path):
    """Serve a folder on 127.0.0.1 for the duration of a test; returns its base URL."""
    servers = []

    def start(folder):
        handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.log_message = lambda *a: None
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()


def test_synthetic_images_are_deterministic_and_normalised():
    a, b = data.SyntheticImages(16, 3, 8, 5, seed=1), data.SyntheticImages(16, 3, 8, 5, seed=1)
    x, y = a[3]
    assert x.shape == (3, 8, 8) and x.dtype == torch.float32 and 0 <= int(y) < 5
    assert torch.equal(x, b[3][0]) and len(a) == 16


def test_tiny_imagenet_train_and_val_annotations(tmp_path):
    make_tiny_imagenet(tmp_path / "tiny-imagenet-200")
    train = data.open_dataset("tiny_imagenet", tmp_path, "train", 3, 16)
    val = data.open_dataset("tiny_imagenet", tmp_path / "tiny-imagenet-200", "val", 3, 16)
    assert (len(train), len(val), data.num_classes(train)) == (6, 4, 2)
    assert [label for _, label in val.samples] == [0, 1, 0, 1]
    x, _ = train[0]
    assert x.shape == (3, 16, 16)
    batch = next(iter(data.loader(train, 2, workers=0, pin_memory=False)))
    assert batch[0].shape == (2, 3, 16, 16)


def test_imagenette_layout(tmp_path):
    wnids = list(tvd.Imagenette._WNID_TO_CLASS)
    for i, wnid in enumerate(wnids):
        for split in ("train", "val"):
            jpeg(tmp_path / "imagenette2-160" / split / wnid / f"{wnid}_{split}.JPEG", seed=i)
    ds = data.open_dataset("imagenette", tmp_path, "val", 3, 16)
    assert len(ds) == 10 and data.num_classes(ds) == 10 and ds[0][0].shape == (3, 16, 16)


def test_mnist_layout_and_model_shapes(tmp_path):
    make_mnist_raw(tmp_path / "MNIST" / "raw")
    ds = data.open_dataset("mnist", tmp_path, "train", 1, 28)
    assert len(ds) == 12 and ds[0][0].shape == (1, 28, 28) and data.num_classes(ds) == 10
    rgb = data.open_dataset("mnist", tmp_path, "val", 3, 32)  # an ImageNet model on MNIST: 3 channels, resized
    assert len(rgb) == 6 and rgb[0][0].shape == (3, 32, 32)


def test_cifar10_layout(tmp_path, monkeypatch):
    folder = make_cifar(tmp_path)
    monkeypatch.setattr(tvd.CIFAR10, "train_list", [[f"data_batch_{i}", md5(folder / f"data_batch_{i}")] for i in range(1, 6)])
    monkeypatch.setattr(tvd.CIFAR10, "test_list", [["test_batch", md5(folder / "test_batch")]])
    monkeypatch.setattr(tvd.CIFAR10, "meta", {**tvd.CIFAR10.meta, "md5": md5(folder / "batches.meta")})
    ds = data.open_dataset("cifar10", tmp_path, "train", 3, 32)
    assert len(ds) == 20 and ds[0][0].shape == (3, 32, 32)


def test_image_folder(tmp_path):
    for c in ("cat", "dog"):
        for j in range(2):
            jpeg(tmp_path / "pets" / "train" / c / f"{j}.jpg", seed=j)
    ds = data.open_dataset("imagefolder", tmp_path / "pets", "train", 3, 8)
    assert len(ds) == 4 and data.num_classes(ds) == 2


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(data.DataError, match="does not exist"):
        data.open_dataset("tiny_imagenet", tmp_path / "absent", "train", 3, 64)
    with pytest.raises(data.DataError, match="wnids.txt missing"):
        data.open_dataset("tiny_imagenet", tmp_path, "train", 3, 64)


def test_tiny_imagenet_download_with_checksum(tmp_path, serve, monkeypatch):
    src = tmp_path / "src"
    make_tiny_imagenet(src / "tiny-imagenet-200")
    archive = shutil.make_archive(str(tmp_path / "www" / "tiny-imagenet-200"), "zip", src)
    url = serve(tmp_path / "www") + "/tiny-imagenet-200.zip"
    monkeypatch.setattr(data, "TINY_IMAGENET_URL", (url, md5(tmp_path / "www" / "tiny-imagenet-200.zip")))
    ds = data.open_dataset("tiny_imagenet", tmp_path / "dl", "val", 3, 8, download=True)
    assert len(ds) == 4 and archive.endswith(".zip")
    # a corrupted download is refused
    monkeypatch.setattr(data, "TINY_IMAGENET_URL", (url, "0" * 32))
    with pytest.raises(data.DataError):
        data.open_dataset("tiny_imagenet", tmp_path / "dl2", "val", 3, 8, download=True)


def test_mnist_and_cifar_downloads(tmp_path, serve, monkeypatch):
    www = tmp_path / "www"
    make_mnist_raw(tmp_path / "raw")
    resources = []
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        www.mkdir(exist_ok=True)
        with open(tmp_path / "raw" / name, "rb") as f, gzip.open(www / f"{name}.gz", "wb") as g:
            g.write(f.read())
        resources.append((f"{name}.gz", md5(www / f"{name}.gz")))
    base = serve(www)
    monkeypatch.setattr(tvd.MNIST, "mirrors", [base + "/"])
    monkeypatch.setattr(tvd.MNIST, "resources", resources)
    ds = data.open_dataset("mnist", tmp_path / "mnist", "train", 1, 28, download=True)
    assert len(ds) == 12

    folder = make_cifar(tmp_path / "cifar_src")
    with tarfile.open(www / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname="cifar-10-batches-py")
    monkeypatch.setattr(tvd.CIFAR10, "url", base + "/cifar-10-python.tar.gz")
    monkeypatch.setattr(tvd.CIFAR10, "tgz_md5", md5(www / "cifar-10-python.tar.gz"))
    monkeypatch.setattr(tvd.CIFAR10, "train_list", [[f"data_batch_{i}", md5(folder / f"data_batch_{i}")] for i in range(1, 6)])
    monkeypatch.setattr(tvd.CIFAR10, "test_list", [["test_batch", md5(folder / "test_batch")]])
    monkeypatch.setattr(tvd.CIFAR10, "meta", {**tvd.CIFAR10.meta, "md5": md5(folder / "batches.meta")})
    ds = data.open_dataset("cifar10", tmp_path / "cifar", "val", 3, 32, download=True)
    assert len(ds) == 4


def _zip_with(path, members):
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members:
            zf.writestr(name, text)


def _zip_with_symlink(path):
    import stat
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tiny-imagenet-200/wnids.txt", "n0\n")
        info = zipfile.ZipInfo("tiny-imagenet-200/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")


@pytest.mark.parametrize("make", [
    lambda p: _zip_with(p, [("tiny-imagenet-200/wnids.txt", "n0\n"), ("../../escaped.txt", "x")]),
    lambda p: _zip_with(p, [("tiny-imagenet-200/wnids.txt", "n0\n"), ("/tmp/absolute-escaped.txt", "x")]),
    _zip_with_symlink,
])
def test_download_refuses_archive_members_outside_the_target_whatever_the_checksum(tmp_path, serve, monkeypatch, make):
    (tmp_path / "www").mkdir()
    make(tmp_path / "www" / "tiny-imagenet-200.zip")
    url = serve(tmp_path / "www") + "/tiny-imagenet-200.zip"
    monkeypatch.setattr(data, "TINY_IMAGENET_URL", (url, md5(tmp_path / "www" / "tiny-imagenet-200.zip")))
    with pytest.raises(data.DataError, match="refused"):
        data.open_dataset("tiny_imagenet", tmp_path / "a" / "dl", "val", 3, 8, download=True)
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "a" / "escaped.txt").exists()
    assert not list((tmp_path / "a" / "dl").glob("tiny-imagenet-200*/"))  # nothing extracted


@pytest.mark.parametrize("kind", ["symlink", "dotdot"])
def test_tar_extraction_refuses_links_and_escapes(tmp_path, kind):
    import io

    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        if kind == "symlink":
            info = tarfile.TarInfo("d/link")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc"
            tf.addfile(info)
        else:
            info = tarfile.TarInfo("../escaped.txt")
            info.size = 1
            tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(data.DataError, match="refused"):
        data.safe_extract(archive, tmp_path / "out")
    with data._safe_tar_extraction(), tarfile.open(archive) as tf, pytest.raises(tarfile.TarError):
        tf.extractall(tmp_path / "out2")  # what torchvision's own extraction meets
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out2" / "d" / "link").exists()


def test_tiny_imagenet_is_fetched_over_https():
    assert data.TINY_IMAGENET_URL[0].startswith("https://")
