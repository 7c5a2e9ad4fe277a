"""CNN specs: closed-form multiply-adds, parameters and shapes of the built-in CNNs."""

from __future__ import annotations

import math

import pytest

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.families.cnn.spec import CNN_MODELS, CNNSpec, Layer, as_model, cosmoflow, resnet, unet3d, vgg16


def test_resnet50_has_4_1_gmacs_and_25_6m_parameters():
    net = resnet("resnet50", (3, 4, 6, 3))
    # He et al. 2016 Table 1 (3.8e9 "FLOPs" = multiply-adds, v1); torchvision v1.5: 4.09 GMACs, 25,557,032 params
    assert net.forward_macs() == pytest.approx(4.09e9, rel=0.01)
    assert net.params() == 25_557_032


def test_other_catalog_parameter_counts_match_their_papers():
    assert resnet("r152", (3, 8, 36, 3)).params() == pytest.approx(60.2e6, rel=0.002)    # He et al. Table 1 / torchvision
    assert vgg16().params() == 138_357_544                                              # Simonyan & Zisserman: 138M
    assert vgg16().forward_macs() == pytest.approx(15.5e9, rel=0.01)


def test_a_convolution_counts_output_pixels_times_its_kernel_volume():
    conv1 = resnet("r", (1, 1, 1, 1)).layers[0]
    assert (conv1.out_size, conv1.kernel, conv1.stride) == ((112, 112), 7, 2)
    assert conv1.macs() == 112 * 112 * 64 * 3 * 7 * 7
    assert conv1.params() == 64 * 3 * 7 * 7


def test_resnet_ends_in_7x7_maps_and_a_1000_way_classifier():
    net = resnet("r", (3, 4, 6, 3))
    pool = next(layer for layer in net.layers if layer.name == "avgpool")
    assert pool.in_size == (7, 7) and pool.in_channels == 2048
    assert net.layers[-1].kind == "fc" and net.layers[-1].out_channels == 1000


def test_three_dimensional_networks_have_volumes():
    cf = cosmoflow()
    assert cf.dims == 3 and cf.layers[0].out_size == (510, 510, 510)
    assert cf.layers[0].macs() == 510**3 * 16 * 4 * 27
    u = unet3d()
    assert u.dims == 3 and u.layers[-1].out_size == (128, 128, 128) and u.layers[-1].out_channels == 3
    up = next(layer for layer in u.layers if layer.kind == "upconv")
    assert up.out_size == tuple(2 * n for n in up.in_size)


def test_training_flops_are_three_forwards():
    net = vgg16()
    assert net.model_flops_per_sample() == 6 * net.forward_macs()


def test_a_cnn_model_counts_samples_as_tokens():
    m = as_model(resnet("r50", (3, 4, 6, 3)))
    assert m.family == "cnn" and m.seq_len == 1
    assert m.params() == m.structure.params()
    assert m.model_flops_per_iteration(256) == 256 * m.structure.model_flops_per_sample()
    assert m.hardware_flops_per_iteration(256, "full") == pytest.approx(m.model_flops_per_iteration(256) * 4 / 3)


def test_catalog_serves_every_cnn_by_name_and_alias():
    assert {m.name for m in CNN_MODELS} == {"resnet50", "resnet152", "vgg16", "cosmoflow", "unet3d"}
    assert all(m.source for m in CNN_MODELS)
    assert get_model("ResNet-50").name == "resnet50"


def test_bad_cnn_specs_are_user_errors():
    with pytest.raises(SpecError, match="no layers"):
        CNNSpec(name="x", input_channels=3, input_size=(8, 8), layers=())
    layer = Layer("c", "conv", 3, 8, (8, 8), (8, 8), 3)
    with pytest.raises(SpecError, match="dtype_bytes must be 2 or 4"):
        CNNSpec(name="x", input_channels=3, input_size=(8, 8), layers=(layer,), dtype_bytes=3)


def test_pooling_rounds_down_in_pytorch_and_up_under_chainers_cover_all():
    from autoplan.families.cnn.spec import pooled_extent
    # ⌊(n + 2p − k)/s⌋ + 1, and Chainer's cover_all ⌊(n + 2p − k + s − 1)/s⌋ + 1 (get_conv_outsize)
    assert [pooled_extent(n, 2, 2) for n in (226, 113, 56)] == [113, 56, 28]
    assert [pooled_extent(n, 2, 2, cover_all=True) for n in (226, 113, 57, 29, 15)] == [113, 57, 29, 15, 8]
    assert pooled_extent(113, 3, 2, 0, cover_all=True) == 56 and pooled_extent(113, 3, 2, 1) == 57
    # an extent that divides evenly pools the same either way
    assert all(pooled_extent(2 * n, 2, 2) == pooled_extent(2 * n, 2, 2, cover_all=True) == n for n in range(1, 50))


def test_chainer_vgg16_at_226_pixels_has_the_oracles_170m_parameters():
    net = vgg16(226, framework="chainer")
    fc6 = next(layer for layer in net.layers if layer.name == "fc6")
    assert fc6.in_channels * 8 * 8 == math.prod((fc6.in_channels, *fc6.in_size)) == 32_768
    # the oracle's VGG_ImageNet_profall.net_sc: 169,801,408 weights, plus 13,416 biases (64+…+4096+1000)
    assert net.params() == 169_801_408 + 13_416
    assert vgg16(226).params() == 138_357_544        # PyTorch rounds the poolings down: fc6 sees 7×7


def test_chainer_resnet50_is_v1_strided_on_the_first_1x1_conv():
    net = resnet("r", (3, 4, 6, 3), 226, framework="chainer")
    by_name = {layer.name: layer for layer in net.layers}
    assert by_name["maxpool"].out_size == (56, 56)
    assert by_name["conv3.0.a"].stride == 2 and by_name["conv3.0.b"].stride == 1
    assert by_name["avgpool"].in_size == (7, 7)
    assert net.params() == resnet("r", (3, 4, 6, 3), 226).params()           # same weights, other shapes
    # v1 at 224: He et al. 2016 Table 1's 3.8e9 multiply-adds (3.86e9 counting the shortcut convs)
    assert resnet("r", (3, 4, 6, 3), framework="chainer").forward_macs() == pytest.approx(3.86e9, rel=0.01)


def test_an_unknown_framework_is_a_user_error():
    from autoplan.families.cnn.spec import build
    with pytest.raises(SpecError, match="framework must be one of pytorch, chainer"):
        build("vgg16", 224, framework="tensorflow")
    assert build("vgg16", 224, 4, "chainer").structure.framework == "chainer"
