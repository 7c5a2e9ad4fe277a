"""The built-in convolutional networks: ResNet-50/152, VGG-16, CosmoFlow and 3D U-Net."""

from __future__ import annotations

from autoplan.families.cnn.spec import CNN_MODELS

MODELS = CNN_MODELS
"""Every built-in CNN."""

ALIASES = {"resnet-50": "resnet50", "resnet-152": "resnet152", "vgg-16": "vgg16", "3d-unet": "unet3d"}
"""Short names accepted for these models."""


EPOCH_SAMPLES = {
    "resnet50": 1281167, "resnet152": 1281167, "vgg16": 1281167,   # ImageNet-1k (ILSVRC 2012) training images
    "cosmoflow": 524288,             # MLPerf HPC CosmoFlow training set (cosmoUniverse_2019_05_4parE: 524,288 samples)
    "unet3d": 168,                   # MLPerf Training 3D U-Net: KiTS19's 210 cases less the 42 held out for evaluation
}
"""Samples in one epoch of each built-in CNN's training set (``--epochs``)."""
