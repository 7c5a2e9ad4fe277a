"""One search run: its folder, its record of every evaluation (for --resume), the sampler and the executor."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable

from autoplan.errors import SpecError
from autoplan.search import symbolic
from autoplan.search.exhaustive import SearchResult, distinct_plans, rank_key, search, top_feasible
from autoplan.families.registry import lower_bound
from autoplan.search.executors import AutoExecutor, Executor
from autoplan.search.folder import JOURNAL, RECORD, RunFolder
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy


def load_known(folder: Path | RunFolder) -> dict[Strategy, Evaluation]:
    """Evaluations already made in ``folder`` (a run being resumed); a line torn by a kill is cut off."""
    return (folder if isinstance(folder, RunFolder) else RunFolder(folder)).load_evaluations()


class SearchInterrupted(Exception):
    """Ctrl-C during a search; ``partial`` ranks what was evaluated before it (the record keeps it for --resume)."""

    def __init__(self, partial: SearchResult) -> None:
        super().__init__("search interrupted")
        self.partial = partial


def resolve_executor(workers: int | None, ray_address: str | None) -> Executor:
    """``None`` (auto): in this process, or an embedded Ray with the CPU count when the search's work left, measured
    on its first batches, wins back Ray's start (decided once: ``AutoExecutor``); ``0``: serial; ``N``: N Ray
    workers from the start; an address (or RAY_ADDRESS): that cluster."""
    from autoplan.search.executors import make_executor

    if workers is None and not (ray_address or os.environ.get("RAY_ADDRESS")):
        return AutoExecutor(os.cpu_count() or 1)
    return make_executor(workers, ray_address)


def choose_sampler(sampler: str, fitting: int, budget: int) -> str:
    """The search for ``sampler`` over ``fitting`` distinct valid plans: ``auto`` is the exhaustive search in bound
    order, which simulates few plans (GPT-3 on 1024 GPUs: 51 of 2,839 that fit) and stops at the budget if it
    must, where TPE's cost per trial grows with the trials (measured: 92 % of a 26,104-plan hopper search's CPU in
    ``Study.ask``, 2.5 plans/s by its 1,400th trial); a sampler asked for is kept unless the budget covers every
    plan (then exhaustive)."""
    if sampler == "auto" or (sampler in ("tpe", "nsga2", "random") and fitting <= budget):
        return "exhaustive"
    return sampler


class StopBetweenBatches:
    """Ctrl-C ends the search after the batch in flight, at a point where no store is half-written (a
    KeyboardInterrupt inside Optuna's journal lock surfaces as another error); a second Ctrl-C stops at once.
    Wraps the progress callback, which the search calls after every batch."""

    def __init__(self, progress: Callable[[int, int, list[Evaluation]], None] | None) -> None:
        self._progress = progress
        self.requested = False
        self._previous: object = None

    def __call__(self, done: int, total: int, board: list[Evaluation]) -> None:
        if self._progress:
            self._progress(done, total, board)
        if self.requested:
            raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> "StopBetweenBatches":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def run_search(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy], folder: Path | RunFolder, *,
               sampler: str = "auto", budget: int = 20000, seed: int = 0, top_k: int = 10,
               workers: int | None = None, ray_address: str | None = None, storage: str | None = None,
               progress: Callable[[int, int, list[Evaluation]], None] | None = None, cost: str = "sim",
               prefilter: float | None = None, weights: str = "balance",
               study_name: str | None = None) -> SearchResult:
    """Search ``plans`` and record everything in ``folder``, resuming what it already holds: the resumed run
    replays the recorded evaluations (nothing is simulated twice) and ends as an uninterrupted run would.

    ``cost="symbolic"`` ranks the plans by their symbolic cost and simulates only the top k; ``prefilter=K``
    first keeps the symbolic best K % of the plans (at least ``top_k``) for the search (``search/symbolic.py``);
    an exhaustive search then widens to the dropped plans whose bound could still beat its top k (``_widen``), so
    that its leaderboard is the whole space's.

    ``study_name`` names the run's Optuna study (unique per run, so that runs sharing a ``storage`` never share a
    study; a resume replaces only this one); default: the folder's name.

    Raises SearchInterrupted, carrying the ranking so far, on Ctrl-C; SpecError before any evaluation if the
    storage or the Ray cluster cannot be reached.
    """
    t0 = time.perf_counter()
    counts = None
    if prefilter is not None:
        order, out_of_memory = symbolic.symbolic_order(model, cluster, plans, weights)
        kept = symbolic.best_percent(order, prefilter, top_k)
        # the search sees only the kept plans; its summary counts the whole space's
        counts = dict(valid=len(plans), equivalent=len(plans) - len(order) - out_of_memory,
                      out_of_memory=out_of_memory, prefiltered=len(order) - len(kept))
        plans = kept
    folder = folder if isinstance(folder, RunFolder) else RunFolder(folder)
    resuming = folder.file(RECORD).exists()
    known = folder.load_evaluations()
    folder.check_known(known, plans)
    distinct = len(distinct_plans(cluster, plans))
    chosen = "symbolic" if cost == "symbolic" else choose_sampler(sampler, distinct, budget)
    # an exact search needs no sampler: its record is evaluations.jsonl and the leaderboard, and Optuna (a third
    # of a second to import, a journal write per trial) is for a study asked for with --storage
    sampled = chosen not in ("exhaustive", "symbolic")
    st = study = None
    if sampled or storage is not None:
        from autoplan.search import study as st
        study = st.open_study(folder.file(JOURNAL), storage, study_name or folder.name,
                              multi_objective=chosen == "nsga2", fresh=resuming)
    else:
        _refuse_odd_journal(folder.file(JOURNAL))
    executor = resolve_executor(workers, ray_address)
    recorder = folder.recorder()
    new: list[Evaluation] = []

    def on_result(e: Evaluation) -> None:
        recorder(e)
        new.append(e)

    run = (st.sampled_search if sampled else
           search if chosen == "exhaustive" else functools.partial(symbolic.symbolic_search, weights=weights))
    stop = StopBetweenBatches(progress)
    try:
        with stop:
            result = run(model, cluster, plans, top_k, executor, known, on_result, stop, sampler=chosen,
                         budget=budget, seed=seed, study=study)
            if prefilter is not None and chosen == "exhaustive":
                result = _widen(model, cluster, order[len(plans):], result, top_k, executor, known, on_result, stop,
                                budget)
                counts["prefiltered"] -= result.widened
            if chosen == "exhaustive" and study is not None:
                st.record(study, [*known.values(), *result.evaluations], cluster, st.distributions(plans),
                          multi=False)
    except KeyboardInterrupt:
        raise SearchInterrupted(_partial(known, new, len(plans), top_k, chosen, time.perf_counter() - t0)) from None
    finally:
        recorder.close()
        executor.close()
    if counts:
        for name, value in counts.items():
            setattr(result, name, value)
        result.seconds = time.perf_counter() - t0     # the symbolic scoring of every plan counts too
    return result


def _refuse_odd_journal(journal: Path) -> None:
    """A run folder's Optuna journal that is a link or no regular file is refused, as ``study.open_study`` refuses
    it, also by the searches that keep no study."""
    if journal.is_symlink() or (journal.exists() and not journal.is_file()):
        raise SpecError(f"the run's Optuna journal {str(journal)!r} is a link or no regular file; autoplan writes "
                        "only its own files in a run folder (remove it)")


def _widen(model: ModelSpec, cluster: ClusterSpec, dropped: list[tuple[float, Strategy]], first: SearchResult,
           top_k: int, executor: Executor, known: dict[Strategy, Evaluation], on_result: Callable,
           stop: Callable, budget: int | None = None) -> SearchResult:
    """The pre-filter's search made exact: the dropped plans whose bound could still beat the kept plans' k-th best
    are searched too (bound-pruned, from that leaderboard, within what is left of ``budget``); every other plan's
    bound is above it, so the top k is the whole space's (``widened`` says how many joined). A first search the
    budget cut short is returned as it is."""
    if first.unproven:
        return first
    kth = rank_key(first.leaderboard[top_k - 1])[0] if len(first.leaderboard) >= top_k else float("inf")
    # the bound-pruned search's own rule (per sequence, as rank_key ranks): a plan whose bound equals the k-th best
    # may tie it and rank before it
    widened = [s for _, s in dropped if lower_bound(model, cluster, s) / s.global_batch <= kth]
    if not widened:
        return first
    done = {**known, **{e.strategy: e for e in first.evaluations}}
    left = None if budget is None else budget - len(first.evaluations) - first.reused
    second = search(model, cluster, widened, top_k, executor, done, on_result, stop, budget=left)
    return SearchResult(leaderboard=second.leaderboard, evaluations=first.evaluations + second.evaluations,
                        valid=first.valid, out_of_memory=first.out_of_memory, pruned=first.pruned + second.pruned,
                        equivalent=first.equivalent, reused=first.reused + second.reused, widened=len(widened),
                        unproven=second.unproven)


def _partial(known: dict[Strategy, Evaluation], new: list[Evaluation], valid: int, top_k: int, sampler: str,
             seconds: float) -> SearchResult:
    """The ranking of every plan evaluated before an interruption."""
    done = {**known, **{e.strategy: e for e in new}}
    return SearchResult(leaderboard=top_feasible(done.values(), top_k), evaluations=new, valid=valid, reused=len(known),
                        out_of_memory=sum(1 for e in done.values() if e.metrics is None),
                        pruned=max(0, valid - len(done)), seconds=seconds, sampler=sampler)
