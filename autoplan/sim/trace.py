"""Chrome Trace Event JSON of a simulated step: open it in https://ui.perfetto.dev or chrome://tracing.

A trace holds at most ``MAX_EVENTS`` events: passes show their layers only while that bound holds, and a step
with more tasks than the bound merges each stream's consecutive tasks into spans. Written gzip'd for a ``.gz``
path (Perfetto opens it as is).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

from autoplan.sim.critical import CriticalPath, analyse_path
from autoplan.sim.workload import Lowered
from autoplan.sim.engine import Timeline

_US = 1e6
MAX_EVENTS = 200_000
"""Most events in a trace (~30 MB of JSON, ~4 MB gzip'd): beyond it, detail is merged (see ``trace_events``)."""
GZIP_LEVEL = 3
"""zlib level of a gzip'd trace: measured on GPT-3/1024's best plans (2-7 MB of JSON), a third of level 6's CPU for
files 27 % larger (level 6 took 0.13 s of the headline's 2.6 s for its three traces)."""


def trace_events(lowered: Lowered, timeline: Timeline, layers_per_chunk: int = 0,
                 max_events: int = MAX_EVENTS) -> list[dict]:
    """Trace events: one process per stage device, one thread per stream, times in microseconds.

    With ``layers_per_chunk`` above 1 each pass also shows its layers as nested spans, if the trace then stays
    within ``max_events`` (a chunk of one layer has none: its span would repeat the pass's). If even one event per
    task exceeds it, each stream's consecutive tasks are merged into spans (named "F3 .. B1", with their task count
    and busy time), so that the whole stays within the bound.
    """
    tasks = lowered.tasks
    events, threads, chain, shown, layers_per_chunk, merged = _layout(lowered, timeline, layers_per_chunk, max_events)
    if merged is not None:
        return events + merged
    for i in shown:
        pid, tid = threads[tasks.resource[i]]
        name, args = _name(lowered, i, tasks.kind[i])
        if i in chain:
            args["critical"] = True
        ts, dur = timeline.start[i] * _US, tasks.duration[i] * _US
        events.append({"ph": "X", "name": name, "cat": tasks.kind[i], "pid": pid, "tid": tid, "ts": _r(ts),
                       "dur": max(_r(dur), 0.001), "args": args})
        if layers_per_chunk and i in lowered.meta:
            step = dur / layers_per_chunk
            for layer in range(layers_per_chunk):
                events.append({"ph": "X", "name": f"layer {layer}", "cat": "layer", "pid": pid, "tid": tid,
                               "ts": _r(ts + layer * step), "dur": _r(step)})
    return events


def _chain_events(path: CriticalPath, timeline: Timeline, pid: int) -> list[dict]:
    """A "critical path" process below the stages: one span per segment of the chain, where it ran."""
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "critical path"}},
                          {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "sets the step"}}]
    ids = [i for i in path.tasks if timeline.end[i] > timeline.start[i]]
    k = 0
    for seg in path.segments:
        run, k = ids[k:k + seg.tasks], k + seg.tasks
        ts = timeline.start[run[0]] * _US
        name = f"stage {seg.stage} {seg.stream}: " + (seg.first if seg.first == seg.last else f"{seg.first} .. {seg.last}")
        events.append({"ph": "X", "name": name, "cat": "critical", "pid": pid, "tid": 0, "ts": _r(ts),
                       "dur": max(_r(timeline.end[run[-1]] * _US - ts), 0.001),
                       "args": {"tasks": seg.tasks, "kind": seg.kind, "busy_us": _r(seg.seconds * _US),
                                "share_of_step": round(seg.share, 6)}})
    return events


def _layout(lowered: Lowered, timeline: Timeline, layers_per_chunk: int,
            max_events: int) -> tuple[list[dict], dict, set[int], list[int], int, list[dict] | None]:
    """What ``trace_events`` and ``trace_json`` both start from: the process and thread events (with the critical
    path's track where the timeline records what set each start), each stream's (pid, tid), the critical path's
    tasks, the tasks shown (those that take time), ``layers_per_chunk`` (0 where the layers would exceed
    ``max_events``), and the merged spans where even one event per task would (else None)."""
    head, threads = _thread_events(lowered)
    chain: set[int] = set()
    if timeline.cause is not None:
        # the chain that sets the step: its own track, and ``critical`` on each of its spans
        path = analyse_path(lowered, timeline)
        chain = set(path.tasks)
        head += _chain_events(path, timeline, lowered.stages)
    shown = [i for i, dur in enumerate(lowered.tasks.duration) if dur > 0]
    budget = max(1, max_events - len(head))
    if layers_per_chunk == 1 or (layers_per_chunk and len(shown) + layers_per_chunk * len(lowered.meta) > budget):
        layers_per_chunk = 0
    merged = _merged(lowered, timeline, shown, threads, budget, chain) if len(shown) > budget else None
    return head, threads, chain, shown, layers_per_chunk, merged


def _r(us: float) -> float:
    """Microseconds to the nanosecond: the trace's resolution, and a third shorter than ``repr`` digits."""
    return round(us, 3)


def _thread_events(lowered: Lowered) -> tuple[list[dict], dict[int, tuple[int, int]]]:
    """Name events for every stage (process) and stream (thread), and each resource's (pid, tid)."""
    events: list[dict] = []
    threads: dict[int, tuple[int, int]] = {}
    for rid, name in enumerate(lowered.tasks.resources):
        stage, stream = name.split(".", 1)
        pid = int(stage.removeprefix("stage"))
        tid = len([t for t in threads.values() if t[0] == pid])
        threads[rid] = (pid, tid)
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": stream}})
        if tid == 0:
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": f"pipeline stage {pid}"}})
    return events, threads


def _merged(lowered: Lowered, timeline: Timeline, shown: list[int], threads: dict[int, tuple[int, int]],
            budget: int, chain: set[int] = frozenset()) -> list[dict]:
    """Each stream's tasks in runs of ``group`` consecutive ones, one span per run from the first's start to the
    last's end (with the run's task count and busy time): at most ``budget`` spans."""
    tasks, meta, kind, duration = lowered.tasks, lowered.meta, lowered.tasks.kind, lowered.tasks.duration
    by_stream: dict[int, list[int]] = {}
    for i in shown:
        by_stream.setdefault(tasks.resource[i], []).append(i)
    group = math.ceil(len(shown) / max(1, budget - len(by_stream)))   # a stream's last run may be short
    events = []
    for r, ids in by_stream.items():
        pid, tid = threads[r]
        for k in range(0, len(ids), group):
            run = ids[k:k + group]
            first, last = run[0], run[-1]
            kinds = {kind[j] for j in run}
            name = _label(meta.get(first), kind[first])
            if len(run) > 1:
                name = f"{name} .. {_label(meta.get(last), kind[last])}"
            ts = timeline.start[first] * _US
            events.append({"ph": "X", "name": name, "cat": kinds.pop() if len(kinds) == 1 else "merged",
                           "pid": pid, "tid": tid, "ts": _r(ts), "dur": _r(timeline.end[last] * _US - ts),
                           "args": {"tasks": len(run), "busy_us": _r(sum(map(duration.__getitem__, run)) * _US)}
                                   | ({"critical": True} if chain.intersection(run) else {})})
    return events


def _name(lowered: Lowered, i: int, kind: str) -> tuple[str, dict]:
    meta = lowered.meta.get(i)
    parts = {k: round(v * _US, 3) for k, v in lowered.parts.get(i, ())}
    if meta is not None:
        return _label(meta, kind), {"micro_batch": meta[2], "chunk": meta[3], "us_by_kind": parts}
    return _label(meta, kind), {"us_by_kind": parts}


def _label(meta: tuple[int, bool, int, int, str] | None, kind: str) -> str:
    if meta is not None:
        _, forward, mb, chunk, part = meta
        return f"{'F' if forward else 'F&B' if part == '&' else part or 'B'}{mb}" + (f".c{chunk}" if chunk else "")
    return {"pp": "send", "dp": "dp collective", "optimizer": "optimizer"}.get(kind, kind)


def trace_json(lowered: Lowered, timeline: Timeline, layers_per_chunk: int = 0, max_events: int = MAX_EVENTS) -> str:
    """``{"traceEvents": trace_events(...), "displayTimeUnit": "ms"}`` as compact JSON, the same text as
    ``json.dumps`` gives, written event by event without building each event's dict (a third of the time), the
    critical path's track and marks included (a timeline that records what set each start)."""
    tasks = lowered.tasks
    head, threads, chain, shown, layers_per_chunk, merged = _layout(lowered, timeline, layers_per_chunk, max_events)
    if merged is not None:
        return _dumps(head + merged)
    quoted: dict[str, str] = {}

    def q(text: str) -> str:
        out = quoted.get(text)
        if out is None:
            out = quoted[text] = json.dumps(text)
        return out

    meta, parts, start, duration, kind, resource = (lowered.meta, lowered.parts, timeline.start, tasks.duration,
                                                     tasks.kind, tasks.resource)
    out = [json.dumps(e, separators=(",", ":")) for e in head]
    # a step's tasks share a dozen tuples of parts, a few streams and kinds and durations: each written once
    by_parts: dict[tuple, str] = {}
    where: dict[tuple[int, str], str] = {}
    lengths: dict[float, str] = {}
    for i in shown:
        m, k, r, d = meta.get(i), kind[i], resource[i], duration[i]
        own = parts.get(i, ())
        us = by_parts.get(own)
        if us is None:
            us = by_parts[own] = ",".join(f"{q(name)}:{round(v * _US, 3)!r}" for name, v in own)
        thread = where.get((r, k))
        if thread is None:
            pid, tid = threads[r]
            thread = where[(r, k)] = f',"cat":{q(k)},"pid":{pid},"tid":{tid},"ts":'
        length = lengths.get(d)
        if length is None:
            length = lengths[d] = f',"dur":{max(round(d * _US, 3), 0.001)!r},"args":'
        critical = ',"critical":true' if i in chain else ""
        args = (f'{{"micro_batch":{m[2]},"chunk":{m[3]},"us_by_kind":{{{us}}}{critical}}}' if m is not None
                else f'{{"us_by_kind":{{{us}}}{critical}}}')
        ts = start[i] * _US
        out.append(f'{{"ph":"X","name":{q(_label(m, k))}{thread}{round(ts, 3)!r}{length}{args}}}')
        if layers_per_chunk and m is not None:
            pid, tid = threads[r]
            dur = d * _US
            step = dur / layers_per_chunk
            for layer in range(layers_per_chunk):
                out.append(f'{{"ph":"X","name":"layer {layer}","cat":"layer","pid":{pid},"tid":{tid},'
                           f'"ts":{_r(ts + layer * step)!r},"dur":{_r(step)!r}}}')
    return '{"traceEvents":[' + ",".join(out) + '],"displayTimeUnit":"ms"}'


def _dumps(events: list[dict]) -> str:
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, separators=(",", ":"))


def trace_bytes(lowered: Lowered, timeline: Timeline, layers_per_chunk: int = 0, gzipped: bool = True) -> bytes:
    """The trace JSON as bytes, gzip'd at ``GZIP_LEVEL`` unless ``gzipped`` is False."""
    data = trace_json(lowered, timeline, layers_per_chunk).encode()
    # mtime=0: the same step gives the same bytes
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0) if gzipped else data


def write_trace(path: Path, lowered: Lowered, timeline: Timeline, layers_per_chunk: int = 0) -> None:
    """Write the trace JSON to ``path``, gzip'd if its name ends with ``.gz``."""
    path = Path(path)
    path.write_bytes(trace_bytes(lowered, timeline, layers_per_chunk, path.name.endswith(".gz")))
