"""Read a simulated step: throughput, FLOP rates, where each device's time went, memory."""

from __future__ import annotations

from dataclasses import dataclass, field

from autoplan.families.costs import StageMemory
from autoplan.sim.engine import Timeline
from autoplan.sim.workload import Lowered

BREAKDOWN_KINDS = ("compute", "recompute", "tp", "cp", "ep", "pp", "dp", "a2a", "optimizer", "bubble")
"""How a device's step time splits: useful compute, recomputation, exposed TP/CP/EP/PP/DP communication (EP: the
MoE all-to-alls) and the embedding all-to-alls of a DLRM (a2a), the optimizer step, and pipeline bubble or idle
time."""


@dataclass(frozen=True, kw_only=True)
class Metrics:
    """What one simulated training step of a plan achieves."""

    step_time: float
    """Seconds per optimizer step."""
    tokens_per_s: float
    """Tokens per second for the whole cluster."""
    samples_per_s: float
    """Sequences per second for the whole cluster."""
    model_tflops_per_gpu: float
    """Model FLOPs (no recompute) per second per GPU, in TFLOP/s."""
    hardware_tflops_per_gpu: float
    """FLOPs executed including recomputation, per second per GPU, in TFLOP/s."""
    mfu: float
    """Model FLOPs utilisation: model FLOP/s over peak (PaLM, Chowdhery et al. 2022, App. B)."""
    hfu: float
    """Hardware FLOPs utilisation: executed FLOP/s (with recompute) over peak."""
    breakdown: dict[str, float]
    """Seconds of the step by kind, averaged over pipeline stages (sums to step_time)."""
    stage_breakdown: tuple[dict[str, float], ...]
    """The same per stage."""
    activity: tuple[dict[str, float], ...]
    """Busy seconds of each stream, per stage device."""
    memory: tuple[StageMemory, ...]
    """Per-GPU memory of each stage."""
    peak_memory: float
    """Bytes on the fullest GPU."""
    memory_capacity: float
    """Usable bytes per GPU (HBM)."""
    fits: bool = field(default=True)
    """Every stage fits in HBM."""

    def fraction(self, kind: str) -> float:
        """Share of the step spent on ``kind`` (one of BREAKDOWN_KINDS)."""
        return self.breakdown.get(kind, 0.0) / self.step_time if self.step_time else 0.0

    @property
    def exposed_comm_fraction(self) -> float:
        """Share of the step the GPUs wait on TP, CP, EP, PP, DP or embedding all-to-all communication."""
        return sum(self.fraction(k) for k in ("tp", "cp", "ep", "pp", "dp", "a2a"))


def stage_breakdowns(lowered: Lowered, timeline: Timeline) -> list[dict[str, float]]:
    """Per stage: compute-stream time by kind, exposed PP/DP waits, and the rest as bubble."""
    start, end = timeline.start, timeline.end
    kind, deps = lowered.tasks.kind, lowered.tasks.deps
    makespan = timeline.makespan
    out = []
    for ids, parts in zip(lowered.compute_tasks, lowered.stage_parts()):
        acc = dict.fromkeys(BREAKDOWN_KINDS, 0.0)
        acc.update(parts)
        prev_end = 0.0
        for i in ids:
            t = start[i]
            gap = t - prev_end
            if gap > 0:
                # an idle gap, ended by the first dependency to end at t (a task starts at the latest end of its
                # stream's previous task and its dependencies): exposed communication if a PP/DP transfer
                for d in deps[i]:
                    if end[d] == t:
                        break
                k = kind[d]
                if k == "pp" or k == "dp":
                    waited = min(gap, t - max(prev_end, start[d]))
                    acc[k] += waited
                    acc["bubble"] += gap - waited
                else:
                    acc["bubble"] += gap
            prev_end = end[i]
        acc["bubble"] += makespan - prev_end
        out.append(acc)
    return out


def activities(lowered: Lowered, timeline: Timeline) -> list[dict[str, float]]:
    """Busy seconds per stream of each stage device."""
    out: list[dict[str, float]] = [{} for _ in range(lowered.stages)]
    for name, busy in zip(lowered.tasks.resources, lowered.busy()):
        stage, stream = name.split(".", 1)
        out[int(stage.removeprefix("stage"))][stream] = busy
    return out
