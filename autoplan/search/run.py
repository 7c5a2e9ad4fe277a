"""One search run: its folder, its record of every evaluation (for --resume), the sampler and the executor."""

from __future__ import annotations

import itertools
import json
import os
import pickle
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from autoplan.files import write_atomic
from autoplan.search.exhaustive import SearchResult, rank_key, search
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy

RECORD = "evaluations.pkl"
"""Every evaluation of the run, appended as it arrives (one pickle per record; a torn last record is ignored)."""


def load_known(folder: Path) -> dict[Strategy, Evaluation]:
    """Evaluations already made in ``folder`` (a run being resumed); a record torn by a kill is cut off, so
    what is appended next can be read back."""
    known: dict[Strategy, Evaluation] = {}
    path = folder / RECORD
    if not path.exists():
        return known
    with path.open("r+b") as f:
        good = 0
        while True:
            try:
                e = pickle.load(f)
            except EOFError:
                break
            except (pickle.UnpicklingError, ValueError, AttributeError, IndexError, TypeError):
                f.truncate(good)
                break
            known[e.strategy] = e
            good = f.tell()
    return known


class Recorder:
    """Appends each new evaluation to the run's record and to ``evaluations.jsonl`` (for people)."""

    def __init__(self, folder: Path, known: dict[Strategy, Evaluation] | None = None) -> None:
        """``known``: the record as ``load_known`` read it (read here if not given)."""
        known = load_known(folder) if known is None else known
        self._bin = (folder / RECORD).open("ab")
        text = folder / "evaluations.jsonl"
        # the record is the truth: a kill can tear the last line, or land between a record and its line
        write_atomic(text, "".join(_line(e) for e in known.values()))
        self._text = text.open("a")

    def __call__(self, e: Evaluation) -> None:
        pickle.dump(e, self._bin)
        self._bin.flush()
        self._text.write(_line(e))
        self._text.flush()

    def close(self) -> None:
        self._bin.close()
        self._text.close()


def _line(e: Evaluation) -> str:
    m = e.metrics
    return json.dumps({"plan": e.strategy.short(), "feasible": e.feasible,
                       "step_time_s": m.step_time if m else None, "tokens_per_s": m.tokens_per_s if m else None,
                       "peak_memory_gib": e.peak_memory / 2**30, "violations": list(e.violations)}) + "\n"


class SearchInterrupted(Exception):
    """Ctrl-C during a search; ``partial`` ranks what was evaluated before it (the record keeps it for --resume)."""

    def __init__(self, partial: SearchResult) -> None:
        super().__init__("search interrupted")
        self.partial = partial


SWITCH_TO_RAY_AFTER_S = 10.0
"""Serial seconds before ``--workers auto`` starts Ray: about what an embedded Ray takes to start on a 2-core
machine (8.7 s measured, benchmarks/bench_search.py). Rent-or-buy: never more than twice the better choice's
time spent before the switch (Karlin et al. 1988, ski rental)."""


class AutoExecutor:
    """Evaluates in this process, and moves the rest of the work to an embedded Ray with ``workers`` CPUs once
    it has simulated serially for as long as Ray takes to start (short searches never pay for Ray)."""

    def __init__(self, workers: int, switch_after: float = SWITCH_TO_RAY_AFTER_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.workers = 1
        self._ray_workers = workers
        self._switch_after = switch_after
        self._clock = clock
        self._ray: object | None = None
        self.serial_seconds = 0.0
        """Time spent simulating in this process so far (what Ray could have shared out)."""

    def map(self, model: ModelSpec, cluster: ClusterSpec,
            batches: Iterable[Sequence[Strategy]]) -> Iterator[list[Evaluation]]:
        from autoplan.search.executors import RayExecutor, evaluate_batch

        if self._ray is not None:
            yield from self._ray.map(model, cluster, batches)
            return
        it = iter(batches)
        for batch in it:
            t0 = self._clock()
            results = evaluate_batch(model, cluster, batch)
            self.serial_seconds += self._clock() - t0
            yield results
            if self._ray_workers > 1 and self.serial_seconds >= self._switch_after:
                break
        else:
            return
        following = next(it, None)
        if following is None:
            return
        it = itertools.chain([following], it)
        self._ray = RayExecutor(self._ray_workers)
        self.workers = self._ray.workers
        yield from self._ray.map(model, cluster, it)

    def close(self) -> None:
        if self._ray is not None:
            self._ray.close()


def resolve_executor(workers: int | None, ray_address: str | None) -> object:
    """``None`` (auto): the CPU count, Ray only once the search is long enough to pay for it; ``0``: serial;
    ``N``: N Ray workers from the start; an address (or RAY_ADDRESS): that cluster."""
    from autoplan.search.executors import make_executor

    if workers is None and not (ray_address or os.environ.get("RAY_ADDRESS")):
        return AutoExecutor(os.cpu_count() or 1)
    return make_executor(workers, ray_address)


def choose_sampler(sampler: str, fitting: int, budget: int) -> str:
    """``auto``: exhaustive when every plan fits in the budget, else TPE."""
    if sampler != "auto":
        return sampler
    return "exhaustive" if fitting <= budget else "tpe"


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


def run_search(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy], folder: Path, *, sampler: str = "auto",
               budget: int = 20000, seed: int = 0, top_k: int = 10, workers: int | None = None,
               ray_address: str | None = None, storage: str | None = None,
               progress: Callable[[int, int, list[Evaluation]], None] | None = None) -> SearchResult:
    """Search ``plans`` and record everything in ``folder`` (resuming what it already holds).

    Raises SearchInterrupted, carrying the ranking so far, on Ctrl-C.
    """
    from autoplan.search import study as st

    t0 = time.perf_counter()
    known = load_known(folder)
    chosen = choose_sampler(sampler, len(plans), budget)
    recorder = Recorder(folder, known)
    new: list[Evaluation] = []

    def on_result(e: Evaluation) -> None:
        recorder(e)
        new.append(e)

    executor = resolve_executor(workers, ray_address)
    stop = StopBetweenBatches(progress)
    try:
        with stop:
            study = st.open_study(folder, storage, folder.name, multi_objective=chosen == "nsga2")
            dists = st.distributions(plans)
            if chosen == "exhaustive":
                result = search(model, cluster, plans, top_k, executor=executor, known=known, on_result=on_result,
                                progress=stop)
                st.record(study, result.evaluations, cluster, dists, multi=False)
            else:
                result = st.sampled_search(model, cluster, plans, study, chosen, budget, seed, executor, top_k,
                                           known, on_result=on_result, progress=stop)
    except KeyboardInterrupt:
        raise SearchInterrupted(_partial(known, new, len(plans), top_k, chosen, time.perf_counter() - t0)) from None
    finally:
        recorder.close()
        executor.close()
    return result


def _partial(known: dict[Strategy, Evaluation], new: list[Evaluation], valid: int, top_k: int, sampler: str,
             seconds: float) -> SearchResult:
    """The ranking of every plan evaluated before an interruption."""
    done = {**known, **{e.strategy: e for e in new}}
    board = sorted((e for e in done.values() if e.feasible), key=rank_key)[:top_k]
    return SearchResult(leaderboard=board, evaluations=new, valid=valid, reused=len(known),
                        out_of_memory=sum(1 for e in done.values() if e.metrics is None),
                        pruned=max(0, valid - len(done)), seconds=seconds, sampler=sampler)
