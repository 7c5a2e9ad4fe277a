"""Lower (model, cluster, strategy) into tasks for one representative pipeline.

Every DP replica, CP rank and TP rank of a stage behaves alike, so we simulate one pipeline of pp devices and
let each collective carry its group's cost: the cost of a simulation does not grow with dp or the GPU count.
Layers compose hierarchically (DistSim): a layer's kernels and TP collectives form a layer event, a chunk's
layers form one pass on the stage's compute stream; PP transfers and DP reductions are separate events on
their own streams, overlapping with compute where Megatron-LM overlaps them.

The graph's structure depends only on a plan's shape (schedule, pp, micro-batches, chunks and how DP
communication is arranged), so ``_graph`` builds it once per shape with symbolic durations (slots) and
``lower`` gives each slot a plan's seconds, as the model's family prices them (``autoplan.families.registry``;
no cost formula lives here): a search's plans that differ in TP, CP, sequence parallelism,
recompute or micro-batch size but not in shape share one graph and one engine plan.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from autoplan.families.costs import PAIR_COMM_SMS, PassCost, StepCosts, overlapped, split_backward
from autoplan.families.registry import step_costs
from autoplan.sim.engine import Plan, Tasks, plan_of, sized_cache
from autoplan.sim.schedule import Step, ends, stage_order, virtual_stage
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import FUSED_PAIRS, SPLIT_BACKWARD
from autoplan.families.strategy import Strategy


@dataclass(slots=True)
class Lowered:
    """The task graph of one step, with what the metrics and the trace need to read it."""

    tasks: Tasks
    stages: int
    compute_streams: list[int]
    _graph: _Graph
    _costs: list[PassCost]
    """Seconds and parts of each slot of the graph."""
    _parts: dict[int, tuple[tuple[str, float], ...]] | None = None
    _meta: dict[int, tuple[int, bool, int, int, str]] | None = None
    stretched: list[float] | None = None
    """Per stream, the extra seconds its transfers took because others shared their links (``sim/contention.py``)."""

    @property
    def meta(self) -> dict[int, tuple[int, bool, int, int, str]]:
        """(stage, forward, micro_batch, chunk, part) of each pass task (part: "B" or "W" for a split backward)."""
        if self._meta is None:
            self._meta = dict(sorted((j, (i, *st)) for i, steps in enumerate(self._graph.passes)
                                     for j, st in steps.items()))
        return self._meta

    def slot_key(self, i: int) -> object:
        """What task ``i``'s seconds are: its slot's key, (stage, forward, chunk) for a pass or a collective's name."""
        return self._graph.keys[self._graph.tasks.duration[i]]

    @property
    def compute_tasks(self) -> tuple[tuple[int, ...], ...]:
        """Per stage, the tasks of its compute stream (passes, then the optimizer step) in stream order."""
        return self._graph.compute_tasks

    @property
    def plan(self) -> Plan:
        """The engine's visiting order of ``tasks``, shared by every plan of this shape: ``run(tasks, plan)``."""
        return self._graph.plan

    @property
    def parts(self) -> dict[int, tuple[tuple[str, float], ...]]:
        """Breakdown of compute-stream tasks by kind (compute, recompute, tp, cp, optimizer)."""
        if self._parts is None:
            slot, costs = self._graph.tasks.duration, self._costs
            self._parts = {i: costs[slot[i]].parts for i in sorted(i for ids in self.compute_tasks for i in ids)}
        return self._parts

    def stage_parts(self) -> list[dict[str, float]]:
        """Seconds of each stage's compute stream by kind: the sum of its tasks' parts (as count × seconds)."""
        out = []
        for r in self.compute_streams:
            acc: dict[str, float] = {}
            for slot, n in self._graph.stream_slots[r]:
                for k, sec in self._costs[slot].parts:
                    acc[k] = acc.get(k, 0.0) + n * sec
            out.append(acc)
        for acc, r in zip(out, self.compute_streams):
            if self.stretched and self.stretched[r]:
                # sends that block the compute stream (synchronous p2p), slowed by links they share
                acc["pp"] = acc.get("pp", 0.0) + self.stretched[r]
        return out

    def busy(self) -> list[float]:
        """Seconds each stream spends running tasks: the sum of their durations (as count × seconds)."""
        costs = self._costs
        out = [sum(n * costs[slot].seconds for slot, n in counts) for counts in self._graph.stream_slots]
        return [x + more for x, more in zip(out, self.stretched)] if self.stretched else out


class _Shape(NamedTuple):
    """All a step's task graph depends on besides durations: the plans of one shape share one graph."""

    schedule: str
    stages: int
    micro_batches: int
    chunks: int
    segments: int           # pieces of a chunk's last backward, each reducing its gradients as it ends (0: none)
    segment_reduce: bool    # those pieces each start a DP reduction (ZeRO < 2)
    param_gather: bool      # overlapped all-gather of a chunk's weights before its first forward
    shard_gather: bool      # ZeRO-3 all-gather before every pass
    shard_reduce: bool      # ZeRO-2/3 reduce-scatter after every backward
    reduce_all: bool        # one gradient reduction after the whole backward (no overlap)
    tied: bool              # the first and last stage all-reduce the tied embedding's gradient
    final_gather: bool      # all-gather of the updated weights after the optimizer (no overlap)
    blocking_p2p: bool      # PP sends occupy the sender's compute stream (Strategy.synchronous_p2p)


@dataclass(frozen=True, slots=True)
class _Graph:
    """The task graph of a shape with durations left symbolic: each task's duration is a slot, named by a key."""

    tasks: Tasks
    """The graph; ``duration`` holds each task's slot, an index into ``keys``."""
    keys: tuple
    """What each slot's duration is: (stage, forward, chunk) for a pass, or a collective's name."""
    passes: tuple[dict[int, Step], ...]
    """Per stage, the schedule step of each of its pass tasks."""
    compute_tasks: tuple[tuple[int, ...], ...]
    """Per stage, its compute-stream tasks in stream order."""
    stream_slots: tuple[tuple[tuple[int, int], ...], ...]
    """Per stream, (slot, count) over its tasks: sums over a stream's tasks without visiting them."""
    plan: Plan
    """The engine's visiting order, the same for every duration."""


def lower(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> Lowered:
    """The tasks of one training step of plan ``s`` (which must be valid).

    The graph's structure comes from ``_graph`` (cached per shape); here each of its slots gets the seconds
    the model's family gives it (``autoplan.families.registry``).
    """
    shape, cost = slot_costs(model, cluster, s)
    g = _graph(shape)
    by_slot = [cost[k] for k in g.keys]
    seconds = [x.seconds for x in by_slot]
    tasks = g.tasks.with_durations(list(map(seconds.__getitem__, g.tasks.duration)))
    comp = [tasks.stream(f"stage{i}.compute") for i in range(shape.stages)]
    return Lowered(tasks, shape.stages, comp, g, by_slot)


def slot_costs(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> tuple[_Shape, dict[object, PassCost]]:
    """The shape of plan ``s``'s step graph and the seconds (with their parts) of each kind of task in it, by the
    slot keys ``_graph`` names (the family's costs, ``autoplan.families.registry``)."""
    shape, cost, _ = step_slot_costs(model, cluster, s)
    return shape, cost


def step_slot_costs(model: ModelSpec, cluster: ClusterSpec, s: Strategy, reuse: tuple | None = None
                    ) -> tuple[_Shape, dict[object, PassCost], StepCosts]:
    """``slot_costs`` and the family's step costs behind them. ``reuse``: another plan's answer, taken as it is
    when this plan's step costs and shape but its micro-batch count are the same (the slot costs do not read it)."""
    p, v = s.pp, s.chunks
    c = step_costs(model, cluster, s)
    segments = c.segments
    shape = _Shape(s.schedule, p, s.micro_batches, v, segments, segment_reduce=c.segment_reduce is not None,
                   param_gather=True, shard_gather=bool(c.shard_gather),
                   shard_reduce=bool(c.shard_reduce), reduce_all=c.reduce_all is not None, tied=c.tied is not None,
                   final_gather=True, blocking_p2p=s.synchronous_p2p)
    # the weight all-gathers (overlapped before the first forward, or after the optimizer) are always in the
    # graph, lasting 0 s where the plan has none: a zero-length task moves no start or end, and plans differing
    # only in those flags share one graph (the size-bounded cache holds a third as many graphs otherwise)
    if reuse is not None and reuse[2] == c and reuse[0]._replace(micro_batches=0) == shape._replace(micro_batches=0):
        return shape, reuse[1], c
    costs = c.passes
    split = s.schedule in SPLIT_BACKWARD
    # the SMs a fused pair's communication kernels hold (costs.overlapped)
    share = min(1.0, PAIR_COMM_SMS / cluster.gpu.sm_count)
    cost: dict[object, PassCost] = {}
    for i in range(p):
        for ch in range(v):
            # the chunk holds the embedding / output layer when first / last of its pipeline (DualPipe: direction)
            at_ends = ends(s.schedule, virtual_stage(s.schedule, i, ch, p), p, v)
            for fwd in (True, False):
                cost[(i, fwd, ch)] = costs[(fwd, *at_ends)]
            if split:
                # zero-bubble schedules: the backward as B (input gradients) and W (weight gradients); a family
                # that does not price W leaves the whole backward in B
                w = c.weight_grad[at_ends] if c.weight_grad is not None else PassCost(0.0, ())
                cost[(i, "B", ch)], cost[(i, "W", ch)] = split_backward(cost[(i, False, ch)], w)
            for kind in (False, "W") if segments else ():
                # the last backward that produces a chunk's gradients: a whole backward, or a split one's W
                b = cost.get((i, kind, ch))
                if b is not None:
                    cost[("segment", i, ch, kind)] = PassCost(b.seconds / segments,
                                                              tuple((k, x / segments) for k, x in b.parts))
        if s.schedule in FUSED_PAIRS:
            # DualPipe(V)'s fused pair: a forward of one chunk with the whole backward of the other
            for ch in range(v):
                cost[(i, "F&B", ch)] = overlapped(cost[(i, True, ch)], cost[(i, False, v - 1 - ch)], share)
        cost[("optimizer", i)] = PassCost(c.optimizer[i], (("optimizer", c.optimizer[i]),))
        if c.reduce_all is not None:
            cost[("reduce_all", i)] = _comm(c.reduce_all[i])
        cost[("final_gather", i)] = _comm(c.final_gather[i] if c.final_gather is not None else 0.0)
    cost["hop"] = PassCost(c.hop, (("pp", c.hop),)) if shape.blocking_p2p else _comm(c.hop)
    cost["shard_gather"], cost["shard_reduce"] = _comm(c.shard_gather), _comm(c.shard_reduce)
    if c.segment_reduce is not None:
        cost["segment_reduce"] = _comm(c.segment_reduce)
    # the wait before a chunk's first forward, then the buckets that arrive while it runs
    gather = c.param_gather if c.param_gather is not None else 0.0
    lead = gather if c.param_gather_lead is None else c.param_gather_lead
    cost["param_gather"], cost["param_gather_rest"] = _comm(lead), _comm(gather - lead)
    if c.tied is not None:
        cost["tied"] = _comm(c.tied)
    return shape, cost, c


def _comm(seconds: float) -> PassCost:
    return PassCost(seconds, ())


GRAPH_CACHE_TASKS = 4_000_000   # ~1 GB: a cached graph takes ~250 bytes per task (measured, tracemalloc)


@sized_cache(GRAPH_CACHE_TASKS, lambda g: len(g.tasks))   # a space may hold > 300 shapes of < 50k tasks each
def _graph(shape: _Shape) -> _Graph:
    """The task graph of one step of ``shape``; plans of one shape (say, differing in TP or recompute) share it."""
    p, m, v = shape.stages, shape.micro_batches, shape.chunks
    tasks = Tasks()
    slots: dict[object, int] = {}

    def slot(key: object) -> int:
        return slots.setdefault(key, len(slots))

    orders = [stage_order(shape.schedule, i, p, m, v) for i in range(p)]
    comp = [tasks.stream(f"stage{i}.compute") for i in range(p)]
    fwd_link = [tasks.stream(f"stage{i}.pp_send_fwd") for i in range(p)]
    bwd_link = [tasks.stream(f"stage{i}.pp_send_bwd") for i in range(p)]
    dp_stream = [tasks.stream(f"stage{i}.dp") for i in range(p)]
    add = tasks.add
    passes: tuple[dict[int, Step], ...] = tuple({} for _ in range(p))
    on_compute: list[list[int]] = [[] for _ in range(p)]   # each stage's compute-stream tasks
    last_backward = _last_backward_steps(orders) if shape.segments else {}
    dp_tasks: list[list[int]] = [[] for _ in range(p)]
    gather_first: dict[tuple[int, int], int] = {}
    if shape.param_gather:
        for i in range(p):
            for c in range(v):
                gather_first[(i, c)] = add(dp_stream[i], slot("param_gather"), (), "dp", None)
                add(dp_stream[i], slot("param_gather_rest"), (), "dp", None)
    hop, shard_gather, shard_reduce = slot("hop"), slot("shard_gather"), slot("shard_reduce")
    pass_slot = {(i, fwd, c): slot((i, fwd, c)) for i in range(p) for fwd in (True, False) for c in range(v)}
    parts = {st.part for st in orders[0]} - {""}
    if parts:
        pass_slot.update({(i, part, c): slot((i, part, c)) for i in range(p) for part in ("B", "W") for c in range(v)})
    if "&" in parts:
        pass_slot.update({(i, "F&B", c): slot((i, "F&B", c)) for i in range(p) for c in range(v)})
    fused: list[tuple[Step, list[int]] | None] = [None] * p   # per stage, a fused forward waiting for its backward
    stage_of_vs = {virtual_stage(shape.schedule, i, c, p): i for i in range(p) for c in range(v)}
    at_ends = {vs: ends(shape.schedule, vs, p, v) for vs in stage_of_vs}   # (first, last) of its pipeline
    sent: dict[tuple[bool, int, int], int] = {}          # (forward, micro-batch, virtual stage) -> arriving send
    waiting: dict[tuple[bool, int, int], list[int]] = {}  # the same key -> deps of a pass created before its send
    last_task = [0] * p
    t_res, t_dur, t_deps, t_kind, t_label = tasks.resource, tasks.duration, tasks.deps, tasks.kind, tasks.label

    def _send(i: int, target: tuple[bool, int, int], link: int, last: int) -> None:
        """Stage ``i``'s pass ``last`` feeds the pass ``target`` (forward, micro-batch, virtual stage) over ``link``."""
        if stage_of_vs[target[2]] == i:
            # a V shape's turn on its last rank: the next chunk is on this GPU, nothing to send
            _deliver(target, last, sent, waiting)
            return
        t_res.append(comp[i] if shape.blocking_p2p else link)
        if shape.blocking_p2p:
            # synchronous p2p (Megatron-LM's batch_isend_irecv + cuda synchronize): the sender's compute waits
            on_compute[i].append(len(t_dur))
        send = len(t_dur)                              # add(link, hop, (last,), "pp", None), inlined
        t_dur.append(hop)
        t_deps.append((last,))
        t_kind.append("pp")
        t_label.append(None)
        _deliver(target, send, sent, waiting)
    # stages take turns step by step, so most dependencies already exist when a task is added (engine fast path)
    for st, i in _round_robin(orders):
        fwd, mb, chunk, part = st
        vs = virtual_stage(shape.schedule, i, chunk, p)
        if part == "W":
            d: list[int] = []                          # after its B, earlier on this stream
        else:
            key = (fwd, mb, vs)
            arrived = sent.pop(key, None)
            if arrived is None:
                d = []
                waiting[key] = d
            else:
                d = [arrived]
        if fwd and mb == 0 and shape.param_gather:
            d.append(gather_first[(i, chunk)])
        if shape.shard_gather:
            # ZeRO-3 gathers a chunk's weights before every pass (Rajbhandari et al. 2020, §5.3)
            d.append(add(dp_stream[i], shard_gather, (), "dp", None))
        if part == "&":
            fused[i] = (st, d)                         # one task with the next step (DualPipeV)
            continue
        pair = fused[i]
        if pair is not None:
            # the fused task waits for both passes' inputs: one dependency list, kept where a late send finds it
            fused[i] = None
            d_fwd = pair[1]
            d_fwd.extend(d)
            if waiting.get((fwd, mb, vs)) is d:
                waiting[(fwd, mb, vs)] = d_fwd
            last = add(comp[i], pass_slot[(i, "F&B", pair[0].chunk)], d_fwd, "pass", None)
            passes[i][last] = Step(False, mb, chunk, "&")
            on_compute[i].append(last)
            last_task[i] = last
            f_vs = virtual_stage(shape.schedule, i, pair[0].chunk, p)
            if not at_ends[f_vs][1]:
                _send(i, (True, pair[0].micro_batch, f_vs + 1), fwd_link[i], last)
            if not at_ends[vs][0]:
                _send(i, (False, mb, vs - 1), bwd_link[i], last)
            continue
        if not fwd and part != "B" and shape.segments and last_backward[(i, chunk)] == mb:
            # the last backward of a chunk, in bucket-sized pieces; each piece's gradients reduce as it ends
            piece = slot(("segment", i, chunk, part or False))
            for j in range(shape.segments):
                last = add(comp[i], piece, d if j == 0 else (), "pass", None)
                passes[i][last] = st
                on_compute[i].append(last)
                if shape.segment_reduce:
                    dp_tasks[i].append(add(dp_stream[i], slot("segment_reduce"), (last,), "dp", None))
        else:
            last = len(t_dur)                          # add(comp[i], ..., d, "pass", None), inlined
            t_res.append(comp[i])
            t_dur.append(pass_slot[(i, part or fwd, chunk)])
            t_deps.append(d)
            t_kind.append("pass")
            t_label.append(None)
            passes[i][last] = st
            on_compute[i].append(last)
            if shape.shard_reduce and not fwd and part != "B":
                # ZeRO-2/3 reduce-scatter gradients after every micro-batch (Rajbhandari et al. 2020, §5.2)
                dp_tasks[i].append(add(dp_stream[i], shard_reduce, (last,), "dp", None))
        last_task[i] = last
        first_vs, last_vs = at_ends[vs]
        if fwd and not last_vs:
            target = (True, mb, vs + 1)
            link = fwd_link[i]
        elif not fwd and part != "W" and not first_vs:
            target = (False, mb, vs - 1)
            link = bwd_link[i]
        else:
            continue
        _send(i, target, link, last)
    for i in range(p):
        last_pass = last_task[i]
        if shape.reduce_all:
            dp_tasks[i].append(add(dp_stream[i], slot(("reduce_all", i)), (last_pass,), "dp", None))
        if shape.tied and i in (0, p - 1):
            dp_tasks[i].append(add(dp_stream[i], slot("tied"), (last_pass,), "dp", None))
        opt = add(comp[i], slot(("optimizer", i)), tuple(dp_tasks[i]) + (last_pass,), "optimizer", None)
        on_compute[i].append(opt)
        if shape.final_gather:
            add(dp_stream[i], slot(("final_gather", i)), (opt,), "dp", None)
    tasks.deps[:] = [tuple(d) for d in tasks.deps]
    counts: list[list[tuple[int, int]]] = [[] for _ in tasks.resources]
    for (r, k), n in Counter(zip(tasks.resource, tasks.duration)).items():
        counts[r].append((k, n))
    stream_slots = tuple(map(tuple, counts))
    return _Graph(tasks, tuple(slots), passes, tuple(map(tuple, on_compute)), stream_slots, plan_of(tasks))


def _deliver(target: tuple, task: int, sent: dict, waiting: dict) -> None:
    """``target``'s pass waits on ``task``: added to its dependencies if it exists, else kept until it does."""
    consumer = waiting.pop(target, None)
    if consumer is None:
        sent[target] = task
    else:
        consumer.append(task)


def _round_robin(orders: list) -> list[tuple]:
    """(step, stage) pairs: every stage's first step, then every stage's second, …; each stage keeps its order."""
    longest = max(len(o) for o in orders)
    return [(o[k], i) for k in range(longest) for i, o in enumerate(orders) if k < len(o)]


def _last_backward_steps(orders: list) -> dict[tuple[int, int], int]:
    last: dict[tuple[int, int], int] = {}
    for i, order in enumerate(orders):
        for st in order:
            if not st.forward and st.part != "B":
                last[(i, st.chunk)] = st.micro_batch
    return last
