"""Model registry: every torchvision classification model, plus the small MNIST CNN of seed 001."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache

import torch
import torchvision
from torch import nn


class MnistCNN(nn.Module):
    """Seed 001's network: conv8(3x3)-relu-pool2 - conv16(3x3)-relu-pool2 - fc128-relu - fc10, input 1x28x28."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, image_size: int = 28):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 8, kernel_size=3),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        side = ((image_size - 2) // 2 - 2) // 2
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * side * side, 128),
            nn.ReLU(inplace=True),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


@dataclass(frozen=True)
class ModelSpec:
    """What a model expects: its reference input (for published counts), its natural data, how it is built."""

    name: str
    in_channels: int
    reference_size: int  # the resolution its published figures refer to
    reference_classes: int  # the classes its published figures refer to
    # "imagenet": trains on the run's dataset and resolution; else the dataset it has of its own
    native_data: str
    builder: Callable[..., nn.Module] | None = field(default=None, compare=False)  # None: torchvision's

    @property
    def own_data(self) -> bool:
        """The model runs on data of its own (the MNIST CNN on MNIST-shaped data), whatever the run's."""
        return self.native_data != "imagenet"

    def data_for(self, dataset: str, image_size: int, num_classes: int) -> tuple[str, int, int, int]:
        """(dataset, channels, image size, classes) the model runs on in a run of ``dataset`` at ``image_size``
        with ``num_classes``: the run's, or its own data (or synthetic data shaped like it) at its own size."""
        if not self.own_data:
            return dataset, self.in_channels, image_size, num_classes
        own = dataset if dataset == self.native_data else "synthetic"
        return own, self.in_channels, self.reference_size, self.reference_classes

    @property
    def published_gmacs(self) -> float | None:
        """torchvision's own per-model figure (``weights.meta['_ops']``, GMACs at reference_size)."""
        weights = _weights(self.name)
        return float(weights.meta["_ops"]) if weights is not None and "_ops" in weights.meta else None

    @property
    def published_params(self) -> int | None:
        weights = _weights(self.name)
        return int(weights.meta["num_params"]) if weights is not None else None


LOCAL_MODELS = {"mnist_cnn": ModelSpec("mnist_cnn", 1, 28, 10, "mnist", MnistCNN)}


@lru_cache(maxsize=1)
def model_names() -> tuple[str, ...]:
    """Every valid model name: torchvision's classification models and ours."""
    return tuple(sorted(torchvision.models.list_models(module=torchvision.models)) + sorted(LOCAL_MODELS))


def _weights(name: str):
    """torchvision's default weights of a model (every classification model has them); None for ours."""
    return None if name in LOCAL_MODELS else torchvision.models.get_model_weights(name).DEFAULT


@cache
def spec(name: str) -> ModelSpec:
    if name in LOCAL_MODELS:
        return LOCAL_MODELS[name]
    if name not in model_names():
        raise ValueError(f"unknown model '{name}'; valid models: {', '.join(model_names())}")
    weights = _weights(name)  # its published figures are at its evaluation crop, over its categories
    size, classes = int(weights.transforms().crop_size[0]), len(weights.meta["categories"])
    return ModelSpec(name, 3, size, classes, "imagenet")


# The structure torchvision publishes figures for: GoogLeNet's pretrained model drops its auxiliary heads,
# Inception v3's keeps them (in train mode it returns a tuple whose first item is the logits).
_BUILD_KWARGS = {
    "googlenet": {"aux_logits": False, "init_weights": True},
    "inception_v3": {"init_weights": True},
}


def build(name: str, num_classes: int | None = None, image_size: int | None = None) -> nn.Module:
    """A freshly initialised model (no pretrained weights are downloaded)."""
    s = spec(name)
    num_classes = num_classes or s.reference_classes
    if s.builder is not None:
        return s.builder(
            num_classes=num_classes, in_channels=s.in_channels, image_size=image_size or s.reference_size
        )
    kwargs = dict(_BUILD_KWARGS.get(name, {}))
    if name.startswith("vit_"):
        # ViT's position embedding is sized for one resolution (vit_h_14's published figure is at 518)
        kwargs["image_size"] = image_size or s.reference_size
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes, **kwargs)


@contextlib.contextmanager
def _parameters_on_meta():
    """Every parameter registered inside the block lives on the meta device (initialisers then do nothing)."""
    register = nn.Module.register_parameter

    def on_meta(module, name, param):
        if param is not None and param.device.type != "meta":
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register(module, name, param)

    nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


def build_meta(name: str, num_classes: int | None = None, image_size: int | None = None) -> nn.Module:
    """:func:`build` with no memory and no initialisation: shapes only, for counting (regnet_y_128gf in <1 s)."""
    with _parameters_on_meta():
        model = build(name, num_classes=num_classes, image_size=image_size)
    return model.to("meta")


def input_shape(name: str, image_size: int) -> tuple[int, int, int]:
    """(channels, height, width) of one input image at ``image_size``."""
    return (spec(name).in_channels, image_size, image_size)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def param_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def logits(output) -> torch.Tensor:
    """The logits of a model's output (Inception/GoogLeNet return a tuple with auxiliary logits in train mode)."""
    return output if isinstance(output, torch.Tensor) else output[0]


_OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


def make_optimizer(name: str, parameters, lr: float, momentum: float = 0.9) -> torch.optim.Optimizer:
    """sgd (with ``momentum``), adam or adamw (as params validated) over the trainable ``parameters``."""
    extra = {"momentum": momentum} if name == "sgd" else {}
    return _OPTIMIZERS[name]([p for p in parameters if p.requires_grad], lr=lr, **extra)
