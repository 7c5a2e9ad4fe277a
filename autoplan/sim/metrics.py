"""Read a simulated step: throughput, FLOP rates, where each device's time went, memory."""

from __future__ import annotations

from dataclasses import dataclass, field

from autoplan.cost.memory import StageMemory
from autoplan.sim.engine import Timeline
from autoplan.sim.workload import Lowered

BREAKDOWN_KINDS = ("compute", "recompute", "tp", "cp", "pp", "dp", "optimizer", "bubble")
"""How a device's step time splits: useful compute, recomputation, exposed TP/CP/PP/DP communication,
the optimizer step, and pipeline bubble or idle time."""


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
        """Share of the step the GPUs wait on TP, CP, PP or DP communication."""
        return sum(self.fraction(k) for k in ("tp", "cp", "pp", "dp"))


def stage_breakdowns(lowered: Lowered, timeline: Timeline) -> list[dict[str, float]]:
    """Per stage: compute-stream time by kind, exposed PP/DP waits, and the rest as bubble."""
    tasks, start, end = lowered.tasks, timeline.start, timeline.end
    kind, deps = tasks.kind, tasks.deps
    makespan = timeline.makespan
    by_stream: dict[int, list[int]] = {r: [] for r in lowered.compute_streams}
    resource = tasks.resource
    for i in lowered.parts:                      # inserted in id order
        by_stream[resource[i]].append(i)
    out = []
    for r in lowered.compute_streams:
        acc = dict.fromkeys(BREAKDOWN_KINDS, 0.0)
        prev_end = 0.0
        for i in by_stream[r]:
            for k, sec in lowered.parts.get(i, ()):
                acc[k] += sec
            gap = start[i] - prev_end
            if gap > 0:
                waited = 0.0
                if deps[i]:
                    d = max(deps[i], key=end.__getitem__)
                    if kind[d] in ("pp", "dp"):
                        waited = min(gap, end[d] - max(prev_end, start[d]))
                        acc[kind[d]] += waited
                acc["bubble"] += gap - waited
            prev_end = end[i]
        acc["bubble"] += makespan - prev_end
        out.append(acc)
    return out


def activities(lowered: Lowered, timeline: Timeline) -> list[dict[str, float]]:
    """Busy seconds per stream of each stage device."""
    tasks = lowered.tasks
    busy = [0.0] * len(tasks.resources)
    for i, r in enumerate(tasks.resource):
        busy[r] += tasks.duration[i]
    out: list[dict[str, float]] = [{} for _ in range(lowered.stages)]
    for rid, name in enumerate(tasks.resources):
        stage, stream = name.split(".", 1)
        out[int(stage.removeprefix("stage"))][stream] = busy[rid]
    return out
