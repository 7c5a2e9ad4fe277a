"""ClusterSpec: GPUs, nodes and the network tiers that join them, read from ``cluster_specs/*.toml``."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from autoplan.errors import SpecError

GIB = 1024**3


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
    clock_ratio: float = 1.0
    """Sustained tensor-core clock under training load over the clock the peak is quoted at (power capping)."""


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

    @property
    def gpus(self) -> int:
        """Total GPUs."""
        return self.nodes * self.gpus_per_node

    def with_gpus(self, gpus: int) -> "ClusterSpec":
        """The same cluster with ``gpus`` GPUs; they must fill whole nodes."""
        if gpus <= 0:
            raise SpecError(f"--gpus must be positive, got {gpus}")
        if gpus % self.gpus_per_node:
            lo = gpus // self.gpus_per_node * self.gpus_per_node
            options = [str(n) for n in (lo, lo + self.gpus_per_node) if n > 0]
            raise SpecError(f"--gpus {gpus} does not fill whole {self.name} nodes of {self.gpus_per_node} GPUs; "
                            f"use a multiple of {self.gpus_per_node} (e.g. {' or '.join(options)})")
        return replace(self, nodes=gpus // self.gpus_per_node)

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


def load_cluster(name_or_path: str, gpus: int | None = None) -> ClusterSpec:
    """A cluster spec by built-in name or TOML path, sized to ``gpus`` GPUs when given."""
    path = Path(name_or_path)
    if not (name_or_path.endswith(".toml") or path.is_file()):
        path = specs_dir() / f"{name_or_path}.toml"
        if not path.is_file():
            near = difflib.get_close_matches(name_or_path, list_clusters(), n=3, cutoff=0.4)
            hint = f"did you mean {', '.join(near)}?" if near else f"known clusters: {', '.join(list_clusters())}"
            raise SpecError(f"unknown cluster {name_or_path!r}; {hint} (or pass a .toml file)")
    spec = _parse(path)
    return spec.with_gpus(gpus) if gpus is not None else spec


def _parse(path: Path) -> ClusterSpec:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"cluster file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"cluster file {str(path)!r} is not valid TOML: {err}") from None
    try:
        g = data["gpu"]
        gpu = GPUSpec(
            name=g["name"], peak_flops=_pos(g, "peak_tflops", path) * 1e12, hbm_bytes=_pos(g, "hbm_gib", path) * GIB,
            hbm_bandwidth=_pos(g, "hbm_bandwidth_gb_per_s", path) * 1e9, sm_count=int(_pos(g, "sm_count", path)),
            gemm_efficiency=_frac(g, "gemm_efficiency", path), gemm_tile=tuple(g.get("gemm_tile", (128, 256))),
            gemm_half_k=float(g.get("gemm_half_k", 64.0)),
            attention_efficiency=_frac(g, "attention_efficiency", path),
            memory_efficiency=_frac(g, "memory_efficiency", path), kernel_overhead=g["kernel_overhead_us"] * 1e-6,
            memory_reserve_bytes=g["memory_reserve_gib"] * GIB, clock_ratio=_frac(g, "clock_ratio", path)
            if "clock_ratio" in g else 1.0)
        tiers = tuple(NetworkTier(
            name=t["name"], gpus=int(t.get("gpus", 0)), bandwidth=_pos(t, "bandwidth_gb_per_s", path) * 1e9,
            efficiency=_frac(t, "efficiency", path), latency=t["latency_us"] * 1e-6,
            allreduce_busbw=t.get("allreduce_busbw_gb_per_s", 0.0) * 1e9,
            half_bandwidth_bytes=t.get("half_bandwidth_mib", 0.0) * 2**20) for t in data["tiers"])
        return ClusterSpec(name=data.get("name", path.stem), description=data.get("description", ""), gpu=gpu,
                           gpus_per_node=int(_pos(data, "gpus_per_node", path)), tiers=tiers,
                           nodes=int(data.get("nodes", 1)), flash_attention=bool(data.get("flash_attention", True)),
                           source=data.get("source", ""))
    except KeyError as err:
        raise SpecError(f"cluster file {str(path)!r}: missing key {err.args[0]!r}") from None


def _pos(table: dict, key: str, path: Path) -> float:
    value = table[key]
    if not isinstance(value, (int, float)) or value <= 0:
        raise SpecError(f"cluster file {str(path)!r}: {key} must be a positive number, got {value!r}")
    return float(value)


def _frac(table: dict, key: str, path: Path) -> float:
    value = _pos(table, key, path)
    if value > 1:
        raise SpecError(f"cluster file {str(path)!r}: {key} is a fraction in (0, 1], got {value}")
    return value
