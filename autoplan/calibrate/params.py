"""The physical parameters calibration fits: what each means, its cluster-file key, its unit and its bounds."""

from __future__ import annotations

from dataclasses import dataclass, replace

from autoplan.calibrate.model import ClusterSpec, SpecError


@dataclass(frozen=True, kw_only=True)
class Param:
    """One fittable constant of a cluster spec, in the cluster file's unit."""

    name: str
    """``gpu.KEY`` or ``tiers.NAME.KEY`` (the cluster file's table and key)."""
    field: str
    """The GPUSpec / NetworkTier attribute it sets."""
    scale: float
    """Spec units per file unit (µs → s: 1e-6)."""
    low: float
    high: float
    doc: str

    @property
    def key(self) -> str:
        """The key in the cluster file."""
        return self.name.rsplit(".", 1)[1]

    @property
    def tier(self) -> str | None:
        """The tier's name for a network parameter, else None."""
        return self.name.split(".")[1] if self.name.startswith("tiers.") else None


# Bounds are physical: an efficiency is a fraction of a datasheet peak; the sustained clock under load is at most the
# clock the peak is quoted at and no lower than half of it (power capping: NVIDIA's H100 at 700 W sustains ~0.85-0.95,
# cluster_specs/dgx-h100-80g.toml); a GEMM's k-half-point is a few tile stages (64-wide k stages, CUTLASS), at most a
# few thousand; a kernel's launch-and-tail overhead is microseconds (CUDA launch ~2-5 µs, eager PyTorch ~10-20 µs
# with the host's dispatch); NCCL's per-step latency is ~1 µs over NVLink and ~5 µs over InfiniBand (NCCL tuning
# model), never over 100 µs; a network tier reaches between 5 % and 100 % of its line rate. Host times: eager
# PyTorch issues a module call in tens to hundreds of µs (H. He, "Making Deep Learning Go Brrrr From First Principles",
# 2022: overhead), a step's own host work (optimizer, logging) in at most seconds.
GPU_PARAMS = {
    "gemm_efficiency": ("gemm_efficiency", 1.0, 0.2, 1.0,
                        "fraction of the BF16 peak that large GEMMs reach (per clock)"),
    "gemm_half_k": ("gemm_half_k", 1.0, 0.0, 4096.0, "inner size k at which a GEMM reaches half its large-k rate"),
    "clock_ratio": ("clock_ratio", 1.0, 0.5, 1.0,
                    "sustained tensor-core clock under training load over the clock of the quoted peak"),
    "fp8_gemm_efficiency": ("fp8_gemm_efficiency", 1.0, 0.2, 1.0, "fraction of the FP8 peak large FP8 GEMMs reach"),
    "attention_efficiency": ("attention_efficiency", 1.0, 0.1, 1.0,
                             "fraction of the BF16 peak the fused attention kernels reach"),
    "memory_efficiency": ("memory_efficiency", 1.0, 0.2, 1.0,
                          "fraction of HBM bandwidth element-wise and norm kernels reach"),
    "kernel_overhead_us": ("kernel_overhead", 1e-6, 0.0, 200.0, "fixed launch-and-tail time per kernel (µs)"),
    "epilogue_exposure": ("epilogue_exposure", 1.0, 0.0, 1.0,
                          "fraction of a GEMM's output bytes beyond a 16-bit write (adding into main_grad) not hidden"),
    "host_launch_us": ("host_launch", 1e-6, 0.0, 2000.0, "host time to issue one modelled op (µs)"),
    "host_step_ms": ("host_step", 1e-3, 0.0, 10000.0, "host time per step outside its passes, the GPU idle (ms)"),
    # Sinha et al. SC'22 measured 2-3 % interquartile spreads of identical GPUs' power-capped speed, outliers to 1.5×
    "speed_variability": ("speed_variability", 1.0, 0.0, 0.2,
                          "relative spread of identical GPUs' compute speed: a job runs at its slowest GPU's pace"),
}
TIER_PARAMS = {
    "efficiency": ("efficiency", 1.0, 0.05, 1.0, "fraction of the tier's line rate NCCL collectives reach"),
    "latency_us": ("latency", 1e-6, 0.0, 100.0, "seconds per collective algorithm step crossing the tier (µs)"),
}


def gpu_param(key: str) -> Param:
    """The GPU parameter ``gpu.KEY``."""
    field, scale, low, high, doc = GPU_PARAMS[key]
    return Param(name=f"gpu.{key}", field=field, scale=scale, low=low, high=high, doc=doc)


def tier_param(tier: str, key: str) -> Param:
    """The network parameter ``tiers.TIER.KEY``."""
    field, scale, low, high, doc = TIER_PARAMS[key]
    return Param(name=f"tiers.{tier}.{key}", field=field, scale=scale, low=low, high=high, doc=f"{tier}: {doc}")


def all_params(cluster: ClusterSpec) -> dict[str, Param]:
    """Every fittable parameter of ``cluster`` by name."""
    out = {f"gpu.{k}": gpu_param(k) for k in GPU_PARAMS}
    if not cluster.gpu.fp8_peak_flops:
        del out["gpu.fp8_gemm_efficiency"]
    for t in cluster.tiers:
        out |= {f"tiers.{t.name}.{k}": tier_param(t.name, k) for k in TIER_PARAMS}
    return out


def parse_names(text: str, cluster: ClusterSpec) -> list[Param]:
    """``--fit`` names (comma-separated; ``clock_ratio`` short for ``gpu.clock_ratio``) as parameters."""
    known = all_params(cluster)
    out = []
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        name = raw if raw in known else f"gpu.{raw}"
        if name not in known:
            raise SpecError(f"--fit: unknown parameter {raw!r}; known: {', '.join(known)}")
        if known[name] not in out:
            out.append(known[name])
    if not out:
        raise SpecError("--fit names no parameter")
    return out


def value_of(cluster: ClusterSpec, p: Param) -> float:
    """``p``'s value in ``cluster``, in the file's unit."""
    if p.tier is None:
        return getattr(cluster.gpu, p.field) / p.scale
    return getattr(next(t for t in cluster.tiers if t.name == p.tier), p.field) / p.scale


def apply(cluster: ClusterSpec, params: list[Param], values: list[float]) -> ClusterSpec:
    """``cluster`` with each parameter set to its value (file units)."""
    gpu_kw = {p.field: float(v) * p.scale for p, v in zip(params, values) if p.tier is None}
    tiers = []
    for t in cluster.tiers:
        kw = {p.field: float(v) * p.scale for p, v in zip(params, values) if p.tier == t.name}
        tiers.append(replace(t, **kw) if kw else t)
    return replace(cluster, gpu=replace(cluster.gpu, **gpu_kw) if gpu_kw else cluster.gpu, tiers=tuple(tiers))
