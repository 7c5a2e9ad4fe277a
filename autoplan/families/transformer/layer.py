"""One transformer layer's kernels on one GPU: its GEMMs, attention core, element-wise kernels and TP collectives,
and those of the input embedding and the output layer, for the plan's (tp, cp, sp, micro-batch)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from autoplan.families.transformer.fp8_scaling import fp8_copies
from autoplan.hardware import network
from autoplan.hardware.compute import BF16, FP8, Collective, Op, gemm_op, linear_backward, memory_op, memory_time
from autoplan.specs.cluster import ClusterSpec, GPUSpec
from autoplan.specs.model import ModelSpec


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


def fused_softmax_applies(b: int, s_q: int, s_kv: int, heads: int) -> bool:
    """Whether Megatron's fused scale-mask-softmax kernel takes the attention scores of ``b`` sequences and
    ``heads`` local heads (s_q × s_kv each); otherwise it falls back to PyTorch's softmax in fp32."""
    # Megatron-LM/-DeepSpeed FusedScaleMaskSoftmax.is_kernel_available (fused_softmax.py; the copy in vTrain's
    # src/model/fused_softmax.py): sq % 4 == 0 and b·np % 4 == 0 (the causal kernel's 4 batches per block at
    # sk ≤ 1024), 16 < sk; the key-length cap (2048, later 4096 and 16384) varies by version and is left out
    return s_kv > 16 and s_q % 4 == 0 and (b * heads) % 4 == 0


def unfused_softmax_ops(gpu: GPUSpec, b: int, s_q: int, s_kv: int, heads: int) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """The element-wise kernels the unfused softmax adds to the attention core, forward and backward (none where
    the fused kernel applies): the fp32 cast of the 16-bit scores, the scale, the masked fill and the cast back,
    and their four backwards (the softmax itself runs in fp32: ``attention_ops``' ``fused_softmax``)."""
    if fused_softmax_applies(b, s_q, s_kv, heads):
        return (), ()
    scores = b * heads * s_q * s_kv
    # FusedScaleMaskSoftmax.forward_torch_softmax: input.float() (read 2, write 4 bytes a score), input * scale
    # (4 + 4), mask_func's masked_fill_ (4 + 4), softmax, probs.half() (4 + 2); autograd runs each one's backward
    fwd = (memory_op(gpu, "softmax.to_fp32", 6 * scores), memory_op(gpu, "softmax.scale", 8 * scores),
           memory_op(gpu, "softmax.mask", 8 * scores), memory_op(gpu, "softmax.to_fp16", 6 * scores))
    bwd = (memory_op(gpu, "softmax.to_fp16.bwd", 6 * scores), memory_op(gpu, "softmax.mask.bwd", 8 * scores),
           memory_op(gpu, "softmax.scale.bwd", 8 * scores), memory_op(gpu, "softmax.to_fp32.bwd", 6 * scores))
    return fwd, bwd


def attention_ops(cluster: ClusterSpec, model: ModelSpec, b: int, s_q: int, s_kv: int, heads: int,
               dropout: bool, fused_softmax: bool = True, fp8: bool = False) -> tuple[Op, Op]:
    """Forward and backward of the attention core for ``heads`` local heads, s_q queries over s_kv keys; without
    ``fused_softmax`` its softmax reads and writes fp32 scores (``unfused_softmax_ops`` has the casts around it);
    ``fp8``: the fused kernel in FP8 (TransformerPlan.fp8_attention)."""
    gpu, d = cluster.gpu, model.head_dim
    rate = gpu.peak_flops * gpu.sustained_clock * gpu.attention_efficiency
    if cluster.flash_attention:
        # fused causal kernel: 4·b·s_q·keys·d·a FLOPs over the keys each query meets (s_kv/2 causal); backward
        # recomputes scores, 2.5× forward (Dao 2023, FA2 §3)
        flops = 4.0 * b * s_q * attended_keys(model, s_kv) * d * heads
        # cuDNN's FP8 backward computes every causal block under a sliding window (cudnn-frontend's GB200 training
        # benchmark, gpt_oss config: its time grows with the square of the length, BF16's with the length)
        bwd_flops = 4.0 * b * s_q * (s_kv / 2) * d * heads if fp8 and model.window else flops
        fwd_ratio, bwd_ratio = (gpu.fp8_attention_fwd_ratio, gpu.fp8_attention_bwd_ratio) if fp8 else (1.0, 1.0)
        # Dao et al. 2022 (FlashAttention, arXiv 2205.14135) §3.2: Q and O of s_q rows, K and V of s_kv rows
        io = BF16 * b * heads * d * (2 * s_q + 2 * s_kv)
        fwd = Op("attention.flash", flops, io, flops / rate * fwd_ratio + gpu.kernel_overhead)
        bwd = 2.5 * bwd_flops / rate * gpu.attention_bwd_ratio * bwd_ratio + gpu.kernel_overhead
        return fwd, Op("attention.flash.bwd", 2.5 * bwd_flops, 2 * io, bwd)
    # Korthikanti et al. 2022 §4.1 (Megatron-LM's unfused core): batched QK^T and AV over the full s×s block,
    # fused scale-mask-softmax, then dropout; 4·b·s²·h FLOPs forward (Narayanan et al. SC'21 App. A)
    flops = 4.0 * b * s_q * s_kv * d * heads
    scores = b * heads * s_q * s_kv
    # bf16 bytes per score (Korthikanti et al. 2022 §4.1 sizes: 2as²b softmax, as²b mask, 2as²b dropout output):
    # forward softmax reads and writes, dropout reads, writes and its mask; the backward reads the softmax
    # output and gradient and writes a gradient, and reverses dropout (gradient in, mask, gradient out)
    v = 2 if fused_softmax else 4                      # bytes of a score the softmax reads and writes
    elementwise_fwd = scores * (v + v + (2 + 2 + 1 if dropout else 0))
    elementwise_bwd = scores * (v + v + v + (2 + 1 + 2 if dropout else 0))
    gemm_fwd = flops / rate + 2 * gpu.kernel_overhead
    # two GEMMs each for dgrad and wgrad: the backward's GEMMs are 2× the forward's (Narayanan et al. SC'21 §5.1)
    eff = gpu.attention_memory_efficiency
    fwd = Op("attention.core", flops, elementwise_fwd, gemm_fwd + memory_time(gpu, elementwise_fwd, 2, eff))
    bwd = Op("attention.core.bwd", 2 * flops, elementwise_bwd,
             2 * gemm_fwd + memory_time(gpu, elementwise_bwd, 2, eff))
    return fwd, bwd


def qkv_split_ops(gpu: GPUSpec, model: ModelSpec, tokens: int, tp: int) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """What a layer does to its fused QKV GEMM's output before the attention and to the gradients after it, forward
    and backward, for ``tokens`` tokens of a TP rank's heads: under grouped-query attention the queries are copied
    out of the interleaved buffer, RoPE rewrites the queries and keys, and the three gradients are concatenated back.

    Megatron-Core ``SelfAttention.get_query_key_value_tensors`` (core_v0.10.0-0.13.0) splits the buffer
    [s, b, groups, (heads/groups + 2)·d] along its last dimension and reshapes the queries to [s, b, heads, d]: a copy
    where a group holds more than one query head (the split's rows are strided). ``apply_rotary_pos_emb`` with
    ``apply_rope_fusion`` (the NeMo recipes' setting) runs Transformer Engine's fused RoPE, one kernel reading and
    writing the queries and one the keys, and the same in the backward. Transformer Engine's ``_SplitAlongDim``
    backward concatenates dQ, dK and dV (v1.13 pytorch/attention.py) unless they are views of one buffer, which the
    gradients of RoPE and of the queries' copy are not."""
    rope = model.position == "rope"
    grouped = model.kv_heads != model.heads
    d = model.head_dim
    q = tokens * (model.heads // tp) * d
    kv = tokens * max(1, model.kv_heads // tp) * d
    # Megatron-Core SelfAttention (qk_layernorm): q_layernorm and k_layernorm, one Transformer Engine RMSNorm each,
    # between the split and RoPE; priced as the layer's norms (one read, one write; the backward twice that)
    norm_f, norm_b = ((memory_op(gpu, "qk_norm", BF16 * 2 * (q + kv), 2),),
                      (memory_op(gpu, "qk_norm.bwd", BF16 * 4 * (q + kv), 2),)) if model.qk_norm else ((), ())
    if not (rope or grouped):
        return norm_f, norm_b
    # bytes: each pass reads and writes its tensor once (16-bit); the concatenation writes dQ, dK and dV once more
    rope_bytes = BF16 * 2 * (q + kv) if rope else 0.0
    fwd = memory_op(gpu, "qkv.split", rope_bytes + (BF16 * 2 * q if grouped else 0.0), 2 * rope + grouped)
    bwd = memory_op(gpu, "qkv.split.bwd", rope_bytes + BF16 * 2 * (q + 2 * kv), 2 * rope + 1)
    return (fwd, *norm_f), (*norm_b, bwd)


def cp_ring_merge_ops(gpu: GPUSpec, q: float, o: float, kv: float, ring: int) -> tuple[Op, Op]:
    """The copies and merges a causal context-parallel ring of ``ring`` ranks runs around a layer's attention,
    forward and backward: ``q``, ``o`` and ``kv`` are a rank's query, output and key-plus-value values (16-bit).

    Transformer Engine's ``AttnFuncWithCPAndKVP2P`` (v1.13 pytorch/attention.py; the same in v2.x
    dot_product_attention/context_parallel.py), its 2·ring load-balanced chunks: the forward concatenates K and V
    into the ring's buffer, zeroes the output and, for each of the ring's steps, merges the step's output into it
    (``flash_attn_fwd_out_correction``, one fused kernel reading both and writing it); a step past the rank's
    diagonal computes half the queries against all keys (a ``.contiguous()`` copy of the queries' half, and a merge
    of half the output), one before it all queries against half the keys (a copy of that half). The backward copies
    K and V into its ring buffer, copies the first step's dQ and dKV out, and for each later step zeroes a dQ,
    copies the halves it needs (K and V, or Q, O and dO) and adds the step's dQ and dKV into the running ones."""
    # at step i of the ring's 1 … ring−1, the i ranks below i take the half-query branch and the others the
    # half-key one: over the ranks, half of the later steps each way
    half = (ring - 1) / 2
    fwd = 2 * kv + o + 3 * o + half * (kv + 3 * o) + half * (q + 1.5 * o)
    bwd = 2 * kv + 2 * q + 2 * kv + half * (kv + q + 3 * q + 1.5 * kv) + half * (3 * q + 0.5 * q + 1.5 * q + 3 * kv)
    return (memory_op(gpu, "cp.merge", BF16 * fwd, 2 + ring + 2 * (ring - 1)),
            memory_op(gpu, "cp.merge.bwd", BF16 * bwd, 3 + 5 * (ring - 1)))


def fp8_store_ops(gpu: GPUSpec, name: str, values: float, store: bool) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """The casts of an activation's saved input to FP8 after the forward and back to BF16 before the backward."""
    if not store:
        return (), ()
    # Megatron-LM fused_bias_swiglu.py (fp8_input_store): input.to(float8_e4m3fn), then .to(bf16) in the backward,
    # each reading and writing every value (2 + 1 bytes)
    return (memory_op(gpu, f"{name}.fp8_store", 3 * values),), (memory_op(gpu, f"{name}.fp8_load", 3 * values),)


def is_weight_grad(op: Op) -> bool:
    """Whether a backward kernel computes weight gradients (a W kernel of a split backward): the wgrad GEMMs and
    the embedding's gradient scatter; the input-gradient GEMMs, attention core and element-wise backwards are B."""
    # Qi et al. 2024 (arXiv 2401.10241) §2, Fig. 1: a linear layer's backward is B = ∇x (dgrad) and W = ∇W (wgrad)
    return op.name.endswith(".wgrad") or op.name == "embedding.bwd"


def fp8_gemm_gpu(gpu: GPUSpec, precision: str, own_kernels: bool = False) -> GPUSpec:
    """The GPU as a layer's FP8 GEMMs see it: under Megatron-LM's blockwise recipe cuBLAS's blockwise-scaled GEMMs
    take ``fp8_blockwise_gemm_ratio`` times a tensor-scaled one's time (``own_kernels``: DeepSeek-V3's, at the
    tensor-wise rate); MXFP8's block-scaled GEMMs ``mxfp8_gemm_ratio`` times."""
    ratio = (gpu.fp8_blockwise_gemm_ratio if precision == "fp8-blockwise" and not own_kernels
             else gpu.mxfp8_gemm_ratio if precision == "mxfp8" else 1.0)
    if ratio == 1.0:
        return gpu
    rate = gpu.fp8_gemm_efficiency or gpu.gemm_efficiency
    return replace(gpu, fp8_gemm_efficiency=rate / ratio)


@lru_cache(maxsize=4096)
def layer_compute(model: ModelSpec, cluster: ClusterSpec, tp: int, cp: int, sp: bool, micro_batch: int,
                  recompute: str, precision: str = "bf16", fp8_activation_store: bool = False,
                  own_fp8_kernels: bool = False, wgrad_bytes: float = BF16,
                  fp8_attention: bool = False) -> LayerCompute:
    """Kernels and TP collectives of one layer for one micro-batch on one GPU (Megatron-LM's layer); with an
    FP8 precision the four linear layers' GEMMs run in FP8, each after a quantizing pass over its inputs; with
    ``fp8_activation_store`` the MLP activation's input is cast to FP8 for the backward and back before it;
    ``own_fp8_kernels``: DeepSeek-V3's FP8 GEMMs (``fp8_gemm_gpu``); ``wgrad_bytes``: HBM bytes per weight-gradient
    value of the wgrad GEMMs (``compute.wgrad_output_bytes``); ``fp8_attention``: the attention core in FP8."""
    gpu, h, t, b = fp8_gemm_gpu(cluster.gpu, precision, own_fp8_kernels), model.hidden, tp, micro_batch
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
    norm, residual, mlp_act_bytes = _elementwise_bytes(model, act, tokens, fc2_k)
    # with CP each GPU's s/cp queries meet all s keys over the ring (Liu et al. 2023, Ring Attention); causal
    # balancing halves the work evenly (Megatron-Core context parallelism: two mirrored chunks per rank)
    fused = cluster.flash_attention or fused_softmax_applies(b, s, model.seq_len, heads)
    attn_f, attn_b = attention_ops(cluster, model, b, s, model.seq_len, heads, drop, fused, fp8_attention)
    soft_f, soft_b = ((), ()) if fused else unfused_softmax_ops(gpu, b, s, model.seq_len, heads)
    gemm = {name: gemm_op(gpu, name, *shape, fp8=fp8) for name, shape in shapes.items()}
    grads = {name: linear_backward(gpu, name, *shape, fp8=fp8, wgrad_bytes=wgrad_bytes)
             for name, shape in shapes.items()}
    quant_f, quant_b = _quantizing(cluster, shapes, norm_tokens * h, precision, sp, t) if fp8 else ((), ())
    store_f, store_b = fp8_store_ops(gpu, "activation", tokens * fc2_k * (2 if model.gated else 1),
                                     fp8_activation_store)
    qkv_f, qkv_b = qkv_split_ops(gpu, model, tokens, t)
    forward = (
        memory_op(gpu, "norm1", norm), *quant_f[:1], gemm["qkv"], *qkv_f, *soft_f, attn_f, *quant_f[1:2], gemm["proj"],
        memory_op(gpu, "dropout_add1", residual), memory_op(gpu, "norm2", norm), *quant_f[2:3], gemm["fc1"],
        memory_op(gpu, "activation", mlp_act_bytes), *store_f, *quant_f[3:], gemm["fc2"],
        memory_op(gpu, "dropout_add2", residual),
    )
    # element-wise backwards read a saved input (those Korthikanti et al. 2022 §4.1 lists) and the incoming
    # gradient and write one: 1.5× the activation's forward bytes, 2× a norm's
    backward = (
        memory_op(gpu, "dropout_add2.bwd", residual), *quant_b[3:], *grads["fc2"],
        *store_b, memory_op(gpu, "activation.bwd", 1.5 * mlp_act_bytes), *quant_b[2:3], *grads["fc1"],
        memory_op(gpu, "norm2.bwd", 2 * norm), memory_op(gpu, "dropout_add1.bwd", residual), *quant_b[1:2], *grads["proj"],
        attn_b, *soft_b, *qkv_b, *quant_b[:1], *grads["qkv"], memory_op(gpu, "norm1.bwd", 2 * norm),
    )
    full_buffer = BF16 * tokens * h
    gathered = gathered_bytes(tokens * h, fp8)
    fwd_coll = _tp_collectives(t, sp, full_buffer, gathered)
    bwd_coll = fwd_coll + sp_regathers(t, sp, gathered, 2)
    recompute_ops, recompute_coll = _recomputed(model, cluster, recompute, forward, (*soft_f, attn_f), fwd_coll,
                                                tokens, t, fp8, (norm, residual, mlp_act_bytes))
    return LayerCompute(forward=forward, backward=backward, recompute=recompute_ops,
                        forward_collectives=fwd_coll, backward_collectives=bwd_coll,
                        recompute_collectives=recompute_coll, attention_forward=attn_f.seconds)


def _elementwise_bytes(model: ModelSpec, act: float, tokens: int, fc2_k: int) -> tuple[float, float, float]:
    """HBM bytes of a norm, a residual add and the MLP activation in one layer's forward (``act``: the bytes of
    the hidden states a norm sees)."""
    # Megatron-LM fused bias-dropout-add: read x and the residual, write the sum, a 1-byte mask per 2-byte value
    residual = act * (3 + (0.5 if model.dropout else 0))
    norm = act * 2                                        # Apex fused layer norm (Megatron-LM): one read, one write
    # GeLU reads fc1's output and writes its own; SwiGLU reads gate and up, writes one (Shazeer 2020, arXiv 2002.05202)
    mlp_act_bytes = BF16 * tokens * fc2_k * (3 if model.gated else 2)
    return norm, residual, mlp_act_bytes


def _quantizing(cluster: ClusterSpec, shapes: dict, inputs: float, precision: str, sp: bool,
                tp: int) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """The FP8 casts before the four linear layers' GEMMs, forward and backward (``inputs``: the values a norm's
    output holds)."""
    current = precision == "fp8-current"
    # TE v2.4 module/linear.py _customize_quantizers_float8_current_scaling: under sequence parallelism a
    # column-parallel layer's input and a row-parallel layer's output gradient all-reduce their amax over TP
    tp_amax = (network.all_reduce_latency(cluster, network.group_shape(cluster.domain_gpus, tp, 1))
               if current and sp and tp > 1 else 0.0)
    return quantize_ops(cluster.gpu, shapes, inputs, current, tp_amax, fp8_copies(cluster.gpu, precision))


def gathered_bytes(values: int, fp8: bool) -> int:
    """Bytes of a sequence-parallel all-gather of ``values`` activations (or their gradients): FP8 under an FP8
    precision, 16-bit otherwise."""
    # Transformer Engine casts before it gathers: LayerNormLinear's norm writes its output in FP8 and
    # gather_along_first_dim gathers that (v1.13 module/layernorm_linear.py, ln_out_dtype torch.uint8; the userbuffers
    # all-gather likewise), the backward re-gathers the saved FP8 input for the weight gradient, and a row-parallel
    # layer's output gradient is cast to FP8 before its all-gather (base.py grad_output_preprocess); reduce-scatters
    # stay 16-bit
    return (FP8 if fp8 else BF16) * values


def _tp_collectives(tp: int, sp: bool, full_buffer: int, gathered: int) -> tuple[Collective, ...]:
    """The TP collectives of one layer's forward over its ``full_buffer`` bytes of b·s·h activations (``gathered``:
    the bytes an SP all-gather moves, ``gathered_bytes``)."""
    # Shoeybi et al. 2019 (Megatron-LM, arXiv 1909.08053) §3, Fig. 3: two all-reduces of b·s·h per layer and pass;
    # with SP each becomes an all-gather and a reduce-scatter (Korthikanti et al. 2022 §4.2.2, Fig. 5)
    if tp == 1:
        return ()
    if sp:
        return (Collective("all_gather", gathered), Collective("reduce_scatter", full_buffer)) * 2
    return (Collective("all_reduce", full_buffer),) * 2


def _recomputed(model: ModelSpec, cluster: ClusterSpec, recompute: str, forward: tuple[Op, ...],
                core: tuple[Op, ...], fwd_coll: tuple[Collective, ...], tokens: int, tp: int, fp8: bool,
                element_bytes: tuple[float, float, float]) -> tuple[tuple[Op, ...], tuple[Collective, ...]]:
    """The kernels and TP collectives a layer's ``recompute`` runs again before its backward (``core``: the
    attention core's kernels)."""
    # Korthikanti et al. 2022 §4.2: selective recomputes the attention core, full recomputes the whole layer
    if recompute == "full":
        return forward, fwd_coll
    if recompute == "selective" and not cluster.flash_attention:
        return core, ()
    if recompute == "op":
        # the reduce-scatters' outputs are on the save list; all-gathers and all-reduces run again
        return (op_sac_recompute(model, cluster, tokens, tp, fp8, element_bytes),
                tuple(c for c in fwd_coll if c.kind != "reduce_scatter"))
    return (), ()


def sp_regathers(tp: int, sp: bool, full_buffer: int, column_layers: int) -> tuple[Collective, ...]:
    """The backward's extra all-gathers of sequence parallelism: each column-parallel linear layer (QKV, fc1)
    keeps only its sequence shard of the input for the backward and gathers it again for its weight gradient."""
    if tp == 1 or not sp:
        return ()
    # Megatron-LM core/tensor_parallel/layers.py (LinearWithGradAccumulationAndAsyncCommunication.backward: with
    # sequence_parallel, all_gather of the saved input before the wgrad GEMM) and Transformer Engine
    # pytorch/module/layernorm_linear.py, layernorm_mlp.py (backward: gather_along_first_dim(ln_out) for wgrad);
    # the activation memory of Korthikanti et al. 2022 §4.2.2 (34sbh/t) counts that input sharded. Issued async
    # beside the dgrad GEMM, like the dgrad's reduce-scatter beside the wgrad GEMM, and priced the same way
    # (exposed; SimuMax models it so too: dense_module.py all_gather_bwd, "gather again in bwd to save memory")
    return (Collective("all_gather", full_buffer),) * column_layers


def op_sac_recompute(model: ModelSpec, cluster: ClusterSpec, tokens: int, t: int, fp8: bool,
                     elementwise: tuple[float, float, float]) -> tuple[Op, ...]:
    """What torchtitan's per-op selective checkpointing runs again before a layer's backward: every op not on its
    save list up to the block's last saved output, i.e. the norms, the 2nd, 4th, ... matmul (Llama: wk, wo, w3),
    the first residual add and the MLP activation; the attention core and the odd matmuls are replayed from their
    saved outputs (torchtitan @9dec370 parallelize_llama.py; ``memory.op_sac_bytes_per_layer``)."""
    gpu, (norm, residual, mlp_act_bytes) = cluster.gpu, elementwise
    # Shoeybi et al. 2019 §3: column-parallel layers split their outputs over t, row-parallel ones their inputs
    gemms = tuple(gemm_op(gpu, f"{name}.recompute", tokens, n if name in ("wo", "w2") else n // t,
                          k // t if name in ("wo", "w2") else k, fp8=fp8)
                  for name, k, n in model.layer_matmuls()[1::2])
    # the norms and the first residual add rebuild the inputs the saved matmuls' backwards read; the activation
    # (SwiGLU: silu(w1)·w3) the input of w2; the last residual add follows the last saved op (no recompute)
    return (memory_op(gpu, "norm1.recompute", norm), *gemms, memory_op(gpu, "add1.recompute", residual),
            memory_op(gpu, "norm2.recompute", norm), memory_op(gpu, "activation.recompute", mlp_act_bytes))


def layer_gemm_shapes(model: ModelSpec, tp: int, cp: int, micro_batch: int) -> dict[str, tuple[int, int, int]]:
    """(m, n, k) of one layer's four linear GEMMs on one GPU: qkv, proj, fc1, fc2 (forward)."""
    tokens, t = micro_batch * (model.seq_len // cp), tp
    # Shoeybi et al. 2019 §3: QKV and fc1 are column-parallel (n/t), proj and fc2 row-parallel (k/t)
    return {"qkv": (tokens, (model.q_dim + 2 * model.kv_dim) // t, model.hidden),
            "proj": (tokens, model.hidden, model.q_dim // t),
            "fc1": (tokens, (2 if model.gated else 1) * model.ffn_hidden // t, model.hidden),
            "fc2": (tokens, model.hidden, model.ffn_hidden // t)}


CURRENT_SCALING_KERNELS = 4
"""Kernels of one tensor's cast under current scaling: the amax zeroed and found (two: TE v2.9
common/recipe/current_scaling.cu ``launch_amax_kernel``, ``zero_amax_kernel`` then the reduction), the scale set
from it, the cast (pytorch/csrc/quantizer.cpp ``Float8CurrentScalingQuantizer::quantize_impl``)."""


NORM_AMAX_KERNELS = 2
"""Kernels a current-scaling cast skips when the norm before it found the amax: the zeroing and the reduction."""


def quantize_op(gpu: GPUSpec, name: str, values: float, current: bool = False, tp_amax: float = 0.0,
                tensors: int = 1, copies: int = 2, norm_amax: bool = False) -> Op:
    """Transformer Engine's FP8 cast of ``values`` BF16 values: one pass reads them and writes FP8 ``copies``
    times, row- and column-wise (the wgrad GEMM's transposed operand; one copy where ``fp8_scaling.fp8_copies``
    says so), recording the amax (TE docs, "Using FP8 with Transformer Engine": cast_transpose; Hopper FP8 GEMMs
    take only TN layouts, cuBLASLt docs). Under current scaling a pass over the input finds its amax and a kernel
    sets the scale before the cast (TE v2.4
    pytorch/csrc/extensions/cast.cpp ``quantize``: nvte_compute_amax, nvte_compute_scale_from_amax,
    nvte_quantize_v2), after an all-reduce of the amax over TP of ``tp_amax`` seconds where one is needed;
    ``tensors``: the tensors cast one by one (their kernels each), the values split among them; ``norm_amax``: the
    input is a fused norm's output whose amax that norm found (current scaling: no amax pass of its own)."""
    amax_pass = current and not norm_amax
    kernels = 1
    if current:
        kernels = CURRENT_SCALING_KERNELS - (0 if amax_pass else NORM_AMAX_KERNELS)
    op = memory_op(gpu, name, (BF16 + copies * FP8 + (BF16 if amax_pass else 0)) * values, kernels * tensors)
    return replace(op, seconds=op.seconds + tp_amax) if tp_amax else op


def quantize_ops(gpu: GPUSpec, shapes: dict[str, tuple[int, int, int]], sharded_input: int, current: bool = False,
                 tp_amax: float = 0.0, copies: int = 2) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """The FP8 casts (``quantize_op``) around each linear layer: forward, the GEMM input (before the SP all-gather
    for qkv and fc1, whose current-scaling amax is all-reduced over TP: ``tp_amax``); backward, the incoming
    gradient (reduce-scattered after proj's and fc2's dgrad: the same all-reduce). The weights' casts run once
    per step (TE caches them across micro-batches, ``is_first_microbatch``) and are left out."""
    inputs = {"qkv": sharded_input, "proj": shapes["proj"][0] * shapes["proj"][2],
              "fc1": sharded_input, "fc2": shapes["fc2"][0] * shapes["fc2"][2]}
    # TE v2.7+ (PR #2013, pytorch/csrc/extensions/normalization.cpp): under current scaling LayerNormLinear's norm
    # kernel finds its output's amax (create_hp_tensor_with_amax, quantize_with_amax); v2.6 ran nvte_compute_amax
    # after it. Megatron-Core fuses the norms before qkv and fc1 (TELayerNormColumnParallelLinear)
    fwd = tuple(quantize_op(gpu, f"{name}.quantize", n, current, tp_amax if name in ("qkv", "fc1") else 0.0,
                            copies=copies, norm_amax=name in ("qkv", "fc1")) for name, n in inputs.items())
    bwd = tuple(quantize_op(gpu, f"{name}.quantize_grad", shapes[name][0] * shapes[name][1], current,
                            tp_amax if name in ("proj", "fc2") else 0.0, copies=copies) for name in inputs)
    return fwd, bwd


@lru_cache(maxsize=1024)
def embedding_compute(model: ModelSpec, cluster: ClusterSpec, tp: int, cp: int, sp: bool, micro_batch: int,
                      main_grad_bytes: int = 4) -> tuple[tuple[Op, ...], tuple[Op, ...], tuple[Collective, ...]]:
    """Forward ops, backward ops and TP collectives of the (vocab-parallel) input embedding on the first stage;
    ``main_grad_bytes``: bytes per value of the gradient buffer its weight gradient is added to."""
    gpu = cluster.gpu
    tokens = micro_batch * model.seq_len // cp
    out = BF16 * tokens * model.hidden
    # gather rows (read and write b·s·h), plus the learned position rows; the backward scatters the gradient back
    fwd = (memory_op(gpu, "embedding", 2 * out + (out if model.position == "learned" else 0), 2),)
    # the weight gradient is a dense table every micro-batch: PyTorch's embedding_dense_backward zero-fills a 16-bit
    # vocab/tp × h gradient (at::zeros) before scattering the rows into it, then Megatron-LM DDP's backward hook adds
    # it to the fp32 main_grad (distributed_data_parallel.py: param.main_grad.add_(param.grad); the embedding has no
    # gradient-accumulation fusion): write 2, read 2, read and write the main grad
    rows = math.ceil(model.vocab / (128 * tp)) * 128            # Megatron pads the vocabulary to 128·tp
    table = rows * model.hidden * (BF16 + BF16 + 2 * main_grad_bytes)
    bwd = (memory_op(gpu, "embedding.bwd", 2 * out * 2, 2), memory_op(gpu, "embedding.wgrad", table, 2))
    # Shoeybi et al. 2019 §3: the vocab-parallel embedding all-reduces its output (reduce-scatter with SP,
    # Korthikanti et al. 2022 §4.2.2)
    coll = () if tp == 1 else ((Collective("reduce_scatter" if sp else "all_reduce", out),))
    return fwd, bwd, coll


@lru_cache(maxsize=1024)
def output_compute(model: ModelSpec, cluster: ClusterSpec, tp: int, cp: int, sp: bool, micro_batch: int,
                   fused_loss: bool = False, wgrad_bytes: float = BF16,
                   mxfp8_head: bool = False) -> tuple[tuple[Op, ...], tuple[Op, ...], tuple[Collective, ...]]:
    """Forward ops, backward ops and TP collectives of the final norm, vocab-parallel logits and the loss (with
    ``fused_loss``: Megatron-Core's fused cross entropy, knobs.TransformerPlan.cross_entropy_fusion;
    ``wgrad_bytes``: ``compute.wgrad_output_bytes`` of the logits' wgrad; ``mxfp8_head``: the logits' GEMMs in
    MXFP8, knobs.TransformerPlan.fp8_output_layer)."""
    gpu, h = cluster.gpu, model.hidden
    tokens = micro_batch * model.seq_len // cp
    vocab = math.ceil(model.vocab / (128 * tp)) * 128          # Megatron pads the vocabulary to 128·tp
    norm_bytes = BF16 * (tokens // tp if sp else tokens) * h * 2   # as the layer's norms (Korthikanti §4.2.2 with SP)
    # Megatron-LM vocab_parallel_cross_entropy (core/tensor_parallel/cross_entropy.py), per logit: the cast to fp32
    # (2 + 4 B), the max (4), the in-place subtract (8), exp (8), sum (4) and the in-place division to the softmax
    # kept for the backward (8); back, the in-place scaling by the loss gradient (8) and the cast to 16 bits (4 + 2);
    # fused (Megatron-Core fused_cross_entropy.py / TE parallel_cross_entropy): the 16-bit logits read once and their
    # gradient written in place in the forward, scaled in place in the backward
    loss_fwd, loss_bwd = ((BF16 * 2 * tokens * vocab, BF16 * 2 * tokens * vocab) if fused_loss
                          else (38 * tokens * vocab, 14 * tokens * vocab))
    # Megatron-Core fp8_output_proj: the output layer as a Transformer Engine linear under the MXFP8 autocast (its
    # input and the logits' gradient cast with row- and column-wise copies, quantize_op), the logits kept BF16
    f8 = fp8_gemm_gpu(gpu, "mxfp8") if mxfp8_head else gpu
    cast_in = (quantize_op(gpu, "logits.quantize", tokens * h),) if mxfp8_head else ()
    cast_grad = (quantize_op(gpu, "logits.quantize_grad", tokens * vocab),) if mxfp8_head else ()
    fwd = (memory_op(gpu, "final_norm", norm_bytes), *cast_in, gemm_op(f8, "logits", tokens, vocab, h, fp8=mxfp8_head),
           memory_op(gpu, "cross_entropy", loss_fwd, 1 if fused_loss else 6))
    bwd = (*cast_grad, *linear_backward(f8, "logits", tokens, vocab, h, fp8=mxfp8_head, wgrad_bytes=wgrad_bytes),
           memory_op(gpu, "cross_entropy.bwd", loss_bwd, 1 if fused_loss else 2),
           memory_op(gpu, "final_norm.bwd", 2 * norm_bytes))
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


