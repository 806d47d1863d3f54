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
    assert (len(train), len(val), len(train.classes)) == (6, 4, 2)
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
    assert len(ds) == 10 and len(ds.classes) == 10 and ds[0][0].shape == (3, 16, 16)


def test_mnist_layout_and_model_shapes(tmp_path):
    make_mnist_raw(tmp_path / "MNIST" / "raw")
    ds = data.open_dataset("mnist", tmp_path, "train", 1, 28)
    assert len(ds) == 12 and ds[0][0].shape == (1, 28, 28) and len(ds.classes) == 10
    rgb = data.open_dataset(
        "mnist", tmp_path, "val", 3, 32
    )  # an ImageNet model on MNIST: 3 channels, resized
    assert len(rgb) == 6 and rgb[0][0].shape == (3, 32, 32)


def test_cifar10_layout(tmp_path, monkeypatch):
    folder = make_cifar(tmp_path)
    monkeypatch.setattr(
        tvd.CIFAR10, "train_list", [[f"data_batch_{i}", md5(folder / f"data_batch_{i}")] for i in range(1, 6)]
    )
    monkeypatch.setattr(tvd.CIFAR10, "test_list", [["test_batch", md5(folder / "test_batch")]])
    monkeypatch.setattr(tvd.CIFAR10, "meta", {**tvd.CIFAR10.meta, "md5": md5(folder / "batches.meta")})
    ds = data.open_dataset("cifar10", tmp_path, "train", 3, 32)
    assert len(ds) == 20 and ds[0][0].shape == (3, 32, 32)


def test_image_folder(tmp_path):
    for c in ("cat", "dog"):
        for j in range(2):
            jpeg(tmp_path / "pets" / "train" / c / f"{j}.jpg", seed=j)
    ds = data.open_dataset("imagefolder", tmp_path / "pets", "train", 3, 8)
    assert len(ds) == 4 and len(ds.classes) == 2


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
    for name in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
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
    monkeypatch.setattr(
        tvd.CIFAR10, "train_list", [[f"data_batch_{i}", md5(folder / f"data_batch_{i}")] for i in range(1, 6)]
    )
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


@pytest.mark.parametrize(
    "make",
    [
        lambda p: _zip_with(p, [("tiny-imagenet-200/wnids.txt", "n0\n"), ("../../escaped.txt", "x")]),
        lambda p: _zip_with(p, [("tiny-imagenet-200/wnids.txt", "n0\n"), ("/tmp/absolute-escaped.txt", "x")]),
        _zip_with_symlink,
    ],
)
def test_download_refuses_archive_members_outside_the_target_whatever_the_checksum(
    tmp_path, serve, monkeypatch, make
):
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


# --- issue 21: datasets that fail only after a notebook started, and data that hangs ----------------------------


def _run_with_deadline(fn, seconds=10):
    """Run ``fn`` in a daemon thread; (finished, result or exception)."""
    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            out["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    return not t.is_alive(), out


def test_a_dataset_smaller_than_one_batch_is_a_clear_error_not_stop_iteration():
    ds = data.SyntheticImages(3, 3, 8, 2)
    with pytest.raises(
        data.DataError, match=r"3 images.*one batch of 8.*\(lower the batch size or use more images\)"
    ):
        data.loader(ds, 8, workers=0, pin_memory=False)
    assert len(list(data.loader(ds, 3, workers=0, pin_memory=False))) == 1


def test_cycle_raises_when_a_pass_yields_no_batch_instead_of_looping():
    from torch.utils.data import DataLoader

    empty = DataLoader(data.SyntheticImages(3, 3, 8, 2), batch_size=8, drop_last=True)
    finished, out = _run_with_deadline(lambda: next(data.cycle(empty)))
    assert finished, "data.cycle looped forever over a loader that yields no batch"
    assert isinstance(out.get("error"), data.DataError) and "no batch" in str(out["error"])
    batches = data.cycle(data.loader(data.SyntheticImages(4, 3, 8, 2), 2, workers=0, pin_memory=False))
    assert [next(batches)[0].shape[0] for _ in range(5)] == [2] * 5  # still endless over a real pass


def _image_folder(root, classes=("cat", "dog"), per_class=2):
    for c in classes:
        for j in range(per_class):
            jpeg(root / c / f"{j}.jpg", seed=j)
    return root


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda r: _image_folder(r, classes=("cat",)), "one class"),
        (lambda r: (_image_folder(r), (r / "empty").mkdir()), "no image"),
        (
            lambda r: (_image_folder(r / "train"), _image_folder(r / "val", classes=("cat", "dog", "eel"))),
            "3 classes",
        ),
        (lambda r: _image_folder(r / "train"), "val"),
    ],
)
def test_image_folder_problems_are_seen_up_front(tmp_path, make, expected):
    root = tmp_path / "pets"
    root.mkdir()
    make(root)
    assert expected in data.layout_problem("imagefolder", root)


def test_good_layouts_have_no_problem(tmp_path):
    assert data.layout_problem("imagefolder", _image_folder(tmp_path / "a")) == ""
    _image_folder(tmp_path / "b" / "train"), _image_folder(tmp_path / "b" / "val")
    assert data.layout_problem("imagefolder", tmp_path / "b") == ""
    make_tiny_imagenet(tmp_path / "t" / "tiny-imagenet-200")
    assert data.layout_problem("tiny_imagenet", tmp_path / "t") == ""
    assert data.layout_problem("tiny_imagenet", tmp_path / "t" / "tiny-imagenet-200") == ""
    make_mnist_raw(tmp_path / "m" / "MNIST" / "raw")
    assert data.layout_problem("mnist", tmp_path / "m") == ""
    assert data.dataset_classes("mnist", tmp_path / "m") == 10
    assert data.dataset_classes("tiny_imagenet", tmp_path / "t") == 2
    assert data.dataset_classes("imagefolder", tmp_path / "b") == 2
    assert (
        data.split_size("mnist", tmp_path / "m", "train") == 12
        and data.split_size("mnist", tmp_path / "m", "val") == 6
    )
    assert data.split_size("tiny_imagenet", tmp_path / "t", "train") == 6
    assert data.split_size("tiny_imagenet", tmp_path / "t", "val") == 4
    assert data.split_size("imagefolder", tmp_path / "b", "val") == 4
    assert data.split_size("imagefolder", tmp_path / "b", "train", at_most=3) == 3


def _tiny_without_train_images(root):
    make_tiny_imagenet(root)
    shutil.rmtree(root / "train" / "n01629819")


def _tiny_with_unknown_val_class(root):
    make_tiny_imagenet(root)
    with open(root / "val" / "val_annotations.txt", "a") as f:
        f.write("val_9.JPEG\tn09999999\t0\t0\t8\t8\n")


def _tiny_in_a_renamed_folder(root):
    make_tiny_imagenet(root / "tiny-imagenet")  # TinyImageNet looks in root and root/tiny-imagenet-200 only


@pytest.mark.parametrize(
    "make, expected",
    [
        (_tiny_without_train_images, "train/n01629819/images"),
        (_tiny_with_unknown_val_class, "n09999999"),
        (
            lambda r: (make_tiny_imagenet(r), (r / "val" / "val_annotations.txt").unlink()),
            "val_annotations.txt",
        ),
        (lambda r: (r.mkdir(parents=True), (r / "wnids.txt").write_text("")), "wnids.txt"),
        (_tiny_in_a_renamed_folder, "tiny-imagenet/"),
    ],
)
def test_wrong_tiny_imagenet_layouts_are_seen_up_front(tmp_path, make, expected):
    root = tmp_path / "tiny"
    make(root)
    root.mkdir(exist_ok=True)
    problem = data.layout_problem("tiny_imagenet", root)
    assert expected in problem, problem


def _fake_idx(raw, name, content):
    make_mnist_raw(raw)
    (raw / name).write_bytes(content)


@pytest.mark.parametrize(
    "name, content, expected",
    [
        ("train-images-idx3-ubyte", bytes(range(256)) * 4, "not an MNIST idx file"),
        ("t10k-labels-idx1-ubyte", b"\x00\x00\x08\x01" + (7).to_bytes(4, "big") + bytes(7), "t10k"),
        ("train-images-idx3-ubyte", struct.pack(">IIII", 2051, 12, 28, 28) + bytes(100), "truncated"),
        ("t10k-images-idx3-ubyte", struct.pack(">IIII", 2051, 6, 32, 32) + bytes(6 * 32 * 32), "28x28"),
    ],
)
def test_a_fake_or_broken_mnist_file_is_seen_up_front(tmp_path, name, content, expected):
    _fake_idx(tmp_path / "MNIST" / "raw", name, content)
    problem = data.layout_problem("mnist", tmp_path)
    assert expected in problem and name in problem, problem


def test_a_missing_mnist_file_is_seen_up_front(tmp_path):
    make_mnist_raw(tmp_path / "MNIST" / "raw")
    (tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").unlink()
    assert "t10k-labels-idx1-ubyte" in data.layout_problem("mnist", tmp_path)


# validation (cnnbench.params) uses these before any work


def _load(tmp_path, text):
    from cnnbench import params

    path = tmp_path / "p.yaml"
    if "notebooks:" not in text:
        text += "notebooks: [02_scenario_a]\n"
    if "models:" not in text:
        text += "models: [resnet18]\n"
    path.write_text("device: cpu\nimage_size: 32\n" + text)
    return params.load(path)


def test_params_refuse_a_one_class_folder_and_a_fake_mnist(tmp_path):
    from cnnbench.params import ParamsError

    _image_folder(tmp_path / "one", classes=("cat",))
    with pytest.raises(ParamsError, match="key 'data_path'.*one class"):
        _load(tmp_path, f"dataset: imagefolder\nnum_classes: 1\ndata_path: {tmp_path / 'one'}\n")
    _fake_idx(tmp_path / "mn" / "MNIST" / "raw", "train-images-idx3-ubyte", bytes(range(256)) * 4)
    with pytest.raises(ParamsError, match="key 'data_path'.*not an MNIST idx file"):
        _load(tmp_path, f"dataset: mnist\nnum_classes: 10\ndata_path: {tmp_path / 'mn'}\n")


def test_params_refuse_num_classes_that_do_not_match_the_data(tmp_path):
    from cnnbench.params import ParamsError

    _image_folder(tmp_path / "pets")
    with pytest.raises(ParamsError, match="key 'num_classes' 200.*2 classes"):
        _load(tmp_path, f"dataset: imagefolder\ndata_path: {tmp_path / 'pets'}\n")
    make_mnist_raw(tmp_path / "m" / "MNIST" / "raw")
    with pytest.raises(ParamsError, match="key 'num_classes'"):
        _load(tmp_path, f"dataset: mnist\ndata_path: {tmp_path / 'm'}\n")
    # the MNIST CNN alone runs MNIST at its own 10 classes: num_classes does not apply
    _load(
        tmp_path,
        f"dataset: mnist\ndata_path: {tmp_path / 'm'}\nmodels: [mnist_cnn]\n"
        "batch_size_per_model: {mnist_cnn: 4}\n",
    )


@pytest.mark.parametrize("mode", ["loader", "device"])
def test_params_refuse_a_dataset_smaller_than_one_batch(tmp_path, mode):
    from cnnbench.params import ParamsError

    _image_folder(tmp_path / "pets", per_class=2)  # 4 images
    base = f"dataset: imagefolder\nnum_classes: 2\ndata_path: {tmp_path / 'pets'}\ndata_mode: {mode}\n"
    with pytest.raises(ParamsError) as err:
        _load(tmp_path, base + "batch_size: 8\n")
    assert (
        "key 'batch_size'" in str(err.value) and "4 images" in str(err.value) and "\n" not in str(err.value)
    )
    assert _load(tmp_path, base + "batch_size: 4\n").batch_size == 4
    with pytest.raises(ParamsError, match="key 'sweep"):
        _load(tmp_path, base + "batch_size: 4\nsweep: {resnet18: [2, 8]}\nnotebooks: [03_batch_sweep]\n")
    with pytest.raises(ParamsError, match="key 'epoch_images'|key 'batch_size'"):
        _load(tmp_path, base + "batch_size: 4\nepoch_mode: true\nepoch_images: 2\n")


def test_a_fake_mnist_for_the_scratch_backends_is_refused_before_any_work(tmp_path):
    """Issue 21 barrage rerun: scratch_dataset mnist with a scratch_data_path of fake idx files passed validation,
    so a pipeline run measured 00-04 before 05 failed on it. A folder that is there but not MNIST is refused at
    validation (an absent one stays valid: it may be fetched before 05 runs, or refused by the pipeline)."""
    from cnnbench.params import ParamsError

    _fake_idx(tmp_path / "mn" / "MNIST" / "raw", "train-images-idx3-ubyte", bytes(range(256)) * 4)
    with pytest.raises(ParamsError, match="key 'scratch_data_path'.*not an MNIST idx file"):
        _load(
            tmp_path,
            f"scratch_dataset: mnist\nscratch_data_path: {tmp_path / 'mn'}\nnotebooks: [05_backends]\n",
        )
    p = _load(
        tmp_path, f"scratch_dataset: mnist\nscratch_data_path: {tmp_path / 'mn'}\nnotebooks: [00_setup]\n"
    )
    assert p.scratch_dataset == "mnist"  # 05 does not run: nothing reads it


def test_download_of_an_image_folder_is_refused_at_validation(tmp_path):
    """Issue 21 barrage rerun: dataset imagefolder with download: true and no folder passed validation (a folder to
    be downloaded) and the run started; an ImageFolder has nothing to download from."""
    from cnnbench.params import ParamsError

    with pytest.raises(ParamsError, match="key 'download'.*imagefolder.*cannot be downloaded"):
        _load(
            tmp_path,
            f"dataset: imagefolder\nnum_classes: 2\ndownload: true\ndata_path: {tmp_path / 'none'}\n",
        )


def test_an_empty_image_folder_does_not_suggest_a_download(tmp_path):
    """The message said "set download: true to fetch imagefolder", which is refused: an image folder has no
    source to download from. A public dataset's empty folder still suggests it."""
    (tmp_path / "empty").mkdir()
    assert "download" not in data.layout_problem("imagefolder", tmp_path / "empty")
    assert "download: true" in data.layout_problem("cifar10", tmp_path / "empty")


# --- issue 30: a folder a walk or read cannot finish, and a download with no network, refused before any work ---


def _folder_of_images(root, classes=2, images=3):
    for c in range(classes):
        for i in range(images):
            jpeg(root / f"c{c}" / f"{i}.png", seed=c * 10 + i)
    return root


def test_a_fifo_in_a_class_folder_is_refused_at_validation(tmp_path):
    """Issue 30: a FIFO named x.png passed validation and blocked a loader worker until cell_timeout_s (an hour)."""
    import os
    import time

    from cnnbench.params import ParamsError

    root = _folder_of_images(tmp_path / "imgs")
    os.mkfifo(root / "c1" / "x.png")
    start = time.monotonic()
    with pytest.raises(ParamsError) as err:
        _load(tmp_path, f"dataset: imagefolder\nnum_classes: 2\nbatch_size: 2\ndata_path: {root}\n")
    assert (
        "x.png" in str(err.value) and "not a regular file" in str(err.value) and time.monotonic() - start < 30
    )


def test_symlink_loops_in_a_class_folder_are_refused_at_validation(tmp_path):
    """Issue 30: two `-> .` links in a class folder made ImageFolder walk without end."""
    import os

    from cnnbench.params import ParamsError

    root = _folder_of_images(tmp_path / "imgs")
    os.symlink(".", root / "c0" / "loop1")
    os.symlink(".", root / "c0" / "loop2")
    with pytest.raises(ParamsError) as err:
        _load(tmp_path, f"dataset: imagefolder\nnum_classes: 2\nbatch_size: 2\ndata_path: {root}\n")
    assert "loop" in str(err.value) and "c0" in str(err.value)


def test_a_download_whose_host_does_not_answer_fails_before_the_first_notebook(tmp_path, monkeypatch, capsys):
    """Issue 30: download: true with no network failed after 25 s from inside a notebook; it fails in one line before
    any, naming the host and the folder to put the files in by hand (a loopback port that refuses)."""
    import socket

    from cnnbench import pipeline
    from conftest import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: connecting is refused
    monkeypatch.setattr(
        data, "TINY_IMAGENET_URL", (f"http://127.0.0.1:{port}/tiny-imagenet-200.zip", "0" * 32)
    )
    monkeypatch.setattr(pipeline, "execute", lambda *a, **k: pytest.fail("a notebook ran"))
    folder = tmp_path / "tiny"
    code = pipeline.main(
        [
            "--params",
            str(ROOT / "params" / "smoke.yaml"),
            "--outputs",
            str(tmp_path / "out"),
            "--set",
            "dataset=tiny_imagenet",
            "--set",
            f"data_path={folder}",
            "--set",
            "download=true",
            "--set",
            "num_classes=200",
            "--set",
            "notebooks=[00_setup, 02_scenario_a]",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"127.0.0.1:{port}" in err and str(folder) in err and "by hand" in err, err


def test_an_image_folder_whose_train_and_val_classes_differ_names_both_folders(tmp_path):
    """Every layout refusal names the folder to fix: here train/ and val/ of the data_path given."""
    for split, classes in (("train", "abc"), ("val", "ab")):
        for c in classes:
            (tmp_path / split / c).mkdir(parents=True)
            (tmp_path / split / c / "x.png").write_bytes(b"")
    why = data.layout_problem("imagefolder", tmp_path)
    assert f"'{tmp_path / 'train'}' has 3 classes" in why and f"'{tmp_path / 'val'}' has 2" in why, why
