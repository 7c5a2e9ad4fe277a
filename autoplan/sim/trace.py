"""Chrome Trace Event JSON of a simulated step: open it in https://ui.perfetto.dev or chrome://tracing."""

from __future__ import annotations

import json
from pathlib import Path

from autoplan.sim.workload import Lowered
from autoplan.sim.engine import Timeline

_US = 1e6


def trace_events(lowered: Lowered, timeline: Timeline, layers_per_chunk: int = 0) -> list[dict]:
    """Trace events: one process per stage device, one thread per stream, times in microseconds.

    With ``layers_per_chunk`` each pass also shows its layers as nested spans.
    """
    tasks = lowered.tasks
    events: list[dict] = []
    threads: dict[int, tuple[int, int]] = {}
    for rid, name in enumerate(tasks.resources):
        stage, stream = name.split(".", 1)
        pid = int(stage.removeprefix("stage"))
        tid = len([t for t in threads.values() if t[0] == pid])
        threads[rid] = (pid, tid)
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": stream}})
        if tid == 0:
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": f"pipeline stage {pid}"}})
    for i, dur in enumerate(tasks.duration):
        if dur <= 0:
            continue
        pid, tid = threads[tasks.resource[i]]
        name, args = _name(lowered, i, tasks.kind[i])
        ts = timeline.start[i] * _US
        events.append({"ph": "X", "name": name, "cat": tasks.kind[i], "pid": pid, "tid": tid, "ts": ts,
                       "dur": dur * _US, "args": args})
        if layers_per_chunk and i in lowered.meta:
            step = dur * _US / layers_per_chunk
            for layer in range(layers_per_chunk):
                events.append({"ph": "X", "name": f"layer {layer}", "cat": "layer", "pid": pid, "tid": tid,
                               "ts": ts + layer * step, "dur": step})
    return events


def _name(lowered: Lowered, i: int, kind: str) -> tuple[str, dict]:
    meta = lowered.meta.get(i)
    parts = {k: round(v * _US, 3) for k, v in lowered.parts.get(i, ())}
    if meta is not None:
        stage, forward, mb, chunk = meta
        label = f"{'F' if forward else 'B'}{mb}" + (f".c{chunk}" if chunk else "")
        return label, {"micro_batch": mb, "chunk": chunk, "us_by_kind": parts}
    return {"pp": "send", "dp": "dp collective", "optimizer": "optimizer"}.get(kind, kind), {"us_by_kind": parts}


def write_trace(path: Path, lowered: Lowered, timeline: Timeline, layers_per_chunk: int = 0) -> None:
    """Write the trace JSON to ``path``."""
    Path(path).write_text(json.dumps({"traceEvents": trace_events(lowered, timeline, layers_per_chunk),
                                      "displayTimeUnit": "ms"}))
