"""FLOP counting against published and analytic counts."""

import pytest
import torch
from torch import nn

from cnnbench import flops, models

# A varied set: plain, residual, grouped, depthwise, dense, inception, squeeze-excite, attention, window attention.
VARIED = ["alexnet", "vgg11", "resnet50", "resnext50_32x4d", "mobilenet_v2", "mobilenet_v3_large", "shufflenet_v2_x1_0",
          "efficientnet_b0", "regnet_y_400mf", "densenet121", "googlenet", "inception_v3", "squeezenet1_1",
          "convnext_tiny", "vit_b_32", "swin_t", "maxvit_t"]


@pytest.mark.parametrize("name", VARIED)
def test_forward_macs_and_params_match_torchvision(name):
    spec = models.spec(name)
    model = models.build(name).eval()
    assert models.count_params(model) == spec.published_params
    model = model.to("meta")  # shapes are all a count needs
    x = torch.empty(1, 3, spec.reference_size, spec.reference_size, device="meta")
    gmacs = flops.forward_flops(model, x) / 2 / 1e9
    assert gmacs == pytest.approx(spec.published_gmacs, rel=0.01)


def test_linear_is_2mnk():
    m, k, n = 16, 64, 32
    layer = nn.Linear(k, n, bias=False)
    x = torch.randn(m, k)
    assert flops.forward_flops(layer, x) == 2 * m * n * k
    # backward: weight gradient only (x needs no gradient), another 2MNK
    assert flops.train_flops(nn.Sequential(layer), x, num_classes=n) == 2 * (2 * m * n * k)


def test_conv_and_depthwise_backward():
    x = torch.randn(2, 8, 10, 10)
    dense = nn.Conv2d(8, 16, 3, padding=1, bias=False)
    fwd = 2 * 2 * 10 * 10 * 16 * 8 * 9
    assert flops.forward_flops(dense, x) == fwd
    depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
    fwd_dw = 2 * 2 * 10 * 10 * 8 * 9
    assert flops.forward_flops(depthwise, x) == fwd_dw
    # weight gradient costs the forward again (torch's own formula overcounts it by the channel count)
    net = nn.Sequential(depthwise, nn.Flatten())
    assert flops.train_flops(net, x, num_classes=800) == 2 * fwd_dw
    # with an input gradient too (a layer in the middle of a network): 3x the forward
    net = nn.Sequential(nn.Conv2d(8, 8, 1, bias=False), depthwise, nn.Flatten())
    pointwise = 2 * 2 * 10 * 10 * 8 * 8
    assert flops.train_flops(net, x, num_classes=800) == 2 * pointwise + 3 * fwd_dw


def test_mnist_cnn_counts_by_hand():
    c = flops.complexity("mnist_cnn", with_fvcore=False)
    macs = 26 * 26 * 8 * 1 * 9 + 11 * 11 * 16 * 8 * 9 + 400 * 128 + 128 * 10
    assert c.gmacs_fwd * 1e9 == pytest.approx(macs)
    assert c.gflops_fwd == pytest.approx(2 * c.gmacs_fwd)
    assert c.params == (8 * 9 + 8) + (16 * 8 * 9 + 16) + (400 * 128 + 128) + (128 * 10 + 10)
    assert (c.image_size, c.in_channels, c.num_classes) == (28, 1, 10)


def test_complexity_resnet18_at_training_resolution():
    ref = flops.complexity("resnet18", with_fvcore=True)
    assert ref.gmacs_fwd == pytest.approx(1.814, rel=0.01)
    assert 2.8 < ref.train_fwd_ratio < 3.0  # backward ~2x forward, minus the first layer's input gradient
    assert ref.fvcore_gmacs > ref.gmacs_fwd and "batch_norm" in ref.fvcore_extra_ops
    small = flops.complexity("resnet18", image_size=64, num_classes=200, with_fvcore=False)
    assert small.gmacs_fwd == pytest.approx(ref.gmacs_fwd * (64 / 224) ** 2, rel=0.03)
    assert small.params < ref.params  # 200-class head
    assert small.published_gmacs is None  # torchvision's figure does not apply at 64x64
    assert small.activation_mb > 0 and ref.activation_mb > 10 * small.activation_mb


def test_activation_bytes_of_a_known_stack():
    net = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    x = torch.randn(4, 10)
    # saved: x (4x10) for the first weight grad, relu output (4x20) for relu and second linear; the 4x5
    # logits for the loss's softmax backward
    got = flops.activation_bytes(net, x, num_classes=5)
    assert got >= 4 * (10 + 20) * 4
    assert got <= 4 * (10 + 20 + 20 + 5 + 5) * 4 + 64
