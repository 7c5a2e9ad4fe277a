"""Why a step takes as long as it does: the chain of tasks that sets it (the critical path) and how much later
every other stream's work could run without lengthening it (its slack).

The engine records, for each task, the predecessor whose end set its start (``engine.run(..., why=True)``); the
chain is that relation walked back from the task that ends last (the critical path method, Kelley & Walker
1959). Consecutive tasks of the chain on one stream form a segment: "stage 7 compute, F3 .. B95, 8.1 s".
"""

from __future__ import annotations

from dataclasses import dataclass

from autoplan.sim.engine import Timeline, critical_path, slack
from autoplan.sim.workload import Lowered

_COLLECTIVES = {"segment_reduce": "grad reduce", "reduce_all": "grad reduce", "shard_reduce": "grad reduce-scatter",
                "param_gather": "param gather", "param_gather_rest": "param gather", "shard_gather": "param gather",
                "final_gather": "param gather",
                "tied": "tied-embedding all-reduce", "hop": "send"}
"""How a communication task is named, by its slot's key (``Lowered.slot_key``)."""


@dataclass(frozen=True, kw_only=True)
class Segment:
    """Consecutive tasks of the critical path on one stream."""

    stage: int
    stream: str
    """compute, pp_send_fwd, pp_send_bwd or dp."""
    kind: str
    """What its tasks are: forward, backward, B, W, F&B, send, grad reduce, optimizer, … joined by '+'."""
    first: str
    """Label of its first task (F0, B95.c1, send, …)."""
    last: str
    tasks: int
    seconds: float
    share: float
    """Of the step time."""


@dataclass(frozen=True, kw_only=True)
class StreamSlack:
    """How much later a stream's work could end without moving the step's end."""

    stage: int
    stream: str
    busy: float
    """Seconds it runs tasks."""
    slack: float
    """The least total float of its tasks (0 on the critical path)."""
    critical: bool
    """Some of its tasks are on the critical path."""


@dataclass(frozen=True, kw_only=True)
class CriticalPath:
    """The chain of tasks that sets a simulated step, and every stream's slack."""

    step: float
    segments: tuple[Segment, ...]
    streams: tuple[StreamSlack, ...]
    tasks: tuple[int, ...]
    """The chain's task ids, first to last (zero-length tasks included)."""

    kinds: dict[str, float]
    """Seconds of the chain by kind (BREAKDOWN_KINDS: a pass's compute, recompute, TP/CP/EP parts; pp, dp
    transfers; optimizer)."""


def task_label(lowered: Lowered, i: int) -> tuple[str, str]:
    """(label, kind) of task ``i``: ("F3.c1", "forward") for a pass, ("send", "send") for a PP transfer, …"""
    meta = lowered.meta.get(i)
    kind = lowered.tasks.kind[i]
    if meta is not None:
        _, forward, mb, chunk, part = meta
        name = "F" if forward else "F&B" if part == "&" else part or "B"
        what = {"F": "forward", "B": "backward" if not part else "B", "W": "W", "F&B": "F&B"}[name]
        return f"{name}{mb}" + (f".c{chunk}" if chunk else ""), what
    if kind == "optimizer":
        return "optimizer", "optimizer"
    key = lowered.slot_key(i)
    name = _COLLECTIVES.get(key[0] if isinstance(key, tuple) else key, kind)
    return name, name


def analyse_path(lowered: Lowered, timeline: Timeline) -> CriticalPath:
    """The critical path of ``timeline`` (from ``run(..., why=True)``) and the slack of every stream."""
    tasks = lowered.tasks
    chain = critical_path(timeline)
    step = timeline.makespan
    segments: list[Segment] = []
    run: list[int] = []
    for i in [j for j in chain if tasks.duration[j] > 0]:
        if run and tasks.resource[run[-1]] != tasks.resource[i]:
            segments.append(_segment(lowered, run, step))
            run = []
        run.append(i)
    if run:
        segments.append(_segment(lowered, run, step))
    return CriticalPath(step=step, segments=tuple(segments), streams=_streams(lowered, timeline, set(chain)),
                        tasks=tuple(chain), kinds=_kinds(lowered, chain))


def _kinds(lowered: Lowered, chain: list[int]) -> dict[str, float]:
    parts, tasks = lowered.parts, lowered.tasks
    out: dict[str, float] = {}
    for i in chain:
        own = parts.get(i, ())
        # a transfer's seconds (with what sharing its links added) count as its kind (pp, dp)
        rest = tasks.duration[i] - sum(sec for _, sec in own)
        for k, sec in own + (((tasks.kind[i], rest),) if rest > 1e-15 * max(1.0, tasks.duration[i]) else ()):
            if sec > 0:
                out[k] = out.get(k, 0.0) + sec
    return out


def _where(name: str) -> tuple[int, str]:
    stage, stream = name.split(".", 1)
    return int(stage.removeprefix("stage")), stream


def _segment(lowered: Lowered, ids: list[int], step: float) -> Segment:
    stage, stream = _where(lowered.tasks.resources[lowered.tasks.resource[ids[0]]])
    labels = [task_label(lowered, i) for i in ids]
    kinds = list(dict.fromkeys(k for _, k in labels))
    seconds = sum(lowered.tasks.duration[i] for i in ids)
    named = [label for i, (label, _) in zip(ids, labels) if i in lowered.meta] or [label for label, _ in labels]
    return Segment(stage=stage, stream=stream, kind="+".join(kinds), first=named[0], last=named[-1],
                   tasks=len(ids), seconds=seconds, share=seconds / step if step else 0.0)


def _streams(lowered: Lowered, timeline: Timeline, chain: set[int]) -> tuple[StreamSlack, ...]:
    tasks = lowered.tasks
    floats = slack(timeline, lowered.plan)
    least: dict[int, float] = {}
    busy: dict[int, float] = {}
    on_path: set[int] = set()
    for i, r in enumerate(tasks.resource):
        if tasks.duration[i] <= 0:
            continue
        busy[r] = busy.get(r, 0.0) + tasks.duration[i]
        least[r] = min(least.get(r, floats[i]), floats[i])
        if i in chain:
            on_path.add(r)
    out = []
    for r in sorted(busy, key=lambda r: (_where(tasks.resources[r]), r)):
        stage, stream = _where(tasks.resources[r])
        out.append(StreamSlack(stage=stage, stream=stream, busy=busy[r], slack=0.0 if r in on_path else max(0.0, least[r]),
                               critical=r in on_path))
    return tuple(out)


def path_dict(path: CriticalPath) -> dict:
    """The critical path as plain JSON (seconds, shares of the step)."""
    return {"step_time_s": path.step,
            "segments": [{"stage": s.stage, "stream": s.stream, "kind": s.kind, "first": s.first, "last": s.last,
                          "tasks": s.tasks, "seconds": s.seconds, "share": s.share} for s in path.segments],
            "by_kind_s": path.kinds,
            "streams": [{"stage": s.stage, "stream": s.stream, "busy_s": s.busy, "slack_s": s.slack,
                         "critical": s.critical} for s in path.streams]}
