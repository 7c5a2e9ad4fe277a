"""A lower bound on a plan's simulated step from its task durations alone (no run): what the exhaustive search
asks of a plan before simulating it, once the family's cheaper bound has let it through.

Two chains every step of a GPipe, 1F1B or interleaved schedule contains (``workload._graph``):

- **fill, stage, drain.** Stage i's first pass waits for micro-batch 0's forward through the i stages before it
  (their first chunks and i transfers), and its last pass, micro-batch m−1's backward of chunk 0, is followed by
  that backward through the same i stages: ``head_i + busy_i + max(tail_i, optimizer_i + final gather_i)``. With
  equal stages this is the 1F1B makespan (m + p − 1)(f + b) (Narayanan et al. SC'21 §2.2, eq. 1).
- **a DP stream's busy time.** A stream runs its tasks one after another, and the optimizer waits for the last
  gradient reduction: the DP stream's tasks before the optimizer, then the optimizer and the weight gather after
  it. ZeRO-2's reduce-scatter after every backward makes this the longer chain on large DP groups.
- **a DP stream's reductions after their release.** A reduction starts after the compute task it follows, which
  ends no earlier than the stage's fill and the compute tasks before it: for every reduction k, the fill, the
  compute up to k, and the reductions from k on (a single machine with release times: Lawler 1973's
  max_k (r_k + Σ_{j≥k} p_j)). Under ZeRO-2 with a pipeline the reductions that follow the last backwards pile up
  at the end of the step.

Both are chains of tasks that run one after another, so no schedule of them is shorter (Graham 1969). Link
contention only lengthens transfers and collectives. Zero-bubble schedules, whose stages may end on a weight
gradient, keep the fill and the DP stream; DualPipe(V) keeps the fill of the nearer end and counts its fused pairs
from the compiled program.
"""

from __future__ import annotations

import numpy as np

from autoplan.sim.program import program
from autoplan.sim.workload import step_slot_costs
from autoplan.specs.layout import BIDIRECTIONAL, virtual_stage
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

CHAINED = ("gpipe", "1f1b", "interleaved")
"""Schedules whose stage i starts with micro-batch 0's forward of chunk 0 and ends with a backward of chunk 0, every
backward whole (``orders._warmup_steady_cooldown``)."""

HEADED = ("zb-h1", "zbv")
"""Zero-bubble schedules: stage i starts with micro-batch 0's forward of chunk 0 too, but may end with a weight
gradient (W), after which nothing need follow; their backwards run as B and W (``orders._zb_h1``, ``_zbv``)."""

FUSED = ("dualpipev", "dualpipe")
"""DualPipe(V): fused forward-backward pairs, counted from the compiled program's compute stream; DualPipe's two
directions each start a pipeline at one end."""

ROUNDING = 1 - 1e-9
"""The bound is a sum taken in another order than the simulator's: kept below it by more than rounding."""


def step_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds no simulation of plan ``s`` (valid) can be shorter than; 0 for a schedule outside ``CHAINED``,
    ``HEADED`` and ``FUSED``."""
    if s.schedule not in CHAINED and s.schedule not in HEADED and s.schedule not in FUSED:
        return 0.0
    shape, cost, _ = step_slot_costs(model, cluster, s)
    if s.schedule in FUSED:
        return _fused_bound(shape, cost) * ROUNDING
    p, m, v = shape.stages, shape.micro_batches, shape.chunks
    split = s.schedule in HEADED
    hop, gather = cost["hop"].seconds, cost["param_gather"].seconds
    head, tail, best = gather, 0.0, 0.0
    for i in range(p):
        backward = [cost[(i, "B", c)].seconds + cost[(i, "W", c)].seconds if split else cost[(i, False, c)].seconds
                    for c in range(v)]
        busy = m * sum(cost[(i, True, c)].seconds + backward[c] for c in range(v))
        after = cost[("optimizer", i)].seconds + cost[("final_gather", i)].seconds
        best = max(best, head + busy + (after if split else max(tail, after)), _dp_chain(shape, cost, i, split))
        # the next stage's first forward waits for this stage's chunk 0 and the transfer; its last backward
        # feeds this stage's chunk 0 the same way
        head += cost[(i, True, 0)].seconds + hop
        tail += cost[(i, False, 0)].seconds + hop
    return best * ROUNDING


def release_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """Seconds no simulation of plan ``s`` (valid) can be shorter than, from each stage's DP-stream reductions after
    their release; 0 unless ZeRO-2/3 reduce-scatters after every backward of a ``CHAINED`` or ``HEADED`` schedule.
    It compiles the step's program, so the search asks it last, of the plans it would otherwise simulate."""
    if s.zero < 2 or (s.schedule not in CHAINED and s.schedule not in HEADED):
        return 0.0                      # below ZeRO-2 gradients stay whole until the step's end (ZeRO §5.2)
    shape, cost, _ = step_slot_costs(model, cluster, s)
    if not shape.shard_reduce:
        return 0.0
    hop, head, best = cost["hop"].seconds, cost["param_gather"].seconds, 0.0
    for i, chain in enumerate(_released_chains(shape, cost)):
        best = max(best, head + chain)
        head += cost[(i, True, 0)].seconds + hop
    return best * ROUNDING


def _released_chains(shape, cost: dict) -> list[float]:
    """Per stage, from its first task's start: the latest of (compute up to a reduction, then that reduction and
    every later one on the DP stream), then the optimizer and the weight gather after it. Tasks run in pieces or
    with several dependencies (``Special``) count one piece and no reduction: a lower bound still."""
    prog = program(shape)
    sec = np.array([cost[k].seconds for k in prog.keys])
    a = prog.arrays
    done = np.cumsum(sec.take(a["slot"]))
    red = a["reduce"]
    reduces = np.where((red >= 0) & (a["key"] >= -1), sec.take(np.maximum(red, 0)), 0.0)
    out = []
    for i, (tail_reduce, tied, optimizer, final) in enumerate(prog.tails):
        lo, hi = int(a["bounds"][i]), int(a["bounds"][i + 1])
        compute = done[lo:hi] - (done[lo - 1] if lo else 0.0)
        after_all = sum(float(sec[x]) for x in (tail_reduce, tied) if x >= 0)
        r = reduces[lo:hi]
        later = np.cumsum(r[::-1])[::-1] + after_all
        at = r > 0.0
        chain = max(float((compute[at] + later[at]).max()) if at.any() else 0.0, float(compute[-1]) + after_all)
        out.append(chain + float(sec[optimizer]) + (float(sec[final]) if final >= 0 else 0.0))
    return out


def _fused_bound(shape, cost: dict) -> float:
    """DualPipe(V): each stage's compute stream (its tasks counted in the compiled program) after the shortest
    forward chain that feeds one of its model pieces, then the weight gather; and each DP stream's tasks, the
    optimizer after them where it waits for a reduction on that stream."""
    prog = program(shape)
    p, v = shape.stages, shape.chunks
    holder = {virtual_stage(shape.schedule, i, c, p): (i, c) for i in range(p) for c in range(v)}
    first_of = (lambda vs: vs - vs % p) if shape.schedule == BIDIRECTIONAL else (lambda vs: 0)
    best = 0.0
    for i in range(p):
        # every pass of a piece waits for some micro-batch's forwards through the pieces before it (transfers left
        # out: never negative)
        head = min(sum(cost[(holder[u][0], True, holder[u][1])].seconds for u in range(first_of(vs), vs))
                   for vs in (virtual_stage(shape.schedule, i, c, p) for c in range(v)))
        compute, _, _, dp = (sum(n * cost[prog.keys[k]].seconds for k, n in stream) for stream in prog.counts[i])
        best = max(best, head + compute + cost[("final_gather", i)].seconds)
        waits = any(_reduces(prog.keys[k]) for k, _ in prog.counts[i][3])
        best = max(best, dp + (cost[("optimizer", i)].seconds if waits else 0.0))
    return best


def _reduces(key: object) -> bool:
    """A DP-stream task the optimizer waits for (``workload._graph``'s ``dp_tasks``)."""
    name = key[0] if isinstance(key, tuple) else key
    return name in ("shard_reduce", "segment_reduce", "reduce_all", "tied")


def _dp_chain(shape, cost: dict, i: int, split: bool) -> float:
    """Stage ``i``'s DP stream before the optimizer, then (if the optimizer waits for a reduction on it) the
    optimizer, then the weight gather after it."""
    m, v = shape.micro_batches, shape.chunks
    gathers = v * (cost["param_gather"].seconds + cost["param_gather_rest"].seconds)
    if shape.shard_gather:
        gathers += (3 if split else 2) * m * v * cost["shard_gather"].seconds     # before every pass (F, B, W)
    reduces = []                                   # (count, seconds) of the tasks the optimizer waits for
    if shape.shard_reduce:
        # after every backward (its W when split) but a chunk's last when that one runs in pieces (which reduce on
        # their own)
        reduces.append((m * v - (v if shape.segments else 0), cost["shard_reduce"].seconds))
    if shape.segment_reduce and shape.segments:
        reduces.append((v * shape.segments, cost["segment_reduce"].seconds))
    if shape.reduce_all:
        reduces.append((1, cost[("reduce_all", i)].seconds))
    if shape.tied and i in (0, shape.stages - 1):
        reduces.append((1, cost["tied"].seconds))
    waited = sum(n * x for n, x in reduces)
    optimizer = cost[("optimizer", i)].seconds if any(n for n, _ in reduces) else 0.0
    return gathers + waited + optimizer + cost[("final_gather", i)].seconds
