"""Optuna: samplers for spaces too large to simulate every plan, and the durable record of a run.

Optuna lives here and nowhere else. Every evaluated plan becomes a trial of an Optuna study kept in a
JournalStorage file inside the run folder (or an RDB given by ``--storage``), so optuna-dashboard can open it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable

import optuna

from autoplan.errors import SpecError
from autoplan.search.exhaustive import SearchResult, distinct_plans, top_feasible
from autoplan.search.executors import Executor, SerialExecutor
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import AXES, Strategy

SAMPLERS = ("auto", "exhaustive", "tpe", "nsga2", "random")
GIB = 1024**3
CONSTRAINT = "memory_excess"
PARAMS = tuple(a for a in AXES if a != "virtual_stages")
"""Trial parameters: the search axes, virtual stages folded into the schedule (``interleaved:4``)."""

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _storage(journal: Path, storage: str | None) -> object:
    if storage is not None:
        return storage
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    return JournalStorage(JournalFileBackend(str(journal)))


def open_study(journal: Path, storage: str | None, name: str, multi_objective: bool,
               fresh: bool = False) -> optuna.Study:
    """The run's study: the journal file ``journal`` by default (SQLite costs tens of ms per trial), else the
    ``--storage`` URL. ``fresh``: drop what the study holds first (a resume replays the run into it).
    SpecError, one line, if the storage cannot be opened."""
    if storage is None and (journal.is_symlink() or (journal.exists() and not journal.is_file())):
        raise SpecError(f"the run's Optuna journal {str(journal)!r} is a link or no regular file; autoplan writes "
                        "only its own files in a run folder (remove it)")
    try:
        if fresh and storage is None:
            journal.unlink(missing_ok=True)
        backend = _storage(journal, storage)
        if fresh and storage is not None and name in optuna.get_all_study_names(backend):
            optuna.delete_study(study_name=name, storage=backend)
        directions = ["maximize", "minimize"] if multi_objective else ["maximize"]
        return optuna.create_study(study_name=name, storage=backend, directions=directions, load_if_exists=True)
    except Exception as err:  # noqa: BLE001 - SQLAlchemy, drivers and Optuna raise many kinds
        if storage is None:
            raise
        message = (str(err).strip().splitlines() or [""])[0]
        raise SpecError(f"--storage {storage!r} cannot be opened: {type(err).__name__}: {message}") from None


def _schedule_label(s: Strategy) -> str:
    return f"interleaved:{s.virtual_stages}" if s.schedule == "interleaved" else s.schedule


def plan_params(s: Strategy) -> dict:
    """A plan as trial parameters (dp follows from the others)."""
    return {k: _schedule_label(s) if k == "schedule" else getattr(s, k) for k in PARAMS}


def _params_in(s: Strategy, dists: dict) -> dict:
    """The plan's trial parameters on the axes of ``dists``."""
    params = plan_params(s)
    return {k: params[k] for k in dists}


def distributions(plans: list[Strategy]) -> dict[str, optuna.distributions.CategoricalDistribution]:
    """One categorical distribution per axis that varies, with the values the valid plans use (sorted,
    deterministic); an axis with one value is no choice (and would only slow multivariate TPE)."""
    values: dict[str, set] = {k: set() for k in PARAMS}
    for s in plans:
        for k, v in plan_params(s).items():
            values[k].add(v)
    return {k: optuna.distributions.CategoricalDistribution(sorted(v, key=str))
            for k, v in values.items() if len(v) > 1}


def _attrs(e: Evaluation, cluster: ClusterSpec) -> dict:
    m = e.metrics
    return {"feasible": e.feasible, "plan": e.strategy.short(), "peak_memory_gib": e.peak_memory / GIB,
            "memory_excess_gib": max(0.0, (e.peak_memory - cluster.gpu.hbm_bytes) / GIB),
            "violations": list(e.violations), "step_time_s": m.step_time if m else None,
            "mfu": m.mfu if m else None}


def _constraint(e: Evaluation, cluster: ClusterSpec) -> float:
    """≤ 0 when the plan runs; otherwise 1 + GiB over capacity (so samplers learn which way memory fits)."""
    return 0.0 if e.feasible else 1.0 + max(0.0, (e.peak_memory - cluster.gpu.hbm_bytes) / GIB)


def _values(e: Evaluation, multi: bool) -> list[float]:
    tokens = e.metrics.tokens_per_s if e.feasible else 0.0
    return [tokens, e.peak_memory / GIB] if multi else [tokens]


def record(study: optuna.Study, evaluations: Iterable[Evaluation], cluster: ClusterSpec,
           dists: dict, multi: bool) -> None:
    """Add evaluated plans as finished trials (exhaustive runs: no sampler involved)."""
    trials = [optuna.trial.create_trial(params=_params_in(e.strategy, dists), distributions=dists,
                                        values=_values(e, multi), user_attrs=_attrs(e, cluster),
                                        constraints={CONSTRAINT: _constraint(e, cluster)})
              for e in evaluations]
    if trials:
        study.add_trials(trials)


def make_sampler(name: str, seed: int, multi: bool) -> optuna.samplers.BaseSampler:
    """TPE, NSGA-II (throughput vs memory) or random; constraints come with each trial (``set_constraint``).

    Any integer seeds a sampler: numpy takes 0 … 2³²−1, so others are taken modulo 2³².
    """
    seed %= 2**32
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=24)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise SpecError(f"unknown sampler {name!r}; the samplers are tpe, nsga2 and random")


ASK_BATCH = 8
"""Plans asked of the sampler before it is told their results. A constant, not the number of workers, so that
a seed gives the same trials, and the same leaderboard, serial or on Ray. TPE with a tenth of GPT-3's plans
finds the exhaustive best at batches of 1, 4, 8 and 16 alike (seeds 0-2, within 1.3 %)."""


def _share(todo: list[Strategy], executor: Executor) -> list[list[Strategy]]:
    """``todo`` in contiguous pieces, one per worker (results come back in this order)."""
    n = -(-len(todo) // max(1, getattr(executor, "workers", 1)))
    return [todo[i:i + n] for i in range(0, len(todo), n)] if todo else []


def sampled_search(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy], top_k: int = 10,
                   executor: Executor | None = None, known: dict[Strategy, Evaluation] | None = None,
                   on_result: Callable[[Evaluation], None] | None = None,
                   progress: Callable[[int, int, list[Evaluation]], None] | None = None, *,
                   sampler: str = "tpe", budget: int = 20000, seed: int = 0,
                   study: optuna.Study | None = None) -> SearchResult:
    """Ask the sampler for plans until ``budget`` distinct plans have been evaluated (repeats are free), or
    every plan has been.

    ``known`` (a run being resumed) is replayed: the seeded sampler asks again the plans it asked before, their
    recorded results are told without simulating, and it goes on where the run stopped; so a resumed run ends with
    the budget and the leaderboard of an uninterrupted one. ``study``: where trials go (``fresh`` for a replay);
    None, in memory.
    """
    t0 = time.perf_counter()
    executor = executor or SerialExecutor()
    known = known or {}
    multi = sampler == "nsga2"
    # the sampler works on an in-memory study; each batch's finished trials go to ``study`` (a journal file
    # or an RDB) in one write per trial: a trial told to a journal directly costs one fsync per parameter and
    # attribute, most of a sampled search's time (cProfile: 42 s of fsync in 2,315 trials)
    durable = study
    study = optuna.create_study(directions=["maximize", "minimize"] if multi else ["maximize"])
    copied = 0
    valid = len(plans)
    plans = distinct_plans(cluster, plans)
    dists = distributions(plans)
    by_params = {tuple(_params_in(s, dists).values()): s for s in plans}
    study.sampler = make_sampler(sampler, seed, multi)
    seen: dict[Strategy, Evaluation] = {}
    evaluations: list[Evaluation] = []
    reused = 0
    stale = 0
    target = min(budget, len(plans))
    while len(seen) < target and stale < 20 * max(target, 10):
        trials, todo = _ask(study, dists, by_params, min(ASK_BATCH, target - len(seen)), seen)
        fresh = [p for p in todo if p not in known]
        left = target - len(seen) - len(fresh)
        results = {e.strategy: e for batch in executor.map(model, cluster, _share(fresh, executor),
                                                           remaining=lambda: left, rounds=-(-left // ASK_BATCH))
                   for e in batch}
        for plan in todo:
            if plan in known:
                seen[plan] = known[plan]
                reused += 1
                continue
            e = seen[plan] = results[plan]
            evaluations.append(e)
            if on_result:
                on_result(e)
        stale = 0 if todo else stale + len(trials)
        for trial, plan in trials:
            _tell(study, trial, plan, seen, cluster, multi)
        if durable is not None:
            copied = _copy_trials(study, durable, copied)
        if progress:
            progress(len(seen), target, top_feasible(seen.values(), top_k))
    oom = sum(1 for e in seen.values() if not e.feasible)
    return SearchResult(leaderboard=top_feasible(seen.values(), top_k), evaluations=evaluations, valid=valid,
                        equivalent=valid - len(plans), out_of_memory=oom, pruned=len(plans) - len(seen),
                        reused=reused, seconds=time.perf_counter() - t0, sampler=sampler)


def _ask(study: optuna.Study, dists: dict, by_params: dict[tuple, Strategy], n: int,
         seen: dict[Strategy, Evaluation]) -> tuple[list[tuple[optuna.Trial, Strategy | None]], list[Strategy]]:
    """``n`` trials from the sampler, each with the plan its parameters name (None: no valid plan has them), and
    the plans among them not evaluated yet, each once, in the order asked."""
    trials, todo = [], []
    for _ in range(n):
        trial = study.ask(dists)
        plan = by_params.get(tuple(trial.params[k] for k in dists))
        trials.append((trial, plan))
        if plan is not None and plan not in seen and plan not in todo:
            todo.append(plan)
    return trials, todo


def _copy_trials(study: optuna.Study, durable: optuna.Study, copied: int) -> int:
    """Add the in-memory study's trials after the first ``copied`` to ``durable``; how many are copied now."""
    done = study.get_trials(deepcopy=False)
    durable.add_trials(done[copied:])
    return len(done)


def _tell(study: optuna.Study, trial: optuna.Trial, plan: Strategy | None, seen: dict[Strategy, Evaluation],
          cluster: ClusterSpec, multi: bool) -> None:
    if plan is None:
        trial.set_constraint(CONSTRAINT, 1.0)
        trial.set_user_attr("feasible", False)
        trial.set_user_attr("peak_memory_gib", None)
        trial.set_user_attr("violations", ["not a valid plan for this model and cluster"])
        study.tell(trial, [0.0, 1e6] if multi else [0.0])
        return
    e = seen[plan]
    trial.set_constraint(CONSTRAINT, _constraint(e, cluster))
    for k, v in _attrs(e, cluster).items():
        trial.set_user_attr(k, v)
    study.tell(trial, _values(e, multi))
