import re

import pytest

from cnnbench import devices, params
from cnnbench.params import ParamsError
from conftest import ROOT


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("name", ["local.yaml", "smoke.yaml", "colab_t4.yaml", "apple_m.yaml", "seeds_full.yaml"])
def test_shipped_params_files_are_valid(name):
    path = ROOT / "params" / name
    if not path.exists():
        pytest.skip(f"{name} not present")
    text = path.read_text()
    assert text.startswith("#"), "each params file says in a comment what it is for"
    raw = params.read_yaml(path)
    raw.pop("data_path", None), raw.pop("dataset", None)
    params.validate(raw, src=name, check_device=False)


def test_defaults_and_overrides(write_yaml):
    p = params.load(write_yaml("batch_size: 32\nmodels: [resnet18]\n"), {"warmup_steps": 0})
    assert (p.batch_size, p.models, p.warmup_steps) == (32, ["resnet18"], 0)
    assert p.batch_size_for("squeezenet1_1") == 64 and p.batch_size_for("resnet18") == 32
    assert p.lr == 0.01 and isinstance(p.lr, float)


def test_unknown_key_is_an_error(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("batchsize: 32\n"))
    assert "unknown key 'batchsize'" in one_line(err) and "batch_size" in str(err.value)


@pytest.mark.parametrize(
    "text, key",
    [("batch_size: '32'", "batch_size"), ("batch_size: true", "batch_size"), ("models: resnet18", "models"),
     ("lr: fast", "lr"), ("compile: 1", "compile"), ("sweep: {resnet18: 32}", "sweep"), ("epoch_mode: 1", "epoch_mode")],
)
def test_wrong_type_names_the_key(write_yaml, text, key):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml(text + "\n"))
    assert f"'{key}'" in one_line(err)


def test_unknown_model_suggests_close_names_in_a_short_message(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("models: [resnet18, resnet5O]\n"))
    msg = one_line(err)
    assert "resnet5O" in msg and "did you mean resnet50" in msg and "mnist_cnn" in msg
    assert len(msg) < 400 and "vit_b_16" not in msg  # not the ~80 torchvision names


def test_unknown_key_suggests_the_close_key(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("batchsize: 32\n"))
    assert "did you mean batch_size" in one_line(err)


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "a/b", "..", ".hidden", "a b", "x" * 101])
def test_run_name_must_be_a_safe_folder_name(write_yaml, name):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("device: cpu\n"), {"run_name": name})
    assert "not a safe run name" in one_line(err)


@pytest.mark.parametrize("text, key", [("phases: []", "phases"), ("sweep: {}", "sweep")])
def test_empty_phases_and_sweep_are_refused(write_yaml, text, key):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml(f"device: cpu\n{text}\n"))
    assert f"key '{key}'" in one_line(err)


def test_empty_sweep_is_fine_without_the_sweep_notebook(write_yaml):
    p = params.load(write_yaml("device: cpu\nsweep: {}\nnotebooks: [00_setup]\n"))
    assert p.sweep == {}


def test_image_size_too_small_for_a_model_is_caught_before_work(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("device: cpu\nmodels: [resnet18, squeezenet1_1]\nimage_size: 16\n"))
    assert "key 'image_size' 16 is too small for model 'squeezenet1_1'" in one_line(err)
    assert params.load(write_yaml("device: cpu\nmodels: [mnist_cnn, resnet18]\nimage_size: 16\n"))


def test_override_errors_name_the_override_not_the_file(write_yaml):
    path = write_yaml("device: cpu\n")
    with pytest.raises(ParamsError) as err:
        params.load(path, {"batch_size": 0}, overrides_src="--set")
    msg = one_line(err)
    assert msg.startswith("--set key 'batch_size'") and str(path) not in msg
    with pytest.raises(ParamsError) as err:
        params.parse_overrides(["batch_size"])
    assert one_line(err).startswith("--set 'batch_size'")


def test_folder_given_as_params_file_says_so(tmp_path):
    with pytest.raises(ParamsError) as err:
        params.load(tmp_path)
    assert "is a folder, not a params file" in one_line(err)


def test_empty_params_file_says_it_runs_the_defaults(write_yaml):
    assert "running with the defaults" in params.empty_file_note(write_yaml("# nothing\n"))
    assert params.empty_file_note(write_yaml("batch_size: 8\n")) == ""


@pytest.mark.parametrize("dataset, make, expected", [
    ("imagefolder", lambda root: None, "is empty"),
    ("tiny_imagenet", lambda root: (root / "readme.txt").write_text("x"), "does not look like tiny_imagenet"),
    ("cifar10", lambda root: (root / "train").mkdir(), "does not look like cifar10"),
    ("imagefolder", lambda root: (root / "notes.txt").write_text("x"), "does not look like imagefolder"),
])
def test_empty_or_wrong_dataset_folder_is_caught_at_validation(write_yaml, tmp_path, dataset, make, expected):
    root = tmp_path / "data"
    root.mkdir()
    make(root)
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml(f"device: cpu\ndataset: {dataset}\ndata_path: {root}\n"))
    assert "key 'data_path'" in one_line(err) and expected in one_line(err)


@pytest.mark.parametrize("text, key", [("batch_size: 0", "batch_size"), ("batch_size: -8", "batch_size"),
                                       ("batch_size_per_model: {resnet18: 0}", "batch_size_per_model.resnet18"),
                                       ("sweep: {resnet50: [32, -1]}", "sweep.resnet50")])
def test_non_positive_batch_size(write_yaml, text, key):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml(text + "\n"))
    assert f"'{key}'" in one_line(err) and "positive" in str(err.value)


def test_unknown_device(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("device: tpu\n"))
    assert "'device'" in one_line(err) and "unknown device 'tpu'" in str(err.value)


def test_absent_device(write_yaml):
    absent = next(kind for kind in ("cuda", "mps") if kind not in devices.available())
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml(f"device: {absent}\n"))
    assert "'device'" in one_line(err) and "not present" in str(err.value)


def test_expected_device_name_mismatch(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("device: cpu\nexpect_device: Tesla T4\n"))
    assert "expected a device named like 'Tesla T4'" in one_line(err)


def test_malformed_yaml(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("models: [resnet18\nbatch_size: 3\n"))
    assert re.search(r"malformed YAML at line \d+, column \d+", one_line(err))


def test_top_level_must_be_a_mapping(write_yaml):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("- resnet18\n"))
    assert "mapping" in one_line(err)


def test_missing_params_file(tmp_path):
    with pytest.raises(ParamsError, match="params file not found"):
        params.load(tmp_path / "nope.yaml")


def test_missing_dataset_path(write_yaml, tmp_path):
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml(f"dataset: tiny_imagenet\ndata_path: {tmp_path}/absent\n"))
    assert "'data_path'" in one_line(err) and "does not exist" in str(err.value)
    with pytest.raises(ParamsError, match="'data_path' is required"):
        params.load(write_yaml("dataset: mnist\n"))


@pytest.mark.parametrize("text, fragment", [
    ("variants: [{precision: fp8}]", "variants[0].precision"),
    ("variants: [{memory_format: nhwc}]", "variants[0].memory_format"),
    ("variants: [{precison: fp32}]", "unknown key 'precison'"),
    ("variants: [{precision: tf32}]", "tf32 needs a CUDA device"),
    ("dataset: imagenet21k", "'dataset'"),
    ("data_mode: disk", "'data_mode'"),
    ("phases: [train, infer]", "'phases'"),
    ("notebooks: [07_magic]", "'notebooks'"),
    ("measured_steps: -1", "'measured_steps'"),
    ("window_s: 0", "'window_s'"),
    ("momentum: -0.5", "'momentum'"),
])
def test_enumerated_values(write_yaml, text, fragment):
    if "tf32" in text and "cuda" in devices.available():
        pytest.skip("tf32 is valid where CUDA is present")
    with pytest.raises(ParamsError) as err:
        params.load(write_yaml("device: cpu\n" + text + "\n"))
    assert fragment in one_line(err)


def test_overrides_parse_as_yaml():
    assert params.parse_overrides(["batch_size=64", "models=[resnet18, mnist_cnn]", "lr=0.1"]) == {
        "batch_size": 64, "models": ["resnet18", "mnist_cnn"], "lr": 0.1}
    with pytest.raises(ParamsError, match="expected key=value"):
        params.parse_overrides(["batch_size"])


def test_every_key_is_documented():
    docs = params.describe()
    assert set(docs) == set(params.FIELDS)
    table = params.table(params.Params(batch_size=7))
    assert bool(table.loc["batch_size", "changed"]) and table.loc["batch_size", "value"] == 7
