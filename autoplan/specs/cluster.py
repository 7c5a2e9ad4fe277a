"""ClusterSpec: GPUs, nodes and the network tiers that join them, read from ``cluster_specs/*.toml``."""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path

from autoplan.errors import SpecError
from autoplan.specs.files import excerpt, shown
from autoplan.specs.hashing import cache_hash

GIB = 1024**3


@lru_cache(maxsize=1024)
def expected_max_normal(n: int) -> float:
    """E[max of ``n`` independent standard normal variables] (0 for one): ∫ x·n·φ(x)·Φ(x)^(n-1) dx (order statistics,
    David & Nagaraja 2003 §2.1), by the trapezoid rule over [-10, 12] in steps of 0.1 (the rule converges
    geometrically for such smooth, fast-decaying integrands: within 1e-9 up to n = 65,536)."""
    if n <= 1:
        return 0.0
    total, norm, root2 = 0.0, 1 / math.sqrt(2 * math.pi), math.sqrt(2)
    for i in range(-100, 121):
        x = i / 10
        total += x * n * norm * math.exp(-x * x / 2) * (0.5 * (1 + math.erf(x / root2))) ** (n - 1)
    return total / 10


def slowest_pace(variability: float, gpus: int) -> float:
    """Speed of the slowest of ``gpus`` GPUs whose speeds spread normally with relative standard deviation
    ``variability``, over the median GPU's (1 for one GPU or no spread)."""
    # a synchronous step waits at every collective for its slowest GPU (the straggler; Sinha et al., SC'22,
    # arXiv 2208.11035: identical GPUs differ in power-capped speed): the expected slowest of n normal draws
    return 1 / (1 + variability * expected_max_normal(gpus)) if variability else 1.0


@cache_hash
@dataclass(frozen=True, kw_only=True)
class GPUSpec:
    """One accelerator and the achievable rates of its kernels (calibration, see the TOML comments)."""

    name: str
    peak_flops: float
    """Dense 16-bit tensor-core FLOP/s."""
    hbm_bytes: float
    """Memory capacity in bytes."""
    hbm_bandwidth: float
    """Peak memory bandwidth in B/s."""
    sm_count: int
    """Streaming multiprocessors: one GEMM tile per SM per wave."""
    gemm_efficiency: float
    """Fraction of peak reached by large, well-shaped GEMMs (before wave quantization)."""
    gemm_tile: tuple[int, int] = (128, 256)
    """Output tile (rows, cols) of the GEMM kernel, for wave quantization."""
    gemm_half_k: float = 64.0
    """Inner dimension k at which a GEMM reaches half its large-k rate (pipeline fill per tile)."""
    attention_efficiency: float
    """Fraction of peak reached by the attention core (score and context GEMMs)."""
    memory_efficiency: float
    """Fraction of HBM bandwidth reached by element-wise and normalisation kernels."""
    kernel_overhead: float
    """Seconds of fixed cost per kernel (launch and tail)."""
    memory_reserve_bytes: float
    """Bytes per GPU not available to tensors (CUDA context, NCCL buffers, allocator fragmentation)."""
    attention_memory_efficiency: float = 0.0
    """Fraction of HBM bandwidth reached by the unfused attention's softmax and dropout over the s×s scores
    (0: as ``memory_efficiency``)."""
    flash2_attention_efficiency: float = 0.0
    """Fraction of peak reached by FlashAttention-2 (Dao's kernel, Transformer Engine's flash-attn backend) where
    ``attention_efficiency`` describes a faster fused kernel of the GPU's stack (cuDNN's on Hopper); 0: FlashAttention-2
    is the kernel ``attention_efficiency`` describes. Read where a run's software picks FlashAttention-2
    (``with_flash2_attention``; validate's ``hardware.attention_kernel: flash2``)."""
    clock_ratio: float = 1.0
    """Sustained tensor-core clock under training load over the clock the peak is quoted at (power capping)."""
    fp8_peak_flops: float = 0.0
    """Dense FP8 tensor-core FLOP/s (0: no FP8 tensor cores, e.g. A100)."""
    fp8_gemm_efficiency: float = 0.0
    """Fraction of ``fp8_peak_flops`` large FP8 GEMMs reach (before wave quantization), like ``gemm_efficiency``
    (0: the same fraction as BF16's)."""
    flash2_deterministic_bwd_ratio: float = 1.0
    """Backward time of FlashAttention-2's deterministic algorithm over its default one (flash-attn ≥ 2.4.1,
    ``deterministic=True``; what Transformer Engine runs under ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0`` below sm90):
    read where a run's ``attention_kernel`` is flash2-deterministic (1: unmeasured)."""
    fused_deterministic_bwd_ratio: float = 1.0
    """The same for the fused kernel ``attention_efficiency`` describes (cuDNN's on Hopper, where Transformer Engine
    keeps it in deterministic mode): read where a run's ``attention_kernel`` is fused-deterministic (1: unmeasured)."""
    attention_bwd_ratio: float = 1.0
    """The attention backward's time over the 2.5× forward the model prices: set for a deterministic run by
    ``with_flash2_attention`` or ``with_deterministic_attention`` (not a file key)."""
    epilogue_exposure: float = 0.0
    """Fraction of a GEMM's output traffic beyond a 16-bit write (an accumulating epilogue's read and FP32 write of
    ``main_grad``) that its main loop does not hide: that traffic's time at ``memory_efficiency`` is added to a
    compute-bound GEMM (0: the roofline alone)."""
    fp8_blockwise_gemm_ratio: float = 1.0
    """Time of an FP8 GEMM with 1×128 activation and 128×128 weight scales (Megatron-LM ``--fp8-recipe blockwise``:
    cuBLAS through Transformer Engine) over the same GEMM with one scale per operand (1: no slower, unmeasured)."""
    mxfp8: bool = False
    """The tensor cores take MXFP8 block-scaled operands natively (Blackwell and later)."""
    mxfp8_gemm_ratio: float = 1.0
    """Time of an MXFP8 GEMM (a scale per 32 values) over the same GEMM with one scale per tensor, both on quantized
    operands (1: no slower, unmeasured)."""
    fp8_attention_fwd_ratio: float = 1.0
    """Time of the fused attention's forward in FP8 (Transformer Engine's FP8 dot-product attention through cuDNN)
    over its BF16 forward (1: unmeasured)."""
    fp8_attention_bwd_ratio: float = 1.0
    """The same for the backward (1: unmeasured)."""
    fp8_any_layout: bool = False
    """cuBLASLt's FP8 GEMMs take every operand layout, not only TN (Blackwell, sm 10.x): Transformer Engine's
    tensor-scaled FP8 then writes and keeps no transposed copy (``fp8_scaling.fp8_copies``)."""
    l2_cache_bytes: float = 0.0
    """L2 cache that holds a skewed embedding table's hot rows (0: no cache modelled)."""
    l2_bandwidth: float = 0.0
    """Bytes per second the L2 cache serves (0: as HBM)."""
    tdp_w: float = 0.0
    """Board power limit (TDP) in watts, from the datasheet: what the GPU draws while it computes (training GEMMs run
    power-capped); 0: unknown, so no energy figure."""
    idle_w: float = 0.0
    """Watts while the GPU waits (pipeline bubble, exposed communication); 0: counted at ``tdp_w`` all the time."""
    host_link: float = 0.0
    """Bytes per second between the GPU and its host's memory, each way (PCIe, or NVLink-C2C on Grace); 0: unknown,
    so no plan offloads to the host."""
    host_adam_params_per_s: float = 0.0
    """Parameters per second the host's CPU Adam updates for one GPU's process (optimizer offload); 0: unknown."""
    graph_kernel_overhead: float = 0.0
    """Seconds of fixed cost per kernel replayed from a CUDA graph (0: unmeasured, as ``kernel_overhead``)."""
    host_launch: float = 0.0
    """Host (CPU) seconds to issue one modelled op (a module call: Python, the dispatcher and its kernel launches)
    from eager PyTorch/Transformer Engine code; 0: the host always keeps ahead of the GPU. A pass is never faster
    than its host issues it (``hardware/compute.host_exposed``); MoE layers, whose token counts sync the host every
    layer, expose it more (``families/transformer/moe_layer.py``)."""
    host_step: float = 0.0
    """Host seconds each training step spends outside its passes, the GPU waiting (the optimizer's launches and its
    gradient-norm sync, the loss and logging reductions read back to the host); 0: none."""
    speed_variability: float = 0.0
    """Standard deviation of the sustained compute speed of GPUs of this SKU, over its median (manufacturing and
    power management: identical GPUs run power-capped kernels at different clocks); 0: all alike."""
    job_gpus: int = 1
    """GPUs of the job this GPU computes in (set by the cluster it belongs to; not a file key): a synchronous step
    runs at the pace of the slowest of them (``pace``)."""

    @cached_property
    def pace(self) -> float:
        """Speed of the slowest of ``job_gpus`` GPUs over the median GPU's, which ``clock_ratio`` describes (kept
        with the instance: it is asked for every GEMM)."""
        return slowest_pace(self.speed_variability, self.job_gpus)

    def with_flash2_attention(self, deterministic: bool = False) -> GPUSpec:
        """This GPU with FlashAttention-2 as its attention kernel (``flash2_attention_efficiency``), its
        deterministic backward where asked (``flash2_deterministic_bwd_ratio``)."""
        return replace(self, attention_efficiency=self.flash2_attention_efficiency or self.attention_efficiency,
                       flash2_attention_efficiency=0.0,
                       attention_bwd_ratio=self.flash2_deterministic_bwd_ratio if deterministic else 1.0)

    def with_deterministic_attention(self) -> GPUSpec:
        """This GPU's fused attention kernel with its deterministic backward (``fused_deterministic_bwd_ratio``)."""
        return replace(self, attention_bwd_ratio=self.fused_deterministic_bwd_ratio)

    @property
    def sustained_clock(self) -> float:
        """``clock_ratio`` at the job's slowest GPU: what the job's compute-bound kernels run at."""
        return self.clock_ratio * self.pace


@dataclass(frozen=True, kw_only=True)
class NetworkTier:
    """One level of the network, innermost first: a GPU reaches ``gpus`` peers through this tier."""

    name: str
    gpus: int
    """GPUs joined at this level (0: the whole cluster)."""
    bandwidth: float
    """Bytes/s per GPU per direction through this tier."""
    efficiency: float
    """Fraction of ``bandwidth`` that NCCL ring collectives reach (bus bandwidth / line rate)."""
    latency: float
    """Seconds per algorithm step crossing this tier."""
    allreduce_busbw: float = 0.0
    """Bus bandwidth (B/s) of an in-switch all-reduce (NVLink SHARP) when the group spans the tier; 0 if none."""
    half_bandwidth_bytes: float = 0.0
    """Message size at which a collective reaches half its large-message bandwidth (NCCL pipelining); 0: none."""
    oversubscription: float = 1.0
    """Bandwidth into the switches below this tier over their uplinks into it (for the spine tier: what a leaf's
    nodes can send over what its uplinks carry); 1: non-blocking. Read by the link-sharing (contention) model."""


DIMENSION_TOPOLOGIES = ("ring", "switch", "fully_connected")
"""Topologies of one network dimension (ASTRA-sim's per-dimension network description; Themis, arXiv 2110.04478)."""


@dataclass(frozen=True, kw_only=True)
class NetworkDimension:
    """One dimension of an N-dimensional network, innermost first: ``size`` GPUs joined by one topology."""

    name: str
    size: int
    """GPUs along this dimension (0 in the last dimension: as many as the cluster needs)."""
    topology: str
    """``ring``, ``switch`` or ``fully_connected``."""
    bandwidth: float
    """Bytes/s per GPU per direction in this dimension (line rate)."""
    efficiency: float = 1.0
    """Fraction of ``bandwidth`` a collective phase reaches."""
    latency: float = 0.0
    """Seconds per algorithm step."""


@cache_hash
@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """A cluster of identical nodes. ``nodes`` is set from ``--gpus``."""

    name: str
    description: str
    gpu: GPUSpec
    gpus_per_node: int
    tiers: tuple[NetworkTier, ...]
    """Network levels, innermost (NVLink) first; the last spans the cluster."""
    nodes: int = 1
    flash_attention: bool = True
    """The software stack's attention core is a fused (flash) kernel; if False the s×s scores are materialised."""
    source: str = ""
    nvlink_domain_gpus: int = 0
    """GPUs joined by the first tier (one NVLink domain); 0: one node. An NVL72 rack is one domain of 72 GPUs over
    18 nodes (trays) of 4."""
    dimensions: tuple[NetworkDimension, ...] = ()
    """Explicit network dimensions, innermost first, for the baseline and Themis collective schedules; empty:
    derived from the tiers (the NVLink domain × the scale-out network)."""
    node_overhead_w: float = 0.0
    """Watts a node draws beside its GPUs (CPUs, memory, NICs, NVSwitches, fans) while it trains."""
    pue: float = 1.0
    """Power usage effectiveness of the data centre: facility power over IT power (cooling, power delivery)."""
    gpu_hour_usd: float = 0.0
    """Price of one GPU-hour in US dollars; 0: unknown (cost only with --gpu-hour-price)."""
    contention: bool = True
    """Transfers that overlap in time on a link share its bandwidth (``sim/contention.py``); False: each runs at
    its calibrated rate as if alone."""

    def __post_init__(self) -> None:
        if self.gpu.job_gpus != self.gpus:
            object.__setattr__(self, "gpu", replace(self.gpu, job_gpus=self.gpus))

    @property
    def gpus(self) -> int:
        """Total GPUs."""
        return self.nodes * self.gpus_per_node

    @property
    def domain_gpus(self) -> int:
        """GPUs of one NVLink domain: where a group's members talk over the first tier (NVLink)."""
        return self.nvlink_domain_gpus or self.gpus_per_node

    @property
    def domains(self) -> int:
        """NVLink domains the cluster's GPUs occupy (the last one may be partly filled)."""
        return -(-self.gpus // self.domain_gpus)

    def without_nvls(self) -> ClusterSpec:
        """This cluster with NCCL's NVLink SHARP all-reduce off (NCCL_ALGO without NVLS): the ring inside a node."""
        return replace(self, tiers=tuple(replace(t, allreduce_busbw=0.0) for t in self.tiers))

    def with_gpus(self, gpus: int) -> "ClusterSpec":
        """The same cluster with ``gpus`` GPUs; they must fill whole nodes."""
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus <= 0:
            raise SpecError(f"--gpus must be a positive integer, got {gpus!r}")
        if gpus > MAX_GPUS:
            raise SpecError(f"--gpus {gpus} is more than the {MAX_GPUS:,} GPUs autoplan plans for")
        if gpus % self.gpus_per_node:
            lo = gpus // self.gpus_per_node * self.gpus_per_node
            options = [str(n) for n in (lo, lo + self.gpus_per_node) if n > 0]
            raise SpecError(f"--gpus {gpus} does not fill whole {self.name} nodes of {self.gpus_per_node} GPUs; "
                            f"use a multiple of {self.gpus_per_node} (e.g. {' or '.join(options)})")
        return replace(self, nodes=gpus // self.gpus_per_node)

    def scaled(self, *, compute: float = 1.0, hbm_bandwidth: float = 1.0, memory: float = 1.0, nvlink: float = 1.0,
               network: float = 1.0, latency: float = 1.0, nvlink_domain: int | None = None,
               oversubscription: float | None = None, gpus: int | None = None,
               contention: bool | None = None) -> "ClusterSpec":
        """This cluster with its hardware changed (a what-if), checked as a cluster file is: factors scale the
        GPU's peak FLOP/s (``compute``), HBM bandwidth and capacity (``memory``), the NVLink tier's bandwidth, the
        bandwidth of every tier beyond it (``network``: NICs, leaves, spine) and every tier's latency;
        ``nvlink_domain`` sets the GPUs of one NVLink domain, ``oversubscription`` the spine's, ``gpus`` the
        GPU count. SpecError names a value that leaves the plausible ranges."""
        for name, x in (("compute", compute), ("hbm_bandwidth", hbm_bandwidth), ("memory", memory),
                        ("nvlink", nvlink), ("network", network), ("latency", latency)):
            if not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
                raise SpecError(f"a what-if factor must be a positive number, got {name}={x!r}")
        g = self.gpu
        gpu = replace(g, peak_flops=g.peak_flops * compute, fp8_peak_flops=g.fp8_peak_flops * compute,
                      hbm_bandwidth=g.hbm_bandwidth * hbm_bandwidth, hbm_bytes=g.hbm_bytes * memory)
        tiers = [replace(t, bandwidth=t.bandwidth * (nvlink if i == 0 else network),
                         allreduce_busbw=t.allreduce_busbw * (nvlink if i == 0 else network),
                         latency=t.latency * latency) for i, t in enumerate(self.tiers)]
        dims = tuple(replace(d, bandwidth=d.bandwidth * (nvlink if k < self._inner_dimensions() else network),
                             latency=d.latency * latency) for k, d in enumerate(self.dimensions))
        domain = self.nvlink_domain_gpus
        if nvlink_domain is not None:
            if dims:
                raise SpecError(f"cluster {self.name!r} lists explicit [[dimensions]]; change its NVLink domain in "
                                "the file")
            domain = nvlink_domain
            tiers[0] = replace(tiers[0], gpus=nvlink_domain)
            if len(tiers) > 1 and 0 < tiers[1].gpus < nvlink_domain:
                tiers[1] = replace(tiers[1], gpus=nvlink_domain)   # a leaf reaches at least one domain
        if oversubscription is not None:
            if len(tiers) < 3:
                raise SpecError(f"cluster {self.name!r} has no spine tier (tiers: "
                                f"{', '.join(t.name for t in tiers)}) to oversubscribe")
            tiers[-1] = replace(tiers[-1], oversubscription=float(oversubscription))
        out = replace(self, gpu=gpu, tiers=tuple(tiers), dimensions=dims,
                      nvlink_domain_gpus=0 if domain in (0, self.gpus_per_node) else domain,
                      contention=self.contention if contention is None else contention)
        check_cluster(out, f"cluster {self.name!r} under the what-if")
        return out.with_gpus(gpus) if gpus is not None else out

    def _inner_dimensions(self) -> int:
        """How many of the explicit dimensions tile the NVLink domain (the rest are the scale-out network)."""
        size = 1
        for k, d in enumerate(self.dimensions):
            if size >= self.domain_gpus:
                return k
            size *= d.size or 1
        return len(self.dimensions)

    def tier_spanning(self, gpus: int) -> NetworkTier:
        """The innermost tier whose reach covers ``gpus`` consecutive GPUs."""
        for tier in self.tiers:
            if tier.gpus == 0 or gpus <= tier.gpus:
                return tier
        return self.tiers[-1]


def specs_dir() -> Path:
    """The folder of built-in cluster specs (``cluster_specs/`` beside the package)."""
    return Path(__file__).resolve().parents[2] / "cluster_specs"


def list_clusters() -> list[str]:
    """Names of the built-in cluster specs."""
    return sorted(p.stem for p in specs_dir().glob("*.toml"))


MAX_GPUS = 2**24
"""Largest accepted GPU count (16.7 million)."""


def load_cluster(name_or_path: str, gpus: int | None = None) -> ClusterSpec:
    """A cluster spec by built-in name or TOML path, sized to ``gpus`` GPUs when given."""
    from autoplan.specs.files import check_path

    path = Path(check_path(name_or_path, "cluster name or file"))
    if not (name_or_path.endswith(".toml") or path.is_file() or ("/" in name_or_path and os.path.lexists(path))):
        path = specs_dir() / f"{name_or_path}.toml"
        if "/" in name_or_path or not path.is_file():
            near = difflib.get_close_matches(name_or_path, list_clusters(), n=3, cutoff=0.4)
            hint = f"did you mean {', '.join(near)}?" if near else f"known clusters: {', '.join(list_clusters())}"
            raise SpecError(f"unknown cluster {name_or_path!r}; {hint} (or pass a .toml file)")
    spec = _parse(path)
    return spec.with_gpus(gpus) if gpus is not None else spec


RANGES: dict[str, tuple[float, float, bool]] = {
    # key: (lowest, highest plausible value, 0 also allowed): generous bounds, so that a typo or a unit slip
    # (1e-300 TFLOP/s, an efficiency of 80) is refused instead of predicting nonsense
    "peak_tflops": (0.1, 1e5, False), "hbm_gib": (0.1, 1e5, False), "hbm_bandwidth_gb_per_s": (1.0, 1e6, False),
    "gemm_efficiency": (0.01, 1.0, False), "attention_efficiency": (0.01, 1.0, False),
    "flash2_attention_efficiency": (0.01, 1.0, True), "memory_efficiency": (0.01, 1.0, False),
    "attention_memory_efficiency": (0.01, 1.0, True),
    "clock_ratio": (0.1, 1.0, False), "gemm_half_k": (0.0, 1e5, False), "kernel_overhead_us": (0.0, 1e6, False),
    "memory_reserve_gib": (0.0, 1e5, False), "fp8_peak_tflops": (0.1, 1e5, True), "fp8_gemm_efficiency": (0.01, 1.0, True),
    "fp8_blockwise_gemm_ratio": (1.0, 10.0, False), "mxfp8_gemm_ratio": (1.0, 10.0, False),
    "fp8_attention_fwd_ratio": (0.1, 10.0, False), "fp8_attention_bwd_ratio": (0.1, 10.0, False),
    "epilogue_exposure": (0.0, 1.0, True),
    "flash2_deterministic_bwd_ratio": (1.0, 10.0, False), "fused_deterministic_bwd_ratio": (1.0, 10.0, False),
    "host_launch_us": (0.0, 1e4, True), "host_step_ms": (0.0, 1e5, True), "speed_variability": (0.0, 0.5, True),
    "graph_kernel_overhead_us": (0.0, 1e6, True),
    "tdp_w": (1.0, 1e5, True), "idle_w": (1.0, 1e5, True),
    "host_link_gb_per_s": (0.1, 1e5, True), "host_adam_params_per_s": (1e6, 1e13, True),
    "bandwidth_gb_per_s": (0.01, 1e6, False), "efficiency": (0.01, 1.0, False), "latency_us": (0.0, 1e6, False),
    "allreduce_busbw_gb_per_s": (0.01, 1e6, True), "half_bandwidth_mib": (0.0, 1e6, False),
    "oversubscription": (1.0, 64.0, False),
    "l2_cache_mib": (0.0, 1e6, True), "l2_bandwidth_gb_per_s": (1.0, 1e7, True),
}
TOP_RANGES: dict[str, tuple[float, float, bool]] = {
    "node_overhead_w": (0.0, 1e6, False), "pue": (1.0, 5.0, False), "gpu_hour_usd": (0.001, 1e4, True),
}
"""The same for the top level's numbers: a node's other power, the data centre's PUE, the price of a GPU-hour."""
OPTIONAL: dict[str, dict[str, object]] = {
    "top": {"name": None, "description": "", "source": "", "nodes": 1, "flash_attention": True,
            "nvlink_domain_gpus": 0, "node_overhead_w": 0.0, "pue": 1.0, "gpu_hour_usd": 0.0, "contention": True},
    "gpu": {"gemm_tile": (128, 256), "gemm_half_k": 64.0, "attention_memory_efficiency": 0.0,
            "flash2_attention_efficiency": 0.0, "clock_ratio": 1.0,
            "fp8_peak_tflops": 0.0, "fp8_gemm_efficiency": 0.0, "fp8_blockwise_gemm_ratio": 1.0, "mxfp8": False,
            "mxfp8_gemm_ratio": 1.0, "fp8_attention_fwd_ratio": 1.0, "fp8_attention_bwd_ratio": 1.0,
            "fp8_any_layout": False,
            "epilogue_exposure": 0.0, "flash2_deterministic_bwd_ratio": 1.0,
            "fused_deterministic_bwd_ratio": 1.0, "l2_cache_mib": 0.0,
            "l2_bandwidth_gb_per_s": 0.0, "host_launch_us": 0.0, "host_step_ms": 0.0, "speed_variability": 0.0,
            "graph_kernel_overhead_us": 0.0,
            "tdp_w": 0.0, "idle_w": 0.0,
            "host_link_gb_per_s": 0.0, "host_adam_params_per_s": 0.0},
    # oversubscription 1: a non-blocking fat tree, as NVIDIA's DGX SuperPOD reference architectures build the compute
    # fabric (DGX A100 and H100 SuperPOD RA: "full fat-tree", every leaf's uplinks carry all of its nodes' NICs)
    "tier": {"gpus": 0, "allreduce_busbw_gb_per_s": 0.0, "half_bandwidth_mib": 0.0, "oversubscription": 1.0},
    "dimension": {"name": "", "efficiency": 1.0},
}
"""Keys a cluster file may leave out, per table, with their defaults (the top level's name: the file's stem)."""


class _Table:
    """One TOML table of a cluster file: typed reads whose errors name the file, the table and the key."""

    def __init__(self, data: object, where: str, path: Path | str) -> None:
        self.where, self.path = where, path
        if not isinstance(data, dict):
            self.fail(f"{where} must be a table, got {excerpt(data)}")
        self.data: dict = data

    def fail(self, message: str) -> None:
        raise SpecError(f"{self.path}: {message}" if isinstance(self.path, str) else
                        f"cluster file {shown(self.path)}: {message}")

    def _get(self, key: str, default: object) -> object:
        if key not in self.data:
            if default is None:
                self.fail(f"missing key {key!r} in {self.where}")
            return default
        return self.data[key]

    def number(self, key: str, default: float | None = None) -> float:
        """A finite number in the key's plausible range (``RANGES``)."""
        value = self._get(key, default)
        low, high, zero_ok = RANGES[key] if key in RANGES else TOP_RANGES[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not (low <= value <= high or (zero_ok and value == 0)):
            zero = "0 or " if zero_ok else ""
            self.fail(f"{key} in {self.where} must be {zero}a number in [{low:g}, {high:g}], got {excerpt(value)}")
        return float(value)

    def integer(self, key: str, default: int | None = None, *, low: int = 1, high: int = MAX_GPUS) -> int:
        """An integer in [low, high]."""
        value = self._get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            what = "a positive integer" if low == 1 else f"an integer ≥ {low}"
            self.fail(f"{key} in {self.where} must be {what} (at most {high:,}), got {excerpt(value)}")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            self.fail(f"{key} in {self.where} must be a string, got {excerpt(value)}")
        return value

    def name(self, key: str, default: str | None = None) -> str:
        """A name: a string of at most 200 printable characters (it becomes a table row, a title, a file name)."""
        value = self.text(key, default)
        if len(value) > 200 or not value.isprintable():
            self.fail(f"{key} in {self.where} must be at most 200 printable characters (no line breaks or "
                      f"control characters), got {excerpt(value)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            self.fail(f"{key} in {self.where} must be true or false, got {excerpt(value)}")
        return value

    def pair(self, key: str, default: tuple[int, int]) -> tuple[int, int]:
        value = self._get(key, default)
        if (not isinstance(value, (list, tuple)) or len(value) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_GPUS for v in value)):
            self.fail(f"{key} in {self.where} must be two positive integers, e.g. [128, 256], got {excerpt(value)}")
        return (value[0], value[1])


_CLUSTER_KEYS = {"name", "description", "source", "gpus_per_node", "nodes", "flash_attention", "gpu", "tiers",
                 "nvlink_domain_gpus", "dimensions", "calibration", "node_overhead_w", "pue", "gpu_hour_usd",
                 "contention"}
"""Top-level keys; ``calibration`` is the provenance table ``autoplan calibrate`` writes (read by no model)."""
_DIMENSION_KEYS = {"name", "size", "topology", "bandwidth_gb_per_s", "efficiency", "latency_us"}
_GPU_KEYS = {"name", "peak_tflops", "hbm_gib", "hbm_bandwidth_gb_per_s", "sm_count", "gemm_tile", "gemm_half_k",
             "gemm_efficiency", "attention_efficiency", "memory_efficiency", "attention_memory_efficiency",
             "flash2_attention_efficiency", "clock_ratio", "kernel_overhead_us", "memory_reserve_gib",
             "fp8_peak_tflops", "fp8_gemm_efficiency", "fp8_blockwise_gemm_ratio", "mxfp8", "mxfp8_gemm_ratio",
             "fp8_attention_fwd_ratio", "fp8_attention_bwd_ratio",
             "fp8_any_layout",
             "l2_cache_mib",
             "epilogue_exposure", "flash2_deterministic_bwd_ratio", "fused_deterministic_bwd_ratio",
             "l2_bandwidth_gb_per_s", "host_launch_us", "host_step_ms", "speed_variability", "graph_kernel_overhead_us",
             "tdp_w", "idle_w",
             "host_link_gb_per_s", "host_adam_params_per_s"}
_TIER_KEYS = {"name", "gpus", "bandwidth_gb_per_s", "efficiency", "latency_us", "allreduce_busbw_gb_per_s",
              "half_bandwidth_mib", "oversubscription"}


def _check_keys(t: _Table, allowed: set[str]) -> None:
    unknown = sorted(set(t.data) - allowed)
    if unknown:
        t.fail(f"unknown key(s) {excerpt(', '.join(unknown))[1:-1]} in {t.where}; "
               f"allowed: {', '.join(sorted(allowed))}")


def _gpu(g: _Table) -> GPUSpec:
    _check_keys(g, _GPU_KEYS)
    d = OPTIONAL["gpu"]
    gpu = GPUSpec(
        name=g.name("name"), peak_flops=g.number("peak_tflops") * 1e12, hbm_bytes=g.number("hbm_gib") * GIB,
        hbm_bandwidth=g.number("hbm_bandwidth_gb_per_s") * 1e9, sm_count=g.integer("sm_count", high=10**5),
        gemm_efficiency=g.number("gemm_efficiency"), gemm_tile=g.pair("gemm_tile", d["gemm_tile"]),
        gemm_half_k=g.number("gemm_half_k", d["gemm_half_k"]),
        attention_efficiency=g.number("attention_efficiency"), memory_efficiency=g.number("memory_efficiency"),
        attention_memory_efficiency=g.number("attention_memory_efficiency", d["attention_memory_efficiency"]),
        flash2_attention_efficiency=g.number("flash2_attention_efficiency", d["flash2_attention_efficiency"]),
        kernel_overhead=g.number("kernel_overhead_us") * 1e-6,
        memory_reserve_bytes=g.number("memory_reserve_gib") * GIB,
        clock_ratio=g.number("clock_ratio", d["clock_ratio"]),
        fp8_peak_flops=g.number("fp8_peak_tflops", d["fp8_peak_tflops"]) * 1e12,
        fp8_gemm_efficiency=g.number("fp8_gemm_efficiency", d["fp8_gemm_efficiency"]), mxfp8=g.flag("mxfp8", d["mxfp8"]),
        fp8_any_layout=g.flag("fp8_any_layout", d["fp8_any_layout"]),
        fp8_blockwise_gemm_ratio=g.number("fp8_blockwise_gemm_ratio", d["fp8_blockwise_gemm_ratio"]),
        mxfp8_gemm_ratio=g.number("mxfp8_gemm_ratio", d["mxfp8_gemm_ratio"]),
        fp8_attention_fwd_ratio=g.number("fp8_attention_fwd_ratio", d["fp8_attention_fwd_ratio"]),
        fp8_attention_bwd_ratio=g.number("fp8_attention_bwd_ratio", d["fp8_attention_bwd_ratio"]),
        epilogue_exposure=g.number("epilogue_exposure", d["epilogue_exposure"]),
        flash2_deterministic_bwd_ratio=g.number("flash2_deterministic_bwd_ratio", d["flash2_deterministic_bwd_ratio"]),
        fused_deterministic_bwd_ratio=g.number("fused_deterministic_bwd_ratio", d["fused_deterministic_bwd_ratio"]),
        l2_cache_bytes=g.number("l2_cache_mib", d["l2_cache_mib"]) * 2**20,
        l2_bandwidth=g.number("l2_bandwidth_gb_per_s", d["l2_bandwidth_gb_per_s"]) * 1e9,
        host_launch=g.number("host_launch_us", d["host_launch_us"]) * 1e-6,
        graph_kernel_overhead=g.number("graph_kernel_overhead_us", d["graph_kernel_overhead_us"]) * 1e-6,
        host_step=g.number("host_step_ms", d["host_step_ms"]) * 1e-3,
        speed_variability=g.number("speed_variability", d["speed_variability"]),
        tdp_w=g.number("tdp_w", d["tdp_w"]), idle_w=g.number("idle_w", d["idle_w"]),
        host_link=g.number("host_link_gb_per_s", d["host_link_gb_per_s"]) * 1e9,
        host_adam_params_per_s=g.number("host_adam_params_per_s", d["host_adam_params_per_s"]))
    if gpu.memory_reserve_bytes >= gpu.hbm_bytes:
        g.fail(f"memory_reserve_gib {gpu.memory_reserve_bytes / GIB:g} in {g.where} leaves nothing of "
               f"hbm_gib {gpu.hbm_bytes / GIB:g} for training")
    return gpu


def _tier(t: _Table) -> NetworkTier:
    _check_keys(t, _TIER_KEYS)
    d = OPTIONAL["tier"]
    return NetworkTier(
        name=t.name("name"), gpus=t.integer("gpus", d["gpus"], low=0), bandwidth=t.number("bandwidth_gb_per_s") * 1e9,
        efficiency=t.number("efficiency"), latency=t.number("latency_us") * 1e-6,
        allreduce_busbw=t.number("allreduce_busbw_gb_per_s", d["allreduce_busbw_gb_per_s"]) * 1e9,
        half_bandwidth_bytes=t.number("half_bandwidth_mib", d["half_bandwidth_mib"]) * 2**20,
        oversubscription=t.number("oversubscription", d["oversubscription"]))


def _dimension(t: _Table, index: int) -> NetworkDimension:
    _check_keys(t, _DIMENSION_KEYS)
    topology = t.text("topology")
    if topology not in DIMENSION_TOPOLOGIES:
        t.fail(f"topology in {t.where} must be one of {', '.join(DIMENSION_TOPOLOGIES)}, got {excerpt(topology)}")
    size = t.integer("size", low=0)
    if size == 1:
        t.fail(f"size in {t.where} must be ≥ 2 (or 0 in the last dimension: the rest of the cluster), got 1")
    return NetworkDimension(name=t.name("name", f"dim {index + 1}") or f"dim {index + 1}", size=size,
                            topology=topology, bandwidth=t.number("bandwidth_gb_per_s") * 1e9,
                            efficiency=t.number("efficiency", OPTIONAL["dimension"]["efficiency"]),
                            latency=t.number("latency_us") * 1e-6)


def _dimensions(top: _Table, path: Path | str, domain: int) -> tuple[NetworkDimension, ...]:
    raw = top.data.get("dimensions", [])
    if not isinstance(raw, list) or not raw:
        top.fail(f"dimensions must be one or more [[dimensions]] tables (innermost first), got {excerpt(raw)}")
    dims = tuple(_dimension(_Table(d, f"[[dimensions]] #{i + 1}", path), i) for i, d in enumerate(raw))
    if any(d.size == 0 for d in dims[:-1]):
        first = next(i for i, d in enumerate(dims) if d.size == 0)
        top.fail(f"size 0 (the rest of the cluster) is allowed only in the last [[dimensions]] table, "
                 f"found in #{first + 1} of {len(dims)}")
    prefix, products = 1, [1]
    for d in dims:
        prefix *= d.size or 1
        products.append(prefix)
    if domain not in products:
        sizes = " x ".join(str(d.size) for d in dims)
        top.fail(f"the innermost dimensions must tile the NVLink domain of {domain} GPUs exactly; sizes {sizes} "
                 f"give products {', '.join(map(str, products[1:]))}")
    return dims


def _parse(path: Path) -> ClusterSpec:
    from autoplan.specs.files import read_toml

    return _from_tables(read_toml(path, "cluster"), path)


def _from_tables(data: dict, path: Path | str) -> ClusterSpec:
    """The ClusterSpec of a cluster file's tables (``path`` names it in errors, its stem is the default name; a
    string is the whole of what errors say first)."""
    top = _Table(data, "the top level", path)
    _check_keys(top, _CLUSTER_KEYS)
    if not isinstance(top.data.get("calibration", {}), dict):
        top.fail(f"calibration must be a table, got {top.data['calibration']!r}")
    gpu = _gpu(_Table(top._get("gpu", None), "[gpu]", path))
    raw_tiers = top._get("tiers", None)
    if not isinstance(raw_tiers, list) or not raw_tiers:
        top.fail(f"tiers must be one or more [[tiers]] tables (innermost first), got {excerpt(raw_tiers)}")
    tiers = tuple(_tier(_Table(t, f"[[tiers]] #{i + 1}", path)) for i, t in enumerate(raw_tiers))
    d = OPTIONAL["top"]
    per_node = top.integer("gpus_per_node", high=4096)
    domain = top.integer("nvlink_domain_gpus", d["nvlink_domain_gpus"], low=0, high=MAX_GPUS) or per_node
    if domain % per_node:
        near = sorted({max(1, domain // per_node) * per_node, (domain // per_node + 1) * per_node})
        top.fail(f"nvlink_domain_gpus {domain} must be a whole number of nodes of gpus_per_node {per_node} "
                 f"(e.g. {' or '.join(map(str, near))})")
    if tiers[0].gpus not in (0, domain) and len(tiers) > 1:
        top.fail(f"the first tier {excerpt(tiers[0].name)} joins {tiers[0].gpus} GPUs but the NVLink domain has {domain} "
                 f"(nvlink_domain_gpus, or gpus_per_node when unset); make them equal")
    dims = _dimensions(top, path, domain) if "dimensions" in top.data else ()
    return ClusterSpec(name=top.name("name", path.stem if isinstance(path, Path) else "cluster"), description=top.text("description", d["description"]),
                       gpu=gpu, gpus_per_node=per_node, tiers=tiers,
                       nodes=top.integer("nodes", d["nodes"]), flash_attention=top.flag("flash_attention",
                                                                                        d["flash_attention"]),
                       source=top.text("source", d["source"]),
                       nvlink_domain_gpus=0 if domain == per_node else domain, dimensions=dims,
                       node_overhead_w=top.number("node_overhead_w", d["node_overhead_w"]),
                       pue=top.number("pue", d["pue"]), gpu_hour_usd=top.number("gpu_hour_usd", d["gpu_hour_usd"]),
                       contention=top.flag("contention", d["contention"]))



_UNITS = {"peak_tflops": 1e12, "hbm_gib": GIB, "hbm_bandwidth_gb_per_s": 1e9, "kernel_overhead_us": 1e-6,
          "memory_reserve_gib": GIB, "fp8_peak_tflops": 1e12, "l2_cache_mib": 2**20, "l2_bandwidth_gb_per_s": 1e9,
          "host_launch_us": 1e-6, "host_step_ms": 1e-3, "bandwidth_gb_per_s": 1e9, "latency_us": 1e-6,
          "allreduce_busbw_gb_per_s": 1e9, "graph_kernel_overhead_us": 1e-6,
          "half_bandwidth_mib": 2**20, "host_link_gb_per_s": 1e9}
"""What one unit of a file key is in SI units (a key not listed is a plain count or fraction)."""
_GPU_FIELDS = {"peak_tflops": "peak_flops", "hbm_gib": "hbm_bytes", "hbm_bandwidth_gb_per_s": "hbm_bandwidth",
               "kernel_overhead_us": "kernel_overhead", "memory_reserve_gib": "memory_reserve_bytes",
               "fp8_peak_tflops": "fp8_peak_flops", "l2_cache_mib": "l2_cache_bytes",
               "l2_bandwidth_gb_per_s": "l2_bandwidth", "host_launch_us": "host_launch", "host_step_ms": "host_step",
               "host_link_gb_per_s": "host_link", "graph_kernel_overhead_us": "graph_kernel_overhead"}
_TIER_FIELDS = {"bandwidth_gb_per_s": "bandwidth", "latency_us": "latency", "allreduce_busbw_gb_per_s":
                "allreduce_busbw", "half_bandwidth_mib": "half_bandwidth_bytes"}


def _table_of(obj: object, keys: set[str], fields: dict[str, str]) -> dict:
    """The file keys of a GPU, tier or dimension spec, in the file's units."""
    out = {}
    for key in keys:
        value = getattr(obj, fields.get(key, key), None)
        if key in _UNITS and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = value / _UNITS[key]
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


def cluster_tables(spec: ClusterSpec) -> dict:
    """The tables of a cluster file that describes ``spec`` (the inverse of reading one)."""
    dimension_fields = {"bandwidth_gb_per_s": "bandwidth", "latency_us": "latency"}
    return {"name": spec.name, "description": spec.description, "source": spec.source,
            "gpus_per_node": spec.gpus_per_node, "nodes": spec.nodes, "flash_attention": spec.flash_attention,
            "nvlink_domain_gpus": spec.nvlink_domain_gpus, "node_overhead_w": spec.node_overhead_w, "pue": spec.pue,
            "gpu_hour_usd": spec.gpu_hour_usd, "contention": spec.contention,
            "gpu": _table_of(spec.gpu, _GPU_KEYS, _GPU_FIELDS),
            "tiers": [_table_of(t, _TIER_KEYS, _TIER_FIELDS) for t in spec.tiers],
            **({"dimensions": [_table_of(d, _DIMENSION_KEYS, dimension_fields) for d in spec.dimensions]}
               if spec.dimensions else {})}


def check_cluster(spec: ClusterSpec, where: str) -> ClusterSpec:
    """``spec`` if it passes every check a cluster file passes (types, plausible ranges, a network tier, a whole
    NVLink domain...); a cluster read back from elsewhere (a run folder's specs.json) is checked so. SpecError
    starting with ``where`` and naming the file key otherwise."""
    if not isinstance(spec.gpu, GPUSpec) or not isinstance(spec.tiers, tuple):
        raise SpecError(f"{where}: the cluster has no GPU or tiers")
    _from_tables(cluster_tables(spec), where)
    return spec
