"""What a plan's step costs, as the simulator's workload asks for it: pass seconds, the communication each
step needs, and the optimizer step. Plain records; the formulas live in the model family's modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from autoplan.hardware.network import GroupShape

PassKey = tuple[bool, bool, bool]
"""(forward, holds the embedding, holds the output layer): the kinds of chunk pass."""


PART_KINDS = ("compute", "recompute", "tp", "cp", "ep", "pp", "dp", "a2a", "optimizer")
"""What a compute-stream task's seconds may be spent on (the simulator's breakdown adds ``bubble``)."""


@dataclass(frozen=True, slots=True)
class PassCost:
    """Seconds of one chunk pass on the compute stream, and how they split by kind."""

    seconds: float
    parts: tuple[tuple[str, float], ...]


def pass_cost(*parts: tuple[str, float]) -> PassCost:
    """A pass made of ``(kind, seconds)`` parts; parts of zero seconds are left out."""
    kept = tuple(p for p in parts if p[1] > 0)
    return PassCost(sum(p[1] for p in kept), kept)


def with_part(cost: PassCost, kind: str, seconds: float) -> PassCost:
    """``cost`` lasting ``seconds`` longer, spent on ``kind`` (added to that kind's part when it has one)."""
    parts = dict(cost.parts)
    parts[kind] = parts.get(kind, 0.0) + seconds
    return PassCost(cost.seconds + seconds, tuple(parts.items()))


def host_bound(cost: PassCost, host_seconds: float) -> PassCost:
    """``cost`` when the host issues the pass in ``host_seconds`` or less; else the pass lasts as long as the host
    takes, the GPU waiting (counted as compute: the stream is held) for the difference."""
    # an eager framework's host runs ahead of the GPU and binds only when it issues slower than the GPU runs
    # (hardware/compute.host_exposed, unsynced)
    wait = host_seconds - cost.seconds
    if wait <= 0:
        return cost
    parts = dict(cost.parts)
    parts["compute"] = parts.get("compute", 0.0) + wait
    return pass_cost(*parts.items())


def pipelined_gather_lead(gather: float, forward: float, buckets: int) -> float:
    """Seconds a chunk's first forward waits for weights all-gathered bucket by bucket (``gather`` seconds over
    ``buckets`` buckets) while it runs (``forward`` seconds): the first bucket, then whatever later buckets arrive
    after the layers before them are done."""
    # Megatron-Core DDP forward pre-hooks (param_and_grad_buffer.py finish_param_sync): a module waits for its own
    # bucket's all-gather, and waiting on one dispatches the next; bucket j + 1 arrives g after layer group j
    # starts, so group j starts at g + j·max(f, g) and the forward ends g + (n − 1)·max(0, g − f) late
    if buckets <= 1:
        return gather
    g, f = gather / buckets, forward / buckets
    return g + (buckets - 1) * max(0.0, g - f)


def split_backward(backward: PassCost, weight: PassCost) -> tuple[PassCost, PassCost]:
    """A backward pass as its B part (input gradients: the rest of its compute, its recompute and its TP/CP
    communication) and its W part (``weight``, all compute); the two add up to ``backward``."""
    w = weight.seconds
    parts = tuple((k, x - w) if k == "compute" else (k, x) for k, x in backward.parts)
    return PassCost(backward.seconds - w, parts), weight


COMPUTE_KINDS = ("compute", "recompute", "optimizer")
"""Part kinds that occupy the GPU's SMs; the others are communication a concurrent pass can hide."""


PAIR_COMM_SMS = 20
"""SMs the communication kernels of a fused forward-backward pair hold while the other chunk computes (DeepSeek-V3,
arXiv 2412.19437 §3.2.2: 20 of an H800's 132 SMs saturate its IB and NVLink bandwidth)."""


def overlapped(a: PassCost, b: PassCost, comm_share: float = 0.0) -> PassCost:
    """Two passes of different micro-batches run as one (DualPipe's overlapped forward and backward chunks): their
    compute adds up, and each one's communication hides under the other's compute, only the excess showing. The
    compute that hides communication runs on the SMs its kernels leave: ``comm_share`` of its speed is lost for
    as long as they run."""
    # DeepSeek-V3 report (arXiv 2412.19437) §3.2.1: a forward and a backward chunk overlap so that the
    # communication of one runs during the computation of the other
    def split(c: PassCost) -> tuple[float, dict[str, float]]:
        comm = {k: x for k, x in c.parts if k not in COMPUTE_KINDS}
        return c.seconds - sum(comm.values()), comm

    comp_a, comm_a = split(a)
    comp_b, comm_b = split(b)
    parts: dict[str, float] = {}
    for k, x in a.parts + b.parts:
        if k in COMPUTE_KINDS:
            parts[k] = parts.get(k, 0.0) + x
    for comm, cover in ((comm_a, comp_b), (comm_b, comp_a)):
        total = sum(comm.values())
        shown = max(0.0, total - cover) / total if total else 0.0
        for k, x in comm.items():
            parts[k] = parts.get(k, 0.0) + x * shown
        # §3.2.2: the hidden transfers' kernels keep ``comm_share`` of the SMs from the covering compute
        parts["compute"] = parts.get("compute", 0.0) + total * (1.0 - shown) * comm_share
    return pass_cost(*parts.items())


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCosts:
    """Seconds of every kind of task in one training step of one representative pipeline.

    ``None`` marks communication the step does not need (the workload then adds no task for it); a zero
    float for the ZeRO-2/3 per-pass collectives means the same.
    """

    passes: Mapping[PassKey, PassCost]
    """A chunk pass's cost by kind (see ``PassKey``)."""
    optimizer: tuple[float, ...]
    """Per stage, the optimizer step on its compute stream."""
    hop: float
    """One micro-batch's activations (or their gradients) sent to the neighbouring stage; 0 with one stage."""
    segments: int
    """Pieces of a chunk's last backward, each reducing its gradients as it ends (0: no overlapped reduction)."""
    segment_reduce: float | None
    """DP reduction of one piece's gradients (ZeRO < 2)."""
    param_gather: float | None
    """Overlapped all-gather of a chunk's sharded weights before its first forward."""
    shard_gather: float
    """ZeRO-3 all-gather of a chunk's weights before every pass (0: none)."""
    shard_reduce: float
    """ZeRO-2/3 reduce-scatter of a chunk's gradients after every backward (0: none)."""
    reduce_all: tuple[float, ...] | None
    """Per stage, one gradient reduction after the whole backward (no overlap)."""
    final_gather: tuple[float, ...] | None
    """Per stage, an all-gather of the updated weights after the optimizer (no overlap)."""
    tied: float | None
    """All-reduce of the tied embedding's gradient between the first and last stage."""
    weight_grad: Mapping[tuple[bool, bool], PassCost] | None = None
    """For schedules that split the backward (zero bubble), the W part of a backward pass by (holds the
    embedding, holds the output layer); its B part is the rest. None: the schedule runs whole backwards."""
    param_gather_lead: float | None = None
    """Of ``param_gather``, the seconds a chunk's first forward waits for (``pipelined_gather_lead``: the
    weights arrive bucket by bucket); the rest overlaps it. None: the whole gather."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommNeed:
    """One collective or transfer a plan needs, for ``autoplan check``: where, what, how big, how long."""

    group: str
    """The parallel group it runs in (tp, cp, pp, dp; ep, etp, edp for MoE experts)."""
    op: str
    """all_reduce, reduce_scatter, all_gather or send_recv."""
    shape: GroupShape
    nbytes: float
    """Buffer bytes per member."""
    seconds: float
    when: str
    """How often it runs, in words."""


COMM_OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv")
"""The kinds of ``CommNeed.op``."""


@dataclass(frozen=True, kw_only=True)
class StageMemory:
    """Bytes per GPU of one pipeline stage, by what they hold."""

    stage: int
    """Pipeline stage, 0-based."""
    weights: float
    """bf16 weights (sharded over dp·cp under ZeRO-3)."""
    gradients: float
    """fp32 gradients (sharded over dp·cp under ZeRO ≥ 2)."""
    optimizer: float
    """fp32 master weights and Adam moments (sharded over dp·cp under ZeRO ≥ 1)."""
    activations: float
    """Activations of the transformer layers held at the stage's peak (all in-flight micro-batches)."""
    embedding: float
    """Activations of the input embedding (first stage) and of the output layer and fp32 logits (last stage)."""
    buffers: float
    """Buffers beside the model state and the stored activations: the full weights of the layers that ZeRO-3
    gathers, the unsharded gradients of the layer that ZeRO-2 reduce-scatters next, Transformer Engine's placeholder
    weight gradients, the gradients the backward running at the peak holds."""
    reserve: float
    """Bytes not available to tensors (CUDA context, NCCL, allocator fragmentation), from the cluster spec."""

    @property
    def total(self) -> float:
        """Every byte this stage needs on one GPU."""
        return (self.weights + self.gradients + self.optimizer + self.activations + self.embedding
                + self.buffers + self.reserve)
