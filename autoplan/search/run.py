"""One search run: its folder, its record of every evaluation (for --resume), the sampler and the executor."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Callable

from autoplan.search.exhaustive import SearchResult, search
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy

RECORD = "evaluations.pkl"
"""Every evaluation of the run, appended as it arrives (one pickle per record; a torn last record is ignored)."""


def load_known(folder: Path) -> dict[Strategy, Evaluation]:
    """Evaluations already made in ``folder`` (a run being resumed)."""
    known: dict[Strategy, Evaluation] = {}
    path = folder / RECORD
    if not path.exists():
        return known
    with path.open("rb") as f:
        while True:
            try:
                e = pickle.load(f)
            except EOFError:
                break
            except (pickle.UnpicklingError, ValueError, AttributeError, IndexError):
                break
            known[e.strategy] = e
    return known


class Recorder:
    """Appends each new evaluation to the run's record and to ``evaluations.jsonl`` (for people)."""

    def __init__(self, folder: Path) -> None:
        self._bin = (folder / RECORD).open("ab")
        self._text = (folder / "evaluations.jsonl").open("a")

    def __call__(self, e: Evaluation) -> None:
        pickle.dump(e, self._bin)
        self._bin.flush()
        m = e.metrics
        self._text.write(json.dumps({"plan": e.strategy.short(), "feasible": e.feasible,
                                     "step_time_s": m.step_time if m else None,
                                     "tokens_per_s": m.tokens_per_s if m else None,
                                     "peak_memory_gib": e.peak_memory / 2**30,
                                     "violations": list(e.violations)}) + "\n")
        self._text.flush()

    def close(self) -> None:
        self._bin.close()
        self._text.close()


def choose_sampler(sampler: str, fitting: int, budget: int) -> str:
    """``auto``: exhaustive when every plan fits in the budget, else TPE."""
    if sampler != "auto":
        return sampler
    return "exhaustive" if fitting <= budget else "tpe"


def run_search(model: ModelSpec, cluster: ClusterSpec, plans: list[Strategy], folder: Path, *, sampler: str = "auto",
               budget: int = 20000, seed: int = 0, top_k: int = 10, workers: int | None = 0,
               ray_address: str | None = None, storage: str | None = None,
               progress: Callable[[int, int, list[Evaluation]], None] | None = None) -> SearchResult:
    """Search ``plans`` and record everything in ``folder`` (resuming what it already holds)."""
    from autoplan.search import study as st
    from autoplan.search.executors import make_executor

    known = load_known(folder)
    chosen = choose_sampler(sampler, len(plans), budget)
    recorder = Recorder(folder)
    executor = make_executor(workers, ray_address)
    try:
        study = st.open_study(folder, storage, folder.name, multi_objective=chosen == "nsga2")
        dists = st.distributions(plans)
        if chosen == "exhaustive":
            result = search(model, cluster, plans, top_k, executor=executor, known=known, on_result=recorder,
                            progress=progress)
            st.record(study, result.evaluations, cluster, dists, multi=False)
        else:
            result = st.sampled_search(model, cluster, plans, study, chosen, budget, seed, executor, top_k, known,
                                       on_result=recorder, progress=progress)
    finally:
        recorder.close()
        executor.close()
    return result
