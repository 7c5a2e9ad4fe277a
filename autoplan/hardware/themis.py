"""Chunked, multi-phase collectives on N-dimensional networks with the baseline and Themis schedules.

Rashidi et al., "Themis: A Network Bandwidth-Aware Collective Scheduling Policy for Distributed Training of DL
Models" (ISCA 2022, arXiv 2110.04478). A collective of S bytes is split into chunks; each chunk runs one
reduce-scatter phase per dimension (its data shrinking by the dimension's size after each), then for all-reduce
one all-gather phase per dimension in the reverse order (the hierarchical all-reduce). Each dimension's links
send one chunk phase at a time, so chunks overlap across dimensions (the paper's per-dimension queues);
per-step latency delays a chunk but does not hold the links, so chunks also pipeline within a dimension.

Policies (the inter-dimension order of each chunk):
- ``baseline``: every chunk visits the dimensions in ascending order (today's hierarchical collectives).
- ``themis``: per chunk, sort the dimensions by their accumulated load and run the reduce-scatter on the least
  loaded first, adding each phase's link time to that dimension's load; all-gather in the reverse order.
Within a dimension, waiting phases are served ``fifo`` (arrival order) or ``scf`` (smallest chunk first).
No section numbers are cited: only the paper's abstracts were at hand (see benchmarks/bench_themis.py).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from autoplan.hardware.dims import NetworkDim
from autoplan.errors import SpecError

OPS = ("all_reduce", "reduce_scatter", "all_gather")
POLICIES = ("baseline", "themis")
INTRA = ("fifo", "scf")
MAX_CHUNKS = 4096


@dataclass(frozen=True, kw_only=True)
class CollectiveTime:
    """The schedule of one collective: its time and what each dimension did."""

    op: str
    policy: str
    nbytes: float
    """Buffer size S in bytes (the input of all-reduce and reduce-scatter, the output of all-gather)."""
    chunks: int
    dims: tuple[NetworkDim, ...]
    time: float
    """Seconds from the start to the end of the last chunk's last phase."""
    busy: tuple[float, ...]
    """Seconds each dimension's links spent sending (bytes / bandwidth; latency only delays chunks)."""
    sent: tuple[float, ...]
    """Bytes each GPU sent along each dimension."""
    orders: tuple[tuple[int, ...], ...]
    """Per chunk, the dimension indices of its reduce-scatter order (all-gather phases run it backwards)."""
    fell_back: bool = False
    """Themis only: the greedy schedule was slower than the baseline's, so the baseline's was kept."""
    starts: tuple[tuple[float, int, int, int], ...] = ()
    """Every chunk phase as (start seconds, dimension, chunk, phase index), in start order: the schedule's events,
    which ``autoplan.sim.chunked`` lowers into engine tasks on per-dimension link streams."""

    @property
    def utilisation(self) -> tuple[float, ...]:
        """Busy fraction of each dimension over the collective's time."""
        return tuple(b / self.time if self.time > 0 else 0.0 for b in self.busy)

    @property
    def algorithm_bandwidth(self) -> float:
        """Bytes sent per GPU over all dimensions per second."""
        return sum(self.sent) / self.time if self.time > 0 else 0.0

    @property
    def bandwidth_utilisation(self) -> float:
        """Achieved bandwidth over the sum of the dimensions' bandwidths (Themis's "network BW utilization")."""
        peak = sum(d.bandwidth for d in self.dims)
        return self.algorithm_bandwidth / peak if peak else 0.0


def phase(dim: NetworkDim, data: float) -> tuple[float, float]:
    """(bytes sent per GPU, seconds) of one reduce-scatter or all-gather phase over ``data`` bytes (the larger side).

    α-β cost: steps·α + (n-1)/n·data/B (Thakur, Rabenseifner & Gropp 2005, cost model; per dimension as in Themis).
    """
    sent = (dim.size - 1) / dim.size * data
    return sent, dim.steps * dim.latency + sent / dim.bandwidth


def _check(dims: tuple[NetworkDim, ...], op: str, nbytes: float, policy: str, chunks: int, intra: str) -> None:
    if op not in OPS:
        raise SpecError(f"--op must be one of {', '.join(OPS)}, got {op!r}")
    if policy not in POLICIES:
        raise SpecError(f"--policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if intra not in INTRA:
        raise SpecError(f"intra-dimension order must be one of {', '.join(INTRA)}, got {intra!r}")
    if not isinstance(nbytes, (int, float)) or isinstance(nbytes, bool) or not math.isfinite(nbytes) or nbytes <= 0:
        raise SpecError(f"--bytes must be a positive finite number of bytes, got {nbytes!r}")
    if not isinstance(chunks, int) or isinstance(chunks, bool) or not 1 <= chunks <= MAX_CHUNKS:
        raise SpecError(f"--chunks must be an integer in [1, {MAX_CHUNKS}], got {chunks!r}")
    if not all(isinstance(d, NetworkDim) for d in dims):
        raise SpecError("dims must be NetworkDim values")


def _orders(dims: tuple[NetworkDim, ...], chunk: float, chunks: int, policy: str) -> list[tuple[int, ...]]:
    """Per chunk, the reduce-scatter dimension order (all-gather runs it backwards)."""
    ascending = tuple(range(len(dims)))
    if policy == "baseline":
        return [ascending] * chunks
    load = [0.0] * len(dims)
    orders = []
    for _ in range(chunks):
        greedy = tuple(sorted(ascending, key=lambda d: (load[d], d)))  # least loaded first (Themis Alg. 1)
        after = {o: _add_load(dims, load, chunk, o) for o in (greedy, ascending)}
        # autoplan's guard: a chunk takes the greedy order unless it raises the bottleneck load more than baseline's
        order = min(after, key=lambda o: (max(after[o]), o != greedy))
        load = after[order]
        orders.append(order)
    return orders


def _add_load(dims: tuple[NetworkDim, ...], load: list[float], chunk: float, order: tuple[int, ...]) -> list[float]:
    """Per-dimension load after adding a chunk's reduce-scatter phases in ``order``."""
    new, data = list(load), chunk
    for d in order:
        new[d] += phase(dims[d], data)[0] / dims[d].bandwidth  # link-busy seconds (Themis's dimension load)
        data /= dims[d].size
    return new


def _phases(dims: tuple[NetworkDim, ...], op: str, chunk: float, order: tuple[int, ...]) -> list[tuple[int, float]]:
    """(dimension, data bytes) of a chunk's phases in execution order."""
    rs, data = [], chunk
    for d in order:
        rs.append((d, data))
        data /= dims[d].size
    ag = rs[::-1]  # all-gather mirrors the reduce-scatter: same dimensions, same data, reverse order
    return {"all_reduce": rs + ag, "reduce_scatter": rs, "all_gather": ag}[op]


def collective(dims: tuple[NetworkDim, ...], op: str, nbytes: float, *, policy: str = "baseline",
               chunks: int = 64, intra: str = "fifo") -> CollectiveTime:
    """Schedule ``op`` over ``nbytes`` on ``dims`` split into ``chunks`` equal chunks and return its timing."""
    dims = tuple(dims)
    _check(dims, op, nbytes, policy, chunks, intra)
    chunk = nbytes / chunks
    orders = _orders(dims, chunk, chunks, policy)
    time, busy, sent, starts = _run(dims, [_phases(dims, op, chunk, o) for o in orders], intra)
    fell_back = False
    if policy == "themis":
        base = _orders(dims, chunk, chunks, "baseline")
        b_time, b_busy, b_sent, b_starts = _run(dims, [_phases(dims, op, chunk, o) for o in base], intra)
        if b_time < time:  # autoplan's guard, after Themis's fallback to baseline: an offline schedule keeps the faster
            orders, time, busy, sent, starts, fell_back = base, b_time, b_busy, b_sent, b_starts, True
    return CollectiveTime(op=op, policy=policy, nbytes=float(nbytes), chunks=chunks, dims=dims, time=time,
                          busy=tuple(busy), sent=tuple(sent), orders=tuple(orders), fell_back=fell_back,
                          starts=tuple(starts))


def chunk_phases(ct: CollectiveTime) -> list[list[tuple[int, float]]]:
    """Per chunk, its phases (dimension, data bytes) in execution order, as ``ct`` scheduled them."""
    chunk = ct.nbytes / ct.chunks
    return [_phases(ct.dims, ct.op, chunk, o) for o in ct.orders]


def _run(dims: tuple[NetworkDim, ...], plans: list[list[tuple[int, float]]], intra: str
         ) -> tuple[float, list[float], list[float], list[tuple[float, int, int, int]]]:
    """Event loop over chunk phases; returns (end time, seconds each dimension's links were busy, bytes sent,
    (start, dimension, chunk, phase) of every phase in start order).

    A dimension serialises the bytes of its phases (its links are busy sent/B per phase) while the per-step
    latency only delays the chunk, so phases of different chunks pipeline on a dimension as packets do in
    ASTRA-sim's analytical network (Themis's simulator); a phase ends steps·α + sent/B after it starts.
    """
    busy, sent = [0.0] * len(dims), [0.0] * len(dims)
    queues: list[list[tuple]] = [[] for _ in dims]
    free = [True] * len(dims)
    events = [(0.0, c, 1, c, 0) for c in range(len(plans))]  # (time, seq, kind 0: dim free / 1: chunk ready, x, k)
    heapq.heapify(events)
    seq, end, starts = len(plans), 0.0, []
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, kind, x, k = heapq.heappop(events)
            if kind == 0:
                free[x] = True
            elif k == len(plans[x]):
                end = max(end, now)
            else:
                d, data = plans[x][k]
                heapq.heappush(queues[d], ((data, now, x) if intra == "scf" else (now, x), x, k))
        for d, dim in enumerate(dims):
            if free[d] and queues[d]:
                _, c, k = heapq.heappop(queues[d])
                nbytes, seconds = phase(dim, plans[c][k][1])
                free[d] = False
                starts.append((now, d, c, k))
                busy[d] += nbytes / dim.bandwidth
                sent[d] += nbytes
                heapq.heappush(events, (now + nbytes / dim.bandwidth, seq, 0, d, 0))
                heapq.heappush(events, (now + seconds, seq + 1, 1, c, k + 1))
                seq += 2
    return end, busy, sent, starts
