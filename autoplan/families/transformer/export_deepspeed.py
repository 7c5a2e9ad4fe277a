"""A transformer plan as a DeepSpeed launch: ``ds_config.json`` and the ``deepspeed`` launcher line, as a shell
snippet that writes the one and runs the other.

Keys are those DeepSpeed reads at the commit in ``tests/fixtures/frameworks/deepspeed.json`` (runtime/constants.py,
runtime/config.py and the pydantic sections: zero/config.py DeepSpeedZeroConfig, tensor_parallel/config.py
TPTrainingConfig, precision_config.py, activation_checkpointing/config.py); the test checks every one against it.
"""

from __future__ import annotations

import json

from autoplan.errors import SpecError
from autoplan.families.transformer.frameworks import deepspeed_violations, refuse
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

CONFIG = "ds_config.json"
"""The file the snippet writes."""


def ds_config(s: Plan) -> dict:
    """The ds_config of plan ``s`` (DeepSpeed's data-parallel size is world / (pp·tp·sequence_parallel_size))."""
    cfg: dict = {"train_batch_size": s.global_batch, "train_micro_batch_size_per_gpu": s.micro_batch,
                 "gradient_accumulation_steps": s.micro_batches, "gradient_clipping": 1.0, "steps_per_print": 10,
                 "bf16": {"enabled": True},
                 # docs/_tutorials/zero.md: stage, overlap_comm (reduce during the backward), contiguous_gradients
                 "zero_optimization": {"stage": s.zero, "overlap_comm": s.overlap_grad_reduce,
                                       "contiguous_gradients": True, "reduce_scatter": True},
                 # runtime/constants.py COMMUNICATION_DATA_TYPE: the dtype of the gradient reduction
                 "communication_data_type": "fp32" if s.grad_reduce_in_fp32 else "bf16"}
    if s.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": s.tp}          # docs/_tutorials/autotp-training.md
    if s.cp > 1:
        cfg["sequence_parallel_size"] = s.cp                    # Ulysses (docs/_tutorials/ulysses-alst-…)
    if s.recompute == "full":
        # runtime/activation_checkpointing/config.py; the model wraps each layer in deepspeed.checkpointing.checkpoint
        cfg["activation_checkpointing"] = {"partition_activations": False, "contiguous_memory_optimization": False}
    return cfg


def deepspeed_text(s: Plan, model: ModelSpec | None, header: str = "", gpus_per_node: int | None = None) -> str:
    """A shell snippet: write ds_config.json, then launch with ``deepspeed``; SpecError when DeepSpeed cannot
    launch the plan as planned."""
    if model is not None:
        refuse("DeepSpeed", "deepspeed", deepspeed_violations(model, s))
    elif s.pp > 1 and s.zero >= 2:
        raise SpecError(f"DeepSpeed's pipeline engine refuses ZeRO-{s.zero}")
    nodes = f"{max(1, s.gpus // gpus_per_node)}" if gpus_per_node else "$NNODES"
    per_node = f"{min(s.gpus, gpus_per_node)}" if gpus_per_node else "$GPUS_PER_NODE"
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append(f"# data-parallel size {s.dp} follows from the world size: {s.gpus} GPUs / (pp {s.pp} · tp {s.tp}"
                 f" · sequence parallel {s.cp})")
    if s.pp > 1:
        ckpt = 1 if s.recompute == "full" else 0
        lines.append(f"# train.py builds PipelineModule(layers, num_stages={s.pp}, partition_method=\"uniform\", "
                     f"activation_checkpoint_interval={ckpt}) and calls engine.train_batch() (runtime/pipe)")
    elif s.recompute == "full":
        lines.append("# train.py wraps each transformer layer in deepspeed.checkpointing.checkpoint")
    if s.cp > 1:
        lines.append("# train.py wraps attention in UlyssesSPAttentionHF / DistributedAttention (Ulysses)")
    if model is not None:
        lines.append(f"# model: {model.name}, sequences of {model.seq_len} tokens (train.py builds it)")
    lines += [f"cat > {CONFIG} <<'EOF'", json.dumps(ds_config(s), indent=2), "EOF",
              f"deepspeed --num_nodes {nodes} --num_gpus {per_node} --hostfile hostfile train.py --deepspeed "
              f"--deepspeed_config {CONFIG}"]
    return "\n".join(lines) + "\n"
