"""What a plan's step costs, as the simulator's workload asks for it: pass seconds, the communication each
step needs, and the optimizer step. Plain records; the formulas live in the model family's modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from autoplan.cost.network import GroupShape

PassKey = tuple[bool, bool, bool]
"""(forward, holds the embedding, holds the output layer): the kinds of chunk pass."""


PART_KINDS = ("compute", "recompute", "tp", "cp", "pp", "dp", "a2a", "optimizer")
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


@dataclass(frozen=True, slots=True, kw_only=True)
class CommNeed:
    """One collective or transfer a plan needs, for ``autoplan check``: where, what, how big, how long."""

    group: str
    """The parallel group it runs in (tp, cp, pp, dp)."""
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
