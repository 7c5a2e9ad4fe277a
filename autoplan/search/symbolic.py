"""Searching with the symbolic cost (``autoplan.families.symbolic``): rank every plan by it (``--cost symbolic``),
or simulate only its best K % (``--prefilter K``); and the statistics that say how well it agrees with the
simulator (Kendall's τ, top-k overlap)."""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

from autoplan.families.registry import peak_memory
from autoplan.families.symbolic import symbolic_cost
from autoplan.search.exhaustive import SearchResult, distinct_plans
from autoplan.search.executors import Executor, SerialExecutor
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

COSTS = ("sim", "symbolic")
"""How ``autoplan search`` ranks plans: the event simulator, or the symbolic cost."""


def _fits(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> bool:
    """Peak memory within capacity; True if computing it raises, so the evaluation records the error."""
    try:
        return peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes
    except Exception:  # noqa: BLE001
        return True


def _cost_or_inf(model: ModelSpec, cluster: ClusterSpec, s: Strategy, weights: str) -> float:
    """The symbolic cost; inf if computing it raises (the plan ranks last, and the simulator records its error)."""
    try:
        return symbolic_cost(model, cluster, s, weights)
    except Exception:  # noqa: BLE001 - the evaluation records the error against the plan
        return math.inf


def symbolic_order(model: ModelSpec, cluster: ClusterSpec, plans: Sequence[Strategy],
                   weights: str = "balance") -> tuple[list[tuple[float, Strategy]], int]:
    """Distinct plans that fit, best symbolic score first (``order_key``); and how many did not fit."""
    distinct = distinct_plans(cluster, list(plans))
    fitting = [s for s in distinct if _fits(model, cluster, s)]
    scored = sorted(((_cost_or_inf(model, cluster, s, weights), s) for s in fitting), key=lambda x: order_key(*x))
    return scored, len(distinct) - len(fitting)


def order_key(score: float, s: Strategy) -> tuple:
    """Lowest symbolic cost first; equal costs (e.g. micro-batch sizes of one pipeline-free plan: the same FLOPs
    and bytes) by fewer passes per step (fewer, larger kernels), then by label (deterministic)."""
    return (score, s.micro_batches * s.chunks, s.short())


def prefilter(model: ModelSpec, cluster: ClusterSpec, plans: Sequence[Strategy], percent: float,
              weights: str = "balance", keep_at_least: int = 1) -> list[Strategy]:
    """The symbolic best ``percent`` % of the plans that fit (at least ``keep_at_least``), best first."""
    return best_percent(symbolic_order(model, cluster, plans, weights)[0], percent, keep_at_least)


def best_percent(order: list[tuple[float, Strategy]], percent: float, keep_at_least: int = 1) -> list[Strategy]:
    """The first ``percent`` % of a symbolic order (at least ``keep_at_least`` plans)."""
    keep = max(keep_at_least, math.ceil(len(order) * percent / 100))
    return [s for _, s in order[:keep]]


def symbolic_search(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy], top_k: int = 10,
                    executor: Executor | None = None, known: dict[Strategy, Evaluation] | None = None,
                    on_result: Callable[[Evaluation], None] | None = None,
                    progress: Callable[[int, int, list[Evaluation]], None] | None = None, *,
                    weights: str = "balance", **_: object) -> SearchResult:
    """Rank every plan by its symbolic score, then simulate only the ``top_k`` best (for their figures): the
    leaderboard keeps the symbolic order. The signature is every search's (sampler, budget, seed, study unused)."""
    executor = executor or SerialExecutor()
    known = known or {}
    t0 = time.perf_counter()
    distinct = distinct_plans(cluster, plans)
    order, out_of_memory = symbolic_order(model, cluster, distinct, weights)
    best = [s for _, s in order[:top_k]]
    todo = [s for s in best if s not in known]
    evaluations: list[Evaluation] = []
    for results in executor.map(model, cluster, [todo] if todo else []):
        for e in results:
            evaluations.append(e)
            if on_result:
                on_result(e)
    by_plan = {**known, **{e.strategy: e for e in evaluations}}
    board = [by_plan[s] for s in best if by_plan[s].feasible]
    if progress:
        progress(len(order), len(order), board)
    return SearchResult(leaderboard=board, evaluations=evaluations, valid=len(plans),
                        equivalent=len(plans) - len(distinct), out_of_memory=out_of_memory,
                        pruned=len(order) - len(best), reused=len(best) - len(todo),
                        seconds=time.perf_counter() - t0, sampler="symbolic")


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b of two rankings of the same items: +1 same order, −1 reversed, ties counted as neither
    (Kendall 1945, Biometrika 33(3), τ_b); nan when either is constant."""
    import numpy as np                           # only the benchmarks and tests measure agreement

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"kendall_tau needs two equally long sequences, got {a.shape} and {b.shape}")
    net = pairs_a = pairs_b = 0
    for i in range(len(a) - 1):                 # one row of pairs at a time: memory O(n), not O(n²)
        da, db = np.sign(a[i + 1:] - a[i]), np.sign(b[i + 1:] - b[i])
        net += int(np.sum(da * db))
        pairs_a += int(np.count_nonzero(da))
        pairs_b += int(np.count_nonzero(db))
    if not pairs_a or not pairs_b:
        return math.nan
    # τ_b = (concordant − discordant) / sqrt((n0 − ties in a)(n0 − ties in b))
    return net / math.sqrt(pairs_a * pairs_b)


def top_overlap(x: Sequence[float], y: Sequence[float], k: int = 10) -> int:
    """How many of the k lowest items by ``x`` are also among the k lowest by ``y`` (ties by position)."""
    import numpy as np

    first = set(np.argsort(np.asarray(x, dtype=float), kind="stable")[:k].tolist())
    return len(first & set(np.argsort(np.asarray(y, dtype=float), kind="stable")[:k].tolist()))
