"""Which plans a transformer (dense or MoE) can run: divisibility of heads, layers, batch and sequence by the
degrees, schedule rules, and the numerics and TP-overlap features a plan asks for."""

from __future__ import annotations

from autoplan.specs.layout import (BIDIRECTIONAL, V_SHAPE, balanced_layout, balanced_v_layout, chunk_layers,
                                   layout_chunks, uneven_violations)
from autoplan.families.transformer.knobs import DEFAULT_RS
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import SPLIT_BACKWARD, Plan

_CNN_AXES = ("spatial", "channel", "filter")
"""Degrees of the CNN family that a transformer plan keeps at 1 (read by name: no family imports another)."""

def violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """Every reason ``s`` cannot run ``model`` on ``gpus`` GPUs, in words a person can act on; [] if valid."""
    return [reason for _, rules in VIOLATION_GROUPS for reason in rules(model, gpus, s)]


PLACEMENT_READS = ("dp", "tp", "pp", "cp", "spatial", "channel", "filter", "global_batch", "micro_batch", "schedule",
                   "virtual_stages", "first_stage_layers", "last_stage_layers")
"""Every plan field ``placement_violations`` may read (tests/families/transformer/test_validity.py records them):
a space's enumeration asks it once per distinct value of these (``registry.violation_checker``)."""


def placement_violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """Reasons the degrees, batch, schedule and layer layout of ``s`` do not split ``model`` over ``gpus`` GPUs."""
    out: list[str] = []
    if s.gpus != gpus:
        out.append(f"dp·tp·pp·cp = {s.dp}·{s.tp}·{s.pp}·{s.cp} = {s.gpus}, not the {gpus} GPUs of the cluster")
    out += [f"{k} parallelism is for CNNs; a transformer needs {k} 1, got {getattr(s, k)}"
            for k in _CNN_AXES if getattr(s, k) != 1]
    if model.heads % s.tp:
        out.append(f"attention heads {model.heads} are not divisible by tp {s.tp}")
    if model.kv_heads % s.tp and model.kv_heads != model.heads:
        out.append(f"kv heads {model.kv_heads} are not divisible by tp {s.tp}")
    if model.ffn_hidden % s.tp:
        out.append(f"ffn_hidden {model.ffn_hidden} is not divisible by tp {s.tp}")
    out += _layout_violations(model, s)
    if s.global_batch % (s.dp * s.micro_batch):
        out.append(f"global batch {s.global_batch} is not divisible by dp·micro_batch = {s.dp}·{s.micro_batch}")
    if s.cp > 1 and model.seq_len % (2 * s.cp):
        out.append(f"sequence length {model.seq_len} is not divisible by 2·cp = {2 * s.cp} (load-balanced ring attention)")
    if s.schedule == "interleaved":
        if s.pp == 1:
            out.append("the interleaved schedule needs pp > 1")
        if s.virtual_stages < 2:
            out.append("the interleaved schedule needs virtual_stages ≥ 2")
        if s.micro_batches % s.pp:
            out.append(f"the interleaved schedule needs micro-batches ({s.micro_batches}) divisible by pp ({s.pp})")
    elif s.schedule in V_SHAPE or s.schedule == BIDIRECTIONAL:
        out += _v_shape_violations(s)
    elif s.virtual_stages != 1:
        out.append(f"virtual_stages {s.virtual_stages} needs the interleaved schedule, not {s.schedule}")
    if s.schedule in SPLIT_BACKWARD and s.pp == 1:
        out.append("a zero-bubble schedule (split backward) needs pp > 1")
    return out


def _layout_violations(model: ModelSpec, s: Plan) -> list[str]:
    """The layers do not split over the pipeline's stages and chunks (evenly, or as its uneven ends say)."""
    if s.uneven:
        return uneven_violations(model.layers, s)
    if model.layers % (s.pp * layout_chunks(s)):
        first, last = (balanced_v_layout(model.layers, s.pp), 0) if s.schedule in V_SHAPE else balanced_layout(
            model.layers, s.pp, output_heavy=bool(model.mtp_layers))
        hint = (f" (uneven: --first-stage-layers {first} --last-stage-layers {last})"
                if first and last else f" (uneven: --last-stage-layers {last})" if last
                else f" (uneven: --first-stage-layers {first})" if first else "")
        return [f"layers {model.layers} are not divisible by pp·virtual_stages = {s.pp}·{layout_chunks(s)}{hint}"]
    return []


RECOMPUTE_LAYERS_READS = ("recompute", "recompute_layers", "pp", "schedule", "virtual_stages", "first_stage_layers",
                          "last_stage_layers")
"""Every plan field ``recompute_layers_violations`` may read (as ``PLACEMENT_READS``)."""


def recompute_layers_violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """Megatron-LM's block recompute (``recompute_layers``): only with full recompute, and fewer layers than a
    model chunk holds (a chunk's layer count exists only for a valid layout: an uneven V on one rank has none)."""
    if not s.recompute_layers:
        return []
    return _partial_recompute_violations(model, s, not _layout_violations(model, s))


KNOB_READS = ("tp", "pp", "cp", "sharding", "ep", "etp", "ep_overlap", "moe_dispatcher", "deepseek_fp8",
              "fused_grouped_mlp", "fp8_output_layer", "fp8_attention", "zero",
              "recompute", "activation_offload_layers", "optimizer_offload_pct", "loss_impl", "cross_entropy_fusion",
              "fp8_param_gather", "precision", "tp_comm_overlap", "sequence_parallel", "cp_comm", "param_remainders",
              "embedding_wgrad_deferral", "schedule", "gradient_accumulation_fusion", "tp_overlap_rs",
              "tp_overlap_fp8_rs")
"""Every plan field ``knob_violations`` may read (as ``PLACEMENT_READS``)."""


def knob_violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """Reasons the other knobs of ``s`` (sharding, ZeRO, offload, recompute, loss, numerics, overlaps) cannot run
    ``model``."""
    out: list[str] = []
    if s.sequence_parallel and s.tp == 1:
        out.append("sequence parallelism needs tp > 1")
    if s.sharding != "auto":
        out.append(f"embedding sharding {s.sharding} applies to DLRM models only")
    if s.ep_overlap and s.ep == 1:
        out.append("ep_overlap needs expert parallelism (ep > 1)")
    if s.moe_dispatcher != "alltoall" and s.ep == 1:
        out.append(f"the {s.moe_dispatcher} token dispatcher needs expert parallelism (ep > 1)")
    if s.deepseek_fp8 and (s.ep == 1 or s.precision != "fp8-blockwise"):
        out.append(f"deepseek_fp8 needs expert parallelism (ep > 1) and fp8-blockwise precision, not ep {s.ep} and "
                   f"{s.precision}")
    if s.fused_grouped_mlp and not (model.moe and model.gated and s.precision == "mxfp8" and s.etp == 1):
        # Megatron-Core TEGroupedMLP._is_fused_impl_supported: no tensor parallelism in the experts, a gated unit;
        # the CuTe-DSL grouped GEMMs take MXFP8 on sm 10.x (transformer_config.py use_grouped_gemm_for_dense_mlp)
        out.append(f"fused_grouped_mlp (Transformer Engine's CuTe-DSL grouped MLP) needs a MoE model with a gated MLP, "
                   f"mxfp8 and etp 1, not {model.name} in {s.precision} with etp {s.etp}")
    if s.fp8_attention and s.precision == "bf16":
        out.append("fp8_attention (Megatron-Core --fp8-dot-product-attention) needs an FP8 precision, not bf16")
    if s.fp8_output_layer and s.precision != "mxfp8":
        # Megatron-Core transformer_config.py fp8_output_proj: "Only active when fp8=True and fp8_recipe='mxfp8'"
        out.append(f"fp8_output_layer (Megatron-Core --fp8-output-proj) runs the output layer in mxfp8 only, not in "
                   f"{s.precision}")
    if (s.ep > 1 or s.etp > 1) and not model.moe:
        out.append(f"ep {s.ep} / etp {s.etp} need a mixture-of-experts model; {model.name} has no experts")
    if s.zero >= 3 and s.pp > 1:
        # ZeRO-2 with pp > 1 is Llama 3's FSDP (arXiv 2407.21783 §3.3.1: optimizer states and gradients sharded,
        # weights kept after the forward), its gradients reduce-scattered after every micro-batch's backward;
        # ZeRO-3 would gather the weights again for every micro-batch (not modelled with pp > 1)
        out.append(f"ZeRO stage {s.zero} shards weights across micro-batches and cannot run with pp > 1 (DeepSpeed)")
    if model.mtp_layers and not model.moe:
        out.append(f"multi-token prediction (mtp_layers {model.mtp_layers}) is modelled for MoE models only")
    out += _offload_violations(model, s)
    if s.recompute == "op" and (model.moe or model.mla or model.bias):
        # torchtitan's per-op policy counts aten.mm (a biased linear is addmm, not on its list) in the dense
        # Llama block's order (ModelSpec.layer_matmuls); experts' grouped matmuls follow another list
        out.append("recompute op (torchtitan's per-op selective checkpointing) is modelled for dense models without "
                   "biases or MLA (torchtitan's Llama block); use selective or full")
    if s.loss_impl != "megatron" and s.cross_entropy_fusion:
        out.append(f"cross_entropy_fusion is Megatron-Core's fused loss; loss_impl {s.loss_impl} is PyTorch's "
                   "(use torch-compiled for the fused one)")
    if s.embedding_wgrad_deferral and (s.pp == 1 or s.schedule not in ("1f1b", "interleaved")
                                       or not s.gradient_accumulation_fusion):
        # Megatron-Core model_parallel_config.py: "Cannot defer embedding wgrad compute when pipeline model parallel
        # is not used" / "... when gradient accumulation fusion is not used"; only its 1F1B schedules drain them
        out.append(f"embedding_wgrad_deferral {s.embedding_wgrad_deferral} needs pp > 1, a 1f1b or interleaved "
                   "schedule and gradient-accumulation fusion (Megatron-Core)")
    if s.recompute == "modules" and not model.moe:
        out.append("recompute modules (norms, MLA up-projections, expert activations) is modelled for MoE models "
                   "only; use selective or full")
    return out + feature_violations(model, s)


VIOLATION_GROUPS = ((PLACEMENT_READS, placement_violations), (RECOMPUTE_LAYERS_READS, recompute_layers_violations),
                    (KNOB_READS, knob_violations))
"""``violations`` as groups of rules, each with the plan fields it reads (``Family.violation_groups``)."""


def feature_violations(model: ModelSpec, s: Plan) -> list[str]:
    """Reasons the plan's precision, TP overlap and CP exchange cannot run (the GPU's share: ``hardware_violations``)."""
    out = []
    if s.fp8_param_gather and s.precision == "bf16":
        out.append("fp8_param_gather needs an FP8 precision, not bf16")
    if s.param_remainders and (s.zero == 0 or s.fp8_param_gather):
        # the remainder completes a BF16 weight: FP8 weights have none (NeMo then stores full master weights)
        out.append("param_remainders needs the distributed optimizer (zero ≥ 1) and BF16 weights (no "
                   "fp8_param_gather)")
    if s.tp_comm_overlap and not (s.sequence_parallel and s.tp > 1):
        # Megatron-LM arguments.py: --tp-comm-overlap requires --sequence-parallel (and TP > 1)
        out.append(f"tp_comm_overlap needs sequence parallelism and tp > 1 (tp {s.tp}, sequence_parallel "
                   f"{str(s.sequence_parallel).lower()})")
    if (s.tp_overlap_rs != DEFAULT_RS or s.tp_overlap_fp8_rs) and not s.tp_comm_overlap:
        out.append("tp_overlap_rs and tp_overlap_fp8_rs set how TP-comm overlap reduce-scatters: they need "
                   "tp_comm_overlap")
    if s.tp_overlap_fp8_rs and s.precision == "bf16":
        out.append("tp_overlap_fp8_rs needs an FP8 precision, not bf16")
    if s.cp_comm == "a2a" and s.cp > 1 and model.heads % (s.cp * s.tp):
        # DeepSpeed-Ulysses (Jacobs et al. 2023 §3): the all-to-all hands each of cp ranks heads/(cp·tp) heads
        out.append(f"cp_comm a2a: attention heads {model.heads} are not divisible by cp·tp = {s.cp}·{s.tp}")
    return out



def _v_shape_violations(s: Plan) -> list[str]:
    """A V-shape schedule places exactly two chunks per rank (Qi et al. 2024 §6); its uneven layouts are checked
    with the others (``layout.uneven_violations``)."""
    out = []
    if s.virtual_stages not in (1, 2):
        shape = "one stage of each direction" if s.schedule == BIDIRECTIONAL else "V shape"
        out.append(f"the {s.schedule} schedule places 2 model chunks per rank ({shape}), not virtual_stages "
                   f"{s.virtual_stages}")
    if s.schedule == "dualpipev" and s.micro_batches < 2 * s.pp:
        # PyTorch ScheduleDualPipeV: at least as many micro-batches as stages (2 per rank)
        out.append(f"the dualpipev schedule needs micro-batches ({s.micro_batches}) ≥ 2·pp ({2 * s.pp})")
    if s.schedule == BIDIRECTIONAL:
        # deepseek-ai/DualPipe dualpipe.py step(): num_ranks % 2 == 0, num_chunks % 2 == 0, num_chunks ≥ 2·num_ranks
        if s.pp % 2:
            out.append(f"the dualpipe schedule needs an even pp (half the ranks start each direction), got {s.pp}")
        if s.micro_batches % 2 or s.micro_batches < 2 * s.pp:
            out.append(f"the dualpipe schedule needs an even number of micro-batches ≥ 2·pp ({2 * s.pp}), got "
                       f"{s.micro_batches}")
    return out


def _partial_recompute_violations(model: ModelSpec, s: Plan, layout_valid: bool) -> list[str]:
    """Megatron-LM's block recompute: only with full recompute, and fewer layers than a model chunk holds."""
    if s.recompute != "full":
        # Megatron-LM arguments.py: recompute_num_layers is only for --recompute-granularity full
        return [f"recompute_layers {s.recompute_layers} needs recompute full (Megatron-LM --recompute-method block), "
                f"not {s.recompute}"]
    if not layout_valid:
        return []
    most = max(chunk_layers(model.layers, s))
    if s.recompute_layers >= most:
        return [f"recompute_layers {s.recompute_layers} is every layer of a model chunk ({most} at most): that is "
                "recompute full alone"]
    return []


def _offload_violations(model: ModelSpec, s: Plan) -> list[str]:
    """Megatron-Core's rules for CPU offload, and what this model prices (dense transformers)."""
    out = []
    if s.activation_offload_layers:
        if s.pp > 1 or s.recompute != "none":
            # Megatron-Core cpu_offloading: "no support for Pipeline parallelism", not with activation recomputation
            out.append(f"activation_offload_layers {s.activation_offload_layers} needs pp 1 and recompute none "
                       f"(Megatron-Core CPU offloading), not pp {s.pp}, recompute {s.recompute}")
        if s.activation_offload_layers > model.layers:
            out.append(f"activation_offload_layers {s.activation_offload_layers} is more than the model's "
                       f"{model.layers} layers")
    if s.optimizer_offload_pct and s.zero < 1:
        # Megatron-LM arguments.py: --optimizer-cpu-offload requires --use-distributed-optimizer
        out.append(f"optimizer_offload_pct {s.optimizer_offload_pct} needs the distributed optimizer (zero ≥ 1)")
    if s.activation_offload_layers and model.moe:
        out.append("activation CPU offload is modelled for dense transformers only")
    return out
