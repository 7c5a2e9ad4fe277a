"""Compute cost of one transformer layer slice, the embedding, the output layer and the optimizer step.

Each op is a GEMM (roofline with a shape-dependent efficiency) or a memory-bound kernel (bytes / achievable
HBM bandwidth), plus a fixed per-kernel overhead. Times are per GPU for the plan's (tp, cp, sp, micro-batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autoplan.errors import SpecError
from autoplan.specs.cluster import ClusterSpec, GPUSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy

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


@dataclass(frozen=True, slots=True)
class LayerCompute:
    """Per-GPU kernels of one transformer layer for one micro-batch, and the TP collectives between them."""

    forward: tuple[Op, ...]
    backward: tuple[Op, ...]
    recompute: tuple[Op, ...]
    forward_collectives: tuple[Collective, ...]
    backward_collectives: tuple[Collective, ...]
    recompute_collectives: tuple[Collective, ...]
    attention_forward: float
    """Seconds of the attention core's forward (what CP ring exchanges overlap with)."""

    @staticmethod
    def seconds(ops: tuple[Op, ...]) -> float:
        """Total time of a list of ops."""
        return sum(op.seconds for op in ops)


@lru_cache(maxsize=16384)
def gemm_time(gpu: GPUSpec, m: int, n: int, k: int, batch: int = 1, fp8: bool = False) -> float:
    """Seconds for ``batch`` GEMMs of (m×k)·(k×n) in BF16 (or FP8 operands with a BF16 output).

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
    per_sm = peak * gpu.clock_ratio * k / (k + gpu.gemm_half_k) / gpu.sm_count
    best = math.inf
    for (fm, fn), tile_eff in zip(_TILE_CHOICES, _TILE_EFFICIENCY):
        rows, cols = tm * fm, tn * fn
        waves = math.ceil(math.ceil(m / rows) * math.ceil(n / cols) * batch / gpu.sm_count)
        best = min(best, waves * 2.0 * rows * cols * k / (per_sm * tile_eff))
    # roofline (Williams et al. 2009, CACM 52(4)): never faster than reading A, B and writing C once
    operand = FP8 if fp8 else BF16
    traffic = batch * (operand * (m * k + k * n) + BF16 * m * n)
    return max(best, traffic / (gpu.hbm_bandwidth * gpu.memory_efficiency)) + gpu.kernel_overhead


def memory_time(gpu: GPUSpec, nbytes: float, kernels: int = 1, efficiency: float = 0.0) -> float:
    """Seconds for memory-bound kernels moving ``nbytes`` at the achievable HBM bandwidth (``efficiency`` of
    peak, the GPU's ``memory_efficiency`` unless given)."""
    # roofline's memory-bound side (Williams et al. 2009): bytes over achievable bandwidth, plus launch overhead
    return nbytes / (gpu.hbm_bandwidth * (efficiency or gpu.memory_efficiency)) + kernels * gpu.kernel_overhead


def _gemm(gpu: GPUSpec, name: str, m: int, n: int, k: int, batch: int = 1, fp8: bool = False) -> Op:
    # 2mnk FLOPs (one multiply-add per term of each output) and one pass over A, B, C (Williams et al. 2009)
    operand = FP8 if fp8 else BF16
    return Op(name, 2.0 * m * n * k * batch, batch * (operand * (m * k + k * n) + BF16 * m * n),
              gemm_time(gpu, m, n, k, batch, fp8))


def _mem(gpu: GPUSpec, name: str, nbytes: float, kernels: int = 1) -> Op:
    return Op(name, 0.0, nbytes, memory_time(gpu, nbytes, kernels))


def _linear_backward(gpu: GPUSpec, name: str, m: int, n: int, k: int, fp8: bool = False) -> tuple[Op, Op]:
    # dgrad (m×n)·(n×k) and wgrad (k×m)·(m×n): backward ≈ 2× forward (Narayanan et al. SC'21 §5.1)
    return _gemm(gpu, f"{name}.dgrad", m, k, n, fp8=fp8), _gemm(gpu, f"{name}.wgrad", k, n, m, fp8=fp8)


FLASH_BLOCK = 128
"""Key-block width of the fused attention kernels (FlashAttention-2, Dao 2023, arXiv 2307.08691 §3.3: blocks of
64-128; cuDNN/FA3 on Hopper use 128): a windowed query block computes whole key blocks."""


def attended_keys(model: ModelSpec, s_kv: int) -> float:
    """Keys one query's fused causal attention computes, averaged over the layers: s_kv/2 for full causal attention;
    with a sliding window of w keys, the w keys plus the partial block around them (whole blocks are computed)."""
    full = s_kv / 2
    share = model.windowed_share
    if not share:
        return full
    # Longformer §3.1 (Beltagy et al. 2020): a window of w keys per query; FA computes whole key blocks, so a
    # query block of FLASH_BLOCK rows meets about w + FLASH_BLOCK keys
    windowed = min(full, model.window + FLASH_BLOCK)
    return (1 - share) * full + share * windowed


def _attention(cluster: ClusterSpec, model: ModelSpec, b: int, s_q: int, s_kv: int, heads: int,
               dropout: bool) -> tuple[Op, Op]:
    """Forward and backward of the attention core for ``heads`` local heads, s_q queries over s_kv keys."""
    gpu, d = cluster.gpu, model.head_dim
    rate = gpu.peak_flops * gpu.clock_ratio * gpu.attention_efficiency
    if cluster.flash_attention:
        # fused causal kernel: 4·b·s_q·keys·d·a FLOPs over the keys each query meets (s_kv/2 causal); backward
        # recomputes scores, 2.5× forward (Dao 2023, FA2 §3)
        flops = 4.0 * b * s_q * attended_keys(model, s_kv) * d * heads
        # Dao et al. 2022 (FlashAttention, arXiv 2205.14135) §3.2: Q and O of s_q rows, K and V of s_kv rows
        io = BF16 * b * heads * d * (2 * s_q + 2 * s_kv)
        fwd = Op("attention.flash", flops, io, flops / rate + gpu.kernel_overhead)
        return fwd, Op("attention.flash.bwd", 2.5 * flops, 2 * io, 2.5 * flops / rate + gpu.kernel_overhead)
    # Korthikanti et al. 2022 §4.1 (Megatron-LM's unfused core): batched QK^T and AV over the full s×s block,
    # fused scale-mask-softmax, then dropout; 4·b·s²·h FLOPs forward (Narayanan et al. SC'21 App. A)
    flops = 4.0 * b * s_q * s_kv * d * heads
    scores = b * heads * s_q * s_kv
    # bf16 bytes per score (Korthikanti et al. 2022 §4.1 sizes: 2as²b softmax, as²b mask, 2as²b dropout output):
    # forward softmax reads and writes, dropout reads, writes and its mask; the backward reads the softmax
    # output and gradient and writes a gradient, and reverses dropout (gradient in, mask, gradient out)
    elementwise_fwd = scores * (2 + 2 + (2 + 2 + 1 if dropout else 0))
    elementwise_bwd = scores * (2 + 2 + 2 + (2 + 1 + 2 if dropout else 0))
    gemm_fwd = flops / rate + 2 * gpu.kernel_overhead
    # two GEMMs each for dgrad and wgrad: the backward's GEMMs are 2× the forward's (Narayanan et al. SC'21 §5.1)
    eff = gpu.attention_memory_efficiency
    fwd = Op("attention.core", flops, elementwise_fwd, gemm_fwd + memory_time(gpu, elementwise_fwd, 2, eff))
    bwd = Op("attention.core.bwd", 2 * flops, elementwise_bwd,
             2 * gemm_fwd + memory_time(gpu, elementwise_bwd, 2, eff))
    return fwd, bwd


def fp8_store_ops(gpu: GPUSpec, name: str, values: float, store: bool) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """The casts of an activation's saved input to FP8 after the forward and back to BF16 before the backward."""
    if not store:
        return (), ()
    # Megatron-LM fused_bias_swiglu.py (fp8_input_store): input.to(float8_e4m3fn), then .to(bf16) in the backward,
    # each reading and writing every value (2 + 1 bytes)
    return (_mem(gpu, f"{name}.fp8_store", 3 * values),), (_mem(gpu, f"{name}.fp8_load", 3 * values),)


@lru_cache(maxsize=4096)
def layer_compute(model: ModelSpec, cluster: ClusterSpec, tp: int, cp: int, sp: bool, micro_batch: int,
                  recompute: str, precision: str = "bf16", fp8_activation_store: bool = False) -> LayerCompute:
    """Kernels and TP collectives of one layer for one micro-batch on one GPU (Megatron-LM's layer); with an
    FP8 precision the four linear layers' GEMMs run in FP8, each after a quantizing pass over its inputs; with
    ``fp8_activation_store`` the MLP activation's input is cast to FP8 for the backward and back before it."""
    gpu, h, t, b = cluster.gpu, model.hidden, tp, micro_batch
    s = model.seq_len // cp
    tokens = b * s
    fp8 = precision != "bf16"
    # Korthikanti et al. 2022 §4.2.2: with SP, norms and dropout see 1/t of the tokens
    norm_tokens = tokens // t if sp else tokens
    act = BF16 * norm_tokens * h
    shapes = layer_gemm_shapes(model, tp, cp, micro_batch)
    fc2_k = shapes["fc2"][2]
    heads = model.heads // t
    drop = model.dropout
    # Megatron-LM fused bias-dropout-add: read x and the residual, write the sum, a 1-byte mask per 2-byte value
    residual = act * (3 + (0.5 if drop else 0))
    norm = act * 2                                        # Apex fused layer norm (Megatron-LM): one read, one write
    # GeLU reads fc1's output and writes its own; SwiGLU reads gate and up, writes one (Shazeer 2020, arXiv 2002.05202)
    mlp_act_bytes = BF16 * tokens * fc2_k * (3 if model.gated else 2)
    # with CP each GPU's s/cp queries meet all s keys over the ring (Liu et al. 2023, Ring Attention); causal
    # balancing halves the work evenly (Megatron-Core context parallelism: two mirrored chunks per rank)
    attn_f, attn_b = _attention(cluster, model, b, s, model.seq_len, heads, drop)
    gemm = {name: _gemm(gpu, name, *shape, fp8=fp8) for name, shape in shapes.items()}
    grads = {name: _linear_backward(gpu, name, *shape, fp8=fp8) for name, shape in shapes.items()}
    quant_f, quant_b = _quantize_ops(gpu, shapes, norm_tokens * h) if fp8 else ((), ())
    store_f, store_b = fp8_store_ops(gpu, "activation", tokens * fc2_k * (2 if model.gated else 1),
                                     fp8_activation_store)
    forward = (
        _mem(gpu, "norm1", norm), *quant_f[:1], gemm["qkv"], attn_f, *quant_f[1:2], gemm["proj"],
        _mem(gpu, "dropout_add1", residual), _mem(gpu, "norm2", norm), *quant_f[2:3], gemm["fc1"],
        _mem(gpu, "activation", mlp_act_bytes), *store_f, *quant_f[3:], gemm["fc2"],
        _mem(gpu, "dropout_add2", residual),
    )
    # element-wise backwards read a saved input (those Korthikanti et al. 2022 §4.1 lists) and the incoming
    # gradient and write one: 1.5× the activation's forward bytes, 2× a norm's
    backward = (
        _mem(gpu, "dropout_add2.bwd", residual), *quant_b[3:], *grads["fc2"],
        *store_b, _mem(gpu, "activation.bwd", 1.5 * mlp_act_bytes), *quant_b[2:3], *grads["fc1"],
        _mem(gpu, "norm2.bwd", 2 * norm), _mem(gpu, "dropout_add1.bwd", residual), *quant_b[1:2], *grads["proj"],
        attn_b, *quant_b[:1], *grads["qkv"], _mem(gpu, "norm1.bwd", 2 * norm),
    )
    full_buffer = BF16 * tokens * h
    # Shoeybi et al. 2019 (Megatron-LM, arXiv 1909.08053) §3, Fig. 3: two all-reduces of b·s·h per layer and pass;
    # with SP each becomes an all-gather and a reduce-scatter (Korthikanti et al. 2022 §4.2.2, Fig. 5)
    if t == 1:
        fwd_coll: tuple[Collective, ...] = ()
    elif sp:
        fwd_coll = (Collective("all_gather", full_buffer), Collective("reduce_scatter", full_buffer)) * 2
    else:
        fwd_coll = (Collective("all_reduce", full_buffer),) * 2
    # Korthikanti et al. 2022 §4.2: selective recomputes the attention core, full recomputes the whole layer
    recompute_ops: tuple[Op, ...] = ()
    recompute_coll: tuple[Collective, ...] = ()
    if recompute == "full":
        recompute_ops, recompute_coll = forward, fwd_coll
    elif recompute == "selective" and not cluster.flash_attention:
        recompute_ops = (attn_f,)
    return LayerCompute(forward=forward, backward=backward, recompute=recompute_ops,
                        forward_collectives=fwd_coll, backward_collectives=fwd_coll,
                        recompute_collectives=recompute_coll, attention_forward=attn_f.seconds)


def layer_gemm_shapes(model: ModelSpec, tp: int, cp: int, micro_batch: int) -> dict[str, tuple[int, int, int]]:
    """(m, n, k) of one layer's four linear GEMMs on one GPU: qkv, proj, fc1, fc2 (forward)."""
    tokens, t = micro_batch * (model.seq_len // cp), tp
    # Shoeybi et al. 2019 §3: QKV and fc1 are column-parallel (n/t), proj and fc2 row-parallel (k/t)
    return {"qkv": (tokens, (model.q_dim + 2 * model.kv_dim) // t, model.hidden),
            "proj": (tokens, model.hidden, model.q_dim // t),
            "fc1": (tokens, (2 if model.gated else 1) * model.ffn_hidden // t, model.hidden),
            "fc2": (tokens, model.hidden, model.ffn_hidden // t)}


def _quantize_ops(gpu: GPUSpec, shapes: dict[str, tuple[int, int, int]],
                  sharded_input: int) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """Transformer Engine's FP8 casts around each linear layer: forward, the GEMM input (before the SP all-gather
    for qkv and fc1); backward, the incoming gradient. Each pass reads BF16 and writes FP8 twice, row- and
    column-wise (the wgrad GEMM's transposed operand), and records the amax (TE docs, "Using FP8 with Transformer
    Engine": cast_transpose; Hopper FP8 GEMMs take only TN layouts, cuBLASLt docs). The weights' casts run once
    per step (TE caches them across micro-batches, ``is_first_microbatch``) and are left out."""
    per_value = BF16 + 2 * FP8
    inputs = {"qkv": sharded_input, "proj": shapes["proj"][0] * shapes["proj"][2],
              "fc1": sharded_input, "fc2": shapes["fc2"][0] * shapes["fc2"][2]}
    fwd = tuple(_mem(gpu, f"{name}.quantize", per_value * n) for name, n in inputs.items())
    bwd = tuple(_mem(gpu, f"{name}.quantize_grad", per_value * shapes[name][0] * shapes[name][1]) for name in inputs)
    return fwd, bwd


@lru_cache(maxsize=1024)
def embedding_compute(model: ModelSpec, cluster: ClusterSpec, tp: int, cp: int, sp: bool,
                      micro_batch: int) -> tuple[tuple[Op, ...], tuple[Op, ...], tuple[Collective, ...]]:
    """Forward ops, backward ops and TP collectives of the (vocab-parallel) input embedding on the first stage."""
    gpu = cluster.gpu
    tokens = micro_batch * model.seq_len // cp
    out = BF16 * tokens * model.hidden
    # gather rows (read and write b·s·h), plus the learned position rows; the backward scatters the gradient back
    fwd = (_mem(gpu, "embedding", 2 * out + (out if model.position == "learned" else 0), 2),)
    bwd = (_mem(gpu, "embedding.bwd", 2 * out * 2, 2),)
    # Shoeybi et al. 2019 §3: the vocab-parallel embedding all-reduces its output (reduce-scatter with SP,
    # Korthikanti et al. 2022 §4.2.2)
    coll = () if tp == 1 else ((Collective("reduce_scatter" if sp else "all_reduce", out),))
    return fwd, bwd, coll


@lru_cache(maxsize=1024)
def output_compute(model: ModelSpec, cluster: ClusterSpec, tp: int, cp: int, sp: bool,
                   micro_batch: int) -> tuple[tuple[Op, ...], tuple[Op, ...], tuple[Collective, ...]]:
    """Forward ops, backward ops and TP collectives of the final norm, vocab-parallel logits and the loss."""
    gpu, h = cluster.gpu, model.hidden
    tokens = micro_batch * model.seq_len // cp
    vocab = math.ceil(model.vocab / (128 * tp)) * 128          # Megatron pads the vocabulary to 128·tp
    norm_bytes = BF16 * (tokens // tp if sp else tokens) * h * 2   # as the layer's norms (Korthikanti §4.2.2 with SP)
    # Megatron-LM vocab_parallel_cross_entropy: three passes over fp32 logits (max, exp-sum, gradient)
    loss_bytes = 4 * tokens * vocab * 3
    fwd = (_mem(gpu, "final_norm", norm_bytes), _gemm(gpu, "logits", tokens, vocab, h),
           _mem(gpu, "cross_entropy", loss_bytes, 3))
    bwd = (*_linear_backward(gpu, "logits", tokens, vocab, h), _mem(gpu, "cross_entropy.bwd", loss_bytes, 2),
           _mem(gpu, "final_norm.bwd", 2 * norm_bytes))
    coll: tuple[Collective, ...] = ()
    if tp > 1:
        # Korthikanti et al. 2022 §4.2.2: SP gathers the sequence before the vocab-parallel logits
        coll = (Collective("all_gather", BF16 * tokens * h),) if sp else ()
        # Shoeybi et al. 2019 §3: the fused cross-entropy all-reduces b·s fp32 scalars (max, sum, target logit)
        coll += (Collective("all_reduce", 4 * tokens * 3),)
    return fwd, bwd, coll


def layer_tensors(model: ModelSpec) -> int:
    """Parameter tensors of one layer: QKV, projection and two MLP matrices (and their biases), two norms."""
    # Megatron-LM ParallelTransformerLayer: fused QKV, dense, fc1 (gate and up fused), fc2; two norms
    return 4 * (2 if model.bias else 1) + 2 * (2 if model.norm == "layernorm" else 1)


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
