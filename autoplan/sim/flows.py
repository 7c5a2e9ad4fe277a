"""Link contention on the fast path: a compiled program's transfers and DP collectives as flow classes and groups
(``sim/contention.py``, ``sim/fluid.py``), once per shape, and the contended step run stage by stage.

``contention.contend`` reads the classes off the task graph, measures on the engine's timeline how long each
transfer overlaps the classes it shares a link with (``fluid.stretch``) and runs the engine again with the slowed
durations. Here the same: ``flows`` numbers the classes as ``contention.flow_classes`` numbers the graph's (the
order in which ``workload._graph`` first builds a task of each) and lays the program's transfers and DP-stream
tasks out as ``fluid.groups`` lays the graph's (by class and stream, each group in stream order); ``totals`` runs
the program (``pipeline.run`` notes every transfer's and DP collective's start and end), hands those intervals to
``fluid.stretch`` and runs it again with each slowed task's extra seconds. The answer is the contended graph's, bit
for bit: the same intervals in the same order give the same extra seconds, each added to the same duration
(tests/sim/test_flows.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autoplan.sim.contention import applies, sharing_of
from autoplan.sim.fluid import stretch
from autoplan.sim.pipeline import Ends, Slowed, Totals, run
from autoplan.sim.pipeline import dp_bounds as dp_bounds_of
from autoplan.sim.program import DIRECT, ON_COMPUTE, Program, cycle_gc_paused, program
from autoplan.sim.workload import slot_costs
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

I = np.int64


@dataclass(frozen=True, slots=True)
class Flows:
    """A program's transfers and DP-stream tasks as ``fluid.Groups`` of flow classes: position k of the groups
    reads entry ``index[k]`` of the run's values (a transfer id, or ``transfers`` + a DP-stream task's place in
    every stage's DP stream, stage after stage)."""

    classes: tuple
    """The flow classes' names (``contention.flow_classes``' order)."""
    group_classes: tuple[int, ...]
    bounds: np.ndarray
    index: np.ndarray
    resource: np.ndarray
    """The graph's stream of each position (stage i: compute i, forward link p + i, backward link 2p + i, DP
    3p + i)."""
    dp_bounds: list[int]
    """Where each stage's DP-stream tasks start in the flat order (and the end)."""


def flows(prog: Program) -> Flows:
    """``prog``'s flow classes and groups (kept with the program)."""
    got = prog.made.get("flows")
    if got is None:
        got = prog.made["flows"] = _flows(prog)
    return got


def _flows(prog: Program) -> Flows:
    a, p, n_t = prog.arrays, prog.stages, prog.transfers
    stage, created = a["stage"], a["created"]
    # each transfer's consumer stage: the stage of the pass that waits for it
    target = np.full(n_t, -1, I)
    for name in ("raw_key", "fkey"):
        col = a[name]
        if col is not None:
            has = col >= 0
            target[col[has]] = stage[has]
    # every send that crosses a link, in workload._graph's build order: by when its pass is built (``created``),
    # a fused pair's forward before its backward
    key, link, sender, sub = [], [], [], []
    for name, lname, order in (("fsend", "flink", 0), ("send", "link", 1)):
        col = a[name]
        if col is None:
            continue
        has = (col >= 0) & (a[lname] != DIRECT)
        key.append(col[has])
        link.append(a[lname][has])
        sender.append(stage[has])
        sub.append(np.full(int(has.sum()), order, I))
    key, link, sender, sub = (np.concatenate(x) if x else np.zeros(0, I) for x in (key, link, sender, sub))
    # by when the pass is built, then the fused forward's send before the backward's (np.lexsort's order)
    built = (np.argsort(created.take(key).astype(np.int64) * 2 + sub, kind="stable") if len(key)
             else np.zeros(0, I))
    key, link, sender = key[built], link[built], sender[built]
    pair = sender * I(p) + target.take(key)
    # classes: each stage's DP (its weight gathers are the graph's first tasks), the PP pairs in the order they are
    # first sent, the tied embedding's (built last)
    codes, first = np.unique(pair, return_index=True)
    codes = codes[np.argsort(first)]
    rank = np.zeros(p * p, I)
    rank[codes] = np.arange(len(codes), dtype=I)
    tied = [i for i in range(p) if prog.tails[i][1] >= 0]
    names = ([("dp", i) for i in range(p)] + [("pp", int(c) // p, int(c) % p) for c in codes]
             + ([("tied",)] if tied else []))
    resource = np.where(link == ON_COMPUTE, sender, np.where(link == 0, I(p) + sender, I(2 * p) + sender))
    group = (I(p) + rank.take(pair)) * I(4 * p) + resource
    along = np.argsort(group, kind="stable")
    pp_group, pp_index = group[along], key[along]
    # DP-stream tasks: stage i's n_i tasks in stream order, the tied all-reduce second to last (before the
    # final weight gather)
    dp_bounds = np.array(dp_bounds_of(prog), dtype=I)
    # each stage's tasks in its own group (one per stage and class), the tied all-reduce second to last in the tied
    # class's; the stable sort below keeps each group in stream order
    stage_of = np.repeat(np.arange(p, dtype=I), np.diff(dp_bounds))
    dp_group = stage_of * I(4 * p) + I(3 * p) + stage_of
    tied_class = len(names) - 1
    for i in tied:
        dp_group[dp_bounds[i + 1] - 2] = tied_class * 4 * p + 3 * p + i
    groups = np.concatenate([pp_group, dp_group])
    index = np.concatenate([pp_index, np.arange(dp_bounds[-1], dtype=I) + I(n_t)])
    along = np.argsort(groups, kind="stable")
    groups, index = groups[along], index[along]
    keys, starts = np.unique(groups, return_index=True)
    bounds = np.append(starts, len(groups)).astype(I)
    return Flows(tuple(names), tuple((keys // (4 * p)).tolist()), bounds, index, groups % (4 * p),
                 dp_bounds.tolist())


def intervals(fl: Flows, recorded: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every grouped task, in ``fl``'s order, from a run's noted intervals (``pipeline.run``)."""
    arr_end, arr_start, dp_start, dp_end = recorded
    # transfers' ends and starts as lists (None: no such transfer -> nan) or arrays (the C runner's, nan already);
    # the DP-stream tasks' flat, at fl.dp_bounds (pipeline.dp_bounds)
    starts = np.concatenate([np.asarray(arr_start, dtype=float), dp_start])
    ends = np.concatenate([np.asarray(arr_end, dtype=float), dp_end])
    return starts.take(fl.index), ends.take(fl.index)


@cycle_gc_paused
def totals(model: ModelSpec, cluster: ClusterSpec, s: Plan, tails: bool = False) -> Totals | Ends:
    """Step time, stage breakdowns and stream activities of plan ``s``'s step with every micro-batch, transfers
    slowed where they share links: the same floats as ``simulate._graph_totals`` (the contended graph). ``tails``:
    the run stopped before each stage's tail (``pipeline.Ends``; ``pipeline.finish_ends`` completes it)."""
    shape, cost = slot_costs(model, cluster, s)
    prog = program(shape)
    first, recorded, _ = run(prog, cost)
    sl = _slowed(cluster, s, prog, cost, recorded)
    if sl is None:
        return run(prog, cost, tails=True)[0] if tails else first
    return run(prog, cost, slowed=sl, tails=tails)[0]


def _slowed(cluster: ClusterSpec, s: Plan, prog: Program, cost: dict, recorded: tuple) -> Slowed | None:
    """What sharing links adds to the run that ``recorded`` the intervals of, or None if nothing."""
    if not applies(cluster, s):
        return None
    fl = flows(prog)
    sharing = sharing_of(cluster, s, fl.classes)
    if not sharing.rows:
        return None                                    # no link shared, none overloaded (contention.inert)
    start, end = intervals(fl, recorded)
    hit, more = stretch(start, end, fl.bounds, fl.group_classes, sharing)
    if not len(hit):
        return None                                    # nothing shares a link at once: exact as it is
    return slowed(fl, prog, cost, hit, more)


def slowed(fl: Flows, prog: Program, cost: dict, hit: np.ndarray, more: np.ndarray) -> Slowed:
    """The extra seconds ``more`` of the grouped tasks at positions ``hit``, as ``pipeline.run`` takes them."""
    n_t, p = prog.transfers, prog.stages
    at = fl.index.take(hit)
    t = at < n_t
    hops = np.full(n_t, cost["hop"].seconds)
    hops[at[t]] += more[t]
    dp = np.zeros(fl.dp_bounds[-1])
    dp[at[~t] - n_t] += more[~t]
    stretched = np.bincount(fl.resource.take(hit), more, 4 * p).tolist()
    return Slowed(hops, dp, stretched)
