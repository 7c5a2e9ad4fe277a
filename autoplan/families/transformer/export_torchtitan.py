"""A transformer plan as a torchtitan configuration: a Python module whose function returns a ``Trainer.Config``
(torchtitan/config/README.md: configurations are Python functions chosen with ``--module`` and ``--config``).

Field names are those of torchtitan's config dataclasses at the commit in ``tests/fixtures/frameworks/torchtitan.json``
(``ParallelismConfig``, ``TrainingConfig``, ``CompileConfig`` in torchtitan/config/configs.py; the activation
checkpointing configs in torchtitan/distributed/activation_checkpoint.py); the test checks every one against it.
"""

from __future__ import annotations

from autoplan.errors import SpecError
from autoplan.families.transformer.frameworks import TITAN_MODELS, TITAN_SCHEDULES, refuse, torchtitan_violations
from autoplan.specs.layout import chunk_layers, layout_chunks
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

FUNCTION = "autoplan_plan"
"""The config function the module defines (``--config``)."""
TEMPLATE = "llama3_8b"
"""The Llama-3 recipe (optimizer, data, checkpointing) a model torchtitan does not define starts from."""


def _reshard(s: Plan) -> str:
    """fsdp_reshard_after_forward: ZeRO-3 reshards after the forward, ZeRO-2 keeps the gathered weights for the
    backward (torch fully_shard reshard_after_forward); under pipelining torchtitan's default."""
    return {3: "always", 2: "never"}.get(s.zero, "default")


def _stage_fqns(model: ModelSpec, s: Plan) -> list[list[str]]:
    """Module names of every virtual stage, first to last (torchtitan's module_fqns_per_model_part)."""
    first, mid, last = chunk_layers(model.layers, s)
    count = s.pp * layout_chunks(s)
    sizes = [first] + [mid] * (count - 2) + [last] if count > 1 else [model.layers]
    out, at = [], 0
    for i, n in enumerate(sizes):
        names = [f"layers.{k}" for k in range(at, at + n)]
        at += n
        out.append((["tok_embeddings"] if i == 0 else []) + names + (["norm", "lm_head"] if i == count - 1 else []))
    return out


def _parallelism(s: Plan, model: ModelSpec) -> list[str]:
    sharded = s.zero >= 2 or (s.zero == 1 and s.pp > 1)
    p = "config.parallelism."
    lines = [f"{p}data_parallel_replicate_degree = {1 if sharded else s.dp}",
             f"{p}data_parallel_shard_degree = {s.dp if sharded else 1}",
             f'{p}fsdp_reshard_after_forward = "{_reshard(s)}"',
             f"{p}tensor_parallel_degree = {s.tp}",
             f"{p}enable_sequence_parallel = {s.sequence_parallel or s.tp == 1}",
             f"{p}context_parallel_degree = {s.cp}",
             f"{p}pipeline_parallel_degree = {s.pp}"]
    if s.pp > 1:
        lines += [f'{p}pipeline_parallel_schedule = "{TITAN_SCHEDULES[s.schedule]}"',
                  f"{p}num_pp_microbatches = {s.micro_batches}"]
        if s.uneven:
            lines.append(f"{p}module_fqns_per_model_part = {_stage_fqns(model, s)!r}")
        else:
            lines.append(f"{p}pipeline_parallel_layers_per_stage = {model.layers // (s.pp * layout_chunks(s))}")
    if model.moe:
        lines.append(f"{p}expert_parallel_degree = {s.ep}")
    return lines


def _model_lines(model: ModelSpec) -> tuple[list[str], list[str], str]:
    """(imports, module-level definitions, base recipe call) for ``model``: torchtitan's own recipe when it defines
    the model, else its shape as torchtitan's Llama-3 decoder registered as a flavor."""
    if model.name in TITAN_MODELS:
        package, _, recipe = TITAN_MODELS[model.name]
        return [f"from torchtitan.models.{package}.config_registry import {recipe}"], [], f"{recipe}()"
    # a SwiGLU MLP of 2/3 the GELU width has the GELU MLP's parameters and FLOPs (3 matrices instead of 2)
    hidden = model.ffn_hidden if model.activation == "swiglu" else 2 * model.ffn_hidden // 3
    fn = "_" + "".join(c if c.isalnum() else "_" for c in model.name)
    kv = model.kv_heads
    defs = [f"def {fn}(attn_backend: str, tp_gemm_backend: str = \"default\") -> Llama3Model.Config:",
            f'    """{model.name} as torchtitan\'s Llama-3 decoder (RMSNorm, SwiGLU, RoPE): its layers, width, heads '
            'and vocabulary;',
            f'    a {model.activation} MLP of {model.ffn_hidden} becomes SwiGLU of {hidden} (same parameters and '
            'FLOPs)."""',
            "    return Llama3Model.Config(",
            f"        dim={model.hidden}, vocab_size={model.vocab}, enable_weight_tying={model.tied_embeddings},",
            f"        tok_embeddings=Embedding.Config(num_embeddings={model.vocab}, embedding_dim={model.hidden}),",
            f"        norm=RMSNorm.Config(normalized_shape={model.hidden}),",
            f"        lm_head=Linear.Config(in_features={model.hidden}, out_features={model.vocab}),",
            "        layers=_build_llama3_layers(",
            f"            n_layers={model.layers}, dim={model.hidden}, n_heads={model.heads}, n_kv_heads={kv}, "
            f"hidden_dim={hidden},",
            f"            rope=ComplexRoPE.Config(dim={model.head_dim}, max_context_length={model.seq_len}, "
            "theta=10000.0),",
            "            attn_backend=attn_backend, tp_gemm_backend=tp_gemm_backend))",
            "", "", f'llama3_configs["{model.name}"] = {fn}']
    imports = ["from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss",
               "from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm",
               "from torchtitan.models.common.config_utils import decoder_vocab_size",
               "from torchtitan.models.llama3 import Llama3Model, _build_llama3_layers, llama3_configs, "
               "model_registry",
               f"from torchtitan.models.llama3.config_registry import {TEMPLATE}"]
    return imports, defs, f"{TEMPLATE}()"


def torchtitan_python(s: Plan, model: ModelSpec | None, header: str = "", gpus_per_node: int | None = None) -> str:
    """A Python module for torchtitan whose ``autoplan_plan()`` returns the plan's ``Trainer.Config``, with the
    launch line; SpecError when torchtitan cannot launch the plan as planned."""
    if model is None:
        raise SpecError("a torchtitan config needs the run's model (it could not be rebuilt)")
    refuse("torchtitan", "torchtitan", torchtitan_violations(model, s))
    imports, defs, base = _model_lines(model)
    ac = {"none": "None", "full": "FullAC.Config()", "op": "SelectiveAC.Config()"}[s.recompute]
    nodes = f"{max(1, s.gpus // gpus_per_node)}" if gpus_per_node else "$NNODES"
    per_node = f"{min(s.gpus, gpus_per_node)}" if gpus_per_node else "$GPUS_PER_NODE"
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"# save as {FUNCTION}.py where Python finds it, then on each node (torchtitan/config/README.md):",
              f"#   torchrun --nnodes {nodes} --nproc-per-node {per_node} --node-rank $NODE_RANK --master-addr "
              f"$MASTER_ADDR -m torchtitan.train --module {FUNCTION} --config {FUNCTION}"]
    if model.name not in TITAN_MODELS:
        lines.append(f"# torchtitan defines no {model.name}: its shape as a Llama-3 decoder; set config.hf_assets_path "
                     f"to a tokenizer of at most {model.vocab:,} tokens")
    if s.precision == "mxfp8":
        lines.append("# mxfp8: add MXFP8LinearConverter.Config() to the model's converters (model_registry(..., "
                     "converters=[...]))")
    lines += ["", *sorted(imports + ["from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC",
                                      "from torchtitan.trainer import Trainer"])]
    lines += ["", "", *defs] + (["", ""] if defs else [])
    lines += [f"def {FUNCTION}() -> Trainer.Config:",
              f'    """{s.short()}: {s.gpus} GPUs, global batch {s.global_batch} of {model.seq_len} tokens."""',
              f"    config = {base}"]
    if model.name not in TITAN_MODELS:
        lines += [f'    config.model_spec = model_registry("{model.name}")',
                  "    config.loss = ChunkedLossWrapper.Config(loss_fn=CrossEntropyLoss.Config("
                  "global_vocab_size=decoder_vocab_size(config.model_spec)))"]
    lines += ["    " + line for line in _parallelism(s, model)]
    lines += [f"    config.training.max_context_length = {model.seq_len}",
              f"    config.training.num_tokens_per_microbatch_per_dp_rank = {s.micro_batch * model.seq_len}",
              f"    config.training.num_tokens_per_train_step = {s.global_batch * model.seq_len}",
              f"    config.activation_checkpoint = {ac}"]
    if s.tp_comm_overlap:
        # CompileConfig: async TP pipelines the TP collectives with the GEMMs and requires torch.compile
        lines += ["    config.compile.enable = True", "    config.compile.enable_async_tensor_parallel = True"]
    lines.append("    return config")
    return "\n".join(lines) + "\n"
