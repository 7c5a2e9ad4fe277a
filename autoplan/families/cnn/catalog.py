"""The built-in convolutional networks: ResNet-50/152, VGG-16, CosmoFlow and 3D U-Net."""

from __future__ import annotations

from autoplan.families.cnn.spec import CNN_MODELS

MODELS = CNN_MODELS
"""Every built-in CNN."""

ALIASES = {"resnet-50": "resnet50", "resnet-152": "resnet152", "vgg-16": "vgg16", "3d-unet": "unet3d"}
"""Short names accepted for these models."""

