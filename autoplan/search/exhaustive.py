"""Exhaustive search with an exact leaderboard: plans are simulated in order of an optimistic bound, and
once the bound of the next plan exceeds the k-th best step time no later plan can enter the top k. A plan the
order reaches is first held against a tighter bound from its task durations (``sim/bounds``) and skipped when
that one already exceeds the k-th best."""

from __future__ import annotations

import bisect
import functools
import heapq
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Sequence

from autoplan.families.registry import lower_bound, peak_memory, quick_bound
from autoplan.search.executors import Executor, SerialExecutor
from autoplan.sim.simulate import Evaluation, release_bound, step_bound
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

BATCH = 16
"""Plans per executor task: a simulation takes milliseconds, a Ray task about one."""


@dataclass
class SearchResult:
    """What a search found and what it skipped."""

    leaderboard: list[Evaluation]
    """Feasible plans, fastest first (ties broken by the plan's label)."""
    evaluations: list[Evaluation]
    """Every plan simulated in this run (not those reused from a resumed run)."""
    valid: int
    out_of_memory: int
    pruned: int
    """Valid plans that fit but were never simulated: those that could not enter the top k, and the ``unproven``."""
    equivalent: int = 0
    """Valid plans identical to another one on this cluster (selective recompute with fused attention)."""
    reused: int = 0
    """Plans whose result came from the run being resumed."""
    rejected: Counter = field(default_factory=Counter)
    raw: int = 0
    seconds: float = 0.0
    sampler: str = "exhaustive"
    prefiltered: int = 0
    """Plans the symbolic pre-filter dropped before the search (``--prefilter``)."""
    widened: int = 0
    """Plans the pre-filter had dropped whose bound could still beat its top k: searched too."""
    unproven: int = 0
    """Plans whose bound could still enter the top k, left unsimulated when the budget ran out: 0 when the exhaustive
    search's top k is exact."""


def _or_zero(bound: Callable[[ModelSpec, ClusterSpec, Strategy], float], model: ModelSpec, cluster: ClusterSpec,
             s: Strategy) -> float:
    """``bound(model, cluster, s)``; 0 if it raises, so the plan comes first and its evaluation records the error."""
    try:
        return bound(model, cluster, s)
    except Exception:  # noqa: BLE001 - the evaluation records the error against the plan
        return 0.0


LEVELS = (lower_bound, step_bound, release_bound)
"""The bounds a plan the search reaches is held against in turn, each asked only when the plan comes first under
the ones before it: the family's lower bound (when the order used its cheap one), the simulator's bound from the
plan's task durations (``sim/bounds``: pipeline fill and drain, DP streams), and the release bound (the DP stream's
reductions after their release), which compiles the plan's program."""


@functools.lru_cache(maxsize=16384)
def plan_peak(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
    """``peak_memory``, kept per model, cluster and plan: the search's memory check and the report's memory
    elasticity (``whatif``) ask it of the same plans."""
    return peak_memory(model, cluster, s)


def _may_fit(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> bool:
    """Peak memory within capacity; True if computing it raises, so the evaluation records the error."""
    try:
        return plan_peak(model, cluster, s) <= cluster.gpu.hbm_bytes
    except Exception:  # noqa: BLE001
        return True


def _by_bound(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy]) -> tuple[list[tuple[float, Strategy]],
                                                                                       bool]:
    """(bound per sequence, plan) by that bound, equal bounds in the order of ``plans``, and whether the bound is
    the family's cheap one (``quick_bound``: ``lower_bound`` is then asked when the search reaches the plan). The
    search orders a group of equal bounds by the plan's label when it reaches it (``_ties_by_label``; labels take
    ~10 µs each, and most groups lie beyond the point where the search stops)."""
    quick = quick_bound(model)
    bounds = [_or_zero(quick or lower_bound, model, cluster, s) / s.global_batch for s in plans]
    return [(bounds[i], plans[i]) for i in sorted(range(len(plans)), key=bounds.__getitem__)], quick is not None


def _ties_by_label(order: list[tuple[float, Strategy]], start: int) -> int:
    """Order the group of equal bounds that begins at ``start`` by the plan's label, in place; the group's end."""
    end = start + 1
    while end < len(order) and order[end][0] == order[start][0]:
        end += 1
    if end - start > 1:
        order[start:end] = sorted(order[start:end], key=lambda x: x[1].short())
    return end


def rank_key(e: Evaluation) -> tuple:
    """Highest throughput first: step time per sequence (plans of one global batch: fastest first; of a range of
    batches, the batch is part of the plan); equal times ordered by the plan's label (deterministic)."""
    return (e.metrics.step_time / e.strategy.global_batch, e.strategy.short())


def top_feasible(evaluations: Iterable[Evaluation], k: int) -> list[Evaluation]:
    """The ``k`` best plans that run and fit among ``evaluations``, in rank order (``rank_key``)."""
    return sorted((e for e in evaluations if e.feasible), key=rank_key)[:k]


def _another_plan(cluster: ClusterSpec, s: Strategy) -> bool:
    """``s`` is the same as another plan on this cluster: a fused attention kernel keeps no s×s scores, so selective
    recompute is then the same plan as none."""
    return cluster.flash_attention and s.recompute == "selective"


def distinct_plans(cluster: ClusterSpec, plans: list[Strategy]) -> list[Strategy]:
    """Drop plans that are the same as another on this cluster."""
    return [s for s in plans if not _another_plan(cluster, s)] if cluster.flash_attention else plans


def same_plan(cluster: ClusterSpec, s: Strategy) -> Strategy:
    """The plan ``distinct_plans`` keeps for ``s`` on this cluster (``s`` itself, unless it drops ``s``)."""
    return replace(s, recompute="none") if _another_plan(cluster, s) else s


class _Leaderboard:
    """The top ``k`` feasible plans so far, in rank order (``rank_key``)."""

    def __init__(self, k: int, known: dict[Strategy, Evaluation]) -> None:
        self.k = k
        self.board = top_feasible(known.values(), k)
        self.keys = [rank_key(e) for e in self.board]

    def kth(self) -> float:
        """The k-th best step time per sequence (infinite while fewer than k plans are in)."""
        return self.keys[self.k - 1][0] if len(self.board) >= self.k else float("inf")

    def offer(self, e: Evaluation) -> None:
        """Put a feasible plan where it ranks (at most ``k`` keys compared), dropping what falls below the k-th."""
        key = rank_key(e)
        at = bisect.bisect_right(self.keys, key)
        if at < self.k:
            self.keys.insert(at, key)
            self.board.insert(at, e)
            del self.keys[self.k:], self.board[self.k:]


class _BoundOrder:
    """The plans that fit, handed out in order of their bound while it is below the leaderboard's k-th best.

    A plan is simulated once no other plan can have a lower bound, so plans go in the order of their best bound:
    one the order reaches waits in ``reached`` (a heap by the tightest bound asked so far and how many of the
    ``LEVELS`` were asked) until it comes first with every level asked."""

    def __init__(self, model: ModelSpec, cluster: ClusterSpec, fitting: list[Strategy],
                 known: dict[Strategy, Evaluation], budget: int | None) -> None:
        self.model, self.cluster, self.known, self.budget = model, cluster, known, budget
        # bounds per sequence, as rank_key ranks (one batch: the order of the bounds themselves)
        self.order, self.quick = _by_bound(model, cluster, fitting)
        self.bounds = [x[0] for x in self.order]
        self.reached: list[tuple[float, int, Strategy, int]] = []
        self.next = self.reused = self.yielded = 0
        self.labelled = 0
        """``order[:labelled]`` has its ties by label."""
        self.capped = False

    def _reach(self, kth: float) -> None:
        """Move plans from the bound order to ``reached`` while the next one's bound is below every reached one's."""
        order, reached = self.order, self.reached
        while self.next < len(order) and (not reached or order[self.next][0] <= reached[0][0]):
            if self.next == self.labelled:
                self.labelled = _ties_by_label(order, self.next)
            bound, s = order[self.next]
            if bound > kth:
                self.next = len(order)             # the order is by bound: no later plan can enter either
                return
            self.next += 1
            if s in self.known:
                self.reused += 1
            else:
                heapq.heappush(reached, (bound, self.next, s, 0 if self.quick else 1))

    def _batch(self, kth: Callable[[], float]) -> list[Strategy]:
        """Up to ``BATCH`` plans that come first with every bound asked and can still enter the top k."""
        batch: list[Strategy] = []
        while len(batch) < BATCH:
            k = kth()
            self._reach(k)
            if not self.reached or self.reached[0][0] > k:
                break
            if self.budget is not None and self.yielded + len(batch) + self.reused >= self.budget:
                self.capped = True
                break
            tight, at, s, asked = heapq.heappop(self.reached)
            for level in range(asked, len(LEVELS)):
                tighter = _or_zero(LEVELS[level], self.model, self.cluster, s) / s.global_batch
                if tighter > tight:
                    heapq.heappush(self.reached, (tighter, at, s, level + 1))
                    break
            else:
                batch.append(s)
        return batch

    def batches(self, kth: Callable[[], float]) -> Iterator[Sequence[Strategy]]:
        """Batches until no plan left can enter the top k (``kth`` read anew for every plan) or the budget is spent."""
        while batch := self._batch(kth):
            self.yielded += len(batch)
            yield batch

    def remaining(self, kth: float) -> int | None:
        """Plans left whose bound is within ``kth`` (the most the search may still simulate); None while it is
        infinite."""
        if kth == float("inf"):
            return None
        return max(0, bisect.bisect_right(self.bounds, kth) - self.next) + sum(1 for x in self.reached if x[0] <= kth)

    def unproven(self, kth: float) -> int:
        """Plans whose bound could still enter the top k when the budget stopped the search (0 if it did not)."""
        if not self.capped:
            return 0
        left = self.remaining(kth)
        return len(self.order) - self.next + len(self.reached) if left is None else left


def search(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy], top_k: int = 10,
           executor: Executor | None = None, known: dict[Strategy, Evaluation] | None = None,
           on_result: Callable[[Evaluation], None] | None = None,
           progress: Callable[[int, int, list[Evaluation]], None] | None = None, *,
           sampler: str = "exhaustive", budget: int | None = None, seed: int = 0,
           study: object | None = None) -> SearchResult:
    """Simulate plans in order of their bound until none left can enter the top ``top_k``, or until ``budget`` plans
    (simulated and reused) have been evaluated: then ``unproven`` counts those whose bound could still enter.

    ``known`` holds results of a run being resumed (reused, not simulated again); ``on_result`` sees every new one.
    The signature is every search's (``study.sampled_search``'s too); an exhaustive search needs no sampler, seed or
    study and ignores them.
    """
    executor = executor or SerialExecutor()
    t0 = time.perf_counter()
    known = known or {}
    valid = len(plans)
    plans = distinct_plans(cluster, plans)
    fitting = [s for s in plans if _may_fit(model, cluster, s)]
    order = _BoundOrder(model, cluster, fitting, known, budget)
    top = _Leaderboard(top_k, known)
    evaluations: list[Evaluation] = []
    for results in executor.map(model, cluster, order.batches(top.kth), remaining=lambda: order.remaining(top.kth())):
        for e in results:
            evaluations.append(e)
            if on_result:
                on_result(e)
            if e.feasible:
                top.offer(e)
        if progress:
            progress(len(evaluations) + order.reused, len(order.order), top.board)
    done = len(evaluations) + order.reused
    return SearchResult(leaderboard=top.board, evaluations=evaluations, valid=valid, equivalent=valid - len(plans),
                        out_of_memory=len(plans) - len(fitting), pruned=len(order.order) - done, reused=order.reused,
                        seconds=time.perf_counter() - t0, unproven=order.unproven(top.kth()))
