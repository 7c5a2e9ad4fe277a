"""One simulated step, run stage by stage without building its task graph: the search's fast path.

``workload._graph`` lowers a step into tasks on four streams per stage; ``engine.run`` times them. ``program``
compiles a shape's step into per-stage lists (once per shape); ``run`` times them with one Python generator per
stage, which parks on a transfer not yet sent, and reads the breakdown on the way. The two steady-state samples
``simulate`` extends from share the shorter one's first 75-90 % (``program.shared_prefix``), run once.

The answer is the graph's, bit for bit: every task's end is the same ``max(...) + seconds`` of the same floats
(a maximum does not depend on the order it is taken in), every breakdown term is summed in the order
``metrics.stage_breakdowns`` sums it, and a gap is charged to the first dependency (in the graph's dependency
order) that ends when the task starts. tests/sim/test_pipeline.py checks this bit for bit against
``simulate_step`` over every schedule and DP option.
"""

from __future__ import annotations

from itertools import accumulate, islice, repeat
from typing import NamedTuple

import numpy as np

from autoplan.sim.engine import CycleError
from autoplan.sim.metrics import BREAKDOWN_KINDS
from autoplan.sim.program import Program, Special, cycle_gc_paused, pair_split, program
from autoplan.sim.workload import slot_costs, step_slot_costs
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

try:
    from autoplan.sim import _runner
except ImportError:                                     # installed without a C compiler: the generators below
    _runner = None

USE_COMPILED = True
"""Run the stages with the C runner where it was built (tests switch it off to hold the generators to the same
bits)."""

Totals = tuple[float, list[dict[str, float]], list[dict[str, float]]]
"""Step time, per-stage breakdowns and per-stage stream activities, as ``simulate._totals`` returns them."""


class Ends(NamedTuple):
    """A run stopped before each stage's tail (``run(..., tails=True)``)."""

    states: list[tuple]
    """Per stage after its last task: compute-stream end, last pass's end, forward and backward link ends, DP
    stream end, latest DP end and that collective's start."""
    accs: list[dict[str, float]]
    """Per stage, its breakdown so far."""
    tails: tuple
    """Per stage, ``Stage.tail``."""
    sec: list[float]
    tail_extra: list[list[float] | None]
    """Per stage, the extra seconds of its tail's DP tasks (None: not slowed)."""
    acts: list[dict[str, float]]
    """Per stage, its streams' busy seconds (the whole step's)."""


class Slowed(NamedTuple):
    """What link contention adds to a run (``sim/flows.py``; ``contention.contend`` on the graph)."""

    hops: np.ndarray
    """Seconds of each transfer (by id): the hop's, plus what sharing links added."""
    dp: np.ndarray
    """The extra seconds of every DP-stream task: stage i's in stream order at ``dp_bounds(prog)[i]`` on."""
    stretched: list[float]
    """Extra seconds per stream, as the graph numbers them (stage i: compute i, forward link p + i, backward link
    2p + i, DP 3p + i)."""


@cycle_gc_paused
def totals(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> Totals:
    """Step time, stage breakdowns and stream activities of plan ``s``'s step with every micro-batch: the same
    floats as ``simulate_step`` and ``metrics`` give."""
    shape, cost = slot_costs(model, cluster, s)
    return run(program(shape), cost)[0]


@cycle_gc_paused
def totals_pair(model: ModelSpec, cluster: ClusterSpec, a: Plan, b: Plan) -> tuple[Totals, Totals]:
    """``totals`` of two plans that differ only in their micro-batch count (``a``'s the smaller): B is run
    whole and A from where their runs part (``shared_prefix``), when their shapes and seconds allow it."""
    answer_b = step_slot_costs(model, cluster, b)
    shape_a, cost_a, _ = step_slot_costs(model, cluster, a, reuse=answer_b)
    shape_b, cost_b, _ = answer_b
    same = (shape_a._replace(micro_batches=0) == shape_b._replace(micro_batches=0)
            and shape_a.micro_batches < shape_b.micro_batches)
    split = pair_split(shape_a, shape_b) if same else None
    prog_b = program(shape_b)
    if split is None:
        return run(program(shape_a), cost_a)[0], run(prog_b, cost_b)[0]
    prog_a = program(shape_a, shape_b.micro_batches)
    sec_a = [cost_a[k].seconds for k in prog_a.keys]
    if sec_a != [cost_b[k].seconds if k in cost_b else None for k in prog_a.keys]:
        return run(prog_a, cost_a)[0], run(prog_b, cost_b)[0]
    stops, resent = split
    tb, arrays, snaps = run(prog_b, cost_b, stops=stops)
    ta, _, _ = run(prog_a, cost_a, resume=(stops, snaps, arrays, resent))
    return (ta, tb) if ta is not None else (run(prog_a, cost_a)[0], tb)


def run(prog: Program, cost: dict, stops: list[int] | None = None, resume: tuple | None = None,
        slowed: Slowed | None = None, tails: bool = False) -> tuple[Totals | None, tuple, list]:
    """Time ``prog`` with the seconds of ``cost`` (slot key -> PassCost): its totals, its transfers' (ends,
    starts) and its DP-stream tasks' (starts, ends) (stage i's in stream order from ``dp_bounds(prog)[i]`` on), and,
    with ``stops``, each stage's state after its first ``stops[i]`` tasks. ``resume``: (stops, states, transfers,
    transfers to forget) of another program's run to start from (``totals_pair``); its totals None when a stage's
    breakdown does not start from the same seconds there. ``slowed``: the extra seconds of transfers and DP
    collectives that share links (``sim/flows.py``). ``tails``: each stage's state before its tail (``finish``
    takes it) and its breakdown so far instead of the totals. The stages run in C where the package was built with
    its runner (``_runner.c``), else as Python generators: the same floats either way."""
    sec, parts, busy_alone = seconds(prog, cost)
    p = prog.stages
    accs = []
    for i in range(p):
        acc = dict(parts[i])
        if slowed is not None and slowed.stretched[i]:
            acc["pp"] += slowed.stretched[i]              # sends on the compute stream (synchronous p2p), slowed
        if resume is not None and resume[0][i] and resume[1][i][-1] != (acc["pp"], acc["dp"], acc["bubble"]):
            return None, (), []                         # a different start of the breakdown sums
        accs.append(acc)
    bounds = dp_bounds(prog)
    note_start, note_end = np.full(bounds[-1], np.nan), np.full(bounds[-1], np.nan)
    runner = _run_compiled if compiled() else _run_generators
    results, arr_end, arr_start, snaps, noted = runner(prog, sec, accs, (bounds, note_start, note_end), stops,
                                                       resume, slowed)
    acts = []
    for i, busy in enumerate(busy_alone):
        if slowed is not None:
            busy = [x + slowed.stretched[i + k * p] for k, x in enumerate(busy)]
        acts.append({"compute": busy[0], "pp_send_fwd": busy[1], "pp_send_bwd": busy[2], "dp": busy[3]})
    recorded = (arr_end, arr_start, note_start, note_end)
    # each stage's DP tasks after those it has run: its tail's, with their extra seconds
    after = [bounds[i] + noted[i] for i in range(p)]
    if tails:
        extra = [slowed.dp[after[i]:bounds[i + 1]].tolist() if slowed is not None else None for i in range(p)]
        return Ends(results, accs, prog.tails, sec, extra, acts), recorded, snaps
    dps = [(None, iter(slowed.dp[after[i]:bounds[i + 1]].tolist()).__next__ if slowed is not None
            else repeat(0.0).__next__, _Notes(note_start, after[i]), _Notes(note_end, after[i])) for i in range(p)]
    makespan, breakdowns = finish(prog.tails, sec, results, accs, dps)
    return (makespan, breakdowns, acts), recorded, snaps


def seconds(prog: Program, cost: dict) -> tuple[list[float], list[dict[str, float]], list[list[float]]]:
    """Each slot's seconds (and -1.0 for "no task" at the end), each stage's compute by kind before any wait
    (``_stage_parts``) and each stream's busy seconds (compute, forward and backward link, DP), before contention:
    what every run of ``prog`` with ``cost`` starts from (kept with the program for the last ``cost`` asked)."""
    got = prog.made.get("seconds")
    if got is not None and got[0] is cost:
        return got[1]
    by_slot = [cost[k] for k in prog.keys]
    sec = [c.seconds for c in by_slot] + [-1.0]            # slot -1 -> -1.0: "no task"
    parts = []
    for counts in prog.counts:
        acc = dict.fromkeys(BREAKDOWN_KINDS, 0.0)
        acc.update(_stage_parts(counts[0], by_slot))
        parts.append(acc)
    busy = [[sum(n * sec[k] for k, n in c) for c in counts] for counts in prog.counts]
    prog.made["seconds"] = (cost, (sec, parts, busy))
    return sec, parts, busy


def compiled() -> bool:
    """Whether ``run`` times stages with the C runner (``_runner.c``)."""
    return _runner is not None and USE_COMPILED


def dp_bounds(prog: Program) -> list[int]:
    """Where each stage's DP-stream tasks start in a flat array of all of them (stage after stage, each in stream
    order, its tail's included), and the end (kept with the program)."""
    got = prog.made.get("dp_bounds")
    if got is None:
        sizes = [sum(n for _, n in prog.counts[i][3]) for i in range(prog.stages)]
        got = prog.made["dp_bounds"] = [0, *accumulate(sizes)]
    return got


class _Notes:
    """Notes a stage's DP-stream times into its block of a flat array, from position ``at`` on."""

    __slots__ = ("values", "at")

    def __init__(self, values: np.ndarray, at: int) -> None:
        self.values, self.at = values, at

    def __call__(self, x: float) -> None:
        self.values[self.at] = x
        self.at += 1


def _run_generators(prog: Program, sec: list, accs: list[dict], notes: tuple, stops: list[int] | None,
                    resume: tuple | None, slowed: Slowed | None) -> tuple:
    """``run``'s stages as Python generators, one per stage, each parked (a yield of the transfer's id) on a
    transfer not yet sent: (each stage's state after its last task, transfers' ends (None: not sent) and starts,
    each stage's state after its first ``stops[i]`` tasks, each stage's DP-stream tasks noted in ``notes``)."""
    p = prog.stages
    bounds, note_start, note_end = notes
    if slowed is None:
        hops = [sec[prog.hop]] * prog.transfers
        more = [repeat(0.0).__next__ for _ in range(p)]
    else:
        hops = slowed.hops.tolist()
        more = [iter(slowed.dp[bounds[i]:bounds[i + 1]].tolist()).__next__ for i in range(p)]
    if resume is None:
        arr_end: list = [None] * prog.transfers
        arr_start: list = [0.0] * prog.transfers
    else:
        arr_end, arr_start = list(resume[2][0]), resume[2][1]
        for k in resume[3]:
            arr_end[k] = None
    waiter = [-1] * prog.transfers
    ready: list[int] = []
    results: list = [None] * p
    snaps: list = [None] * p
    gens = []
    started: list[list[float]] = [[] for _ in range(p)]
    ended: list[list[float]] = [[] for _ in range(p)]
    for i in range(p):
        dp = (hops, more[i], started[i].append, ended[i].append)
        if resume is not None:
            skip, state = resume[0][i], resume[1][i]
            st = prog.stage(i, skip)
            make = _fused_stage if st.fused_keys is not None else _stage
            gens.append(make(i, st, sec, prog, accs[i], arr_end, arr_start, waiter, ready, results, dp,
                             state=state if skip else None))
        else:
            st = prog.stage(i)
            make = _fused_stage if st.fused_keys is not None else _stage
            gens.append(make(i, st, sec, prog, accs[i], arr_end, arr_start, waiter, ready, results, dp,
                             stop=stops[i] if stops else None, snaps=snaps))
    ready.extend(range(p - 1, -1, -1))
    finished = 0
    while ready:
        i = ready.pop()
        key = next(gens[i], None)
        if key is None:
            finished += 1
        else:
            waiter[key] = i
    if finished < p:
        raise CycleError(f"{p - finished} pipeline stages wait on each other in a cycle")
    for i in range(p):
        # each stage's notes into its block of the flat arrays, at once
        note_start[bounds[i]:bounds[i] + len(started[i])] = started[i]
        note_end[bounds[i]:bounds[i] + len(ended[i])] = ended[i]
    return results, arr_end, arr_start, snaps, [len(x) for x in started]


def _run_compiled(prog: Program, sec: list, accs: list[dict], notes: tuple, stops: list[int] | None,
                  resume: tuple | None, slowed: Slowed | None) -> tuple:
    """``_run_generators`` in C (``_runner.c``): the same answer, transfers' ends as an array (NaN: not sent)."""
    p, c = prog.stages, _compiled(prog)
    bounds, note_start, note_end = notes
    n_t = prog.transfers
    if resume is None:
        arr_end, arr_start = np.full(n_t, np.nan), np.zeros(n_t)
        starts = states = has_state = None
    else:
        arr_end = np.array(resume[2][0], dtype=float)
        arr_end[resume[3]] = np.nan
        arr_start = np.asarray(resume[2][1], dtype=float)
        starts = np.array(resume[0], dtype=np.int32)
        has_state = np.array([bool(k) for k in resume[0]], dtype=np.uint8)
        states = np.array([(*s[:7], *s[7]) if k else (0.0,) * 10 for k, s in zip(resume[0], resume[1])])
    if slowed is None:
        hops, more = np.full(n_t, sec[prog.hop]), None
    else:
        hops, more = slowed.hops, slowed.dp
    acc = np.array([(a["pp"], a["dp"], a["bubble"]) for a in accs])
    init = acc.copy()
    results, snaps, noted = np.zeros((p, 7)), np.zeros((p, 10)), np.zeros(p, np.int32)
    finished = _runner.run(
        p, prog.chunks, prog.param_gather, prog.param_gather_rest, prog.shard_gather, len(sec) - 1, c["bounds"],
        starts, np.array(stops, dtype=np.int32) if stops else None, c["slot"], c["key"], c["send"], c["link"],
        c["reduce"], c["fkey"], c["fsend"], c["flink"], c["ffirst"], np.array(sec), hops, arr_end, arr_start,
        *c["specials"], more, c["dp_bounds"], acc, states, has_state, results, snaps, np.full(n_t, -1, np.int32),
        np.zeros(2 * p * max(1, prog.chunks)), note_start, note_end, noted)
    if finished < p:
        raise CycleError(f"{p - finished} pipeline stages wait on each other in a cycle")
    for a, (pp, dp, bubble) in zip(accs, acc.tolist()):
        a["pp"], a["dp"], a["bubble"] = pp, dp, bubble
    out = [tuple(r) for r in results.tolist()]
    kept = [None] * p
    if stops:
        kept = [(*s[:7], tuple(s[7:]), tuple(i)) for s, i in zip(snaps.tolist(), init.tolist())]
    return out, arr_end, arr_start, kept, noted.tolist()


def _compiled(prog: Program) -> dict:
    """``prog``'s columns as the C runner reads them (int32, contiguous) and its special tasks flattened (kept
    with the program)."""
    got = prog.made.get("runner")
    if got is not None:
        return got
    a = prog.arrays
    col = {k: (np.ascontiguousarray(a[k], dtype=np.int32) if a[k] is not None else None)
           for k in ("bounds", "slot", "key", "send", "link", "reduce", "fkey", "fsend", "flink")}
    col["ffirst"] = np.ascontiguousarray(a["ffirst"], dtype=np.uint8) if a["ffirst"] is not None else None
    col["dp_bounds"] = np.array(dp_bounds(prog), dtype=np.int32)
    col["specials"] = prog.specials.flat()
    prog.made["runner"] = col
    return col


def finish(tails: tuple, sec: list, states: list[tuple], accs: list[dict],
           dps: list[tuple]) -> tuple[float, list[dict[str, float]]]:
    """Each stage's tail (``_tail``) from its state after its last task (``states``: e, lp, lf, lb, de, dmax,
    dstart; ``accs``: its breakdown so far, completed in place), then the step's makespan and breakdowns, every
    stage idle from its optimizer's end to the makespan."""
    ends = [_tail(tail, sec, *state, acc, dp) for tail, state, acc, dp in zip(tails, states, accs, dps)]
    makespan = max(r[0] for r in ends)
    for _, e_last, acc in ends:
        acc["bubble"] += makespan - e_last
    return makespan, [r[2] for r in ends]


def finish_ends(ends: Ends, states: list[tuple] | None = None, accs: list[dict] | None = None,
                acts: list[dict] | None = None) -> Totals:
    """The totals of a run stopped before its tails (``run(..., tails=True)``), from its own states and breakdowns
    or from others of the same program's tails (an extended step's: ``simulate``)."""
    states = ends.states if states is None else states
    accs = [dict(a) for a in (ends.accs if accs is None else accs)]
    dps = [(None, iter(x).__next__ if x is not None else repeat(0.0).__next__, _ignore, _ignore)
           for x in ends.tail_extra]
    makespan, breakdowns = finish(ends.tails, ends.sec, states, accs, dps)
    return makespan, breakdowns, ends.acts if acts is None else acts


def _ignore(_: float) -> None:
    return None


def _stage_parts(counts: tuple[tuple[int, int], ...], by_slot: list) -> dict[str, float]:
    """Seconds of a compute stream by kind (``Lowered.stage_parts``)."""
    acc: dict[str, float] = {}
    for slot, n in counts:
        for k, sec in by_slot[slot].parts:
            acc[k] = acc.get(k, 0.0) + n * sec
    return acc


def _attribute(gap: float, t: float, prev: float, start: float, kind: str, acc: dict) -> None:
    """``metrics.stage_breakdowns``: an idle gap ended by a transfer or a DP collective is partly its exposure."""
    if kind == "pp" or kind == "dp":
        waited = min(gap, t - max(prev, start))
        acc[kind] += waited
        acc["bubble"] += gap - waited
    else:
        acc["bubble"] += gap


def _gathers(prog: Program, sec: list, dp: tuple) -> tuple[list[float], list[float], float]:
    """Ends and starts of each chunk's overlapped weight gather, first on the DP stream (the part its first forward
    waits for, then the rest), and the stream's end."""
    g_end, g_start = [], []
    de, pg, rest = 0.0, sec[prog.param_gather], sec[prog.param_gather_rest]
    _, more, note_start, note_end = dp
    for _ in range(prog.chunks):
        g_start.append(de)
        note_start(de)
        de = de + (pg + more())
        g_end.append(de)
        note_end(de)
        note_start(de)
        de = de + (rest + more())
        note_end(de)
    return g_end, g_start, de


def _stage(i, st, sec, prog, acc, arr_end, arr_start, waiter, ready, results, dp, state=None, stop=None,
           snaps=None):
    """Run stage ``i``'s tasks ``st`` in order; a generator that parks (yields the transfer's id) on a transfer not
    yet sent. ``results[i]``: its state after its last task, before its tail (``finish``). ``dp``:
    each transfer's seconds, the next DP collective's extra seconds, and where to note each DP collective's start
    and end. ``stop``: keep the state after that many tasks in ``snaps[i]``; ``state``: the state to start from
    (``st`` then holds the tasks after those)."""
    hops, more, note_start, note_end = dp
    g_end, g_start, de = _gathers(prog, sec, dp)
    e = lf = lb = lp = dstart = 0.0
    dmax = -1.0
    pp, dpacc, bub = init = acc["pp"], acc["dp"], acc["bubble"]
    if state is not None:
        e, lf, lb, lp, de, dmax, dstart, (pp, dpacc, bub), _ = state
    specials = st.specials
    tasks = zip(map(sec.__getitem__, st.slots), st.keys, st.sends, st.links, map(sec.__getitem__, st.reduces))
    for part in (islice(tasks, stop), tasks) if stop is not None else (tasks,):
        for d, key, o, link, r in part:
            if key >= 0:
                a = arr_end[key]
                if a is None:
                    yield key
                    a = arr_end[key]
                if a > e:
                    gap = a - e
                    s0 = arr_start[key]
                    if s0 >= 0.0:
                        # a transfer's wait (metrics.stage_breakdowns): min(gap, t - max(prev_end, its start))
                        w = a - (e if e >= s0 else s0)
                        if gap < w:
                            w = gap
                        pp += w
                        bub += gap - w
                    else:
                        bub += gap
                    e = a + d
                else:
                    e = e + d
            elif key == -1:
                e = e + d
            else:
                acc["pp"], acc["dp"], acc["bubble"] = pp, dpacc, bub
                e, lf, lb, de, dmax, dstart, lp = yield from _special(
                    specials[-2 - key], d, e, lf, lb, de, dmax, dstart, dp, sec, prog, g_end, g_start, arr_end,
                    arr_start, waiter, ready, acc)
                pp, dpacc, bub = acc["pp"], acc["dp"], acc["bubble"]
                continue
            lp = e
            if r >= 0.0:
                s0 = e if e > de else de
                de = s0 + (r + more())
                note_start(s0)
                note_end(de)
                if de > dmax:
                    dmax, dstart = de, s0
            if o >= 0:
                if link == 0:
                    s0 = e if e > lf else lf
                    lf = s0 + hops[o]
                    arr_end[o] = lf
                elif link == 1:
                    s0 = e if e > lb else lb
                    lb = s0 + hops[o]
                    arr_end[o] = lb
                elif link == 2:
                    s0 = e
                    e = e + hops[o]
                    arr_end[o] = e
                else:
                    s0 = -1.0
                    arr_end[o] = e
                arr_start[o] = s0
                w = waiter[o]
                if w >= 0:
                    ready.append(w)
        if part is not tasks:
            snaps[i] = (e, lf, lb, lp, de, dmax, dstart, (pp, dpacc, bub), init)
    acc["pp"], acc["dp"], acc["bubble"] = pp, dpacc, bub
    results[i] = (e, lp, lf, lb, de, dmax, dstart)


def _fused_stage(i, st, sec, prog, acc, arr_end, arr_start, waiter, ready, results, dp, state=None, stop=None,
                 snaps=None):
    """``_stage`` for schedules with fused forward-backward pairs (DualPipe): a task may wait for two transfers
    and send two."""
    hops, more, note_start, note_end = dp
    g_end, g_start, de = _gathers(prog, sec, dp)
    e = lf = lb = lp = dstart = 0.0
    dmax = -1.0
    init = acc["pp"], acc["dp"], acc["bubble"]
    if state is not None:
        e, lf, lb, lp, de, dmax, dstart, (acc["pp"], acc["dp"], acc["bubble"]), _ = state
    specials = st.specials
    cols = [st.slots, st.keys, st.sends, st.links, st.reduces, st.fused_keys, st.fused_sends, st.fused_links,
            st.fused_first]
    tasks = zip(map(sec.__getitem__, cols[0]), cols[1], cols[2], cols[3], map(sec.__getitem__, cols[4]), *cols[5:])
    for part in (islice(tasks, stop), tasks) if stop is not None else (tasks,):
        for d, key, o, link, r, fk, fo, fl, ff in part:
            if key <= -2:
                e, lf, lb, de, dmax, dstart, lp = yield from _special(
                    specials[-2 - key], d, e, lf, lb, de, dmax, dstart, dp, sec, prog, g_end, g_start, arr_end,
                    arr_start, waiter, ready, acc)
                continue
            t = e
            if fk >= 0:
                a = arr_end[fk]
                if a is None:
                    yield fk
                    a = arr_end[fk]
                if a > t:
                    t = a
            if key >= 0:
                b = arr_end[key]
                if b is None:
                    yield key
                    b = arr_end[key]
                if b > t:
                    t = b
            if t > e:
                # the first dependency, in the graph's order, that ends when the pair starts
                k = (fk if fk >= 0 and arr_end[fk] == t and (ff or key < 0 or arr_end[key] != t) else key)
                s0 = arr_start[k]
                gap = t - e
                if s0 >= 0.0:
                    w = t - (e if e >= s0 else s0)
                    if gap < w:
                        w = gap
                    acc["pp"] += w
                    acc["bubble"] += gap - w
                else:
                    acc["bubble"] += gap
            e = t + d
            lp = pe = e
            if r >= 0.0:
                s0 = e if e > de else de
                de = s0 + (r + more())
                note_start(s0)
                note_end(de)
                if de > dmax:
                    dmax, dstart = de, s0
            # the forward's send, then the backward's (as _send, inlined)
            for o, link in ((fo, fl), (o, link)) if fo >= 0 else ((o, link),):
                if o < 0:
                    continue
                if link == 0:
                    s0 = pe if pe > lf else lf
                    lf = s0 + hops[o]
                    arr_end[o] = lf
                elif link == 1:
                    s0 = pe if pe > lb else lb
                    lb = s0 + hops[o]
                    arr_end[o] = lb
                elif link == 2:
                    s0 = e
                    e = e + hops[o]
                    arr_end[o] = e
                else:
                    s0 = -1.0
                    arr_end[o] = pe
                arr_start[o] = s0
                w = waiter[o]
                if w >= 0:
                    ready.append(w)
        if part is not tasks:
            snaps[i] = (e, lf, lb, lp, de, dmax, dstart, (acc["pp"], acc["dp"], acc["bubble"]), init)
    results[i] = (e, lp, lf, lb, de, dmax, dstart)


def _send(o: int, link: int, pe: float, e: float, lf: float, lb: float, hops: list, arr_end: list,
          arr_start: list, waiter: list, ready: list) -> tuple[float, float, float]:
    """Transfer ``o`` of a pass that ended at ``pe`` (the compute stream is at ``e``): on the forward or backward
    link, holding the compute stream (synchronous p2p), or straight to this GPU's next chunk; its consumer, if
    parked on it, made ready. The compute stream's and the links' ends after it."""
    if link == 0:
        s0 = pe if pe > lf else lf
        lf = s0 + hops[o]
        arr_end[o] = lf
    elif link == 1:
        s0 = pe if pe > lb else lb
        lb = s0 + hops[o]
        arr_end[o] = lb
    elif link == 2:
        s0 = e
        e = e + hops[o]
        arr_end[o] = e
    else:
        s0 = -1.0
        arr_end[o] = pe
    arr_start[o] = s0
    w = waiter[o]
    if w >= 0:
        ready.append(w)
    return e, lf, lb


def _special(sp: Special, d: float, e: float, lf: float, lb: float, de: float, dmax: float, dstart: float,
             dp: tuple, sec: list, prog: Program, g_end: list, g_start: list, arr_end: list, arr_start: list,
             waiter: list, ready: list, acc: dict):
    """A task of several dependencies or pieces, whole: its ZeRO-3 gathers, its start (the idle gap charged to
    the first dependency that ends when it starts), its pieces each with its DP collective, its sends. A
    generator that parks on a transfer not yet sent; returns the stage's new stream ends."""
    hops, more, note_start, note_end = dp
    gathers = []
    if sp.gathers:
        sgd = sec[prog.shard_gather]
        for _ in range(sp.gathers):
            s0 = de
            de = s0 + (sgd + more())
            gathers.append((de, s0))
            note_start(s0)
            note_end(de)
    deps = []
    for kind, x in sp.deps:
        if kind == "a":
            if arr_end[x] is None:
                yield x
            s0 = arr_start[x]
            deps.append((arr_end[x], s0, "pp" if s0 >= 0.0 else "pass"))
        elif kind == "g":
            deps.append((g_end[x], g_start[x], "dp"))
        else:
            deps.append((gathers[x][0], gathers[x][1], "dp"))
    t = e
    for end, _, _ in deps:
        if end > t:
            t = end
    if t > e:
        for end, start, kind in deps:
            if end == t:
                break
        _attribute(t - e, t, e, start, kind, acc)
    r = sec[sp.reduce]
    for _ in range(sp.pieces):
        e = t + d
        t = e
        if r >= 0.0:
            s0 = e if e > de else de
            de = s0 + (r + more())
            note_start(s0)
            note_end(de)
            if de > dmax:
                dmax, dstart = de, s0
    pe = e
    for o, link in sp.sends:
        e, lf, lb = _send(o, link, pe, e, lf, lb, hops, arr_end, arr_start, waiter, ready)
    return e, lf, lb, de, dmax, dstart, pe


def _tail(tail: tuple, sec: list, e: float, lp: float, lf: float, lb: float, de: float, dmax: float,
          dstart: float, acc: dict, dp: tuple) -> tuple[float, float, dict]:
    """The end of a stage's step: the reduction after the whole backward, the tied embedding's all-reduce, the
    optimizer (after every DP reduction and the last pass) and the weight gather after it."""
    _, more, note_start, note_end = dp
    reduce_all, tied, opt, final = tail
    for slot in (reduce_all, tied):
        if slot >= 0:
            s0 = lp if lp > de else de
            de = s0 + (sec[slot] + more())
            note_start(s0)
            note_end(de)
            if de > dmax:
                dmax, dstart = de, s0
    t = e
    if dmax > t:
        t = dmax
    if lp > t:
        t = lp
    if t > e:
        # the optimizer's dependencies: every DP reduction (in stream order: the first of the latest ends), then
        # the last pass
        if dmax == t:
            _attribute(t - e, t, e, dstart, "dp", acc)
        else:
            _attribute(t - e, t, e, 0.0, "pass", acc)
    e = t + sec[opt]
    if final >= 0:
        s0 = e if e > de else de
        de = s0 + (sec[final] + more())
        note_start(s0)
        note_end(de)
    return max(e, lf, lb, de), e, acc
