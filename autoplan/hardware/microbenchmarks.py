"""Published microbenchmarks that set the GPU specs' ``gemm_efficiency``, ``clock_ratio`` and, on Blackwell, the
fused attention's and the NVLink tier's efficiencies.

Each GPU has two measurements of cuBLAS BF16 GEMMs (stas00/ml-engineering, ``mamf-finder.py``): the best burst rate
over shapes (MAMF, the GPU at its boost clock, power far below its limit) sets the per-clock efficiency, and the
rate sustained on a large GEMM that keeps the GPU at its power limit (MSMF: the clock settles below boost) sets the
clock ratio of a training step. ``derive`` solves both through ``compute.gemm_time`` itself, so that the spec
reproduces the two measurements (``tests/hardware/test_microbenchmarks.py``). The Blackwell racks' fused attention
is carried from the H100's, which one H100 measured, by the speed-up cudnn-frontend's attention benchmark measured
between an H200 and each of them with the same cuDNN (``attention_speedup``, ``attention_efficiency``;
``tests/hardware/test_blackwell_attention.py``), and their NVLink tiers' efficiency by the speed relative to the H100
that XLA's public collective table measured (``collective_errors``, ``nvlink_speedup_error``). XLA's public GEMM table
checks the GEMM shape model on an H100 and a B200 (``gemm_table_errors``; no constant is set from it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from autoplan.hardware import network
from autoplan.hardware.compute import gemm_time
from autoplan.specs.cluster import ClusterSpec, GPUSpec


@dataclass(frozen=True)
class GemmMeasurement:
    """A measured BF16 GEMM rate: shape (m, n, k), TFLOP/s, and the clock it ran at over the peak's clock."""

    shape: tuple[int, int, int]
    tflops: float
    clock_over_peak_clock: float
    source: str


@dataclass(frozen=True)
class GemmSources:
    """The burst (per-clock efficiency) and sustained (clock ratio) measurements of one GPU."""

    burst: GemmMeasurement
    sustained: GemmMeasurement


# ml-engineering compute/accelerator/README.md "Maximum Achievable Matmul FLOPS comparison table" (master @744d01e)
# and the fast-mamf branch @082816f (MSMF); the peaks' clocks: H100 SXM 989 TFLOP/s at 1830 MHz (4096 FLOP/clock/SM,
# 132 SMs), A100 312 at its 1410 MHz boost, B200 2250 at 1855 MHz (8192 FLOP/clock/SM, 148 SMs)
SOURCES: dict[str, GemmSources] = {
    "H100": GemmSources(
        GemmMeasurement((2048, 2048, 13312), 794.5, 1980 / 1830, "H100 SXM MAMF 794.5 TFLOP/s, torch 2.7.0, burst at "
                        "the 1980 MHz boost (ml-engineering master)"),
        GemmMeasurement((8192, 8448, 20480), 698.6, 1.0, "H200 SXM (same GH100 die, same 700 W) MSMF 698.6 TFLOP/s, "
                        "mean of all 8 GPUs busy, 1405-1527 MHz (ml-engineering fast-mamf)")),
    "A100": GemmSources(
        GemmMeasurement((1024, 10240, 5120), 271.2, 1.0, "A100 SXM MAMF 271.2 TFLOP/s, torch 2.6.0 (ml-engineering "
                        "master)"),
        GemmMeasurement((8192, 8192, 8192), 258.0, 1.0, "A100 cuBLAS 8192^3 with randn inputs 258 TFLOP/s at the 400 W "
                        "limit (H. He, 'Strangely, Matrix Multiplications on GPUs Run Faster When Given Predictable "
                        "Data', thonking.ai)")),
    "B200": GemmSources(
        GemmMeasurement((1792, 16128, 3072), 1745.0, 1965 / 1855, "B200 SXM MAMF 1745.0 TFLOP/s, torch 2.7.1, burst "
                        "at 1965 MHz (ml-engineering master)"),
        GemmMeasurement((9472, 8192, 20480), 1456.3, 1.0, "B200 SXM MSMF 1456.3 TFLOP/s, ~994 W at 1339 MHz "
                        "(ml-engineering fast-mamf)")),
}


def rate(gpu: GPUSpec, shape: tuple[int, int, int]) -> float:
    """TFLOP/s of one BF16 GEMM of ``shape`` as ``compute.gemm_time`` prices it on ``gpu`` timed alone (one GPU: no
    slower GPU of a job sets its pace)."""
    m, n, k = shape
    return 2.0 * m * n * k / gemm_time(replace(gpu, job_gpus=1), m, n, k) / 1e12


def _solve(gpu: GPUSpec, field: str, target: float, shape: tuple[int, int, int]) -> float:
    lo, hi = 0.05, 2.0
    for _ in range(60):             # the rate grows with either field: bisection
        mid = (lo + hi) / 2
        if rate(replace(gpu, **{field: mid}), shape) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def derive(gpu: GPUSpec, sources: GemmSources) -> tuple[float, float]:
    """(gemm_efficiency, clock_ratio) that make ``gpu`` reproduce the burst and the sustained measurement."""
    efficiency = _solve(replace(gpu, clock_ratio=sources.burst.clock_over_peak_clock), "gemm_efficiency",
                        sources.burst.tflops, sources.burst.shape)
    clock = _solve(replace(gpu, gemm_efficiency=efficiency), "clock_ratio", sources.sustained.tflops,
                   sources.sustained.shape)
    return efficiency, clock


def epilogue_exposure(gpu: GPUSpec, timings: list[tuple[int, int, float, float]]) -> float:
    """The ``epilogue_exposure`` that timed GEMMs with a wider epilogue show: ``timings`` holds, per GEMM, the
    output's values (m·n), its bytes per value beyond a 16-bit write, and the seconds with and without that wider
    epilogue (benchmarks/device/wgrad_accumulate.py). Their summed extra time over the summed time of that extra
    traffic at the spec's achievable bandwidth: a time-weighted mean, as ``gemm_time`` adds it."""
    bandwidth = gpu.hbm_bandwidth * gpu.memory_efficiency
    traffic = sum(values * extra_bytes for values, extra_bytes, _, _ in timings) / bandwidth
    return sum(wide - plain for _, _, wide, plain in timings) / traffic


def backward_ratio(rows: list[dict], kernel: str) -> float:
    """Summed backward seconds of ``kernel``'s deterministic runs over its default ones, over the shapes timed both
    ways (benchmarks/device/deterministic_attention.py rows: ``fwd_s`` and ``fwd_bwd_s`` per shape, kernel,
    ``deterministic`` and pass): a time-weighted mean, as a step adds them."""
    timed = [r for r in rows if r["kernel"] == kernel and "fwd_bwd_s" in r]
    both = {(r["name"], r["pass"]) for r in timed if r["deterministic"]} & {(r["name"], r["pass"]) for r in timed
                                                                           if not r["deterministic"]}
    sums = {True: 0.0, False: 0.0}
    for r in timed:
        if (r["name"], r["pass"]) in both:
            sums[r["deterministic"]] += r["fwd_bwd_s"] - r["fwd_s"]
    return sums[True] / sums[False]


def attention_speedup(rows: list[dict], gpu: str, reference: str) -> float:
    """How many times faster ``gpu`` runs a fused attention's forward and backward than ``reference`` in one
    benchmark in BF16 (rows: ``gpu``, ``dtype``, ``seq``, ``fwd_ms``, ``bwd_ms``;
    calibration/cudnn-attention-training.json): the geometric mean, over the lengths both were timed at, of the
    reference's summed milliseconds over the GPU's."""
    times = {(r["gpu"], r["seq"]): r["fwd_ms"] + r["bwd_ms"] for r in rows if r["dtype"] == "bf16"}
    lengths = sorted({s for g, s in times if g == gpu} & {s for g, s in times if g == reference})
    return math.prod(times[reference, s] / times[gpu, s] for s in lengths) ** (1 / len(lengths))


def attention_efficiency(gpu: GPUSpec, reference: GPUSpec, speedup: float) -> float:
    """The ``attention_efficiency`` at which ``gpu`` runs the fused attention ``speedup`` times as fast as
    ``reference`` does at its own (each timed alone, at its spec's ``clock_ratio``): the reference's rate, which its
    own measurement set, carried across by a ratio that the same kernel library measured on both GPUs."""
    reference_rate = reference.peak_flops * reference.clock_ratio * reference.attention_efficiency
    return reference_rate * speedup / (gpu.peak_flops * gpu.clock_ratio)


def fp8_attention_ratios(rows: list[dict], gpu: str) -> tuple[float, float]:
    """(``fp8_attention_fwd_ratio``, ``fp8_attention_bwd_ratio``) of ``gpu``: its MXFP8 forward and backward times
    over its BF16 ones in the same benchmark (``attention_speedup``'s rows), each the mean over the lengths timed in
    both."""
    times = {(r["dtype"], r["seq"]): (r["fwd_ms"], r["bwd_ms"]) for r in rows if r["gpu"] == gpu}
    lengths = sorted({s for d, s in times if d == "bf16"} & {s for d, s in times if d == "mxfp8"})
    fwd = [times["mxfp8", s][0] / times["bf16", s][0] for s in lengths]
    bwd = [times["mxfp8", s][1] / times["bf16", s][1] for s in lengths]
    return sum(fwd) / len(fwd), sum(bwd) / len(bwd)


def gemm_table_errors(gpu: GPUSpec, rows: list[list], clock_over_peak_clock: float) -> dict[tuple, float]:
    """Shape (b, m, n, k) → ``compute.gemm_time``'s BF16 time over the measured one, for a table of timed GEMMs (rows
    of b, m, n, k, BF16 FLOP/s, ...; calibration/xla-gemm-table.json), the GPU alone at ``clock_over_peak_clock``."""
    alone = replace(gpu, clock_ratio=clock_over_peak_clock, job_gpus=1)
    return {(b, m, n, k): gemm_time(alone, m, n, k, batch=b) / (2.0 * b * m * n * k / flops)
            for b, m, n, k, flops, *_ in rows}


RING_COLLECTIVES = {"AG": network.all_gather, "RS": network.reduce_scatter, "A2A": network.all_to_all}
"""The table's collectives that run as rings or pairwise exchanges over the NVLink tier (its all-reduces are left
out: on NVSwitch NCCL may take NVLS for them, priced by ``allreduce_busbw`` instead)."""


def collective_errors(cluster: ClusterSpec, rows: list[list], min_bytes: float,
                      collectives: dict = RING_COLLECTIVES) -> dict[tuple, float]:
    """(op, group size, bytes) → the network model's time over the measured one, for a table of timed collectives
    (rows of op, GPUs, group size, per-GPU bytes, bytes/s; calibration/xla-collective-table.json) of groups of
    consecutive GPUs inside ``cluster``'s NVLink domain, ``min_bytes`` or larger (where bandwidth, not latency, sets
    the time), for the ops ``collectives`` prices (op → the network function)."""
    out = {}
    for op, _, size, nbytes, rate in rows:
        if op in collectives and nbytes >= min_bytes and size <= cluster.domain_gpus:
            group = network.group_shape(cluster.domain_gpus, size, 1)
            out[op, size, nbytes] = collectives[op](cluster, group, nbytes) / (nbytes / rate)
    return out


def nvlink_speedup_error(reference: dict[tuple, float], errors: dict[tuple, float]) -> float:
    """How much faster, relative to the reference GPU, a spec prices the collectives both tables timed than the
    table measured: the geometric mean over the shared (op, group size, bytes) of the reference's error over this
    one's. The spec's NVLink efficiency over this is the efficiency at which it keeps the measured ratio."""
    shared = [key for key in errors if key in reference]
    return math.exp(sum(math.log(reference[k] / errors[k]) for k in shared) / len(shared))
