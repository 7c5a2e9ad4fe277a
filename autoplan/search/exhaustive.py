"""Exhaustive search with an exact leaderboard: plans are simulated in order of an optimistic bound, and
once the bound of the next plan exceeds the k-th best step time no later plan can enter the top k."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from autoplan.cost.compute import optimizer_time
from autoplan.cost.memory import peak_memory
from autoplan.sim.simulate import Evaluation, evaluate
from autoplan.sim.workload import pass_costs, stage_params
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy

GIB = 1024**3


@dataclass
class SearchResult:
    """What a search found and what it skipped."""

    leaderboard: list[Evaluation]
    """Feasible plans, fastest first (ties broken by the plan's label)."""
    evaluations: list[Evaluation]
    """Every simulated plan."""
    valid: int
    out_of_memory: int
    pruned: int
    """Valid plans that fit but whose bound could not enter the top k (never simulated)."""
    equivalent: int = 0
    """Valid plans identical to another one on this cluster (selective recompute with fused attention)."""
    rejected: Counter = field(default_factory=Counter)
    raw: int = 0
    seconds: float = 0.0


def lower_bound(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
    """Seconds the busiest stage's compute stream needs (its passes and optimizer): never above the step time."""
    costs = pass_costs(model, cluster, s)
    p, v, m = s.pp, s.chunks, s.micro_batches
    last = p * v - 1
    worst = 0.0
    for i in (0, p - 1) if p > 1 else (0,):
        busy = sum(costs[(True, c * p + i == 0, c * p + i == last)].seconds
                   + costs[(False, c * p + i == 0, c * p + i == last)].seconds for c in range(v)) * m
        params = stage_params(model, s, i)
        busy += optimizer_time(cluster.gpu, params, params / (s.dp * s.cp) if s.zero >= 1 else params)
        worst = max(worst, busy)
    return worst


def rank_key(e: Evaluation) -> tuple:
    """Fastest first; equal times ordered by the plan's label (deterministic)."""
    return (e.metrics.step_time, e.strategy.short())


def search(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy], top_k: int = 10,
           progress: Callable[[int, int, list[Evaluation]], None] | None = None) -> SearchResult:
    """Simulate plans in order of their bound until none left can enter the top ``top_k``."""
    t0 = time.perf_counter()
    valid = len(plans)
    if cluster.flash_attention:
        # a fused attention kernel keeps no s×s scores: selective recompute is then the same plan as none
        plans = [s for s in plans if s.recompute != "selective"]
    fitting = [s for s in plans if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes]
    order = sorted(((lower_bound(model, cluster, s), s.short(), s) for s in fitting), key=lambda x: (x[0], x[1]))
    board: list[Evaluation] = []
    evaluations: list[Evaluation] = []
    for n, (bound, _, s) in enumerate(order):
        if len(board) >= top_k and bound > board[top_k - 1].metrics.step_time:
            break
        e = evaluate(model, cluster, s)
        evaluations.append(e)
        if e.feasible:
            board.append(e)
            board.sort(key=rank_key)
            del board[max(top_k, 1) * 4:]
        if progress:
            progress(n + 1, len(order), board)
    board.sort(key=rank_key)
    return SearchResult(leaderboard=board[:top_k], evaluations=evaluations, valid=valid,
                        equivalent=valid - len(plans), out_of_memory=len(plans) - len(fitting),
                        pruned=len(order) - len(evaluations), seconds=time.perf_counter() - t0)
