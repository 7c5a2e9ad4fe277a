"""Launch hint for a CNN plan: a PyTorch DDP ``torchrun`` line and what stock PyTorch does not provide."""

from __future__ import annotations

from autoplan.families.base import Launcher, no_violations
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan


def pytorch_text(s: Plan, model: ModelSpec | None, header: str = "") -> str:
    """A PyTorch DDP launch hint (torchrun) for a CNN plan, with what stock PyTorch does not provide."""
    lines = [f"# {line}" for line in header.splitlines()]
    nodes_hint = "--nnodes $NNODES --nproc-per-node $GPUS_PER_NODE"
    lines.append(f"# {s.gpus} processes: data-parallel {s.dp} × pipeline {s.pp} × spatial {s.spatial} × channel "
                 f"{s.channel} × filter {s.filter}")
    lines.append(f"# per GPU: micro-batch {s.micro_batch}, {s.micro_batches} accumulation step(s) "
                 f"(model.no_sync() on all but the last), global batch {s.global_batch}")
    lines.append("# DistributedDataParallel(model, bucket_cap_mb=25, gradient_as_bucket_view=True): gradient "
                 "all-reduce overlapped with the backward; torch.autocast(dtype=torch.bfloat16)")
    if s.recompute == "full":
        lines.append("# activation checkpointing: torch.utils.checkpoint.checkpoint_sequential over the model")
    if s.pp > 1:
        lines.append(f"# pipeline: torch.distributed.pipelining with Schedule{'GPipe' if s.schedule == 'gpipe' else '1F1B'}"
                     f", {s.pp} stages split by compute time, micro-batch {s.micro_batch}")
    if s.spatial > 1:
        lines.append(f"# spatial {s.spatial}: no stock PyTorch API; shard H (D in 3D) and exchange halos per "
                     "convolution (LBANN DistConv, Dryden et al. IPDPS'19; or torch.distributed send/recv by hand)")
    if s.filter > 1 or s.channel > 1:
        lines.append("# filter/channel split: shard Conv weights along out/in channels with torch.distributed.tensor "
                     "(Shard(0)/Shard(1)) and all-gather/all-reduce activations per layer (Dryden et al. SC'19)")
    name = model.name if model is not None else "MODEL"
    lines.append(f"torchrun {nodes_hint} train.py --arch {name} --batch-size {s.micro_batch} "
                 f"--global-batch-size {s.global_batch}")
    return "\n".join(lines) + "\n"


def _pytorch(s: Plan, model: ModelSpec | None, cluster: ClusterSpec | None, header: str) -> str:
    return pytorch_text(s, model, header)


LAUNCHERS = {"cnn": (Launcher("pytorch", "PyTorch DDP", no_violations, _pytorch, framework=False),)}
"""A CNN launches as a torchrun DDP hint (Megatron-LM, torchtitan and DeepSpeed train transformers here)."""
