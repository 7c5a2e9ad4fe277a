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
from typing import Callable, Iterator, Sequence

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
    # bounds per sequence, as rank_key ranks (one batch: the order of the bounds themselves)
    order, quick = _by_bound(model, cluster, fitting)
    board: list[Evaluation] = sorted((e for e in known.values() if e.feasible), key=rank_key)[:top_k]
    keys = [rank_key(e) for e in board]
    evaluations: list[Evaluation] = []
    state = {"next": 0, "reused": 0, "labelled": 0, "yielded": 0, "capped": False}
    # labelled: order[:labelled] has its ties by label; yielded: plans handed to the executor

    def kth_best() -> float:
        return rank_key(board[top_k - 1])[0] if len(board) >= top_k else float("inf")

    # plans the order has reached, by the tightest bound asked so far, and how many of the LEVELS were asked: a plan
    # is simulated once no other plan can have a lower bound, so plans go in the order of their best bound
    reached: list[tuple[float, int, Strategy, int]] = []

    def reach(kth: float) -> None:
        """Move plans from the bound order to ``reached`` while the next one's bound is below every reached one's."""
        while state["next"] < len(order) and (not reached or order[state["next"]][0] <= reached[0][0]):
            if state["next"] == state["labelled"]:
                state["labelled"] = _ties_by_label(order, state["next"])
            bound, s = order[state["next"]]
            if bound > kth:
                state["next"] = len(order)             # the order is by bound: no later plan can enter either
                return
            state["next"] += 1
            if s in known:
                state["reused"] += 1
            else:
                heapq.heappush(reached, (bound, state["next"], s, 0 if quick else 1))

    def batches() -> Iterator[Sequence[Strategy]]:
        while True:
            batch: list[Strategy] = []
            while len(batch) < BATCH:
                kth = kth_best()
                reach(kth)
                if not reached or reached[0][0] > kth:
                    break
                if budget is not None and state["yielded"] + len(batch) + state["reused"] >= budget:
                    state["capped"] = True
                    break
                tight, at, s, asked = heapq.heappop(reached)
                for level in range(asked, len(LEVELS)):
                    tighter = _or_zero(LEVELS[level], model, cluster, s) / s.global_batch
                    if tighter > tight:
                        heapq.heappush(reached, (tighter, at, s, level + 1))
                        break
                else:
                    batch.append(s)
            if not batch:
                return
            state["yielded"] += len(batch)
            yield batch

    bounds = [x[0] for x in order]

    def remaining() -> int | None:
        """Plans left whose bound is within the k-th best so far (the most the search may still simulate)."""
        kth = kth_best()
        if kth == float("inf"):
            return None
        return max(0, bisect.bisect_right(bounds, kth) - state["next"]) + sum(1 for x in reached if x[0] <= kth)

    for results in executor.map(model, cluster, batches(), remaining=remaining):
        for e in results:
            evaluations.append(e)
            if on_result:
                on_result(e)
            if e.feasible:
                # the top k in rank order: a new plan goes where it ranks (at most top_k keys compared)
                key = rank_key(e)
                at = bisect.bisect_right(keys, key)
                if at < top_k:
                    keys.insert(at, key)
                    board.insert(at, e)
                    del keys[top_k:], board[top_k:]
        if progress:
            progress(len(evaluations) + state["reused"], len(order), board)
    done = len(evaluations) + state["reused"]
    unproven = 0
    if state["capped"]:
        left = remaining()
        unproven = len(order) - state["next"] + len(reached) if left is None else left
    return SearchResult(leaderboard=board, evaluations=evaluations, valid=valid, equivalent=valid - len(plans),
                        out_of_memory=len(plans) - len(fitting), pruned=len(order) - done, reused=state["reused"],
                        seconds=time.perf_counter() - t0, unproven=unproven)
