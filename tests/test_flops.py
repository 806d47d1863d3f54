"""FLOP counting against published and analytic counts."""

import pandas as pd
import pytest
import torch
from torch import nn

from cnnbench import models
from cnnbench.measure import flops

# Every torchvision classifier (the whole sweep counts on the meta device: ~1 min on 2 cores).
TORCHVISION = [n for n in models.model_names() if n not in models.LOCAL_MODELS]


@pytest.mark.parametrize("name", TORCHVISION)
def test_forward_macs_and_params_match_torchvision(name):
    spec = models.spec(name)
    model = models.build_meta(name).eval()  # shapes are all a count needs
    assert models.count_params(model) == spec.published_params
    x = torch.empty(1, 3, spec.reference_size, spec.reference_size, device="meta")
    gmacs = flops.forward_flops(model, x) / 2 / 1e9
    assert flops.matches_published(gmacs, spec.published_gmacs), (gmacs, spec.published_gmacs)


def test_every_torchvision_classifier_is_swept():
    assert len(TORCHVISION) >= 80 and {"vit_h_14", "swin_v2_b", "maxvit_t", "regnet_y_128gf"} <= set(
        TORCHVISION
    )


def test_published_tolerance_is_one_percent_or_the_published_rounding():
    assert flops.matches_published(4.409 * 1.009, 4.409) and not flops.matches_published(4.409 * 1.011, 4.409)
    assert flops.matches_published(0.04048, 0.04)  # shufflenet_v2_x0_5: 0.040 is 0.0405 rounded to 3 decimals
    assert not flops.matches_published(2.95, 4.409) and flops.matches_published(1.0, None)


class _SelfAttention(nn.Module):
    def __init__(self, embed: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed, heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def test_attention_counted_on_cpu_under_no_grad_and_eval():
    """The fused inference fast path and the CPU SDPA kernel hid every product of the block (counted 0)."""
    b, seq, embed, heads = 2, 10, 32, 4
    net = _SelfAttention(embed, heads).eval()
    projections = 2 * b * seq * embed * 3 * embed + 2 * b * seq * embed * embed  # q, k, v in; out
    scores_and_mix = 2 * (2 * b * heads * seq * seq * (embed // heads))  # Q K^T and softmax(Q K^T) V
    assert flops.forward_flops(net, torch.randn(b, seq, embed)) == projections + scores_and_mix
    assert torch.backends.mha.get_fastpath_enabled()  # restored after counting


@pytest.mark.parametrize("name", ["vit_b_32", "swin_t"])
def test_transformers_counted_right_on_cpu(name):
    """01 counts on a real CPU batch: ViT counted 2.95 GMACs (-33%) and a 4.4 training/forward ratio."""
    c = flops.complexity(name, batch=1, with_fvcore=False)
    assert c.gmacs_fwd == pytest.approx(models.spec(name).published_gmacs, rel=0.01)
    assert c.matches_published and abs(c.macs_vs_published_pct) < 1
    assert 2.8 < c.train_fwd_ratio < 3.05


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
    assert small.activation_mib > 0 and ref.activation_mib > 10 * small.activation_mib


def test_activation_bytes_of_a_known_stack():
    net = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    x = torch.randn(4, 10)
    # saved: x (4x10) for the first weight grad, relu output (4x20) for relu and second linear; the 4x5
    # logits for the loss's softmax backward
    got = flops.activation_bytes(net, x, num_classes=5)
    assert got >= 4 * (10 + 20) * 4
    assert got <= 4 * (10 + 20 + 20 + 5 + 5) * 4 + 64


def _complexity_rows(gmacs_vit: float) -> list[dict]:
    rows = []
    for model, gmacs, pub in (("resnet18", 1.814, 1.814), ("vit_b_32", gmacs_vit, 4.409)):
        rows.append(
            {
                "model": model,
                "role": "reference",
                "params": 10,
                "published_params": 10,
                "gmacs_fwd": gmacs,
                "published_gmacs": pub,
                "matches_published": flops.matches_published(gmacs, pub),
            }
        )
    rows.append(
        {
            "model": "resnet18",
            "role": "training",
            "params": 9,
            "published_params": None,
            "gmacs_fwd": 0.15,
            "published_gmacs": None,
            "matches_published": True,
        }
    )
    return rows


def test_01_warns_visibly_about_any_model_off_its_published_count():
    import pandas as pd

    bad = pd.DataFrame(_complexity_rows(2.95))
    html = flops.published_check(bad).data
    assert "WARNING" in html and "vit_b_32" in html and "-33.1%" in html and "resnet18" not in html
    assert "by more than 1%" in html  # the bound a reader judges the disagreement by
    good = flops.published_check(pd.DataFrame(_complexity_rows(4.409))).data
    assert (
        "WARNING" not in good
        and "all 2 row(s)" in good
        and "within 1% (MACs) and exactly (parameters)" in good
    )


def test_report_opens_with_the_warning(tmp_path):
    from cnnbench import report, results

    results.write_rows(tmp_path / "complexity.csv", _complexity_rows(2.95))
    assert "vit_b_32" in report.complexity_warning(tmp_path) and "WARNING" in report.complexity_warning(
        tmp_path
    )
    results.write_rows(tmp_path / "complexity.csv", _complexity_rows(4.409))
    assert report.complexity_warning(tmp_path) == ""
    assert report.complexity_warning(tmp_path / "missing") == ""


def test_a_step_counted_on_the_meta_device_is_kept_on_disk_and_read_back_the_same(tmp_path, monkeypatch):
    """Counting a step on the meta device takes about a second a model; 08, the report and predictions count the
    same steps in fresh processes, so the counts are kept in the workbook's cache, keyed by the arguments and the
    counting code, and a broken cache file is counted again."""
    from cnnbench.measure import traffic

    monkeypatch.setenv("CNNBENCH_CACHE", str(tmp_path))
    first = traffic.count_step("mnist_cnn", 4, 28, 10, "train")
    kept = [p for p in tmp_path.iterdir() if p.suffix != ".lock"]  # the entry (beside its lock file)
    assert len(kept) == 1
    calls = []
    monkeypatch.setattr(traffic, "TrafficCounter", lambda *a: calls.append(a))  # counting again would fail
    again = traffic.count_step("mnist_cnn", 4, 28, 10, "train")
    assert not calls and again.equals(first)
    kept[0].write_bytes(b"not a table")
    monkeypatch.undo()
    monkeypatch.setenv("CNNBENCH_CACHE", str(tmp_path))
    assert traffic.count_step("mnist_cnn", 4, 28, 10, "train").equals(first)
    assert (
        traffic.count_step("mnist_cnn", 8, 28, 10, "train").flops.sum()
        == 2 * first.flops.sum() - first[first.section == "optimizer"].flops.sum()
    )  # another key: counted, not read


def test_the_report_warns_of_a_parameter_count_off_its_published_figure_as_01_does(tmp_path):
    """01's check names a model whose parameters differ from torchvision's; the report's warning read only the MACs'
    verdict (``matches_published``) and opened without a word. Both now come from one list of mismatches."""
    from cnnbench import report, results

    rows = _complexity_rows(4.409)
    rows[0]["params"] = 11  # resnet18: 11 parameters against a published 10, its MACs right
    results.write_rows(tmp_path / "complexity.csv", rows)
    assert "resnet18" in flops.published_check(pd.DataFrame(rows)).data
    warning = report.complexity_warning(tmp_path)
    assert "WARNING" in warning and "resnet18" in warning and "parameters" in warning


def test_parameters_are_checked_against_torchvision_only_at_the_published_resolution():
    """A ViT's position embedding grows with the image: vit_b_32 at 64x64 has 88,189,672 parameters, not the
    88,224,232 published at 224, so 01 warned every FLOP figure was suspect. The published count applies where
    the published MACs do (reference size and classes)."""
    at_64 = flops.complexity("vit_b_32", 64, 1000, batch=1, with_fvcore=False)
    assert at_64.published_params is None and at_64.published_gmacs is None
    assert flops.off_published(pd.DataFrame([vars(at_64)])) == ""
