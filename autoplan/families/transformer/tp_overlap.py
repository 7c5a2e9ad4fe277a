"""Exposed seconds of a layer's sequence-parallel TP collectives when they overlap the GEMMs they feed
(Megatron-LM ``--tp-comm-overlap``, Transformer Engine userbuffers).

Wang et al. ASPLOS'23 ("Overlap Communication with Dependent Computation via Decomposition in Large Deep
Learning Models") split a collective and the GEMM that consumes (or produces) it into tp chunks that pipeline:
while the GEMM of one chunk runs, the next chunk's shard travels. Transformer Engine does this for the
all-gather before QKV and fc1 and the reduce-scatter after proj and fc2 (``ring_exchange``/``pipeline``), and in
the backward overlaps the dgrad's reduce-scatter with the independent wgrad GEMM (``bulk``) (TE docs,
``initialize_ub``; NeMo userbuffers configs). Only what a chunk's GEMM cannot hide stays exposed.
"""

from __future__ import annotations

from dataclasses import replace

from autoplan.hardware import compute, network

from autoplan.families.transformer import layer
from autoplan.specs.cluster import GPUSpec
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

RING = "r"
"""In ``Plan.tp_overlap_rs``: that reduce-scatter as a ring exchange (TE ``ring_exchange``)."""


def reduce_scatter_overlap(rs: str) -> dict[str, str]:
    """How the forward's reduce-scatter after proj and after fc2 overlaps its GEMM, from ``Plan.tp_overlap_rs``
    "P/F": the SMs its pipelined kernels take from the GEMM (``num_sm`` with ``set_sm_margin``; the GEMM runs on the
    rest), or ``RING``. The default, 24 and 20, is NVIDIA's GPT-3 175B H100 recipe (dgxc-benchmarking
    nemo_megatron/gpt3_175b_hydra.yaml ``ub_tp_comm_overlap_cfg``; the all-gathers use copy engines: no SMs)."""
    proj, fc2 = rs.split("/")
    return {"proj": proj, "fc2": fc2}


RS_SPLITS = 4
"""Chunks of the pipelined reduce-scatter (``num_splits`` in the same NVIDIA recipe's userbuffers config)."""


def _fewer_sms(gpu: GPUSpec, taken: int) -> GPUSpec:
    """The GPU as a GEMM sees it with ``taken`` SMs busy with communication kernels (same per-SM rate)."""
    left = max(1, gpu.sm_count - taken)
    ratio = left / gpu.sm_count
    return replace(gpu, sm_count=left, peak_flops=gpu.peak_flops * ratio, fp8_peak_flops=gpu.fp8_peak_flops * ratio)


def pipelined(gemm: float, chunk_gemm: float, comm: float, chunks: int, exposed_chunk: bool = False) -> float:
    """Exposed seconds of a collective of ``comm`` seconds split over a GEMM of ``gemm`` seconds whose ``chunks``
    pieces take ``chunk_gemm`` each: ring exchange, the pipeline ``g + (n−1)·max(c, g)`` with c = comm/(n−1) per
    step; chunked reduce-scatter (``exposed_chunk``), ``g + (n−1)·max(c, g) + c`` with c = comm/n, the last
    chunk's reduce-scatter exposed. What exceeds the unsplit GEMM, never below 0; above ``comm`` (slower than no
    overlap) where the split GEMMs, on the SMs the communication leaves, lose more than the overlap hides, as
    Transformer Engine's userbuffers overlap was measured to on small GEMMs (Chang et al. 2024, Flux, arXiv
    2406.06858 §5.1 and Fig. 4: overlap efficiency −40 to +80 % on H800, −99 to +74 % on A100 NVLink, GPT-3 175B
    shapes, TP 8)."""
    if chunks <= 1 or comm <= 0:
        return max(0.0, comm)
    # Wang et al. ASPLOS'23 §4 (decomposition): each chunk's transfer runs beside its neighbour chunk's GEMM;
    # NeMo docs "Communication Overlap": ring exchanges replace the all-gather, and the chunked reduce-scatter
    # "exposes one reduce-scatter chunk"
    step = comm / chunks if exposed_chunk else comm / (chunks - 1)
    total = chunk_gemm + (chunks - 1) * max(step, chunk_gemm) + (step if exposed_chunk else 0.0)
    return max(0.0, total - gemm)


def bulk(comm: float, independent_gemm: float) -> float:
    """Exposed seconds of a collective running beside an independent GEMM (TE userbuffers ``bulk`` overlap)."""
    return max(0.0, comm - independent_gemm)


ATTENTION = ("qkv", "proj")
"""The attention block's linear layers: the only TE userbuffers an MoE layer has (its experts' fc1 and fc2 take
the dispatcher's expert-TP collectives instead)."""


def layer_exposed(model: ModelSpec, cluster: ClusterSpec, s: Plan,
                  layers: tuple[str, ...] = ("qkv", "proj", "fc1", "fc2")) -> tuple[float, float]:
    """Exposed TP seconds of one layer's forward and backward with TP-comm overlap (sequence parallel, tp > 1):
    the collectives of its ``layers`` (of qkv, proj, fc1, fc2)."""
    gpu, t, fp8 = layer.fp8_gemm_gpu(cluster.gpu, s.precision, s.deepseek_fp8), s.tp, s.precision != "bf16"
    shape = network.shape_of(cluster, s, "tp")
    shapes = layer.layer_gemm_shapes(model, t, s.cp, s.micro_batch)
    # Korthikanti et al. 2022 §4.2.2: each SP all-gather / reduce-scatter moves the full b·s·h tensor, the gathers in
    # FP8 under an FP8 precision (layer.gathered_bytes)
    values = shapes["qkv"][0] * model.hidden
    gather = network.all_gather(cluster, shape, layer.gathered_bytes(values, fp8))
    scatter = network.reduce_scatter(cluster, shape, compute.BF16 * values)
    # userbuffers fp8_buf: proj's and fc2's FP8 GEMMs write FP8 into the buffer the reduce-scatter moves
    out_bytes = (compute.FP8 if fp8 and s.tp_overlap_fp8_rs else compute.BF16) * values
    out_scatter = scatter if out_bytes == compute.BF16 * values else network.reduce_scatter(cluster, shape, out_bytes)
    overlaps = reduce_scatter_overlap(s.tp_overlap_rs)

    def gemm(m: int, n: int, k: int, chunks: int, sms_taken: int = 0) -> tuple[float, float]:
        # the whole GEMM and one of its row chunks (m/chunks tokens; wave quantization of the smaller GEMM), the
        # chunks on the SMs the communication kernels leave
        chunk_gpu = _fewer_sms(gpu, sms_taken) if sms_taken else gpu
        return compute.gemm_time(gpu, m, n, k, 1, fp8), compute.gemm_time(chunk_gpu, -(-m // chunks), n, k, 1, fp8)

    fwd = 0.0
    for name in _of(("qkv", "fc1"), layers):
        # the input's all-gather as t−1 ring exchanges beside t GEMM chunks (TE ``ring_exchange``)
        fwd += pipelined(*gemm(*shapes[name], t), gather, t)
    for name in _of(("proj", "fc2"), layers):
        how = overlaps[name]
        if how == RING:
            # t−1 exchanges of partial outputs beside t GEMM chunks, on copy engines (TE ``ring_exchange``), then one
            # kernel sums the t partial outputs each rank received into its shard (TE v2.2
            # comm_gemm_overlap.cpp ``split_overlap_rs_p2p``: reduce_bf16 / reduce_fp8_in_bf16_out over tp chunks)
            fwd += (pipelined(*gemm(*shapes[name], t), out_scatter, t)
                    + compute.memory_time(gpu, out_bytes + compute.BF16 * values / t))
        else:
            # the output's reduce-scatter in chunks after GEMM chunks (TE ``pipeline``, ``num_splits``)
            fwd += pipelined(*gemm(*shapes[name], RS_SPLITS, int(how)), out_scatter, RS_SPLITS, True)
    bwd = 0.0
    for name in _of(("proj", "fc2"), layers):
        # the gradient's all-gather feeds the row-parallel layer's dgrad, (m×n)·(n×k) (ring exchange)
        m, n, k = shapes[name]
        bwd += pipelined(*gemm(m, k, n, t), gather, t)
    for name in _of(("qkv", "fc1"), layers):
        # the column-parallel dgrad's reduce-scatter beside its own wgrad GEMM, (k×m)·(m×n) (TE ``bulk``,
        # ``qkv_wgrad``/``fc1_wgrad``), and the re-gather of the layer's input for that wgrad beside the dgrad GEMM,
        # (m×n)·(n×k) (``qkv_dgrad``/``fc1_dgrad``: TE layernorm_linear.py ub_bulk_dgrad; layer.sp_regathers):
        # what a small GEMM (QKV under GQA at large tp) cannot hide stays exposed
        m, n, k = shapes[name]
        bwd += (bulk(scatter, compute.gemm_time(gpu, k, n, m, 1, fp8))
                + bulk(gather, compute.gemm_time(gpu, m, k, n, 1, fp8)))
    return fwd, bwd


def _of(names: tuple[str, ...], layers: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in names if n in layers)
