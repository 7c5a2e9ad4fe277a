"""Per-GPU memory of a plan, stage by stage: weights, gradients, optimizer state, activations and buffers.

Megatron-LM mixed precision (bf16 weights, fp32 Adam state, gradients in fp32 or in the 16-bit type as the plan
reduces them), in bytes. Plain arithmetic: the search calls this thousands of times.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from autoplan.errors import SpecError
from autoplan.hardware.compute import FP8, wgrad_output_bytes
from autoplan.specs.cluster import ClusterSpec, GPUSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.costs import StageMemory
from autoplan.families.transformer.fp8_scaling import fp8_copies
from autoplan.specs.layout import (holds_embedding, holds_output, inflight_layer_chunks, model_copies, stage_layers,
                                   weight_grad_held_chunks)
from autoplan.families.transformer.knobs import recomputed_layers
from autoplan.specs.plan import Plan

# Megatron-LM docs, distributed optimizer (bf16 params, fp32 grads): 2 + 4 + 12 = 18 bytes/param, 6 + 12/d sharded
WEIGHT_BYTES = 2
"""bf16 weight per parameter."""
GRADIENT_BYTES = 4
"""fp32 ``main_grad`` per parameter (``grad_reduce_in_fp32``; else the 2-byte training type: ``passes.grad_bytes``)."""
MASTER_WEIGHT_BYTES = 4
"""fp32 master weight per parameter."""
MOMENT_BYTES = {"fp32": 4, "bf16": 2}
"""Bytes of each of Adam's two moments per parameter, by ``Plan.optimizer_moments``."""
OPTIMIZER_BYTES = MASTER_WEIGHT_BYTES + 2 * MOMENT_BYTES["fp32"]
"""fp32 master weight plus Adam's first and second moments per parameter."""
ZERO3_GATHERED_LAYERS = 2   # Rajbhandari et al. 2020 (ZeRO) §5.3, with DeepSpeed stage-3 prefetching one ahead
"""Layers whose full bf16 weights a ZeRO-3 rank holds at once: the one computing and the one prefetched."""
ZERO3_MAX_LIVE_PARAMETERS = 1_000_000_000   # DeepSpeed runtime/zero/constants.py (2021): stage3_max_live_parameters
"""Gathered weight elements DeepSpeed's 2021 ZeRO-3 keeps before releasing ("maximum number of parameters per GPU
before releasing them"; ``zero3_per_tensor`` plans)."""


def optimizer_state_bytes(s: Plan) -> int:
    """Optimizer-state bytes per parameter: the fp32 master weight (or its 16-bit remainder beside the BF16 weight)
    and Adam's two moments in their type."""
    # Megatron-LM distributed optimizer docs (4 + 4 + 4); DeepSeek-V3 §3.3.4: moments in BF16, master weight FP32
    return master_weight_bytes(s) + 2 * MOMENT_BYTES[s.optimizer_moments]


def master_weight_bytes(s: Plan) -> int:
    """Bytes the optimizer keeps per master weight: fp32, or the low 16 bits the BF16 weight lacks."""
    # Apex DistributedFusedAdam store_param_remainders: the BF16 weight holds the fp32 master's upper 16 bits
    return 2 if getattr(s, "param_remainders", False) else MASTER_WEIGHT_BYTES


def grad_bytes(s: Plan) -> int:
    """Bytes per gradient in the DP reduction: fp32 (Megatron's default for bf16) or the 16-bit type."""
    # Megatron-LM --accumulate-allreduce-grads-in-fp32: 4-byte main_grad, else the 2-byte training type
    return 4 if s.grad_reduce_in_fp32 else 2


def wgrad_bytes(s: Plan) -> float:
    """HBM bytes per weight-gradient value of the plan's wgrad GEMMs (``compute.wgrad_output_bytes``)."""
    return wgrad_output_bytes(s.gradient_accumulation_fusion, grad_bytes(s))


def logit_bytes(s: Plan) -> int:
    """Bytes the loss holds per logit at its peak: an fp32 copy (Megatron-LM's vocab_parallel_cross_entropy casts
    the logits), or the 16-bit logits themselves with the fused loss (their gradient written in place); PyTorch's
    F.cross_entropy on fp32 logits (``Plan.loss_impl``): 12 eager, 4 compiled."""
    if s.loss_impl == "torch":
        # aten log_softmax keeps its fp32 output for its backward; in the backward nll_loss's fp32 input gradient
        # and log_softmax's fp32 input gradient coexist with it: 3 × 4 bytes (PyTorch derivatives.yaml
        # _log_softmax: _log_softmax_backward_data(grad, result, ...); measured 12.0 bytes/logit, see
        # tools/probe_torchtitan_memory.py)
        return 12
    if s.loss_impl == "torch-compiled":
        # inductor fuses the fp32 upcast into the loss: it keeps the 16-bit logits and writes a 16-bit gradient
        return 4
    return 2 if s.cross_entropy_fusion else 4


def activation_input_bytes(model: ModelSpec, s: Plan) -> int:
    """Bytes the MLP activation keeps of its input per fc2-input value: SwiGLU's gate and up (2 values) or one."""
    # Korthikanti et al. 2022 §4.2: the activation's input in BF16 (4sbf gated); DeepSeek-V3 §3.3.3 and Megatron-LM
    # --activation-func-fp8-input-store: kept in FP8, 1 byte a value
    return (2 if model.gated else 1) * (1 if s.fp8_activation_store else 2)


def activation_bytes_per_layer(model: ModelSpec, s: Plan, cluster_flash_attention: bool,
                               recompute: str | None = None) -> float:
    """Bytes of activations one transformer layer stores for one micro-batch on one GPU (under ``recompute``
    instead of the plan's, if given).

    Korthikanti et al. 2022 (arXiv 2205.05198) §4 and Table 2, generalised to GQA, gated MLPs, models
    without dropout, context parallelism (s = seq_len / cp) and fused (flash) attention.
    """
    recompute = s.recompute if recompute is None else recompute
    seq = model.seq_len / s.cp
    sb = seq * s.micro_batch
    t = s.tp
    sp = t if s.sequence_parallel else 1
    if recompute == "op":
        return op_sac_bytes_per_layer(model, s)
    if recompute == "full":
        # Korthikanti Table 2, "full activation recomputation": only the layer input 2sbh (÷t with SP)
        return 2 * sb * model.hidden / sp
    d = 1 if model.dropout else 0
    # Korthikanti §4.1-4.2: two norm inputs 4sbh, QKV input 2sbh, fc1 input 2sbh, two dropout masks sbh each
    replicated = (8 + 2 * d) * sb * model.hidden
    # Korthikanti §4.1: Q, K 2sb(q+kv); V 2sb·kv; projection input 2sb·q
    sharded = 2 * sb * (2 * model.q_dim + 2 * model.kv_dim)
    if model.qk_norm:
        # the q and k norms' inputs, which Transformer Engine's RMSNorm saves for its backward
        sharded += 2 * sb * (model.q_dim + model.kv_dim)
    # Korthikanti §4.2: activation input 2sbf (4sbf for SwiGLU's gate and up; FP8-stored: half), fc2 input 2sbf
    sharded += (activation_input_bytes(model, s) + 2) * sb * model.ffn_hidden
    if s.precision != "bf16":
        # Transformer Engine saves the FP8 cast of each linear layer's input for its wgrad (TE docs, "Using FP8
        # with Transformer Engine"): 1 byte instead of 2 for the QKV and fc1 inputs (sbh each) and the projection
        # and fc2 inputs (sb·q, sb·f); the norm inputs, Q, K, V and the activation's input stay BF16
        replicated -= 2 * sb * model.hidden
        sharded -= sb * (model.q_dim + model.ffn_hidden)
    if recompute == "none":
        if cluster_flash_attention:
            # Dao et al. 2022 (FlashAttention, arXiv 2205.14135) Alg. 2: fp32 log-sum-exp per query row and head
            sharded += 4 * sb * model.heads
        else:
            # Korthikanti §4.1: softmax output 2as²b, dropout mask as²b, dropout output 2as²b
            sharded += (2 + 3 * d) * model.heads * seq * sb
    return replicated / sp + sharded / t


def zero3_gathered_elements(model: ModelSpec, s: Plan) -> float:
    """Elements of gathered weights a DeepSpeed 2021 ZeRO-3 rank may hold at once: released once
    ``ZERO3_MAX_LIVE_PARAMETERS`` are live, but a sub-module's tensors are gathered whole (stage3.py
    ``fetch_sub_module``), so never fewer than the largest sub-module's."""
    return max(ZERO3_MAX_LIVE_PARAMETERS, max(sum(m) for m in model.layer_tensors()) / s.tp)


def recomputes_whole_layers(s: Plan) -> bool:
    """Every layer recomputed whole for its backward: a full recompute that is not partial (a partial one's kept
    layers run their backward first and free more than one recomputed layer holds)."""
    return s.recompute == "full" and not s.recompute_layers


def recompute_working_bytes(model: ModelSpec, s: Plan, flash: bool, stored: float) -> float:
    """Bytes a full recompute materialises again on top of the stored layer inputs (``stored`` per layer,
    ``activation_bytes_per_layer``): the activations of the one layer whose backward runs, less its input (a stored
    one already); 0 unless ``recomputes_whole_layers``."""
    if not recomputes_whole_layers(s):
        return 0.0
    # Chen et al. 2016 (arXiv 1604.06174) §4.1: checkpointing's peak is the stored checkpoints plus the activations
    # of the one segment recomputed for its backward; a segment is one layer (Megatron-LM --recompute-method
    # uniform --recompute-num-layers 1, torchtitan's full AC wraps each block)
    return activation_bytes_per_layer(model, s, flash, "none") - stored


def backward_working_bytes(model: ModelSpec, s: Plan) -> float:
    """Bytes of 16-bit gradients a layer's backward holds beside the stored activations, at its largest linear layer:
    the gradient of that layer's output and the one its dgrad GEMM writes for its input, whole sequence length (the
    sequence-parallel gather and reduce-scatter work on full-length buffers)."""
    return linear_grad_bytes(model.seq_len / s.cp * s.micro_batch, *_widest_linear(model, s.tp))


@lru_cache(maxsize=1024)
def _widest_linear(model: ModelSpec, tp: int) -> tuple[int, int]:
    """The (rows, columns) of a dense layer's linear weight on one GPU with the most of both together."""
    return max(dense_linear_shapes(model, tp), key=sum)


def linear_grad_bytes(tokens: float, rows: float, cols: float) -> float:
    """Bytes of the 16-bit gradients a linear layer's backward holds over ``tokens`` rows of a weight of ``rows``
    output and ``cols`` input features: its output's gradient, which it reads, and its input's, which its dgrad
    GEMM writes."""
    # autograd frees a gradient once the op that reads it has run, so a linear layer's backward holds its output's
    # gradient and writes its input's (SimuMax dense_module.py, LinearCol / LinearRow: bwd_peak_mem_no_cache =
    # input_size + output_size)
    return 2 * tokens * (rows + cols)


ROW_PARALLEL = ("wo", "w2")
"""Linear layers whose TP shard outputs a partial sum of full width (torchtitan RowwiseParallel: wo, w2)."""


def op_sac_bytes_per_layer(model: ModelSpec, s: Plan) -> float:
    """Bytes one layer keeps for one micro-batch under torchtitan's per-op selective activation checkpointing
    (``activation_checkpoint.mode = "selective"``, ``selective_ac_option = "op"``): the outputs of the ops on its
    save list, every other op recomputed in the backward. Any precision: torchao's Float8Linear runs its matmul as
    aten.mm on Float8Tensor subclasses, which the policy sees (and keeps the 16-bit output of) first."""
    # pytorch/torchtitan @9dec370 torchtitan/parallelisms/parallelize_llama.py _save_list and _custom_policy
    sb = model.seq_len / s.cp * s.micro_batch
    t, h = s.tp, model.hidden
    sp = t if s.sequence_parallel else 1
    # torch.utils.checkpoint (non-reentrant) holds the block's input to run it again
    kept = 2 * sb * h / sp
    # "Saves output of all compute ops, except every second mm": mm 1, 3, 5, ... of the block (Llama: wq, wv, w1,
    # w2), the column-parallel ones n/t wide, a row-parallel one its full-width partial sum before the reduce-scatter
    for name, _, n in model.layer_matmuls()[::2]:
        kept += 2 * sb * (h if name in ROW_PARALLEL else n / t)
    # _scaled_dot_product_flash/efficient_attention: the 16-bit output and fp32 log-sum-exp per query and head
    # (Dao et al. 2022, Alg. 2); PyTorch's cuDNN attention is not on the @9dec370 list (it is recomputed)
    kept += 2 * sb * model.q_dim / t + 4 * sb * model.heads / t
    if t > 1:
        # _c10d_functional.reduce_scatter_tensor: the sequence-parallel outputs of wo and w2 (2sbh/t each)
        kept += 2 * 2 * sb * h / t
    return kept


def weight_grad_bytes_per_layer(model: ModelSpec, s: Plan) -> float:
    """Bytes one layer keeps from its B to its W for one micro-batch: each linear layer's input and the gradient
    of its output, what the weight-gradient GEMMs read (Qi et al. 2024 Table 1: 32sbh for GPT-3's shapes)."""
    sb = model.seq_len / s.cp * s.micro_batch
    t = s.tp
    sp = t if s.sequence_parallel else 1
    fc1_n = (2 if model.gated else 1) * model.ffn_hidden
    # inputs (Korthikanti et al. 2022 §4.1-4.2): QKV and fc1 see the norm output 2sbh (÷t with SP), the
    # projection 2sb·q/t, fc2 2sb·f/t; output gradients: QKV 2sb(q + 2kv)/t, fc1 2sb·fc1/t, projection and fc2 2sbh
    replicated = 2 * sb * model.hidden * 4
    sharded = 2 * sb * (model.q_dim + model.ffn_hidden + model.q_dim + 2 * model.kv_dim + fc1_n)
    return replicated / sp + sharded / t


@lru_cache(maxsize=1024)
def dense_linear_shapes(model: ModelSpec, tp: int) -> tuple[tuple[int, int], ...]:
    """(rows, columns) on one GPU of the weights of one dense layer's linear layers: QKV, projection, fc1, fc2."""
    # Shoeybi et al. 2019 §3: QKV and fc1 split their rows over TP (column-parallel), projection and fc2 their columns
    f = model.ffn_hidden // tp
    return (((model.q_dim + 2 * model.kv_dim) // tp, model.hidden), (model.hidden, model.q_dim // tp),
            ((2 if model.gated else 1) * f, model.hidden), (model.hidden, f))


def dummy_wgrad_bytes(s: Plan, shapes: Iterable[tuple[int, int]]) -> float:
    """Bytes of the placeholder weight gradients Transformer Engine keeps when the weight-gradient GEMMs accumulate
    into Megatron's ``main_grad`` (``gradient_accumulation_fusion``): one per distinct weight shape among ``shapes``
    ((rows, columns) of the GPU's linear weights), in the weights' 16-bit type."""
    # TE v2.3+ pytorch/module/base.py get_dummy_wgrad: with fuse_wgrad_accumulation, Linear, LayerNormLinear and
    # LayerNormMLP hand autograd a torch.empty of the weight's shape, cached by (rows, columns, dtype) for the rest of
    # the run (GroupedLinear from v2.10; Megatron-Core v0.14+ tensor_parallel/layers.py for the output layer). Earlier
    # releases allocated one each backward and freed it. torchtitan's plans (loss_impl torch) and ZeRO-2/3 have no
    # main_grad path
    if not s.gradient_accumulation_fusion or s.loss_impl != "megatron" or s.zero >= 2:
        return 0.0
    return WEIGHT_BYTES * _distinct_elements(tuple(shapes))


@lru_cache(maxsize=4096)
def _distinct_elements(shapes: tuple[tuple[int, int], ...]) -> int:
    """Elements of the distinct (rows, columns) shapes among ``shapes``."""
    return sum(rows * cols for rows, cols in set(shapes))


@lru_cache(maxsize=4096)
def _stage_shapes(model: ModelSpec, tp: int, layers: bool, output: bool) -> tuple[tuple[int, int], ...]:
    """The linear weight shapes on one GPU of a stage with transformer layers and/or the output layer."""
    return (dense_linear_shapes(model, tp) if layers else ()) + ((output_shape(model, tp),) if output else ())


def output_shape(model: ModelSpec, tp: int) -> tuple[int, int]:
    """(rows, columns) on one GPU of the output layer's weight (vocab-parallel; the embedding's when tied)."""
    return model.vocab // tp, model.hidden


def partial_recompute_bytes(full: float, chunk_layers: float, model: ModelSpec, s: Plan, flash: bool) -> float:
    """Mean activation bytes per layer of a chunk whose first ``s.recompute_layers`` layers recompute (``full``
    bytes each, the layer input) and whose other layers keep everything (Megatron-Core block recompute)."""
    if not chunk_layers:
        return full
    rec = recomputed_layers(s, chunk_layers)
    kept = activation_bytes_per_layer(model, s, flash, "none")
    return (rec * full + (chunk_layers - rec) * kept) / chunk_layers


def _stage(model: ModelSpec, cluster: ClusterSpec, s: Plan, stage: int, per_layer: float,
           working: float = 0.0) -> StageMemory:
    """``working``: ``recompute_working_bytes``, added where the stage holds layers."""
    layers = stage_layers(model.layers, s, stage)
    weights, gradients, optimizer, buffers = _model_state(model, s, layers, _stage_params(model, s, stage, layers),
                                                          fp8_weight_bytes(cluster.gpu, s))
    chunks = inflight_layer_chunks(s, stage)
    shapes = _stage_shapes(model, s.tp, layers > 0, holds_output(s.schedule, stage, s.pp))
    # Transformer Engine's placeholder weight gradients, and the gradients the backward running at the peak holds
    buffers += dummy_wgrad_bytes(s, shapes) + (backward_working_bytes(model, s) if layers else 0.0)
    return StageMemory(stage=stage, weights=weights, gradients=gradients, optimizer=optimizer,
                       activations=_activations(model, cluster, s, stage, layers, chunks, per_layer, working),
                       embedding=end_layer_bytes(model, s, stage, chunks), buffers=buffers,
                       reserve=cluster.gpu.memory_reserve_bytes)


def _stage_params(model: ModelSpec, s: Plan, stage: int, layers: int) -> float:
    """Parameters one GPU of ``stage`` holds (``layers`` layers, and the embedding or output layer if it has them)."""
    first, last = holds_embedding(s.schedule, stage, s.pp), holds_output(s.schedule, stage, s.pp)
    # Shoeybi et al. 2019 §3: layers, embedding and output are all split over the TP group
    params = layers * model.layer_params() / s.tp
    if first:
        params += model.embedding_params() / s.tp
    if last:
        # Megatron-LM: the output layer is vocab-parallel; with pp > 1 a tied embedding is copied to the last stage
        # (not under a V shape, whose first rank holds both ends)
        params += model.output_params() / s.tp
        if model.tied_embeddings and not first:
            params += model.vocab * model.hidden / s.tp
    return params


def fp8_weight_bytes(gpu: GPUSpec, s: Plan) -> int:
    """Bytes of the FP8 copies Transformer Engine keeps of each layer weight under an FP8 precision: the weight
    and its transpose, or the weight alone (``fp8_scaling.fp8_copies``); 0 under BF16."""
    return 0 if s.precision == "bf16" else FP8 * fp8_copies(gpu, s.precision)


def _model_state(model: ModelSpec, s: Plan, layers: int, params: float,
                 fp8_bytes: int = 0) -> tuple[float, float, float, float]:
    """Bytes of weights, gradients, optimizer state and ZeRO's transient buffers for ``params`` parameters
    (``fp8_bytes``: ``fp8_weight_bytes``)."""
    t, n = s.tp, s.dp * s.cp
    # Megatron-LM distributed optimizer docs (the WEIGHT/GRADIENT/OPTIMIZER_BYTES above): bytes per parameter
    weights = WEIGHT_BYTES * params
    if s.precision != "bf16":
        # Transformer Engine keeps an FP8 copy of each layer weight (and its transpose) beside the BF16 one, cached
        # across micro-batches; with --fp8-param-gather the FP8 weight (and transpose) replaces the BF16 copy
        # (Megatron-LM docs, fp8_param_gather; TE Float8Tensor). The embedding and output layer stay BF16.
        fp8_layer = layers * model.layer_params() / t
        weights += fp8_bytes * fp8_layer - (WEIGHT_BYTES * fp8_layer if s.fp8_param_gather else 0)
    # Megatron-Core DDP allocates its gradient buffer in fp32 only with grad_reduce_in_fp32 (Megatron-LM
    # --accumulate-allreduce-grads-in-fp32); NeMo's and Megatron-Bridge's performance recipes reduce in bf16
    # (grad_sync_dtype: bf16, grad_reduce_in_fp32=False): a 2-byte buffer (distributed_data_parallel_config.py)
    gradients = grad_bytes(s) * params
    # Megatron-Core optimizer CPU offload: that share of the optimizer state lives in host memory
    optimizer = optimizer_state_bytes(s) * params * (1 - s.optimizer_offload_pct / 100)
    buffers = 0.0
    # Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) §5.1, Fig. 1: stages 1/2/3 shard optimizer/gradients/weights
    if s.zero >= 1:
        optimizer /= n * model_copies(s.schedule)     # DualPipe: both copies of a stage share its optimizer state
    if s.zero >= 2:
        gradients /= n
    if s.zero == 3 and n > 1:
        weights /= n
        buffers = ZERO3_GATHERED_LAYERS * WEIGHT_BYTES * model.layer_params() / t
        if s.zero3_per_tensor:
            # DeepSpeed's 2021 reduce buckets sit inside its gathered-parameter budget
            buffers = min(buffers, WEIGHT_BYTES * zero3_gathered_elements(model, s))
    if s.zero >= 2 and n > 1 and not s.zero3_per_tensor:
        # sharded gradients exist whole only until their reduce-scatter, issued as each layer's backward ends (Zhao
        # et al. 2023, PyTorch FSDP §3.3, one unit per layer; Llama 3's FSDP, arXiv 2407.21783 §3.3.1): one layer's
        # unsharded gradients at the reduction's width (passes.grad_bytes: fp32 or the 16-bit type; PyTorch FSDP2
        # foreach_reduce, torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: the flat reduce-scatter input)
        buffers += (4 if s.grad_reduce_in_fp32 else 2) * model.layer_params() / t
    return weights, gradients, optimizer, buffers


def _activations(model: ModelSpec, cluster: ClusterSpec, s: Plan, stage: int, layers: int, chunks: int,
                 per_layer: float, working: float) -> float:
    """Bytes of the activations ``stage`` holds at its peak: ``chunks`` in-flight chunk-forwards of ``per_layer``
    bytes a layer, the recompute's ``working`` bytes and the inputs waiting for deferred weight gradients."""
    per_chunk = layers / s.chunks
    if s.recompute_layers:
        # block recompute (knobs.recomputed_layers): the chunk's first layers keep only their input, the rest all
        per_layer = partial_recompute_bytes(per_layer, per_chunk, model, s, cluster.flash_attention)
    # Narayanan et al. SC'21 §2.2: each in-flight chunk-forward holds its layers' activations until its backward
    # (an uneven end stage's chunks: their mean layer count)
    activations = chunks * per_chunk * per_layer + (working if layers else 0.0)
    if s.activation_offload_layers and layers:
        # Megatron-Core CPU offloading (pp 1): the offloaded layers' activations leave the GPU, one layer's in flight
        kept = layers - s.activation_offload_layers + min(1, s.activation_offload_layers)
        activations *= kept / layers
    waiting_w = weight_grad_held_chunks(s, stage)
    if waiting_w:
        activations += waiting_w * (layers / s.chunks) * weight_grad_bytes_per_layer(model, s)
    return activations


def end_layer_bytes(model: ModelSpec, s: Plan, stage: int, chunks: int) -> float:
    """Activation bytes of the embedding and output layer that ``stage`` holds, with ``chunks`` chunk-forwards in
    flight (``inflight_layer_chunks``)."""
    first, last = holds_embedding(s.schedule, stage, s.pp), holds_output(s.schedule, stage, s.pp)
    seq = model.seq_len / s.cp
    sbh = seq * s.micro_batch * model.hidden
    sp = s.tp if s.sequence_parallel else 1
    embedding = 0.0
    if first:
        # the embedding belongs to the first chunk: one activation per in-flight micro-batch (ceil of chunks / v)
        micro_batches = -(-chunks // s.chunks)
        # Korthikanti §4.3: embedding dropout mask sbh (÷t with SP), here with the 2sbh embedding output too
        embedding += micro_batches * (2 + (1 if model.dropout else 0)) * sbh / sp
    if last:
        # Korthikanti §4.3: output-layer input 2sbh (÷t with SP) and fp32 logits for the loss 4sbV/t, one micro-batch;
        # a fused loss keeps the 16-bit logits (their gradient in place) instead of an fp32 copy
        embedding += 2 * sbh / sp + logit_bytes(s) * seq * s.micro_batch * model.vocab / s.tp
    return embedding


def stage_memory(model: ModelSpec, cluster: ClusterSpec, s: Plan, stage: int) -> StageMemory:
    """Bytes per GPU of pipeline stage ``stage`` (0-based) under plan ``s``."""
    if not 0 <= stage < s.pp:
        raise SpecError(f"stage {stage} is outside the pipeline's stages 0..{s.pp - 1}")
    per_layer = activation_bytes_per_layer(model, s, cluster.flash_attention)
    return _stage(model, cluster, s, stage, per_layer,
                  recompute_working_bytes(model, s, cluster.flash_attention, per_layer))


def memory_per_stage(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[StageMemory]:
    """Bytes per GPU of every pipeline stage, first to last."""
    per_layer = activation_bytes_per_layer(model, s, cluster.flash_attention)
    working = recompute_working_bytes(model, s, cluster.flash_attention, per_layer)
    return [_stage(model, cluster, s, i, per_layer, working) for i in range(s.pp)]


def peak_memory(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """The most bytes any GPU of the plan needs: the largest stage total.

    A middle stage never exceeds the first (same layers, no more in-flight activations, no embedding), so only
    the first and last stages are evaluated, and stage 1 (the most in-flight of the middle) when the ends hold
    fewer layers.
    """
    per_layer = activation_bytes_per_layer(model, s, cluster.flash_attention)
    working = recompute_working_bytes(model, s, cluster.flash_attention, per_layer)
    first = _stage(model, cluster, s, 0, per_layer, working).total
    if s.pp == 1:
        return first
    peak = max(first, _stage(model, cluster, s, s.pp - 1, per_layer, working).total)
    if s.uneven and s.pp > 2:
        peak = max(peak, _stage(model, cluster, s, 1, per_layer, working).total)
    return peak
