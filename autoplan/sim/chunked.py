"""A chunked collective schedule as events in the simulator's engine: one task per chunk phase on its dimension's
link stream, so that chunks overlap across dimensions (Rashidi et al., Themis, ISCA 2022: per-dimension queues).

Each phase of ``autoplan.hardware.themis`` becomes two tasks: its bytes on the dimension's link stream (the links are
busy sent/B) and its per-step latency on the chunk's own stream (latency delays the chunk, not the links). Tasks
enter each link stream in the order the schedule served them, so the engine's in-order streams replay it: its
makespan is the schedule's time and each link stream's busy time the dimension's.

The step simulation (``workload.py``) keeps one task per collective, priced by this schedule's time: lowering every
DP bucket into 2·chunks·dimensions tasks would multiply the task graph a search simulates per plan by hundreds.
"""

from __future__ import annotations

from autoplan.hardware.themis import CollectiveTime, chunk_phases, phase
from autoplan.sim.engine import Tasks, Timeline, run


def lower(ct: CollectiveTime, tasks: Tasks | None = None, after: tuple[int, ...] = (), prefix: str = "") -> Tasks:
    """Append ``ct``'s chunk phases to ``tasks`` (a new graph if None), each chunk starting after ``after``."""
    tasks = Tasks() if tasks is None else tasks
    links = [tasks.stream(f"{prefix}{d.name or f'dim{i + 1}'}.links") for i, d in enumerate(ct.dims)]
    plans = chunk_phases(ct)
    last: dict[int, int] = {}
    for _, d, c, k in ct.starts:
        sent, seconds = phase(ct.dims[d], plans[c][k][1])
        deps = (last[c],) if c in last else after
        wire = tasks.add(links[d], sent / ct.dims[d].bandwidth, deps, kind="collective",
                         label=f"chunk {c} phase {k} on {ct.dims[d].name}")
        # the phase's remaining steps·α + its latency share, on the chunk's stream: it delays the chunk only
        last[c] = tasks.add(tasks.stream(f"{prefix}chunk{c}"), seconds - sent / ct.dims[d].bandwidth, (wire,),
                            kind="latency", label=f"chunk {c} phase {k} latency")
    return tasks


def simulate(ct: CollectiveTime) -> Timeline:
    """The engine's timeline of ``ct`` alone."""
    return run(lower(ct))


def trace_events(timeline: Timeline) -> list[dict]:
    """Chrome/Perfetto trace events of a lowered collective: one row per link stream and per chunk (µs)."""
    tasks = timeline.tasks
    rows = {name: i for i, name in enumerate(sorted(tasks.resources, key=lambda n: (not n.endswith(".links"), n)))}
    events = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}}
              for name, tid in rows.items()]
    for i, (start, end) in enumerate(zip(timeline.start, timeline.end)):
        if end > start:
            events.append({"name": tasks.label[i], "cat": tasks.kind[i], "ph": "X", "pid": 0,
                           "tid": rows[tasks.resources[tasks.resource[i]]], "ts": start * 1e6, "dur": (end - start) * 1e6})
    return events
