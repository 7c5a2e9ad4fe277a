"""Which transformer plans each training framework can launch today, as rules citing the framework's own source.

A rule says why a valid plan cannot be launched as planned by one framework (the plan itself is valid: the
simulator prices it); ``--framework NAME`` keeps only the plans with no reason for that framework. Sources were
read at the commits recorded in ``tests/fixtures/frameworks/*.json`` (Megatron-LM d98e8a6, torchtitan b5bcd76,
DeepSpeed edaa722), where ``tools/vendor_frameworks.py`` also extracts the arguments and fields the exporters emit.
"""

from __future__ import annotations

from autoplan.errors import SpecError
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

MEGATRON_SCHEDULES = ("1f1b", "interleaved")
"""Megatron-Core's pipeline schedules (megatron/core/pipeline_parallel/schedules.py:
forward_backward_pipelining_without_interleaving / _with_interleaving)."""
TITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B", "zbv": "ZBVZeroBubble",
                   "dualpipev": "DualPipeV"}
"""autoplan's schedules torch.distributed.pipelining runs, by the names torchtitan's
``parallelism.pipeline_parallel_schedule`` takes (schedules.py get_schedule_class)."""
TITAN_MODELS = {"llama3-8b": ("llama3", "8B", "llama3_8b"), "llama3-70b": ("llama3", "70B", "llama3_70b"),
                "llama3-405b": ("llama3", "405B", "llama3_405b")}
"""Catalog models torchtitan defines: (model package, flavor, its config_registry function)."""


def _common(model: ModelSpec, s: Plan, who: str) -> list[str]:
    out = []
    if s.zero3_per_tensor:
        out.append(f"zero3_per_tensor is DeepSpeed 2021's ZeRO-3 (one blocking gather per tensor); {who} gathers "
                   "per layer, prefetched")
    if model.position == "alibi":
        out.append(f"ALiBi positions are not in {who}")
    if s.deepseek_fp8:
        # Megatron-Core's DeepEP/HybridEP dispatchers: "Currently, we do not support fp8 dispatch" (fused_a2a.py)
        out.append(f"deepseek_fp8 is DeepSeek-V3's own stack (an FP8 dispatch, DeepGEMM); {who} dispatches BF16 and "
                   "runs its own blockwise GEMMs")
    if getattr(s, "param_remainders", False):
        out.append(f"param_remainders is NeMo's distributed Adam (store_param_remainders); the {who} export does not "
                   "set it")
    return out


MEGATRON_ONLY = (("cuda_graphs", "Megatron-Core's full-iteration CUDA graph", "captures no training iteration"),
                 ("fused_grouped_mlp", "Megatron-Core's experts through Transformer Engine's CuTe-DSL grouped MLP",
                  "runs its own experts"),
                 ("fp8_output_layer", "Megatron-Core's --fp8-output-proj", "keeps its output layer out of FP8"),
                 ("fp8_attention", "Megatron-Core's --fp8-dot-product-attention", "keeps its attention in BF16"))
"""Plan knobs only Megatron-Core runs: (field, what it is, what the other frameworks do instead)."""


def _megatron_only(s: Plan, who: str) -> list[str]:
    """The knobs of ``s`` that only Megatron-Core runs (``MEGATRON_ONLY``), as reasons ``who`` cannot launch it."""
    return [f"{name} is {what}; {who} {instead}" for name, what, instead in MEGATRON_ONLY if getattr(s, name)]


def megatron_violations(model: ModelSpec, s: Plan) -> list[str]:
    """Why Megatron-LM (Megatron-Core) cannot launch ``s`` as planned; [] if it can."""
    out = _common(model, s, "Megatron-LM")
    if s.pp > 1 and s.schedule not in MEGATRON_SCHEDULES:
        out.append(f"Megatron-Core runs 1F1B and interleaved 1F1B only (pipeline_parallel/schedules.py), not "
                   f"{s.schedule}")
    if s.zero >= 2 and s.pp > 1:
        # docs/user-guide/features/megatron_fsdp.md and examples/megatron_fsdp/: Megatron-FSDP with TP, CP and EP;
        # no documented pipeline-parallel combination (MFSDP v2 refuses pp > 1 outright, mcore_fsdp_adapter.py)
        out.append(f"ZeRO-{s.zero} runs as Megatron-FSDP (--use-megatron-fsdp), which is documented without "
                   "pipeline parallelism; use pp 1 or zero ≤ 1")
    if s.zero >= 1 and s.overlap_param_gather and not s.overlap_grad_reduce:
        # arguments.py validate_args: "Must use --overlap-param-gather with --overlap-grad-reduce"
        out.append("--overlap-param-gather needs --overlap-grad-reduce (arguments.py)")
    if s.fp8_param_gather and s.zero == 0:
        # arguments.py: --fp8-param-gather only with the distributed optimizer, torch FSDP2 or Megatron-FSDP
        out.append("--fp8-param-gather needs the distributed optimizer or Megatron-FSDP (zero ≥ 1)")
    if s.optimizer_moments == "bf16" and s.zero == 0:
        # arguments.py: --use-precision-aware-optimizer requires --use-distributed-optimizer
        out.append("--use-precision-aware-optimizer (bf16 moments) needs the distributed optimizer (zero ≥ 1)")
    if s.recompute == "op":
        # transformer_config.py recompute_granularity: full or selective (its --recompute-modules), no per-op policy
        out.append("recompute op is torchtitan's per-op selective checkpointing; Megatron-LM recomputes whole "
                   "layers or named modules (--recompute-granularity full/selective)")
    if s.loss_impl != "megatron":
        out.append(f"loss_impl {s.loss_impl} is PyTorch's cross entropy as torchtitan runs it; Megatron-LM runs "
                   "its vocab-parallel loss (loss_impl megatron)")
    if s.fp8_activation_store:
        # TransformerConfig.activation_func_fp8_input_store is excluded from the parser (_add_network_size_args)
        out.append("fp8_activation_store has no command-line flag in Megatron-LM (activation_func_fp8_input_store "
                   "is excluded from arguments.py)")
    return out


def _titan_sharded(s: Plan) -> bool:
    """FSDP2 shards over the data-parallel ranks: ZeRO-2/3, or ZeRO-1 under pipelining (see below)."""
    return s.zero >= 2 or (s.zero == 1 and s.pp > 1)


def torchtitan_violations(model: ModelSpec, s: Plan) -> list[str]:
    """Why torchtitan cannot launch ``s`` as planned; [] if it can."""
    out = _common(model, s, "torchtitan") + _megatron_only(s, "torchtitan")
    if model.moe and model.name not in TITAN_MODELS:
        out.append(f"torchtitan defines no {model.name} (its MoE models are its own deepseek_v3, qwen3, gpt_oss "
                   "flavors)")
    if s.pp > 1 and s.schedule not in TITAN_SCHEDULES:
        out.append(f"torch.distributed.pipelining has no {s.schedule} schedule (GPipe, 1F1B, Interleaved1F1B, "
                   "ZBVZeroBubble, DualPipeV; its zero-bubble schedules are looped or V-shaped)")
    if s.pp == 1 and s.zero == 1:
        # torchtitan shards data parallelism with FSDP2 (configs.py ParallelismConfig.data_parallel_shard_degree),
        # which reduce-scatters gradients every backward: ZeRO-2 or -3, no optimizer-only sharding
        out.append("torchtitan has no ZeRO-1 without pipelining: FSDP2 shards gradients too (use zero 2)")
    if s.pp > 1 and s.zero >= 2:
        # torch.distributed.pipelining stage.py backward_maybe_with_nosync: with FSDP every backward but the last
        # runs set_requires_gradient_sync(False) and set_reshard_after_backward(False): unsharded parameters and
        # gradients until the step's last micro-batch, which is ZeRO-1's memory
        out.append(f"under pipelining FSDP2 keeps parameters and gradients unsharded until the last micro-batch "
                   f"(torch pipelining stage.py): ZeRO-1 memory, not ZeRO-{s.zero}")
    if s.cp > 1 and s.cp_comm != "p2p":
        out.append(f"torchtitan's context parallelism is ring attention; no all-to-all exchange (cp_comm "
                   f"{s.cp_comm})")
    if s.recompute == "modules":
        out.append("torchtitan has no per-module recomputation (FullAC, SelectiveAC, MemoryBudgetAC)")
    if s.recompute == "selective":
        # distributed/activation_checkpoint.py SelectiveAC: per-op (matmuls, attention and reduce-scatters kept,
        # every second matmul recomputed): that is recompute op; no attention-core-only policy
        out.append("torchtitan's SelectiveAC is per-op (recompute op), not Megatron's attention-core recompute "
                   "(recompute selective)")
    if s.precision in ("fp8", "fp8-current", "fp8-blockwise"):
        # components/quantization/float8.py: Float8LinearConverter recipe_name is rowwise or rowwise_with_gw_hp
        out.append(f"torchtitan's Float8LinearConverter has rowwise recipes only, not {s.precision} scaling")
    if s.fp8_param_gather:
        out.append("torchtitan's MXFP8 converter has no FP8 parameter all-gather")
    if s.optimizer_moments == "bf16" or s.fp8_activation_store:
        out.append("torchtitan keeps fp32 Adam moments and BF16 activations (no bf16 moments, no FP8 activation "
                   "store)")
    if s.etp > 1:
        # configs.py ParallelismConfig.expert_parallel_degree: EP borrows ranks from FSDP and TP
        out.append("torchtitan has no expert tensor parallelism (experts borrow FSDP and TP ranks)")
    if s.ep > 1 and ((s.dp if _titan_sharded(s) else 1) * s.cp * s.tp) % s.ep:
        out.append(f"torchtitan needs ep {s.ep} to divide dp_shard·cp·tp (configs.py expert_parallel_degree)")
    if s.ep_overlap:
        out.append("torchtitan has no expert-parallel communication overlap flag")
    return out


def deepspeed_violations(model: ModelSpec, s: Plan) -> list[str]:
    """Why DeepSpeed cannot launch ``s`` as planned; [] if it can."""
    out = [r for r in _common(model, s, "DeepSpeed") if not r.startswith("zero3_per_tensor")]   # DeepSpeed's own
    out += _megatron_only(s, "DeepSpeed")
    if s.pp > 1:
        if s.zero >= 2:
            # runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
            out.append(f"DeepSpeed's pipeline engine refuses ZeRO-{s.zero} (runtime/pipe/engine.py)")
        if s.schedule != "1f1b":
            out.append(f"DeepSpeed's pipeline engine runs TrainSchedule (1F1B) only, not {s.schedule} "
                       "(runtime/pipe/schedule.py)")
        if s.tp > 1 or s.cp > 1:
            out.append("DeepSpeed's AutoTP and Ulysses are documented without its pipeline engine")
        if s.uneven:
            out.append("DeepSpeed's PipelineModule partitions by partition_method, not by first/last stage layers")
    if s.tp > 1 and s.sequence_parallel:
        # docs/_tutorials/autotp-training.md: AutoTP shards linear layers and all-reduces their outputs
        out.append("DeepSpeed AutoTP all-reduces layer outputs: no sequence parallelism")
    if s.cp > 1 and (s.cp_comm != "a2a" or s.tp > 1):
        # docs/_tutorials/ulysses-alst-sequence-parallelism.md: sequence_parallel_size, all-to-all (Ulysses)
        out.append("DeepSpeed's context parallelism is Ulysses (cp_comm a2a, sequence_parallel_size) without TP")
    if s.recompute not in ("none", "full"):
        out.append(f"DeepSpeed's activation checkpointing recomputes whole layers, not {s.recompute}")
    if s.precision != "bf16":
        out.append(f"ds_config has no {s.precision} training recipe (Transformer Engine FP8 needs model code)")
    if s.optimizer_moments == "bf16" or s.fp8_activation_store:
        out.append("ds_config keeps fp32 optimizer states and BF16 activations in this export")
    if s.ep > 1 or s.etp > 1:
        out.append("DeepSpeed-MoE's expert parallelism is set in model code (deepspeed.moe.layer.MoE ep_size), "
                   "not in ds_config")
    return out


def refuse(title: str, name: str, reasons: list[str]) -> None:
    """SpecError listing why ``title`` cannot launch the plan (nothing is exported that it cannot run)."""
    if reasons:
        raise SpecError(f"{title} cannot launch this plan as planned: {'; '.join(reasons)}; search with "
                        f"--framework {name} for plans it can launch")
