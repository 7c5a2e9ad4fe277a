"""Contention: a step's transfers on the cluster's real links. Each PP send and DP collective of the simulated
pipeline stands for that transfer of every replica at once (a *flow class*); ``hardware/topology.py`` routes the
classes' flows over the cluster graph under Megatron's rank placement and says which links they share and how
loaded each leaves them; ``sim/fluid.py`` slows the transfers that overlap in time on a shared link (max-min fair
shares of its bandwidth). Each collective keeps its calibrated algorithm and time when alone; only the rate it
gets while others share its links changes.

``contend`` re-times a step's task graph (traces, critical paths, the tests' reference); the search's fast path
does the same without the graph (``sim/flows.py``), to the same floats.

Left out: communication inside a pass (TP, CP and EP collectives are parts of a compute-stream task, not tasks
of their own) neither slows nor is slowed by the streams' transfers.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import numpy as np

from autoplan.hardware.topology import placement_sharing
from autoplan.sim.engine import Timeline, run
from autoplan.sim.fluid import Groups, Sharing, contended, groups, slowdowns
from autoplan.sim.workload import Lowered
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.plan import Plan

CACHED_TASKS = 1_000_000
"""Tasks of the graphs whose flow classes are kept (an entry holds its graph, ~250 bytes a task, so that its id is
not reused: at most ~250 MB beyond the workload's own cache)."""
_classes_cache: OrderedDict[int, tuple[object, list[int], tuple, Groups]] = OrderedDict()
"""Per task graph (by identity): each task's flow class, the classes, the shared tasks' groups."""
_cache_lock = threading.Lock()
_cached = [0]


def flow_classes(lowered: Lowered) -> tuple[list[int], tuple]:
    """Each task's flow class (an index into the second item, -1 for a task that is not a transfer): ``("pp",
    a, b)`` a send from stage a to stage b, ``("dp", i)`` a collective of stage i's DP group, ``("tied",)``."""
    cls, classes, _ = _of_graph(lowered)
    return cls, classes


def _of_graph(lowered: Lowered) -> tuple[list[int], tuple, Groups]:
    """Flow classes and the fluid simulation's view of ``lowered``'s graph, computed once per graph."""
    graph = lowered._graph
    with _cache_lock:
        hit = _classes_cache.get(id(graph))
        if hit is not None and hit[0] is graph:
            _classes_cache.move_to_end(id(graph))
            return hit[1:]
    tasks = lowered.tasks
    stage_of = [int(name.split(".", 1)[0].removeprefix("stage")) for name in tasks.resources]
    kind = tasks.kind
    target: dict[int, int] = {}
    for j, deps in enumerate(tasks.deps):
        for d in deps:
            if kind[d] == "pp":
                target[d] = stage_of[tasks.resource[j]]
    names: dict[tuple, int] = {}
    cls = [-1] * len(tasks)
    for i, k in enumerate(kind):
        if k == "pp" and i in target:
            name: tuple = ("pp", stage_of[tasks.resource[i]], target[i])
        elif k == "dp":
            name = ("tied",) if lowered.slot_key(i) == "tied" else ("dp", stage_of[tasks.resource[i]])
        else:
            continue
        cls[i] = names.setdefault(name, len(names))
    out = (cls, tuple(names), groups(tasks, cls))
    with _cache_lock:
        if id(graph) not in _classes_cache:
            _classes_cache[id(graph)] = (graph, *out)
            _cached[0] += len(tasks)
        while _cached[0] > CACHED_TASKS and len(_classes_cache) > 1:
            _cached[0] -= len(_classes_cache.popitem(last=False)[1][1])
    return out


def sharing_of(cluster: ClusterSpec, s: Plan, classes: tuple) -> Sharing:
    """The links ``classes`` share on ``cluster`` under plan ``s``'s placement (one object per placement, so
    that the shares it remembers serve every plan placed alike)."""
    return _sharing(cluster, s.tp, s.cp, s.dp, s.pp, classes)


@functools.lru_cache(maxsize=1024)
def _sharing(cluster: ClusterSpec, tp: int, cp: int, dp: int, pp: int, classes: tuple) -> Sharing:
    rows = _restricted(*_possible(cluster, tp, cp, dp, pp), classes)
    if rows is None:
        rows = placement_sharing(cluster, tp, cp, dp, pp, classes)
    return Sharing(rows, len(classes))


def _restricted(every: tuple, rows: tuple, classes: tuple) -> tuple | None:
    """``placement_sharing`` of ``classes`` from that of ``every`` class (``rows``), without routing again; None if a
    class is not among them. A link's load by one class does not depend on the other classes, so each row keeps its
    entries of ``classes`` (renumbered) and the link stays if two of them share it or one loads it past 1."""
    at = {c: k for k, c in enumerate(every)}
    if any(c not in at for c in classes):
        return None
    new = {at[c]: j for j, c in enumerate(classes)}
    out = set()
    for row in rows:
        kept = tuple(sorted((new[c], u) for c, u in row if c in new))
        if len(kept) > 1 or (kept and kept[0][1] > 1.0):
            out.add(kept)
    return tuple(sorted(out))


def applies(cluster: ClusterSpec, s: Plan) -> bool:
    """Contention is on for this cluster, which has a graph (a network tier between its NVLink domains), and the
    plan's GPUs are placed by tp, cp, dp and pp alone."""
    return (cluster.contention and s.tp * s.cp * s.dp * s.pp == s.gpus <= cluster.gpus
            and (len(cluster.tiers) > 1 or cluster.domains == 1))


def possible_classes(pp: int) -> tuple:
    """Every flow class a step's graph on ``pp`` stages can have, whatever its schedule (a superset): sends
    between neighbouring stages both ways, between the last and the first (interleaved chunks, tied embeddings),
    each stage's DP collectives and the tied embeddings' reduction. A send from a stage to itself (a V-shape's
    turn) crosses no link."""
    pairs = {(a, (a + 1) % pp) for a in range(pp)} | {((a + 1) % pp, a) for a in range(pp)} if pp > 1 else set()
    return (tuple(("pp", a, b) for a, b in sorted(pairs) if a != b) + tuple(("dp", i) for i in range(pp))
            + ((("tied",),) if pp > 1 else ()))


def inert(cluster: ClusterSpec, s: Plan) -> bool:
    """Contention cannot change any step of plan ``s``: it does not apply, or no link is shared by two of the
    flow classes its graph can have (``possible_classes``) nor loaded past its bandwidth by one, so that
    ``contend`` returns the engine's timeline as it is whatever the timing."""
    return not applies(cluster, s) or not _possible_sharing(cluster, s.tp, s.cp, s.dp, s.pp)


def _possible_sharing(cluster: ClusterSpec, tp: int, cp: int, dp: int, pp: int) -> bool:
    return bool(_possible(cluster, tp, cp, dp, pp)[1])


@functools.lru_cache(maxsize=1024)
def _possible(cluster: ClusterSpec, tp: int, cp: int, dp: int, pp: int) -> tuple[tuple, tuple]:
    """``possible_classes`` and the links they share, routed once per placement: every graph's sharing is read off
    it (``_restricted``)."""
    every = possible_classes(pp)
    return every, placement_sharing(cluster, tp, cp, dp, pp, every)


def contend(lowered: Lowered, cluster: ClusterSpec, s: Plan, timeline: Timeline, why: bool = False,
            exact: bool = False) -> Timeline:
    """``timeline`` with the transfers slowed where they share links (to first order, ``fluid.slowdowns``);
    ``lowered`` then carries the slowed tasks (``lowered.tasks``) and each stream's extra seconds
    (``lowered.stretched``)."""
    if not applies(cluster, s):
        return timeline
    cls, classes, grouped = _of_graph(lowered)
    if not classes:
        return timeline
    tasks = lowered.tasks
    sharing = sharing_of(cluster, s, classes)
    if exact:                                           # the event-driven reference (tests, benchmarks)
        out = contended(tasks, lowered.plan, timeline, cls, sharing, why, exact=True)
        if out is not timeline:
            lowered.tasks = out.tasks
            lowered.stretched = np.bincount(tasks.resource, np.subtract(out.tasks.duration, tasks.duration),
                                            len(tasks.resources)).tolist()
        return out
    ids, more = slowdowns(timeline, grouped, sharing)
    if not len(ids):
        return timeline                                 # nothing shares a link at once: exact as it is
    duration = np.asarray(tasks.duration)
    duration[ids] += more
    lowered.tasks = tasks.with_durations(duration.tolist())
    lowered.stretched = np.bincount(np.asarray(tasks.resource)[ids], more, len(tasks.resources)).tolist()
    return run(lowered.tasks, lowered.plan, why)
