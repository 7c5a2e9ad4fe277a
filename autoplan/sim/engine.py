"""A small discrete-event core: tasks with durations and dependencies on in-order streams.

Each resource (stream) runs its tasks one at a time in the order they were added, like a CUDA stream;
a task starts when its stream is free and every dependency has finished. Knows nothing about training.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Sequence


class CycleError(ValueError):
    """The tasks wait on each other in a cycle (through dependencies and stream order)."""


@dataclass(slots=True)
class Tasks:
    """A task graph under construction. ``add`` returns the task's id, used in later ``deps``."""

    resources: list[str] = field(default_factory=list)
    resource: list[int] = field(default_factory=list)
    duration: list[float] = field(default_factory=list)
    deps: list[Sequence[int]] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    _resource_ids: dict[str, int] = field(default_factory=dict)

    def stream(self, name: str) -> int:
        """The id of resource ``name``, created on first use."""
        rid = self._resource_ids.get(name)
        if rid is None:
            rid = self._resource_ids[name] = len(self.resources)
            self.resources.append(name)
        return rid

    def add(self, stream: int, duration: float, deps: Sequence[int] = (), kind: str = "", label: str = "") -> int:
        """Append a task to ``stream`` (an id from ``stream()``); it runs after ``deps`` and the stream's previous task."""
        if duration < 0:
            raise ValueError(f"task {label!r}: negative duration {duration}")
        self.resource.append(stream)
        self.duration.append(duration)
        self.deps.append(deps)
        self.kind.append(kind)
        self.label.append(label)
        return len(self.duration) - 1

    def __len__(self) -> int:
        return len(self.duration)


@dataclass(frozen=True, slots=True)
class Timeline:
    """When every task ran."""

    tasks: Tasks
    start: list[float]
    end: list[float]

    @property
    def makespan(self) -> float:
        """Time from the first start to the last end."""
        return max(self.end, default=0.0)

    def busy(self, resource: str, kind: str | None = None) -> float:
        """Seconds ``resource`` spent running tasks (of ``kind``, if given)."""
        t = self.tasks
        rid = t._resource_ids.get(resource)
        return sum(t.duration[i] for i in range(len(t)) if t.resource[i] == rid and (kind is None or t.kind[i] == kind))


def run(tasks: Tasks) -> Timeline:
    """Start and end times of every task: the longest path through dependencies and per-stream order.

    Tasks are visited in the order they were added; one whose dependency has not run yet parks its stream
    until that dependency ends. Deterministic; raises CycleError naming the tasks left waiting.
    """
    duration, deps, resource = tasks.duration, tasks.deps, tasks.resource
    n = len(duration)
    start = [0.0] * n
    end = [-1.0] * n
    free = [0.0] * len(tasks.resources)
    queue: list[deque[int] | None] = [None] * len(tasks.resources)
    parked: dict[int, list[int]] = {}

    def wake(first: int) -> None:
        work = [first]
        while work:
            for r in parked.pop(work.pop(), ()):
                q = queue[r]
                while q:
                    j = q[0]
                    t = free[r]
                    b = -1
                    for d in deps[j]:
                        e = end[d]
                        if e < 0.0:
                            b = d
                            break
                        if e > t:
                            t = e
                    if b >= 0:
                        parked.setdefault(b, []).append(r)
                        break
                    q.popleft()
                    start[j] = t
                    end[j] = free[r] = t + duration[j]
                    if j in parked:
                        work.append(j)
                if not q:
                    queue[r] = None

    for i in range(n):
        r = resource[i]
        q = queue[r]
        if q is not None:
            q.append(i)
            continue
        t = free[r]
        b = -1
        for d in deps[i]:
            e = end[d]
            if e < 0.0:
                b = d
                break
            if e > t:
                t = e
        if b >= 0:
            queue[r] = deque((i,))
            parked.setdefault(b, []).append(r)
            continue
        start[i] = t
        end[i] = free[r] = t + duration[i]
        if parked and i in parked:
            wake(i)
    stuck = [j for q in queue if q for j in q]
    if stuck:
        names = [str(tasks.label[j] or j) for j in stuck[:5]]
        raise CycleError(f"{len(stuck)} tasks wait on each other in a cycle (dependencies or stream order), "
                         f"e.g. {names}")
    return Timeline(tasks, start, end)
