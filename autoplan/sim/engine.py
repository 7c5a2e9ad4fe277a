"""A small discrete-event core: tasks with durations and dependencies on in-order streams.

Each resource (stream) runs its tasks one at a time in the order they were added, like a CUDA stream;
a task starts when its stream is free and every dependency has finished. Knows nothing about training.
``plan_of`` orders a graph once; ``run`` times it, for these durations or another copy's (``with_durations``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, NamedTuple, Sequence, TypeVar

V = TypeVar("V")


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

    def with_durations(self, duration: list[float]) -> Tasks:
        """A copy of this graph whose task i takes ``duration[i]``: build a graph once, run it for many costs."""
        if len(duration) != len(self.duration):
            raise ValueError(f"{len(duration)} durations for {len(self.duration)} tasks")
        if min(duration, default=0.0) < 0:
            raise ValueError(f"negative duration {min(duration)}")
        return Tasks(list(self.resources), list(self.resource), duration, list(self.deps), list(self.kind),
                     list(self.label), dict(self._resource_ids))

    def __len__(self) -> int:
        return len(self.duration)


@dataclass(frozen=True, slots=True)
class Timeline:
    """When every task ran."""

    tasks: Tasks
    start: list[float]
    end: list[float]
    cause: list[int] | None = None
    """For each task, the predecessor whose end set its start (a dependency, or the previous task on its stream;
    -1 if it started at 0 with none): recorded by ``run(..., why=True)``, read by ``critical_path``."""

    @property
    def makespan(self) -> float:
        """Time from the first start to the last end."""
        return max(self.end, default=0.0)

    def busy(self, resource: str, kind: str | None = None) -> float:
        """Seconds ``resource`` spent running tasks (of ``kind``, if given)."""
        t = self.tasks
        rid = t._resource_ids.get(resource)
        return sum(t.duration[i] for i in range(len(t)) if t.resource[i] == rid and (kind is None or t.kind[i] == kind))


@dataclass(frozen=True, slots=True)
class Plan:
    """How to visit a graph: an order with every task after its dependencies and its stream's previous task.

    Depends only on the graph's structure, not on durations, so one plan serves many runs of one structure.
    """

    order: list[int]
    prev: list[int]
    """The previous task on each task's stream, -1 for the first."""


def plan_of(tasks: Tasks) -> Plan:
    """The visiting order of ``tasks``: in the order they were added; one whose dependency is not placed yet parks
    its stream until that dependency is placed. Deterministic; raises CycleError naming the tasks left waiting."""
    deps, resource = tasks.deps, tasks.resource
    prev = [-1] * len(deps)
    last = [-1] * len(tasks.resources)                 # last task seen on each stream
    placed = [False] * len(deps)
    queue: list[deque[int] | None] = [None] * len(tasks.resources)
    parked: dict[int, list[int]] = {}                  # task -> streams whose next task waits for it
    order: list[int] = []

    def blocker(j: int) -> int:
        for d in deps[j]:
            if not placed[d]:
                return d
        return -1

    def wake(first: int) -> None:
        """Place the queued tasks of the streams waiting on ``first``, and of those waiting on these, …"""
        work = [first]
        while work:
            for w in parked.pop(work.pop(), ()):
                q = queue[w]
                while q:
                    b = blocker(q[0])
                    if b >= 0:
                        parked.setdefault(b, []).append(w)
                        break
                    j = q.popleft()
                    order.append(j)
                    placed[j] = True
                    if j in parked:
                        work.append(j)
                if not q:
                    queue[w] = None

    for i in range(len(deps)):
        r = resource[i]
        prev[i] = last[r]
        last[r] = i
        if queue[r] is not None:
            queue[r].append(i)
            continue
        for d in deps[i]:                               # blocker(i), inlined: most tasks are ready
            if not placed[d]:
                queue[r] = deque((i,))
                parked.setdefault(d, []).append(r)
                break
        else:
            order.append(i)
            placed[i] = True
            if i in parked:
                wake(i)
    stuck = [j for q in queue if q for j in q]
    if stuck:
        names = [str(tasks.label[j] or j) for j in stuck[:5]]
        raise CycleError(f"{len(stuck)} tasks wait on each other in a cycle (dependencies or stream order), "
                         f"e.g. {names}")
    return Plan(order, prev)


def run(tasks: Tasks, plan: Plan | None = None, why: bool = False) -> Timeline:
    """Start and end times of every task: the longest path through dependencies and per-stream order.

    ``plan`` is ``plan_of(tasks)``, or of a graph with the same structure (computed here if not given). With
    ``why`` the timeline also records each task's ``cause`` (for ``critical_path``).
    """
    plan = plan or plan_of(tasks)
    duration, deps, prev = tasks.duration, tasks.deps, plan.prev
    if len(prev) != len(duration):
        raise ValueError(f"a plan for {len(prev)} tasks given for {len(duration)}")
    if why:
        return _run_why(tasks, plan)
    start = [0.0] * len(duration)
    end = [0.0] * (len(duration) + 1)                  # end[-1] = 0: where prev is -1 (a stream's first task)
    for j in plan.order:
        t = end[prev[j]]
        for d in deps[j]:
            e = end[d]
            if e > t:
                t = e
        start[j] = t
        end[j] = t + duration[j]
    end.pop()
    return Timeline(tasks, start, end)


def _run_why(tasks: Tasks, plan: Plan) -> Timeline:
    """``run`` that also records which predecessor set each start: the stream's previous task unless a
    dependency ended strictly later (the first such in ``deps`` order on ties)."""
    duration, deps, prev = tasks.duration, tasks.deps, plan.prev
    start = [0.0] * len(duration)
    end = [0.0] * (len(duration) + 1)
    cause = [-1] * len(duration)
    for j in plan.order:
        c = prev[j]
        t = end[c]
        for d in deps[j]:
            e = end[d]
            if e > t:
                t, c = e, d
        start[j] = t
        end[j] = t + duration[j]
        cause[j] = c
    end.pop()
    return Timeline(tasks, start, end, cause)


def critical_path(timeline: Timeline) -> list[int]:
    """The chain of tasks that sets the makespan, first to last: from the task that ends last (the latest in
    stream order on ties), back through each task's ``cause``. Its durations add up to the makespan, less the
    gaps where a task waited on nothing (none in a graph that starts at 0). Needs ``run(..., why=True)``."""
    if timeline.cause is None:
        raise ValueError("this timeline records no causes: run(tasks, plan, why=True)")
    end = timeline.end
    if not end:
        return []
    last = max(range(len(end)), key=lambda i: (end[i], i))
    chain = [last]
    cause = timeline.cause
    while cause[chain[-1]] >= 0:
        chain.append(cause[chain[-1]])
    chain.reverse()
    return chain


def slack(timeline: Timeline, plan: Plan) -> list[float]:
    """Each task's total float: how much later it could end without moving the makespan (critical path
    method: the latest finish allowed by its successors, backwards through ``plan``'s order, minus its end)."""
    tasks = timeline.tasks
    duration, deps, prev = tasks.duration, tasks.deps, plan.prev
    span = timeline.makespan
    latest = [span] * (len(duration) + 1)               # latest end; latest[-1] absorbs a first task's prev (-1)
    for j in reversed(plan.order):
        begin = latest[j] - duration[j]
        p = prev[j]
        if begin < latest[p]:
            latest[p] = begin
        for d in deps[j]:
            if begin < latest[d]:
                latest[d] = begin
    return [latest[i] - timeline.end[i] for i in range(len(duration))]


class CacheInfo(NamedTuple):
    """As ``functools.lru_cache``'s, with ``maxsize`` and ``currsize`` in units of ``size``."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class SizedCache(Generic[V]):
    """A least-recently-used cache of a one-argument function, bounded by the total ``size`` of its answers rather
    than by their count (a task graph's memory grows with its tasks); an answer larger than the bound is not kept.
    Has ``lru_cache``'s ``cache_clear`` and ``cache_info``; thread-safe (the function may run twice for one key)."""

    def __init__(self, fn: Callable[[Hashable], V], max_size: int, size: Callable[[V], int]) -> None:
        self.__wrapped__, self.__doc__, self.__name__, self.__module__ = fn, fn.__doc__, fn.__name__, fn.__module__
        self._max, self._size = max_size, size
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._total = self._hits = self._misses = 0
        self._lock = threading.Lock()

    def __call__(self, key: Hashable) -> V:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._hits += 1
                self._items.move_to_end(key)
                return hit[0]
            self._misses += 1
        value = self.__wrapped__(key)
        n = self._size(value)
        with self._lock:
            if n <= self._max and key not in self._items:
                self._items[key] = (value, n)
                self._total += n
                while self._total > self._max:
                    self._total -= self._items.popitem(last=False)[1][1]
        return value

    def cache_clear(self) -> None:
        """Forget every answer and reset the counts."""
        with self._lock:
            self._items.clear()
            self._total = self._hits = self._misses = 0

    def cache_info(self) -> CacheInfo:
        """Hits, misses, the bound and the total size held."""
        return CacheInfo(self._hits, self._misses, self._max, self._total)


def sized_cache(max_size: int, size: Callable[[V], int]) -> Callable[[Callable[[Hashable], V]], SizedCache[V]]:
    """Decorator: ``SizedCache(fn, max_size, size)``."""
    return lambda fn: SizedCache(fn, max_size, size)
