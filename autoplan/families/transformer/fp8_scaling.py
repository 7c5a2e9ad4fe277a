"""The amax reduction of FP8 tensor-wise delayed scaling (precision ``fp8``): one blocking all-reduce over the
stage's TP×DP×CP ranks at the end of every chunk's forward and again in its backward.

Megatron-Core wraps a model chunk's whole forward in one ``fp8_autocast`` under delayed scaling, with the amax
reduction group TP×DP×CP (core_v0.9.0 transformer/transformer_block.py; core_v0.12.0 fp8_utils.get_fp8_context and
transformer_block.py ``use_outer_fp8_context``; parallel_state.get_amax_reduction_group with ``tp_only_amax_red``
False, its default). When the autocast exits, and when the backward reaches the region's first FP8 module,
Transformer Engine concatenates the amaxes of every FP8 tensor, all-reduces their maximum over that group with a
blocking call and updates the scales (TE v1.12 pytorch/fp8.py ``reduce_and_update_fp8_tensors``: ``torch.cat``,
``all_reduce(MAX)``, ``fused_amax_and_scale_update_after_reduction``). A recompute reuses the forward's scales and
reduces nothing. The buffer holds a few floats per FP8 GEMM, so the all-reduce costs its steps' latency.

Current scaling (``fp8-current``), the blockwise recipes and MXFP8 compute each scale from the tensor at hand and
have no such per-chunk reduction. Not priced: the wait for the group's slowest rank at each reduction beyond the
spread ``GPUSpec.speed_variability`` already charges once a step.
"""

from __future__ import annotations

from autoplan.families.costs import PassCost, PassKey, with_part
from autoplan.hardware import network
from autoplan.specs.cluster import ClusterSpec, GPUSpec
from autoplan.specs.plan import Plan

TENSOR_SCALED = ("fp8", "fp8-current")
"""The recipes with one scale per tensor (delayed and current scaling)."""


def fp8_copies(gpu: GPUSpec, precision: str) -> int:
    """FP8 copies Transformer Engine writes of a tensor it casts for a GEMM, and keeps of each weight: row-wise and
    column-wise (the transposed operand of the GEMMs that reduce along the other dimension), except one under a
    tensor-scaled recipe on a GPU whose FP8 GEMMs take every layout (``GPUSpec.fp8_any_layout``)."""
    # TE v2.2+ pytorch/csrc quantizer.cpp: Float8Quantizer / Float8CurrentScalingQuantizer create the transpose only
    # when columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported() (sm 10.x, sm >= 13); MXFP8's 1x32 scales run
    # along the GEMM's inner dimension, so MXFP8Quantizer writes row-wise and column-wise data on every GPU, as the
    # blockwise recipes do (cublaslt_grouped_gemm.cu: fp8_block ? false : nvte_is_non_tn_fp8_gemm_supported())
    return 1 if precision in TENSOR_SCALED and gpu.fp8_any_layout else 2


UPDATE_KERNELS = 2
"""Kernels around each reduction besides NCCL's: the concatenation of the amax buffer and the fused amax-and-scale
update (TE v1.12 pytorch/fp8.py ``reduce_and_update_fp8_tensors``)."""


def amax_group(cluster: ClusterSpec, s: Plan) -> network.GroupShape:
    """The ranks one amax all-reduce spans: one pipeline stage's TP×CP×DP ranks, consecutive in Megatron's rank
    order (tp, cp, dp, pp)."""
    return network.group_shape(cluster.domain_gpus, s.tp * s.cp * s.dp, 1)


def reduction_seconds(cluster: ClusterSpec, s: Plan) -> float:
    """Seconds one amax reduction holds the compute stream under delayed scaling (0 for other precisions)."""
    if s.precision != "fp8":
        return 0.0
    return network.all_reduce_latency(cluster, amax_group(cluster, s)) + UPDATE_KERNELS * cluster.gpu.kernel_overhead


def with_reductions(passes: dict[PassKey, PassCost], seconds: float) -> dict[PassKey, PassCost]:
    """``passes`` with one amax reduction of ``seconds`` at the end of every forward and backward chunk pass,
    counted as DP communication (its group spans the data-parallel ranks)."""
    if seconds <= 0:
        return passes
    return {key: with_part(cost, "dp", seconds) for key, cost in passes.items()}
