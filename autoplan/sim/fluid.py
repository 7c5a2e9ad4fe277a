"""Transfers that share links, as a fluid: while several run at once on a link they split its bandwidth max-min
fairly; a step timed with those rates. Knows nothing about training (like the engine).

Each shared task belongs to a *class* (say, every PP send from stage 3 to stage 4, of every replica at once); a
``Sharing`` lists the links as rows of (class, utilisation) pairs: the fraction of the link's bandwidth the
class's flows take while it runs alone at its own (calibrated) rate, above 1 where the link cannot carry them
even alone (an oversubscribed uplink). A running task progresses at a *share* of its alone rate, in (0, 1]:
max-min fair by progressive filling (Bertsekas & Gallager, Data Networks, 1992, §6.5.2), the fluid model of
ASTRA-sim's congestion-aware analytical network (Won et al., ASTRA-sim 2.0, ISPASS 2023). A task's share is
equalised on its own most loaded link: two equal transfers on one link get half each; a small one beside a
large one keeps its whole rate while the large one takes the rest.

``contended`` times a graph with these rates. Where no two transfers of classes that share a link overlap in
time and no class overloads a link alone, the engine's timeline is returned as it is (the exact fast path).
Otherwise, by default, to first order: each transfer's overlap with every other class it shares a link with is
measured on the engine's timeline (every transfer at its alone rate), it is slowed by the pair's max-min share
for that long, and the engine runs again with the slowed durations (``first_order``: about two engine runs; on the
headline search's best plans, where contention adds 0.1–5 %, within 0.4 % of the exact step time for most and
2.5 % short at worst, where slowed transfers queue behind each other on a nearly saturated stream). ``simulate``
is the exact event-driven fluid simulation (rates change whenever a transfer starts or ends; 5–15 times the
engine's cost), the reference the tests and ``benchmarks/bench_contention.py`` hold the first order to, and
``contended(..., exact=True)``'s answer.
"""

from __future__ import annotations

import heapq
import operator
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from autoplan.sim.engine import Plan, Tasks, Timeline, run

try:
    from autoplan.sim import _runner
except ImportError:                                     # installed without a C compiler: numpy below
    _runner = None

USE_COMPILED = True
"""Measure overlaps with the C runner where it was built (tests switch it off to hold numpy to the same bits)."""



class Sharing:
    """Links shared by classes of transfers: each row one link (or one kind of link), as (class, utilisation).
    Immutable; remembers the shares of each combination of running classes it was asked for."""

    __slots__ = ("rows", "classes", "weight", "conflicts", "_rows_of", "_row_dicts", "_memo", "_pairs", "_flat")

    def __init__(self, rows: tuple[tuple[tuple[int, float], ...], ...], classes: int) -> None:
        for row in rows:
            for k, u in row:
                if not 0 <= k < classes or not u > 0:
                    raise ValueError(f"row {row}: class {k} of {classes} with utilisation {u}")
        self.rows, self.classes = rows, classes
        self.weight = [0.0] * classes
        """Each class's utilisation of its most loaded link (0: it shares nothing)."""
        self.conflicts: list[frozenset[int]] = []
        """For each class, the classes it shares a link with (itself when a link carries its flows more than
        once over)."""
        self._rows_of: list[list[tuple[int, float]]] = [[] for _ in range(classes)]
        near: list[set[int]] = [set() for _ in range(classes)]
        weight, rows_of = self.weight, self._rows_of
        for r, row in enumerate(rows):
            members = [c for c, _ in row]
            for k, u in row:
                if u > weight[k]:
                    weight[k] = u
                rows_of[k].append((r, u))
                near[k].update(members)
        self.conflicts = [frozenset(x) for x in near]
        self._row_dicts = [d if len(d) == len(x) else None for x in self._rows_of for d in (dict(x),)]
        """Each class's rows as {row: utilisation} (None where a row lists the class twice)."""
        self._memo: dict[tuple[int, ...], dict[int, float]] = {}
        self._pairs: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._flat: tuple | None = None

    def __repr__(self) -> str:
        return f"Sharing({self.rows!r}, {self.classes})"

    def know_pairs(self, pairs: list[tuple[int, int]]) -> None:
        """The shares of the sorted class pairs ``pairs`` (``share_of``'s keys) it has not yet been asked for,
        all at once with the C runner (``_runner.pair_shares``: ``_pair_filling``'s floats), kept for
        ``share_of``; a pair the C runner leaves (NaN) is ``share_of``'s to fill."""
        todo = [q for q in dict.fromkeys(pairs) if q not in self._memo]
        if not todo:
            return
        bounds, cls, util, weight = self.flat()[:4]
        a = np.array([q[0] for q in todo], dtype=np.int64)
        b = np.array([q[1] for q in todo], dtype=np.int64)
        sa, sb = np.empty(len(todo)), np.empty(len(todo))
        _runner.pair_shares(weight, bounds, cls, util, a, b, sa, sb)
        for q, x, y in zip(todo, sa.tolist(), sb.tolist()):
            if x == x:                                  # not NaN
                self._memo[q] = dict(zip(q, (x, y)))

    def flat(self) -> tuple:
        """The rows, weights and conflicts as the C runner reads them: (row bounds, row classes, row utilisations,
        weights, conflict bounds, conflicts in each frozenset's iteration order)."""
        if self._flat is None:
            self._flat = (np.cumsum([0] + [len(r) for r in self.rows], dtype=np.int64),
                          np.array([k for r in self.rows for k, _ in r], dtype=np.int64),
                          np.array([u for r in self.rows for _, u in r], dtype=float),
                          np.array(self.weight, dtype=float),
                          np.cumsum([0] + [len(c) for c in self.conflicts], dtype=np.int64),
                          np.array([k for c in self.conflicts for k in c], dtype=np.int64))
        return self._flat

    def share_of(self, running: tuple[int, ...]) -> dict[int, float]:
        """Share of each class among ``running`` (a sorted tuple of classes, one entry per running task: tasks
        of one class get one share)."""
        got = self._memo.get(running)
        if got is None:
            fill = _pair_filling if len(running) == 2 else _filling
            got = self._memo[running] = dict(zip(running, fill(running, self)))
        return got


def shares(active: Sequence[int], sharing: Sharing) -> list[float]:
    """Max-min fair share (of its alone rate) of each running task, given its class: progressive filling, every
    unfrozen task at ``level / weight`` until a link fills (its tasks freeze) or the task reaches its own rate."""
    got = sharing.share_of(tuple(sorted(active)))
    return [got[k] for k in active]


def _filling(active: Sequence[int], sharing: Sharing) -> list[float]:
    n = len(active)
    w = [sharing.weight[k] for k in active]
    out = [1.0] * n
    live = [a for a in range(n) if w[a] > 0]
    if not live:
        return out
    # each row's (task, utilisation, utilisation / weight), tasks in ``live`` order: the sums below add the same
    # floats in the same order whichever tasks are frozen
    members: dict[int, list[tuple[int, float, float]]] = {}
    for a in live:
        for r, u in sharing._rows_of[active[a]]:
            members.setdefault(r, []).append((a, u, u / w[a]))
    rows = list(members.values())
    frozen: dict[int, float] = {}
    level = 0.0
    while len(frozen) < len(live):
        best, full = float("inf"), None
        for idx, row in enumerate(rows):
            used = slope = 0
            for a, u, q in row:
                x = frozen.get(a)
                if x is None:
                    slope += q
                else:
                    used += u * x
            if slope > 0:
                at = (1.0 - used) / slope
                if at < best:
                    best, full = at, idx
        cap = min((w[a], a) for a in live if a not in frozen)
        if cap[0] <= best:
            level = cap[0]
            frozen[cap[1]] = 1.0
            continue
        level = max(level, best)
        for a, _, _ in rows[full]:
            if a not in frozen:
                frozen[a] = level / w[a]
    for a, x in frozen.items():
        out[a] = max(x, 0.0)
    return out


def _pair_filling(active: tuple[int, int], sharing: Sharing) -> list[float]:
    """``_filling`` of two tasks, the same floats from the same operations in the same order (the pairwise shares
    ``_pairs_of`` asks for every two classes that share a link: most of a cold contended step's filling): each row
    as (k's utilisation, c's) in ``_filling``'s row order, at most two levels."""
    k, c = active
    w = (sharing.weight[k], sharing.weight[c])
    if not (w[0] > 0 and w[1] > 0):
        return _filling(active, sharing)
    of_k, of_c = sharing._row_dicts[k], sharing._row_dicts[c]
    if of_k is None or of_c is None:
        return _filling(active, sharing)                # a class twice in one row
    rows = [(u, of_c.get(r)) for r, u in sharing._rows_of[k]]
    if k != c:
        rows += [(None, u) for r, u in sharing._rows_of[c] if r not in of_k]
    # first level: nothing frozen, each row fills at 1 / (q0 + q1)
    best, full = float("inf"), None
    for row in rows:
        u0, u1 = row
        slope = (u0 / w[0] + u1 / w[1]) if u0 is not None and u1 is not None else (
            u0 / w[0] if u0 is not None else u1 / w[1])
        at = 1.0 / slope
        if at < best:
            best, full = at, row
    cap = 0 if w[0] <= w[1] else 1
    frozen: dict[int, float] = {}
    if w[cap] <= best:
        level = w[cap]
        frozen[cap] = 1.0
    else:
        level = best
        for a in (0, 1):
            if full[a] is not None:
                frozen[a] = level / w[a]
    if len(frozen) < 2:
        # second level: the other task alone rises on the rows it is in, beside the frozen one's use
        (f, x), = frozen.items()
        o = 1 - f
        best = float("inf")
        for row in rows:
            if row[o] is not None:
                used = row[f] * x if row[f] is not None else 0
                at = (1.0 - used) / (row[o] / w[o])
                if at < best:
                    best = at
        if w[o] <= best:
            frozen[o] = 1.0
        else:
            frozen[o] = max(level, best) / w[o]
    return [max(frozen[0], 0.0), max(frozen[1], 0.0)]


def overlapping(timeline: Timeline, cls: Sequence[int], ids: Sequence[int], sharing: Sharing) -> bool:
    """Some class overloads a link alone, or two tasks of ``ids`` whose classes share a link run at once."""
    if any(w > 1.0 for w in sharing.weight):
        return True
    conflicts = sharing.conflicts
    start, end = timeline.start, timeline.end
    spans = sorted(((start[i], end[i], cls[i]) for i in ids if end[i] > start[i]))
    running: list[tuple[float, int]] = []              # (end, class) of the spans still running, a heap
    for s, e, k in spans:
        while running and running[0][0] <= s:
            heapq.heappop(running)
        if any(c in conflicts[k] for _, c in running):
            return True
        heapq.heappush(running, (e, k))
    return False


def contended(tasks: Tasks, plan: Plan, timeline: Timeline, cls: Sequence[int], sharing: Sharing,
              why: bool = False, graph: Structure | None = None, exact: bool = False) -> Timeline:
    """``timeline`` (the engine's, every transfer at its alone rate) with the transfers of class ``cls[i] >= 0``
    slowed where they share links: ``timeline`` itself where none overlap (exact), else ``first_order``'s answer
    or with ``exact`` the event-driven ``simulate``'s. The result's ``tasks`` carry the slowed durations."""
    if exact:
        ids = [i for i, k in enumerate(cls) if k >= 0 and tasks.duration[i] > 0]
        if not ids or not overlapping(timeline, cls, ids, sharing):
            return timeline
        return simulate(tasks, plan, cls, sharing, why, graph)
    return first_order(tasks, plan, timeline, groups(tasks, cls), sharing, why)


@dataclass(frozen=True)
class Groups:
    """The shared tasks of a graph by class and stream, each group in stream order (its spans never overlap):
    group g holds ``ids[bounds[g]:bounds[g + 1]]``, of class ``classes[g]``. Depends on the structure only."""

    classes: tuple[int, ...]
    ids: np.ndarray
    bounds: np.ndarray
    pick: Callable[[Sequence[float]], tuple]
    """Picks the grouped tasks' values out of a per-task list (a start or end list), in ``ids`` order."""

    def __len__(self) -> int:
        return len(self.classes)


def groups(tasks: Tasks, cls: Sequence[int]) -> Groups:
    """``Groups`` of ``tasks`` (cache it with the graph)."""
    by: dict[tuple[int, int], list[int]] = {}
    for i, k in enumerate(cls):
        if k >= 0:
            by.setdefault((k, tasks.resource[i]), []).append(i)
    keys = sorted(by)
    ids = [i for key in keys for i in by[key]]
    bounds = np.cumsum([0] + [len(by[key]) for key in keys])
    pick = operator.itemgetter(*ids) if len(ids) > 1 else (lambda xs: tuple(xs[i] for i in ids))
    return Groups(tuple(k for k, _ in keys), np.array(ids, dtype=np.int64), bounds, pick)


def first_order(tasks: Tasks, plan: Plan, timeline: Timeline, grouped: Groups, sharing: Sharing,
                why: bool = False) -> Timeline:
    """The fluid model to first order (module docstring, ``slowdowns``): ``timeline`` itself where nothing is
    slowed, else the engine's run with the slowed durations."""
    ids, more = slowdowns(timeline, grouped, sharing)
    if not len(ids):
        return timeline
    duration = np.asarray(tasks.duration)
    duration[ids] += more
    return run(tasks.with_durations(duration.tolist()), plan, why)


def _pairs(classes: tuple[int, ...], sharing: Sharing) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(g, h, factor) for every two groups (of classes ``classes``) whose classes share a link: while a task of g
    overlaps one of h it is ``factor`` seconds longer per second (1/s_gh − 1/r_g, r_g its rate alone). Kept by
    ``sharing`` per ``classes``."""
    got = sharing._pairs.get(classes)
    if got is None:
        got = sharing._pairs[classes] = _pairs_of(classes, sharing)
    return got


def _pairs_of(classes: tuple[int, ...], sharing: Sharing) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if _runner is not None and USE_COMPILED:
        bounds, cls, util, weight_, conf_bounds, conf = sharing.flat()
        got = _runner.pairs_of(np.array(classes, dtype=np.int64), weight_, bounds, cls, util, conf_bounds, conf)
        if got is not None:                            # the loop below in C (None: a pair needs _filling)
            return (np.array(got[0], dtype=np.int64), np.array(got[1], dtype=np.int64), np.array(got[2]))
    weight, conflicts = sharing.weight, sharing.conflicts
    of_class: dict[int, list[int]] = {}
    for h, k in enumerate(classes):
        of_class.setdefault(k, []).append(h)
    slowing: dict[int, list[tuple[list[int], float]]] = {}
    """Per class, (groups of a class it shares a link with, the factor), in ``conflicts`` order."""
    if _runner is not None and USE_COMPILED:
        sharing.know_pairs([(k, c) if k <= c else (c, k) for k in of_class for c in conflicts[k]])
    for k in of_class:
        alone = min(1.0, 1.0 / weight[k]) if weight[k] > 0 else 1.0
        slowing[k] = []
        for c in conflicts[k]:
            factor = 1.0 / sharing.share_of((k, c) if k <= c else (c, k))[k] - 1.0 / alone
            if factor > 0 and c in of_class:
                slowing[k].append((of_class[c], factor))
    gs, hs, fs = [], [], []
    for g, k in enumerate(classes):
        for others, factor in slowing[k]:
            for h in others:
                if h != g:
                    gs.append(g)
                    hs.append(h)
                    fs.append(factor)
    return np.array(gs, dtype=np.int64), np.array(hs, dtype=np.int64), np.array(fs)


def slowdowns(timeline: Timeline, grouped: Groups, sharing: Sharing) -> tuple[np.ndarray, np.ndarray]:
    """The slowed transfers of ``timeline`` and their extra seconds, to first order (``stretch``)."""
    if not len(grouped):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    start = np.array(grouped.pick(timeline.start), dtype=float)
    end = np.array(grouped.pick(timeline.end), dtype=float)
    hit, extra = stretch(start, end, grouped.bounds, grouped.classes, sharing)
    return grouped.ids[hit], extra


def stretch(start: np.ndarray, end: np.ndarray, bounds: np.ndarray, classes: tuple[int, ...],
            sharing: Sharing) -> tuple[np.ndarray, np.ndarray]:
    """The slowed ones of grouped transfers and their extra seconds, to first order: a transfer of class a running
    alone at rate ``r = min(1, 1/weight)`` takes d/r; for the o seconds it overlaps transfers of class b on the
    uncontended timeline it runs at the pair's share s_ab instead, o·(1/s_ab − 1/r) longer (summed over b). Exact
    for a class alone on an overloaded link, and for equal transfers that overlap wholly (k of them: k times as
    long). The transfers as ``Groups`` lays them out: group g (class ``classes[g]``, one stream, in stream order)
    holds positions ``bounds[g]:bounds[g + 1]`` of ``start`` and ``end``; the answer is positions and seconds.

    Vectorised over every pair of groups at once: each group's spans are shifted to a block of their own on one
    time axis (group h from h·span on), so that one search finds, for every task and every group it shares a
    link with, how much of that group's running time lies before the task's start and before its end."""
    none = (np.zeros(0, dtype=np.int64), np.zeros(0))
    if not len(classes):
        return none
    n = len(start)
    group_of = np.repeat(np.arange(len(classes)), np.diff(bounds))
    weight = np.array(sharing.weight)[np.array(classes)]
    extra = np.where(weight[group_of] > 1.0, (end - start) * (weight[group_of] - 1.0), 0.0)  # overloaded alone
    g, h, factor = _pairs(classes, sharing)
    if len(g):
        span = 2.0 * float(end.max()) + 1.0
        s_axis, e_axis = start + group_of * span, end + group_of * span
        before = np.concatenate([[0.0], np.cumsum(e_axis - s_axis)])     # running time before each span
        s_axis = np.append(s_axis, np.inf)                              # no span starts after the last
        if _runner is not None and USE_COMPILED:
            # the same floats, each pair's spans walked once (_runner.c overlaps)
            more = np.zeros(n)
            _runner.overlaps(s_axis, e_axis, before, start, end, np.ascontiguousarray(bounds, dtype=np.int64),
                             g, h, factor, span, more)
            extra += more
        else:
            sizes = bounds[g + 1] - bounds[g]
            pair = np.repeat(np.arange(len(g)), sizes)                   # each (task of g, group h) query
            task = np.arange(len(pair)) + np.repeat(bounds[g] - (np.cumsum(sizes) - sizes), sizes)
            shift = h[pair] * span
            o = (_running(s_axis, e_axis, before, end[task] + shift)
                 - _running(s_axis, e_axis, before, start[task] + shift))
            extra += np.bincount(task, o * factor[pair], minlength=n)
    hit = extra > 1e-15 * np.maximum(end, 1.0)
    return (np.flatnonzero(hit), extra[hit]) if hit.any() else none


def _running(starts: np.ndarray, ends: np.ndarray, before: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Seconds of the disjoint, sorted spans (``starts``, ``ends``; ``before[k]``: the length of the first k)
    before each time of ``at`` (a block's offset cancels: the difference of two times in one block counts).
    ``starts`` has one more, infinite, entry: no span starts after the last."""
    k = np.searchsorted(ends, at, side="right")         # spans wholly before each time
    return before[k] + np.maximum(at - starts[k], 0.0)


@dataclass(frozen=True)
class Structure:
    """What ``simulate`` needs of a graph beyond its durations: each task's successors (its dependents and the
    next task on its stream) and how many predecessors it waits for. Depends on the structure only (cache it)."""

    succ: list[list[int]]
    waits: list[int]


def structure(tasks: Tasks, plan: Plan) -> Structure:
    """The successors and predecessor counts of ``tasks`` (``plan`` orders them)."""
    n = len(tasks)
    succ: list[list[int]] = [[] for _ in range(n)]
    waits = [0] * n
    for j in range(n):
        preds = set(tasks.deps[j])
        if plan.prev[j] >= 0:
            preds.add(plan.prev[j])
        waits[j] = len(preds)
        for q in preds:
            succ[q].append(j)
    return Structure(succ, waits)


def simulate(tasks: Tasks, plan: Plan, cls: Sequence[int], sharing: Sharing, why: bool = False,
             graph: Structure | None = None) -> Timeline:
    """The step as an event-driven fluid simulation: a task starts once its stream's previous task and its
    dependencies end; a task of class ``cls[i] >= 0`` progresses at its max-min share, the others at full rate.

    Tasks of fixed length are timed as they become ready (no event queue: their ends follow from their starts);
    only the shared transfers advance in time order, at the rates of those running together, and a transfer's
    end releases its successors. Exact: a transfer not yet known to start waits on one still running, so it
    starts after the next event.
    """
    graph = graph or structure(tasks, plan)
    succ, waits = graph.succ, list(graph.waits)
    duration, deps, prev = tasks.duration, tasks.deps, plan.prev
    n = len(duration)
    conflicts, weight = sharing.conflicts, sharing.weight
    start, end = [0.0] * n, [0.0] * n
    ready = [0.0] * n
    cause = [-1] * n
    future: list[tuple[float, int]] = []               # (start, task) of transfers not running yet
    ends: list[tuple[float, int, int]] = []            # (end at its current rate, version, task) of running ones
    left: dict[int, float] = {}                        # running transfer -> alone-seconds of work left at ``upd``
    rate: dict[int, float] = {}
    upd: dict[int, float] = {}
    version: dict[int, int] = {}
    running: dict[int, set[int]] = {}                  # class -> its running transfers
    stack = [j for j in range(n) if waits[j] == 0]
    done = 0
    push, pop = heapq.heappush, heapq.heappop

    def reshare(classes: set[int], t: float) -> None:
        """New rates at ``t`` for the running transfers linked to ``classes`` through shared links."""
        seen: set[int] = set()
        for k0 in classes:
            if k0 in seen or k0 not in running:
                continue
            group, todo = [], [k0]                     # one connected group of running classes
            seen.add(k0)
            while todo:
                k = todo.pop()
                group.append(k)
                for c in conflicts[k]:
                    if c not in seen and c in running:
                        seen.add(c)
                        todo.append(c)
            got = sharing.share_of(tuple(sorted(k for k in group for _ in running[k])))
            for k in group:
                x = got[k]
                for j in running[k]:
                    if rate[j] != x or upd[j] == t:
                        left[j] -= rate[j] * (t - upd[j])
                        upd[j], rate[j] = t, x
                        version[j] += 1
                        push(ends, (t + left[j] / x, version[j], j))

    while True:
        while stack:
            j = stack.pop()
            st = ready[j]
            start[j] = st
            if cls[j] >= 0 and duration[j] > 0:
                push(future, (st, j))
                continue
            e = st + duration[j]
            end[j] = e
            done += 1
            for q in succ[j]:
                if e > ready[q]:
                    ready[q] = e
                waits[q] -= 1
                if waits[q] == 0:
                    stack.append(q)
        while ends and ends[0][1] != version.get(ends[0][2]):
            pop(ends)                                   # superseded by a new rate
        if not future and not ends:
            break
        # the next event: a transfer starts, or one running ends at its current rate
        t = min(future[0][0] if future else float("inf"), ends[0][0] if ends else float("inf"))
        touched: set[int] = set()
        while ends and ends[0][0] <= t:
            _, v, j = pop(ends)
            if v != version.get(j):
                continue
            k = cls[j]
            del left[j], rate[j], upd[j], version[j]
            running[k].discard(j)
            if not running[k]:
                del running[k]
            for c in conflicts[k]:
                if c in running:                       # those it shared a link with speed up
                    touched.add(c)
            end[j] = t
            done += 1
            for q in succ[j]:
                if t > ready[q]:
                    ready[q] = t
                waits[q] -= 1
                if waits[q] == 0:
                    stack.append(q)
        while future and future[0][0] <= t:
            j = pop(future)[1]
            k = cls[j]
            left[j], upd[j], version[j] = duration[j], t, 0
            if any(c in running for c in conflicts[k]):
                rate[j] = 0.0
                touched.add(k)
            else:                                       # shares no link with anything running: its own rate
                rate[j] = 1.0 / weight[k] if weight[k] > 1.0 else 1.0
                push(ends, (t + duration[j] / rate[j], 0, j))
            running.setdefault(k, set()).add(j)
        if touched:
            reshare(touched, t)
    if done < n:
        raise ValueError("the tasks wait on each other in a cycle")
    if why:
        for j in range(n):
            c = prev[j]
            best = end[c] if c >= 0 else 0.0
            for d in deps[j]:
                if end[d] > best:
                    best, c = end[d], d
            cause[j] = c
    timed = tasks.with_durations([end[i] - start[i] for i in range(n)])
    return Timeline(timed, start, end, cause if why else None)
