"""Launch settings for a transformer plan: Megatron-LM command-line arguments and a torchtitan job-config fragment.

Pure functions from specs to text; names follow Megatron-LM's ``megatron/training/arguments.py`` and
torchtitan's ``torchtitan/config/job_config.py``.
"""

from __future__ import annotations

from autoplan.errors import SpecError
from autoplan.specs.layout import chunk_layers
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan


def megatron_parallel_args(s: Plan, layers: int | None) -> list[str]:
    """Megatron-LM's parallelism, batch, recompute and optimizer arguments for plan ``s`` (of ``layers`` layers,
    when known)."""
    if s.zero >= 2:
        raise SpecError(f"ZeRO stage {s.zero} has no Megatron-LM equivalent: its distributed optimizer "
                        "(--use-distributed-optimizer) shards only the optimizer state (ZeRO-1); export a plan "
                        "with zero ≤ 1, or use --format torchtitan (FSDP)")
    args = [f"--tensor-model-parallel-size {s.tp}", f"--pipeline-model-parallel-size {s.pp}",
            f"--context-parallel-size {s.cp}"]
    if s.ep > 1 or s.etp > 1:
        # Megatron-Core MoE README: expert parallelism and expert tensor parallelism
        args += [f"--expert-model-parallel-size {s.ep}", f"--expert-tensor-parallel-size {s.etp}"]
    if s.uneven:
        args += _uneven_args(s, layers)
    elif s.schedule == "interleaved" and layers:
        args.append(f"--num-layers-per-virtual-pipeline-stage {layers // (s.pp * s.virtual_stages)}")
    elif s.schedule == "interleaved":
        args.append(f"--num-virtual-stages-per-pipeline-rank {s.virtual_stages}")
    for f in type(s).KNOBS:
        knob = f.metadata["knob"]
        if knob.megatron_when is None or knob.megatron_when(s):
            args += knob.megatron.get(getattr(s, f.name), ())
    args += [f"--micro-batch-size {s.micro_batch}", f"--global-batch-size {s.global_batch}"]
    return args


def _uneven_args(s: Plan, layers: int | None) -> list[str]:
    """Megatron-Core's uneven first/last stage arguments; interleaved, the layout of every virtual stage (its
    first/last-stage flags need each stage's layers divisible by the virtual stages, which the outer-chunk
    shortfall is not)."""
    if s.schedule != "interleaved":
        return ([f"--decoder-first-pipeline-num-layers {s.first_stage_layers}"] * bool(s.first_stage_layers)
                + [f"--decoder-last-pipeline-num-layers {s.last_stage_layers}"] * bool(s.last_stage_layers))
    if not layers:
        raise SpecError("an interleaved plan with uneven first/last stages needs the model's layer count for "
                        "--pipeline-model-parallel-layout")
    first, mid, last = chunk_layers(layers, s)
    count = s.pp * s.virtual_stages
    # Megatron-Core --pipeline-model-parallel-layout: E embedding, t layer, L loss, "|" between virtual stages
    # (pp rank fastest), docs "Custom Pipeline Model Parallel Layout"
    stages = ["E" + "t" * first] + ["t" * mid] * (count - 2) + ["t" * last + "L"]
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
    if s.precision != "bf16":
        notes.append("FP8 runs through Transformer Engine (--transformer-impl transformer_engine); the embedding, "
                     "output layer and attention stay BF16")
    if model is None:
        notes.append("model shape arguments left out: the run's model could not be rebuilt")
    else:
        notes.append(f"vocabulary {model.vocab} comes from the tokenizer (--tokenizer-type, --vocab-file)")
        if model.position == "alibi":
            notes.append("ALiBi positions are not in Megatron-LM (Megatron-DeepSpeed has them)")
    return notes


def megatron_args(s: Plan, model: ModelSpec | None, flash_attention: bool = True) -> list[str]:
    """Every Megatron-LM argument for plan ``s`` (model shape too when ``model`` is known)."""
    args = megatron_parallel_args(s, model.layers if model is not None else None)
    return args + (megatron_model_args(model, flash_attention) if model is not None else [])


def megatron_text(s: Plan, model: ModelSpec | None, flash_attention: bool = True, header: str = "") -> str:
    """The arguments as lines to paste after ``pretrain_gpt.py``, with comment lines above them."""
    args = megatron_args(s, model, flash_attention)
    lines = [f"# {line}" for line in header.splitlines() + megatron_notes(s, model)]
    lines += [a + " \\" for a in args[:-1]] + args[-1:]
    return "\n".join(lines) + "\n"


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
_TITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B",
                    "zb-h1": "InterleavedZeroBubble", "zbv": "ZBVZeroBubble", "dualpipev": "DualPipeV",
                    "dualpipe": "DualPipeV"}   # torchtitan has no bidirectional DualPipe: its V variant instead


def torchtitan_toml(s: Plan, model: ModelSpec | None, header: str = "") -> str:
    """A torchtitan job-config fragment ([parallelism], [activation_checkpoint], [training]) for plan ``s``."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append("# merge into a torchtitan train config whose [model] name and flavor describe "
                 f"{model.name if model else 'the model'}")
    if s.zero == 3:
        dp = ["data_parallel_replicate_degree = 1", f"data_parallel_shard_degree = {s.dp}"]
    else:
        lines.append(f"# approximate: torchtitan shards with FSDP (ZeRO-3); ZeRO-{s.zero} has no exact equivalent, "
                     "so the data-parallel ranks replicate the model here (DDP)")
        dp = [f"data_parallel_replicate_degree = {s.dp}", "data_parallel_shard_degree = 1"]
    if s.tp > 1 and not s.sequence_parallel:
        lines.append("# torchtitan's tensor parallelism always shards norms along the sequence (sequence parallel)")
    lines += ["", "[parallelism]", *dp, f"tensor_parallel_degree = {s.tp}", f"context_parallel_degree = {s.cp}",
              f"pipeline_parallel_degree = {s.pp}"]
    if s.tp_comm_overlap:
        # torchtitan docs (async tensor parallel): overlaps TP collectives with matmuls, needs torch.compile
        lines.append("enable_async_tensor_parallel = true  # TP-comm overlap; needs [compile] enable = true")
    if s.precision != "bf16":
        lines.append(f"# precision {s.precision}: enable torchtitan's float8/MX converter by hand ([model] converters)")
    if s.cp_comm != "p2p" and s.cp > 1:
        lines.append(f"# cp_comm {s.cp_comm}: torchtitan's context parallelism is ring attention (p2p) only")
    if s.ep > 1 or s.etp > 1:
        # torchtitan job_config.py [parallelism]: expert parallelism for MoE models
        lines += [f"expert_parallel_degree = {s.ep}", f"expert_tensor_parallel_degree = {s.etp}"]
    if s.uneven:
        lines.append(f"# not exported: the uneven first/last stages ({s.first_stage_layers}/{s.last_stage_layers} "
                     "layers); torchtitan splits stages by module_fqns_per_model_part, write them by hand")
    if s.pp > 1:
        if s.schedule == "dualpipe":
            lines.append("# torchtitan has no bidirectional DualPipe: DualPipeV (V placement) is the closest")
        lines += [f'pipeline_parallel_schedule = "{_TITAN_SCHEDULES[s.schedule]}"',
                  f"pipeline_parallel_microbatch_size = {s.micro_batch}"]
        if s.chunks > 1 and model is not None and not s.uneven:
            lines.append(f"pipeline_parallel_layers_per_stage = {model.layers // (s.pp * s.chunks)}")
    lines += ["", "[activation_checkpoint]", f'mode = "{"selective" if s.recompute == "modules" else s.recompute}"']
    if s.recompute == "modules":
        lines.append('selective_ac_option = "op"  # approximate: Megatron-Core --recompute-modules layernorm '
                     "mla_up_proj moe_act has no torchtitan equivalent")
    if s.recompute == "selective":
        lines.append('selective_ac_option = "op"  # approximate: per-op selective checkpointing, not Megatron\'s '
                     "attention-core recompute")
    lines += ["", "[training]", f"local_batch_size = {s.global_batch // s.dp}  # sequences per data-parallel rank",
              f"global_batch_size = {s.global_batch}"]
    if model is not None:
        lines.append(f"seq_len = {model.seq_len}")
    return "\n".join(lines) + "\n"
