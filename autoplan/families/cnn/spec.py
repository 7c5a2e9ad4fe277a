"""CNNSpec: a convolutional network as a flat list of layers (conv, pool, FC, norm, …) on 2D or 3D inputs, with
per-sample multiply-adds, parameters and activation sizes; the built-in CNNs (ResNet, VGG, CosmoFlow, 3D U-Net).

A CNN enters the rest of autoplan as a ``ModelSpec`` of family ``cnn`` whose ``structure`` is its CNNSpec
(``as_model``): one sample is one "sequence" of length 1, so tokens/s reads as samples/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoplan.errors import SpecError
from autoplan.specs.model import MAX_SIZE, ModelSpec

KINDS = ("conv", "upconv", "pool", "fc", "norm", "act", "add", "concat")
"""Layer kinds: convolution, transposed convolution, pooling, fully connected, batch norm, element-wise activation,
residual add, skip concatenation."""
WEIGHTED = ("conv", "upconv", "fc")
"""Layers whose weights filter/channel parallelism split."""
FRAMEWORKS = ("pytorch", "chainer")
"""Frameworks whose layer shapes and gradient all-reduce the CNN models follow: PyTorch (torchvision models,
floor-rounded pooling, DDP buckets) and Chainer (its ImageNet example models, pooling with ``cover_all=True``,
ChainerMN's pure_nccl all-reduce)."""


def _count(n: object) -> bool:
    """A positive integer no larger than a model's largest size."""
    return type(n) is int and 0 < n <= MAX_SIZE


@dataclass(frozen=True, slots=True)
class Layer:
    """One layer for one sample: its input and output shape (channels × spatial extent) and kernel."""

    name: str
    kind: str
    in_channels: int
    out_channels: int
    in_size: tuple[int, ...]
    """Spatial extent of the input (H, W) or (D, H, W); () after flattening."""
    out_size: tuple[int, ...]
    kernel: int = 1
    stride: int = 1
    bias: bool = False

    @property
    def in_elements(self) -> int:
        """Values of the input tensor (one sample)."""
        return self.in_channels * math.prod(self.in_size)

    @property
    def out_elements(self) -> int:
        """Values of the output tensor (one sample)."""
        return self.out_channels * math.prod(self.out_size)

    @property
    def taps(self) -> int:
        """Kernel positions (k^d)."""
        return self.kernel ** max(1, len(self.in_size)) if self.kind in ("conv", "upconv") else 1

    def macs(self) -> float:
        """Multiply-adds of the forward pass for one sample."""
        if self.kind == "conv":
            # each output value: Cin·k^d multiply-adds (He et al. 2016, Table 1 counts FLOPs as multiply-adds)
            return float(self.out_elements) * self.in_channels * self.taps
        if self.kind == "upconv":
            # transposed convolution: each input value meets Cout·k^d weights (Dumoulin & Visin 2016, §4)
            return float(self.in_elements) * self.out_channels * self.taps
        if self.kind == "fc":
            return float(self.in_elements) * self.out_channels
        return 0.0

    def params(self) -> int:
        """Trainable parameters: weights (and biases), or a norm's scale and shift."""
        if self.kind in ("conv", "upconv"):
            return self.out_channels * self.in_channels * self.taps + (self.out_channels if self.bias else 0)
        if self.kind == "fc":
            return self.in_elements * self.out_channels + (self.out_channels if self.bias else 0)
        if self.kind == "norm":
            return 2 * self.out_channels        # Ioffe & Szegedy 2015 (batch norm): γ and β per channel
        return 0

    def __post_init__(self) -> None:
        # a layer read back from a run folder is checked like one built here: no zero channel or stride
        counts = (self.in_channels, self.out_channels, self.kernel, self.stride, *self.in_size, *self.out_size)
        if (self.kind not in KINDS or not all(_count(n) for n in counts) or len(self.in_size) > 3
                or len(self.out_size) > 3 or not isinstance(self.bias, bool)):
            raise SpecError(f"CNN layer {str(self.name)[:60]!r}: kind must be one of {', '.join(KINDS)}, channels, "
                            f"sizes, kernel and stride positive integers up to {MAX_SIZE:,} (at most 3 sizes)")

    def halo_rows(self) -> int:
        """Rows of its neighbours' input a spatially split layer needs, both sides together: k − s (⌊k/2⌋ on each
        side for a stride-1 'same' convolution; none for a 2×2 stride-2 pooling; Dryden et al. IPDPS'19 §III-B)."""
        return max(0, self.kernel - self.stride) if self.kind in ("conv", "pool") else 0


@dataclass(frozen=True, kw_only=True)
class CNNSpec:
    """A convolutional network: its input and its layers in execution order."""

    name: str
    input_channels: int
    input_size: tuple[int, ...]
    """Spatial extent of one sample, (H, W) or (D, H, W)."""
    layers: tuple[Layer, ...]
    source: str = ""
    dtype_bytes: int = 2
    """Bytes per activation value: 2 for mixed precision (fp16/bf16), 4 for fp32 training."""
    framework: str = "pytorch"
    """What trains it: ``pytorch`` (DDP, 25 MiB gradient buckets) or ``chainer`` (ChainerMN's pure_nccl
    communicator: one packed all-reduce per step); see FRAMEWORKS."""

    def __hash__(self) -> int:
        # hashed on every cost-cache lookup: computed once (the layer tuple of ResNet-152 has ~500 entries)
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.name, self.input_channels, self.input_size, self.layers, self.dtype_bytes,
                           self.framework))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __post_init__(self) -> None:
        if not self.layers:
            raise SpecError(f"CNN {self.name!r} has no layers")
        if not _count(self.input_channels) or len(self.input_size) not in (2, 3) or not all(
                _count(n) for n in self.input_size):
            raise SpecError(f"CNN {self.name!r}: input_channels and input_size (2 or 3 extents) must be positive "
                            f"integers up to {MAX_SIZE:,}")
        if self.dtype_bytes not in (2, 4):
            raise SpecError(f"CNN {self.name!r}: dtype_bytes must be 2 or 4, got {self.dtype_bytes!r}")
        if self.framework not in FRAMEWORKS:
            raise SpecError(f"CNN {self.name!r}: framework must be one of {', '.join(FRAMEWORKS)}, "
                            f"got {self.framework!r}")

    @property
    def dims(self) -> int:
        """2 for images, 3 for volumes."""
        return len(self.input_size)

    def params(self) -> int:
        """Trainable parameters."""
        return sum(layer.params() for layer in self.layers)

    def forward_macs(self) -> float:
        """Multiply-adds of one sample's forward pass."""
        return sum(layer.macs() for layer in self.layers)

    def model_flops_per_sample(self) -> float:
        """Training FLOPs per sample: forward 2·MACs, backward twice the forward (dgrad + wgrad; Kaplan et al. 2020
        §2.1's 6N rule for dense layers applies to convolutions as implicit GEMMs)."""
        return 3 * 2 * self.forward_macs()


def pooled_extent(n: int, k: int, stride: int, pad: int = 0, cover_all: bool = False) -> int:
    """Output extent of a k-wide, stride-s pooling over n values padded by p on each side: ⌊(n + 2p − k)/s⌋ + 1
    (Dumoulin & Visin 2016, relationship 6; PyTorch MaxPool2d, ceil_mode=False), or with ``cover_all`` every input
    covered, ⌊(n + 2p − k + s − 1)/s⌋ + 1 (chainer.utils.conv.get_conv_outsize, the default of Chainer's
    max_pooling_2d: docs.chainer.org chainer.functions.max_pooling_2d, cover_all=True)."""
    return (n + 2 * pad - k + (stride - 1 if cover_all else 0)) // stride + 1


class _Builder:
    """Appends layers while tracking the current channels and spatial extent."""

    def __init__(self, channels: int, size: tuple[int, ...], cover_all: bool = False) -> None:
        self.channels, self.size, self.layers = channels, size, []
        self.cover_all = cover_all
        """Pooling rounds its output extent up (Chainer's ``cover_all=True`` default), not down (PyTorch)."""

    def state(self) -> tuple[int, tuple[int, ...]]:
        return self.channels, self.size

    def _add(self, name: str, kind: str, out: int, size: tuple[int, ...], src: tuple | None = None, **kw: int) -> None:
        cin, insize = src or self.state()
        self.layers.append(Layer(name, kind, cin, out, insize, size, **kw))
        self.channels, self.size = out, size

    def conv(self, name: str, out: int, k: int, stride: int = 1, pad: int | None = None,
             src: tuple | None = None, bias: bool = False) -> None:
        insize = (src or self.state())[1]
        p = k // 2 if pad is None else pad
        # output extent ⌊(n + 2p − k)/s⌋ + 1 (Dumoulin & Visin 2016, relationship 6)
        size = tuple((n + 2 * p - k) // stride + 1 for n in insize)
        self._add(name, "conv", out, size, src, kernel=k, stride=stride, bias=bias)

    def upconv(self, name: str, out: int, k: int = 2) -> None:
        self._add(name, "upconv", out, tuple(n * k for n in self.size), kernel=k, stride=k, bias=True)

    def pool(self, name: str, k: int, stride: int, pad: int = 0) -> None:
        size = tuple(pooled_extent(n, k, stride, pad, self.cover_all) for n in self.size)
        self._add(name, "pool", self.channels, size, kernel=k, stride=stride)

    def global_pool(self, name: str) -> None:
        self._add(name, "pool", self.channels, (1,) * len(self.size), kernel=self.size[0], stride=self.size[0])

    def elementwise(self, name: str, kind: str) -> None:
        self._add(name, kind, self.channels, self.size)

    def bn_relu(self, name: str) -> None:
        self.elementwise(f"{name}.bn", "norm")
        self.elementwise(f"{name}.relu", "act")

    def fc(self, name: str, out: int) -> None:
        self._add(name, "fc", out, (), bias=True)

    def concat(self, name: str, extra_channels: int) -> None:
        self._add(name, "concat", self.channels + extra_channels, self.size)


def resnet(name: str, blocks: tuple[int, int, int, int], size: int = 224, classes: int = 1000,
           framework: str = "pytorch") -> CNNSpec:
    """ResNet with bottleneck blocks (He et al. 2016, arXiv 1512.03385, Table 1). PyTorch: torchvision's v1.5 puts
    the stride on the 3×3 convolution, max pooling padded by 1. Chainer: its ImageNet example (chainer/examples/
    imagenet/resnet50.py, which the CNN oracle's runs trained: github.com/ankahira/paraDL models/resnet50.py) is
    v1, the stride on the first 1×1 convolution, max pooling unpadded with cover_all."""
    chainer = framework == "chainer"
    b = _Builder(3, (size, size), cover_all=chainer)
    b.conv("conv1", 64, 7, 2, 3)
    b.bn_relu("conv1")
    b.pool("maxpool", 3, 2, 0 if chainer else 1)
    for stage, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512)), start=2):
        for i in range(count):
            tag, stride, block_in = f"conv{stage}.{i}", (2 if i == 0 and stage > 2 else 1), b.state()
            b.conv(f"{tag}.a", width, 1, stride if chainer else 1, 0)
            b.bn_relu(f"{tag}.a")
            b.conv(f"{tag}.b", width, 3, 1 if chainer else stride, 1)
            b.bn_relu(f"{tag}.b")
            b.conv(f"{tag}.c", 4 * width, 1, 1, 0)
            b.elementwise(f"{tag}.c.bn", "norm")
            out = b.state()
            if i == 0:
                b.conv(f"{tag}.down", 4 * width, 1, stride, 0, src=block_in)
                b.elementwise(f"{tag}.down.bn", "norm")
            b.channels, b.size = out
            b.elementwise(f"{tag}.add", "add")
            b.elementwise(f"{tag}.relu", "act")
    b.global_pool("avgpool")
    b.fc("fc", classes)
    source = ("He et al. 2016 (arXiv 1512.03385), Table 1; " + ("Chainer's ImageNet example (v1: stride on the first "
              "1x1 conv)" if chainer else "torchvision resnet (v1.5: stride on the 3x3 conv)"))
    return CNNSpec(name=name, input_channels=3, input_size=(size, size), layers=tuple(b.layers), source=source,
                   framework=framework)


def vgg16(size: int = 224, classes: int = 1000, name: str = "vgg16", framework: str = "pytorch") -> CNNSpec:
    """VGG-16, configuration D (Simonyan & Zisserman 2015, arXiv 1409.1556, Table 1), 3×3 convolutions with bias;
    under Chainer its 2×2 poolings round up (cover_all), so fc6 sees ⌈size/32⌉² positions (8² at 226 pixels:
    170M parameters, as the CNN oracle's model file VGG_ImageNet_profall.net_sc counts them)."""
    b = _Builder(3, (size, size), cover_all=framework == "chainer")
    for block, (count, width) in enumerate(((2, 64), (2, 128), (3, 256), (3, 512), (3, 512)), start=1):
        for i in range(1, count + 1):
            b.conv(f"conv{block}_{i}", width, 3, bias=True)
            b.elementwise(f"conv{block}_{i}.relu", "act")
        b.pool(f"pool{block}", 2, 2)
    for i, width in ((6, 4096), (7, 4096), (8, classes)):
        b.fc(f"fc{i}", width)
        if i < 8:
            b.elementwise(f"fc{i}.relu", "act")
    return CNNSpec(name=name, input_channels=3, input_size=(size, size), layers=tuple(b.layers),
                   source="Simonyan & Zisserman 2015 (arXiv 1409.1556), Table 1 configuration D (138M parameters)",
                   framework=framework)


def cosmoflow(size: int = 512, channels: int = 4, name: str = "cosmoflow") -> CNNSpec:
    """CosmoFlow on 4×512³ volumes as the CNN oracle ran it (valid 3D convolutions, average pooling)."""
    b = _Builder(channels, (size,) * 3)
    # Kahira et al. 2021 oracle model file COSMOFLOW.net (github.com/TruongThaoNguyen/paraDL-analysis), after
    # Mathuriya et al. SC'18 (CosmoFlow, arXiv 1808.04728) Fig. 2: 7 conv layers then 3 FC layers
    for i, (width, k, stride) in enumerate(((16, 3, 1), (32, 3, 1), (64, 3, 2), (128, 3, 1), (256, 2, 1),
                                            (256, 2, 1), (128, 2, 1)), start=1):
        b.conv(f"conv{i}", width, k, stride, 0, bias=True)
        b.elementwise(f"conv{i}.relu", "act")
        if i < 7:
            b.pool(f"pool{i}", 2, 2)
    for i, width in enumerate((2048, 256, 4), start=1):
        b.fc(f"fc{i}", width)
        if i < 3:
            b.elementwise(f"fc{i}.relu", "act")
    return CNNSpec(name=name, input_channels=channels, input_size=(size,) * 3, layers=tuple(b.layers),
                   source="Mathuriya et al. SC'18 (arXiv 1808.04728); 4x512^3 layers as in Kahira et al. 2021 "
                          "(arXiv 2104.09075) oracle model file COSMOFLOW.net")


def unet3d(size: int = 128, classes: int = 3, name: str = "unet3d") -> CNNSpec:
    """3D U-Net (Çiçek et al. 2016, arXiv 1606.06650, Fig. 1) with 'same' padding on a 1×128³ patch."""
    b = _Builder(1, (size,) * 3)
    skips = []
    for level, (first, second) in enumerate(((32, 64), (64, 128), (128, 256), (256, 512))):
        b.conv(f"down{level}.a", first, 3)
        b.bn_relu(f"down{level}.a")
        b.conv(f"down{level}.b", second, 3)
        b.bn_relu(f"down{level}.b")
        if level < 3:
            skips.append(second)
            b.pool(f"down{level}.pool", 2, 2)
    for level, width in ((2, 256), (1, 128), (0, 64)):
        b.upconv(f"up{level}.upconv", b.channels)
        b.concat(f"up{level}.concat", skips[level])
        for part in ("a", "b"):
            b.conv(f"up{level}.{part}", width, 3)
            b.bn_relu(f"up{level}.{part}")
    b.conv("head", classes, 1, 1, 0, bias=True)
    return CNNSpec(name=name, input_channels=1, input_size=(size,) * 3, layers=tuple(b.layers),
                   source="Çiçek et al. 2016 (arXiv 1606.06650), Fig. 1; 'same' padding, 128^3 patches")


def as_model(cnn: CNNSpec) -> ModelSpec:
    """The ModelSpec of family ``cnn`` that carries ``cnn``: one sample is a sequence of length 1."""
    convs = sum(1 for layer in cnn.layers if layer.kind in WEIGHTED)
    return ModelSpec(name=cnn.name, layers=len(cnn.layers), hidden=convs, heads=1, ffn_hidden=1,
                     vocab=max(1, cnn.layers[-1].out_channels), seq_len=1, source=cnn.source, family="cnn",
                     structure=cnn)


CNN_MODELS: tuple[ModelSpec, ...] = tuple(as_model(c) for c in (
    resnet("resnet50", (3, 4, 6, 3)), resnet("resnet152", (3, 8, 36, 3)), vgg16(), cosmoflow(), unet3d()))
"""The built-in CNNs."""

BUILDERS = {
    "resnet50": lambda size, fw: resnet("resnet50", (3, 4, 6, 3), size, framework=fw),
    "resnet152": lambda size, fw: resnet("resnet152", (3, 8, 36, 3), size, framework=fw),
    "vgg16": lambda size, fw: vgg16(size, framework=fw),
    "cosmoflow": lambda size, fw: cosmoflow(size),
    "unet3d": lambda size, fw: unet3d(size),
}
"""The built-in CNNs by name, for an input of a given extent (pixels per side) under a framework (FRAMEWORKS:
what changes is ResNet's stride placement and the rounding of pooled extents)."""


def build(name: str, size: int, dtype_bytes: int = 2, framework: str = "pytorch") -> ModelSpec:
    """Built-in CNN ``name`` on ``size``-wide inputs, with ``dtype_bytes`` per activation, as ``framework`` defines
    and trains it, as a model."""
    if name not in BUILDERS:
        raise SpecError(f"unknown CNN {name!r}; built-in CNNs: {', '.join(BUILDERS)}")
    if not isinstance(size, int) or isinstance(size, bool) or not 8 <= size <= 4096:
        raise SpecError(f"CNN {name!r}: image size must be an integer from 8 to 4096, got {size!r}")
    if framework not in FRAMEWORKS:
        raise SpecError(f"CNN {name!r}: framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    spec = BUILDERS[name](size, framework)
    return as_model(CNNSpec(name=spec.name, input_channels=spec.input_channels, input_size=spec.input_size,
                            layers=spec.layers, source=spec.source, dtype_bytes=dtype_bytes, framework=framework))
