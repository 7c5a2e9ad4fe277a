"""Kernel costs on one GPU: GEMMs, memory-bound kernels, gradient accumulation and the optimizer step.

Each op is a GEMM (roofline with a shape-dependent efficiency) or a memory-bound kernel (bytes / achievable
HBM bandwidth), plus a fixed per-kernel overhead. A model family builds its layers from these
(``autoplan/families/transformer/layer.py``, ``families/cnn``, ``families/dlrm``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autoplan.errors import SpecError
from autoplan.specs.cluster import GPUSpec

BF16 = 2                # bytes per bfloat16 value (Kalamkar et al. 2019, arXiv 1905.12322)
FP8 = 1                 # bytes per E4M3/E5M2 value (Micikevicius et al. 2022, FP8 Formats for Deep Learning, arXiv 2209.05433)
# cuBLAS picks among tile shapes to limit wave quantization (NVIDIA "Matrix Multiplication Background" guide,
# tile and wave quantization); the shapes are CUTLASS's BF16 threadblock tiles from the cluster's gemm_tile
# down to a quarter of it; their efficiencies (smaller tiles reuse less data per load) are this model's own
# calibration constants, with no published source.
_TILE_CHOICES = ((1.0, 1.0), (1.0, 0.5), (0.5, 1.0), (0.5, 0.5), (0.25, 0.5))
_TILE_EFFICIENCY = (1.0, 0.92, 0.92, 0.85, 0.70)


@dataclass(frozen=True, slots=True)
class Op:
    """One kernel: its name, work, traffic and time."""

    name: str
    flops: float
    bytes: float
    seconds: float


@dataclass(frozen=True, slots=True)
class Collective:
    """A TP collective a layer pass needs: kind (all_reduce, reduce_scatter, all_gather) and buffer bytes."""

    kind: str
    nbytes: float


@lru_cache(maxsize=16384)
def gemm_time(gpu: GPUSpec, m: int, n: int, k: int, batch: int = 1, fp8: bool = False,
              out_bytes: float = BF16) -> float:
    """Seconds for ``batch`` GEMMs of (m×k)·(k×n) in BF16 (or FP8 operands with a BF16 output); ``out_bytes``:
    HBM bytes the GEMM moves per output value (a 16-bit write, or ``wgrad_output_bytes``).

    Each SM computes one output tile per wave, so the time is waves × one tile's work at the per-SM rate
    (wave quantization: NVIDIA "Matrix Multiplication Background" guide), at the best of several tile shapes
    (smaller tiles reuse less data: lower rate); the k/(k + k½) factor is each tile's main-loop fill. Never
    faster than moving its operands (roofline). FP8 runs at the GPU's FP8 peak times its FP8 efficiency.
    """
    if fp8 and not gpu.fp8_peak_flops:
        raise SpecError(f"the {gpu.name} has no FP8 tensor cores (fp8_peak_tflops not set)")
    tm, tn = gpu.gemm_tile
    peak = (gpu.fp8_peak_flops * (gpu.fp8_gemm_efficiency or gpu.gemm_efficiency) if fp8
            else gpu.peak_flops * gpu.gemm_efficiency)
    per_sm = peak * gpu.sustained_clock * k / (k + gpu.gemm_half_k) / gpu.sm_count
    best = math.inf
    for (fm, fn), tile_eff in zip(_TILE_CHOICES, _TILE_EFFICIENCY):
        rows, cols = tm * fm, tn * fn
        waves = math.ceil(math.ceil(m / rows) * math.ceil(n / cols) * batch / gpu.sm_count)
        best = min(best, waves * 2.0 * rows * cols * k / (per_sm * tile_eff))
    # roofline (Williams et al. 2009, CACM 52(4)): never faster than reading A, B and writing C once
    operand = FP8 if fp8 else BF16
    bandwidth = gpu.hbm_bandwidth * gpu.memory_efficiency
    traffic = batch * (operand * (m * k + k * n) + out_bytes * m * n)
    # an epilogue moving more than a 16-bit C is partly exposed: measured, calibration/h100-wgrad-accumulate.json
    wide = gpu.epilogue_exposure * batch * max(0.0, out_bytes - BF16) * m * n / bandwidth
    return max(best + wide, traffic / bandwidth) + gpu.kernel_overhead


def wgrad_output_bytes(fused: bool, main_grad_bytes: int) -> float:
    """HBM bytes per weight-gradient value of a wgrad GEMM: with gradient-accumulation fusion it adds into the
    gradient buffer, reading and writing it (Megatron-LM ``fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32``,
    Transformer Engine ``fuse_wgrad_accumulation``: the GEMM's output is ``main_grad`` with ``accumulate=True``);
    without, it writes a 16-bit gradient that a separate kernel adds (``grad_accumulation``)."""
    return 2.0 * main_grad_bytes if fused else BF16


def memory_time(gpu: GPUSpec, nbytes: float, kernels: int = 1, efficiency: float = 0.0) -> float:
    """Seconds for memory-bound kernels moving ``nbytes`` at the achievable HBM bandwidth (``efficiency`` of
    peak, the GPU's ``memory_efficiency`` unless given)."""
    # roofline's memory-bound side (Williams et al. 2009): bytes over achievable bandwidth, plus launch overhead
    return nbytes / (gpu.hbm_bandwidth * (efficiency or gpu.memory_efficiency)) + kernels * gpu.kernel_overhead


def gemm_op(gpu: GPUSpec, name: str, m: int, n: int, k: int, batch: int = 1, fp8: bool = False,
            out_bytes: float = BF16) -> Op:
    # 2mnk FLOPs (one multiply-add per term of each output) and one pass over A, B, C (Williams et al. 2009)
    operand = FP8 if fp8 else BF16
    return Op(name, 2.0 * m * n * k * batch, batch * (operand * (m * k + k * n) + out_bytes * m * n),
              gemm_time(gpu, m, n, k, batch, fp8, out_bytes))


def memory_op(gpu: GPUSpec, name: str, nbytes: float, kernels: int = 1) -> Op:
    return Op(name, 0.0, nbytes, memory_time(gpu, nbytes, kernels))


def linear_backward(gpu: GPUSpec, name: str, m: int, n: int, k: int, fp8: bool = False,
                    wgrad_bytes: float = BF16) -> tuple[Op, Op]:
    """dgrad and wgrad of a linear layer (``wgrad_bytes``: ``wgrad_output_bytes``)."""
    # dgrad (m×n)·(n×k) and wgrad (k×m)·(m×n): backward ≈ 2× forward (Narayanan et al. SC'21 §5.1)
    return (gemm_op(gpu, f"{name}.dgrad", m, k, n, fp8=fp8),
            gemm_op(gpu, f"{name}.wgrad", k, n, m, fp8=fp8, out_bytes=wgrad_bytes))


def grad_accumulation(gpu: GPUSpec, params: float, main_grad_bytes: int, tensors: int) -> Op:
    """Adding one micro-batch's weight gradients to the accumulated ones without gradient-accumulation fusion:
    the wgrad GEMM writes a 16-bit gradient, then one add per tensor reads it and the buffer and writes the
    buffer (Megatron-LM DDP's ``main_grad.add_`` hook, or autograd's in-place accumulation)."""
    # read the buffer and the new gradient, write the buffer: 2·g + 2 bytes per parameter
    nbytes = (2 * main_grad_bytes + BF16) * params
    return Op("grad_accumulation", 0.0, nbytes, memory_time(gpu, nbytes, kernels=tensors))


def optimizer_bytes(local_params: float, sharded_params: float) -> float:
    """HBM bytes of the Adam step: fp32 master, m, v read and written, fp32 grad read, bf16 weight written.

    26 bytes per updated parameter (Megatron-LM fused Adam), plus a grad-norm pass over the local grads (4 B).
    """
    # Kingma & Ba 2015 (Adam, Alg. 1) state in fp32 per Micikevicius et al. 2018 (mixed precision §3.1)
    return 26.0 * sharded_params + 4.0 * local_params


def optimizer_time(gpu: GPUSpec, local_params: float, sharded_params: float) -> float:
    """Seconds of the Adam step: its ``optimizer_bytes`` at the achievable HBM bandwidth, four kernels."""
    return memory_time(gpu, optimizer_bytes(local_params, sharded_params), kernels=4)


def host_exposed(host_launch: float, ops: list[tuple[Op, float]], synced: bool) -> float:
    """Seconds the GPU waits for the host over ``ops`` (each with the kernels it launches, or the host work it costs
    in launch-equivalents), at ``host_launch``
    host seconds per launch (eager PyTorch: Python, the dispatcher and the launch of a module's kernels).

    Without a sync the host runs ahead of the GPU and binds only if it issues the ops slower than the GPU runs
    them: the wait is what the host's issue time exceeds the GPU's busy time by (the launch-bound regime of
    small kernels, H. He, "Making Deep Learning Go Brrrr From First Principles", 2022: overhead). After a
    device-to-host sync (``synced``: Megatron-Core's MoE alltoall dispatcher copies the token counts to the
    host every layer, token_dispatcher.py) the host has no lead: each kernel starts when both the GPU is free and
    the host has issued it (a two-queue simulation from the sync to the next one)."""
    if not host_launch:
        return 0.0
    gpu_busy = sum(op.seconds for op, _ in ops)
    if not synced:
        return max(0.0, host_launch * sum(n for _, n in ops) - gpu_busy)
    host = gpu = 0.0
    for op, launches in ops:
        host += host_launch * launches
        gpu = max(gpu, host) + op.seconds
    return gpu - gpu_busy
