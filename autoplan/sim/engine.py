"""A small discrete-event core: tasks with durations and dependencies on in-order streams.

Each resource (stream) runs its tasks one at a time in the order they were added, like a CUDA stream;
a task starts when its stream is free and every dependency has finished. Knows nothing about training.
"""

from __future__ import annotations

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
    """Start and end times of every task: longest path through dependencies and per-stream order.

    Deterministic (times do not depend on processing order); raises CycleError naming the stuck tasks.
    """
    n = len(tasks.duration)
    duration, deps, resource = tasks.duration, tasks.deps, tasks.resource
    waiting = [0] * n
    dependents: list[list[int]] = [[] for _ in range(n)]
    last_on: dict[int, int] = {}
    prev_on = [-1] * n
    for i in range(n):
        r = resource[i]
        p = last_on.get(r, -1)
        prev_on[i] = p
        last_on[r] = i
        count = 0
        if p >= 0:
            dependents[p].append(i)
            count = 1
        for d in deps[i]:
            dependents[d].append(i)
        waiting[i] = count + len(deps[i])
    end = [0.0] * n
    start = [0.0] * n
    ready = [i for i in range(n) if waiting[i] == 0]
    done = 0
    while ready:
        i = ready.pop()
        t = end[prev_on[i]] if prev_on[i] >= 0 else 0.0
        for d in deps[i]:
            if end[d] > t:
                t = end[d]
        start[i] = t
        end[i] = t + duration[i]
        done += 1
        for j in dependents[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.append(j)
    if done < n:
        stuck = [tasks.label[i] or str(i) for i in range(n) if waiting[i] > 0][:5]
        raise CycleError(f"{n - done} tasks wait on each other in a cycle (dependencies or stream order), e.g. {stuck}")
    return Timeline(tasks, start, end)
