"""Launch settings for a transformer plan: Megatron-LM's pretrain_gpt.py launch (this module), torchtitan's Python
config (``export_torchtitan.py``) and DeepSpeed's ds_config.json (``export_deepspeed.py``), and the launchers this
package declares (``LAUNCHERS``).

Pure functions from specs to text; every flag is one Megatron-LM's ``megatron/training/arguments.py`` defines at the
commit in ``tests/fixtures/frameworks/megatron.json`` (the test reads that extract).
"""

from __future__ import annotations

import math

from autoplan.errors import SpecError
from autoplan.families.base import Launcher
from autoplan.families.transformer import tp_overlap
from autoplan.families.transformer.knobs import DEFAULT_RS
from autoplan.families.transformer.frameworks import (deepspeed_violations, megatron_violations, refuse,
                                                      torchtitan_violations)
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.layout import chunk_layers
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan


def megatron_parallel_args(s: Plan, layers: int | None, mtp_layers: int = 0) -> list[str]:
    """Megatron-LM's parallelism, batch, recompute and optimizer arguments for plan ``s`` (of ``layers`` layers,
    when known, and ``mtp_layers`` multi-token-prediction blocks)."""
    args = [f"--tensor-model-parallel-size {s.tp}", f"--pipeline-model-parallel-size {s.pp}",
            f"--context-parallel-size {s.cp}"]
    if s.ep > 1 or s.etp > 1:
        # Megatron-Core MoE README: expert parallelism and expert tensor parallelism
        args += [f"--expert-model-parallel-size {s.ep}", f"--expert-tensor-parallel-size {s.etp}"]
    if s.uneven:
        args += _uneven_args(s, layers, mtp_layers)
    elif s.schedule == "interleaved" and layers:
        args.append(f"--num-layers-per-virtual-pipeline-stage {layers // (s.pp * s.virtual_stages)}")
    elif s.schedule == "interleaved":
        args.append(f"--num-virtual-stages-per-pipeline-rank {s.virtual_stages}")
    for f in type(s).KNOBS:
        knob = f.metadata["knob"]
        if knob.megatron_when is None or knob.megatron_when(s):
            args += knob.megatron.get(getattr(s, f.name), ())
    if s.embedding_wgrad_deferral:
        args += ["--defer-embedding-wgrad-compute", f"--wgrad-deferral-limit {s.embedding_wgrad_deferral}"]
    if s.zero >= 2:
        # docs/user-guide/features/megatron_fsdp.md: ZeRO-2 = optim_grads, ZeRO-3 = optim_grads_params; Megatron-FSDP
        # needs the fsdp_dtensor checkpoint format (arguments.py validate_args)
        args += ["--use-megatron-fsdp", f"--data-parallel-sharding-strategy {_FSDP_SHARDING[s.zero]}",
                 "--ckpt-format fsdp_dtensor"]
    args += [f"--micro-batch-size {s.micro_batch}", f"--global-batch-size {s.global_batch}"]
    return args


_FSDP_SHARDING = {2: "optim_grads", 3: "optim_grads_params"}
"""Megatron-FSDP's --data-parallel-sharding-strategy for ZeRO stages 2 and 3."""


def _uneven_args(s: Plan, layers: int | None, mtp_layers: int = 0) -> list[str]:
    """Megatron-Core's uneven first/last stage arguments; interleaved, the layout of every virtual stage (its
    first/last-stage flags need each stage's layers divisible by the virtual stages, which the outer-chunk
    shortfall is not), the multi-token-prediction blocks beside the loss."""
    if s.schedule != "interleaved":
        return ([f"--decoder-first-pipeline-num-layers {s.first_stage_layers}"] * bool(s.first_stage_layers)
                + [f"--decoder-last-pipeline-num-layers {s.last_stage_layers}"] * bool(s.last_stage_layers))
    if not layers:
        raise SpecError("an interleaved plan with uneven first/last stages needs the model's layer count for "
                        "--pipeline-model-parallel-layout")
    first, mid, last = chunk_layers(layers, s)
    count = s.pp * s.virtual_stages
    # Megatron-Core --pipeline-model-parallel-layout: E embedding, t layer, m MTP block, L loss, "|" between virtual
    # stages (pp rank fastest), docs "Custom Pipeline Model Parallel Layout"
    stages = ["E" + "t" * first] + ["t" * mid] * (count - 2) + ["t" * last + "m" * mtp_layers + "L"]
    return [f'--pipeline-model-parallel-layout "{"|".join(stages)}"']


def megatron_model_args(model: ModelSpec, flash_attention: bool) -> list[str]:
    """Megatron-LM's arguments for the model's shape (the vocabulary comes from the tokenizer)."""
    args = [f"--num-layers {model.layers}", f"--hidden-size {model.hidden}", f"--ffn-hidden-size {model.ffn_hidden}",
            f"--num-attention-heads {model.heads}"]
    if model.kv_heads < model.heads:
        args += ["--group-query-attention", f"--num-query-groups {model.kv_heads}"]
    if model.head_dim != model.hidden // model.heads:
        args.append(f"--kv-channels {model.head_dim}")
    args += [f"--seq-length {model.seq_len}", f"--max-position-embeddings {model.seq_len}"]
    args += {"swiglu": ["--swiglu"], "relu2": ["--squared-relu"]}.get(model.activation, [])
    if model.norm == "rmsnorm":
        args.append("--normalization RMSNorm")
    if model.position == "rope":
        args.append("--position-embedding-type rope")
    if model.qk_norm:
        args.append("--qk-layernorm")
    if not model.bias:
        args.append("--disable-bias-linear")
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if not model.dropout:
        args += ["--attention-dropout 0.0", "--hidden-dropout 0.0"]
    if flash_attention:
        args.append("--use-flash-attn")
    return args + _megatron_moe_args(model) + ["--bf16"]


def _megatron_moe_args(model: ModelSpec) -> list[str]:
    """Megatron-Core's MoE and MLA arguments (megatron/core/transformer/moe/README.md; MLA: --multi-latent-attention)."""
    args: list[str] = []
    if model.moe:
        args += [f"--num-experts {model.experts}", f"--moe-router-topk {model.top_k}",
                 f"--moe-ffn-hidden-size {model.moe_ffn_hidden}", "--moe-grouped-gemm",
                 "--moe-token-dispatcher-type alltoall"]
        if model.shared_experts:
            args.append(f"--moe-shared-expert-intermediate-size {model.shared_experts * model.moe_ffn_hidden}")
        if model.dense_layers:
            # one entry per layer: 0 dense, 1 MoE (Megatron-Core --moe-layer-freq list form)
            args.append(f'--moe-layer-freq "([0]*{model.dense_layers}+[1]*{model.moe_layers})"')
        if model.capacity_factor:
            args.append(f"--moe-expert-capacity-factor {model.capacity_factor:g}")
        if model.pad_to_capacity:
            args.append("--moe-pad-expert-input-to-capacity")
        if model.mtp_layers:
            # Megatron-Core multi_token_prediction.py: the MTP blocks on the last pipeline stage, beside the loss
            args.append(f"--mtp-num-layers {model.mtp_layers}")
    if model.mla:
        args += ["--multi-latent-attention", f"--kv-lora-rank {model.kv_lora_rank}",
                 f"--qk-head-dim {model.head_dim}", f"--qk-pos-emb-head-dim {model.qk_rope_head_dim}",
                 f"--v-head-dim {model.value_dim}"]
        if model.q_lora_rank:
            args.append(f"--q-lora-rank {model.q_lora_rank}")
    return args


def megatron_notes(s: Plan, model: ModelSpec | None) -> list[str]:
    """What the arguments do not say, as comment lines."""
    notes = [f"data-parallel size {s.dp} follows from the world size: {s.gpus} GPUs / "
             f"(tp {s.tp} · pp {s.pp} · cp {s.cp})"]
    if s.schedule == "gpipe" and s.pp > 1:
        notes.append("Megatron-LM has no GPipe schedule: it runs this plan with 1F1B (same bubble, less memory)")
    if s.schedule in _ZERO_BUBBLE:
        notes.append(f"Megatron-Core has no zero-bubble schedule ({s.schedule}): these arguments run 1F1B; "
                     f"{_ZERO_BUBBLE[s.schedule]}")
    if s.cp_comm == "a2a+p2p" and s.cp > 1:
        notes.append("--cp-comm-type a2a+p2p also needs --hierarchical-context-parallel-sizes A R with A·R = cp "
                     f"{s.cp}: autoplan priced A = the CP ranks sharing a node (all-to-all) and a ring of R across")
    if s.tp_comm_overlap and (s.tp_overlap_rs != DEFAULT_RS or s.tp_overlap_fp8_rs):
        notes.append("--tp-comm-overlap-cfg FILE: a userbuffers yaml (Transformer Engine initialize_ub) whose "
                     f"proj_fprop and fc2_fprop are {_reduce_scatter_cfg(s)}, as autoplan priced them")
    if s.zero >= 2:
        notes.append(f"ZeRO-{s.zero} runs as Megatron-FSDP; unset CUDA_DEVICE_MAX_CONNECTIONS (Megatron-FSDP needs "
                     "it > 1 or unset)")
    if s.fused_grouped_mlp:
        notes.append("fused_grouped_mlp: set NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 in the environment (Transformer Engine "
                     "picks the CuTe-DSL grouped MLP on Blackwell only with it)")
    if s.precision != "bf16":
        notes.append("FP8 runs through Transformer Engine (--transformer-impl transformer_engine); the embedding, "
                     "output layer and attention stay BF16")
    if model is None:
        notes.append("model shape arguments left out: the run's model could not be rebuilt")
    else:
        notes.append(f"--mock-data with NullTokenizer --vocab-size {model.vocab} starts as it is: replace them with "
                     "--data-path and your tokenizer (--tokenizer-type, --vocab-file), and set your schedule")
        if model.position == "alibi":
            notes.append("ALiBi positions are not in Megatron-LM (Megatron-DeepSpeed has them)")
    return notes


def _reduce_scatter_cfg(s: Plan) -> str:
    """proj_fprop's and fc2_fprop's userbuffers settings for ``Plan.tp_overlap_rs`` / ``tp_overlap_fp8_rs``."""
    fp8 = ", fp8_buf: true" if s.tp_overlap_fp8_rs else ""

    def one(how: str) -> str:
        if how == tp_overlap.RING:
            return "{method: ring_exchange" + fp8 + "}"
        return "{method: pipeline, num_sm: " + how + ", num_splits: 4, set_sm_margin: 1" + fp8 + "}"

    sides = tp_overlap.reduce_scatter_overlap(s.tp_overlap_rs)
    return f"{one(sides['proj'])} and {one(sides['fc2'])}"


def megatron_args(s: Plan, model: ModelSpec | None, flash_attention: bool = True) -> list[str]:
    """Every Megatron-LM argument for plan ``s`` (model shape too when ``model`` is known)."""
    args = megatron_parallel_args(s, model.layers if model is not None else None, model.mtp_layers if model else 0)
    return args + (megatron_model_args(model, flash_attention) if model is not None else [])


def megatron_run_args(model: ModelSpec) -> list[str]:
    """What pretrain_gpt.py needs besides the plan and the shape to start: mock data with a tokenizer of the
    model's vocabulary and a few iterations (replace with --data-path, your tokenizer and your schedule)."""
    return ["--mock-data", "--tokenizer-type NullTokenizer", f"--vocab-size {model.vocab}", "--train-iters 100",
            "--lr 1.0e-4", "--log-interval 1"]


def megatron_text(s: Plan, model: ModelSpec | None, flash_attention: bool = True, header: str = "",
                  gpus_per_node: int | None = None) -> str:
    """A torchrun launch of Megatron-LM's pretrain_gpt.py for plan ``s``, comment lines above it; SpecError when
    Megatron-LM cannot launch the plan as planned (``frameworks.megatron_violations``)."""
    if model is not None:
        refuse("Megatron-LM", "megatron", megatron_violations(model, s))
    args = megatron_args(s, model, flash_attention) + (megatron_run_args(model) if model is not None else [])
    if s.cp_comm == "a2a+p2p" and s.cp > 1 and gpus_per_node:
        inner = math.gcd(s.cp, max(1, gpus_per_node // s.tp))       # the CP ranks sharing a node: all-to-all
        args.append(f"--hierarchical-context-parallel-sizes {inner} {s.cp // inner}")
    lines = [f"# {line}" for line in header.splitlines() + megatron_notes(s, model)]
    lines += [_torchrun(s.gpus, gpus_per_node) + " pretrain_gpt.py \\"]
    lines += ["  " + a + " \\" for a in args[:-1]] + ["  " + args[-1]]
    return "\n".join(lines) + "\n"


def _torchrun(gpus: int, per_node: int | None) -> str:
    """torchrun on every node (torch.distributed.run flags)."""
    if per_node:
        nodes = max(1, gpus // per_node)
        return (f"torchrun --nnodes {nodes} --nproc-per-node {min(gpus, per_node)} --node-rank $NODE_RANK "
                "--master-addr $MASTER_ADDR --master-port 6000")
    return "torchrun --nnodes $NNODES --nproc-per-node $GPUS_PER_NODE --node-rank $NODE_RANK --master-addr " \
           "$MASTER_ADDR --master-port 6000"


_ZERO_BUBBLE = {
    # sail-sg/zero-bubble-pipeline-parallelism README (a Megatron-LM fork) and torch.distributed.pipelining
    "zb-h1": "for ZB-H1 use the sail-sg/zero-bubble-pipeline-parallelism fork of Megatron-LM (--enable-zero-bubble, "
             "its automatic schedule under 1F1B's memory, ZB-1p) or PyTorch ScheduleInterleavedZeroBubble",
    "zbv": "for ZB-V use the sail-sg/zero-bubble-pipeline-parallelism fork of Megatron-LM (--zero-bubble-v-schedule) "
           "or PyTorch ScheduleZBVZeroBubble (two stages per rank, V placement)",
    "dualpipev": "for DualPipeV use deepseek-ai/DualPipe (DualPipeV) or PyTorch ScheduleDualPipeV (two stages per "
                 "rank, V placement)",
    "dualpipe": "for DualPipe use deepseek-ai/DualPipe (DualPipe: rank i holds stage i and stage pp − 1 − i of two "
                "model copies, micro-batches fed from both ends)",
}
"""Where each zero-bubble schedule runs, since Megatron-Core has none."""


def _megatron(s: Plan, model: ModelSpec | None, cluster: ClusterSpec | None, header: str) -> str:
    flash = cluster.flash_attention if cluster is not None else True
    return megatron_text(s, model, flash, header, cluster.gpus_per_node if cluster is not None else None)


def _torchtitan(s: Plan, model: ModelSpec | None, cluster: ClusterSpec | None, header: str) -> str:
    from autoplan.families.transformer.export_torchtitan import torchtitan_python
    return torchtitan_python(s, model, header, cluster.gpus_per_node if cluster is not None else None)


def _deepspeed(s: Plan, model: ModelSpec | None, cluster: ClusterSpec | None, header: str) -> str:
    from autoplan.families.transformer.export_deepspeed import deepspeed_text
    return deepspeed_text(s, model, header, cluster.gpus_per_node if cluster is not None else None)


TRANSFORMER_LAUNCHERS = (Launcher("megatron", "Megatron-LM", megatron_violations, _megatron),
                         Launcher("torchtitan", "torchtitan", torchtitan_violations, _torchtitan),
                         Launcher("deepspeed", "DeepSpeed", deepspeed_violations, _deepspeed))
"""The frameworks that launch transformer plans, first the default export format."""
LAUNCHERS = {"dense": TRANSFORMER_LAUNCHERS, "moe": TRANSFORMER_LAUNCHERS}
"""This package's families and the frameworks that launch their plans (read by the registry)."""
