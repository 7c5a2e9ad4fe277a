"""A run folder read back: its inputs, every evaluation, the model and cluster it was made for, and what the
report derives from them (the Pareto front, one-axis neighbours of the best plan, parameter importances)."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from autoplan.errors import SpecError
from autoplan.search.exhaustive import rank_key
from autoplan.search.run import load_known
from autoplan.sim.simulate import Evaluation, Simulation, evaluate, simulate_step
from autoplan.sim.trace import write_trace
from autoplan.specs import ClusterSpec, ModelSpec, Strategy, get_model, load_cluster
from autoplan.specs.strategy import data_parallel

SPECS = "specs.pkl"
"""The model and cluster of the run (pickled), for models and clusters given as files."""
TRACES = 3
"""Chrome traces written for this many of the best plans."""
MIN_TRIALS = 10
"""Complete trials needed before parameter importances mean anything."""


@dataclass(frozen=True, kw_only=True)
class Run:
    """A search run as its folder holds it."""

    folder: Path
    inputs: dict
    """inputs.json: model, cluster, gpus, global batch, the space's axes, top k, sampler."""
    evaluations: tuple[Evaluation, ...]
    """Every evaluation recorded in the run (also those of resumed sessions)."""
    model: ModelSpec | None = None
    cluster: ClusterSpec | None = None
    missing: str = ""
    """Why the model or cluster could not be rebuilt (then no timeline, neighbours or model arguments)."""
    summary: dict = field(default_factory=dict)
    """The search's counts from leaderboard.json (valid, out of memory, pruned, seconds), if present."""

    @cached_property
    def ranked(self) -> list[Evaluation]:
        """Feasible evaluations, fastest first (ties by the plan's label)."""
        return sorted((e for e in self.evaluations if e.feasible), key=rank_key)

    @property
    def top_k(self) -> int:
        """Length of the run's leaderboard."""
        return int(self.inputs.get("top", 10))

    @property
    def leaderboard(self) -> list[Evaluation]:
        """The run's top k."""
        return self.ranked[:self.top_k]

    @property
    def title(self) -> str:
        """``gpt3-175b on 1024 × H100-SXM5-80GB (dgx-h100-80g), global batch 1536``."""
        i = self.inputs
        return (f"{i.get('model', '?')} on {i.get('gpus', '?')} × {i.get('gpu', '?')} ({i.get('cluster', '?')}), "
                f"global batch {i.get('global_batch', '?')}")

    def plan(self, rank: int) -> Evaluation:
        """The plan at ``rank`` (1 = best)."""
        n = len(self.ranked)
        if n == 0:
            raise SpecError(f"run {str(self.folder)!r} has no plan that fits in memory")
        if not 1 <= rank <= n:
            raise SpecError(f"rank {rank} is out of range: run {self.folder.name!r} has {n} ranked plans (1–{n})")
        return self.ranked[rank - 1]


def save_specs(folder: Path, model: ModelSpec, cluster: ClusterSpec) -> None:
    """Keep the run's model and cluster beside it, so a report can be rebuilt for models given as files."""
    (folder / SPECS).write_bytes(pickle.dumps((model, cluster)))


def _specs(folder: Path, inputs: dict) -> tuple[ModelSpec | None, ClusterSpec | None, str]:
    path = folder / SPECS
    if path.exists():
        try:
            model, cluster = pickle.loads(path.read_bytes())
            return model, cluster, ""
        except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as err:
            return None, None, f"{SPECS} is unreadable ({err})"
    try:
        return get_model(inputs["model"]), load_cluster(inputs["cluster"], int(inputs["gpus"])), ""
    except (SpecError, KeyError, ValueError) as err:
        return None, None, f"cannot rebuild the model or cluster of this run: {err}"


def load_run(path: str | Path) -> Run:
    """The run in folder ``path``; SpecError if it is not a run folder."""
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise SpecError(f"run folder {str(path)!r} does not exist")
    try:
        inputs = json.loads((folder / "inputs.json").read_text())
    except FileNotFoundError:
        raise SpecError(f"{str(path)!r} is not a run folder (no inputs.json)") from None
    except json.JSONDecodeError as err:
        raise SpecError(f"{str(folder / 'inputs.json')!r} is not valid JSON: {err}") from None
    summary: dict = {}
    try:
        summary = json.loads((folder / "leaderboard.json").read_text()).get("summary", {})
    except (OSError, json.JSONDecodeError, AttributeError):
        pass
    model, cluster, missing = _specs(folder, inputs)
    return Run(folder=folder, inputs=inputs, evaluations=tuple(load_known(folder).values()), model=model,
               cluster=cluster, missing=missing, summary=summary)


def pareto_front(evaluations: list[Evaluation]) -> list[Evaluation]:
    """Feasible plans no other plan beats on both throughput (higher) and peak memory (lower), by memory."""
    front: list[Evaluation] = []
    best = -1.0
    for e in sorted((e for e in evaluations if e.feasible),
                    key=lambda e: (e.peak_memory, -e.metrics.tokens_per_s, e.strategy.short())):
        if e.metrics.tokens_per_s > best:
            front.append(e)
            best = e.metrics.tokens_per_s
    return front


def simulate_top(run: Run, n: int = TRACES) -> list[Simulation]:
    """Simulated steps of the ``n`` best plans (every micro-batch), for traces and the timeline."""
    if run.model is None or run.cluster is None:
        return []
    return [simulate_step(run.model, run.cluster, e.strategy) for e in run.ranked[:n]]


def write_traces(run: Run, sims: list[Simulation]) -> list[Path]:
    """``trace_rank1.json``… (Chrome Trace Event JSON) for the simulated best plans."""
    paths = []
    for rank, (e, sim) in enumerate(zip(run.ranked, sims), 1):
        s = e.strategy
        path = run.folder / f"trace_rank{rank}.json"
        write_trace(path, sim.lowered, sim.timeline, run.model.layers // (s.pp * s.chunks))
        paths.append(path)
    return paths


@dataclass(frozen=True, kw_only=True)
class Neighbour:
    """The best plan with one axis changed to one other value of the run's space."""

    axis: str
    value: str
    evaluation: Evaluation | None
    """None when no plan could be built; else feasible or with the reasons it is not."""
    reason: str = ""
    """Why the plan is missing from the plot (invalid, out of memory)."""
    best: bool = False
    """This is the best plan itself (its value on this axis)."""


def _schedule_label(schedule: str, virtual_stages: int) -> str:
    return f"int{virtual_stages}" if schedule == "interleaved" else schedule


def _axis_values(space: dict[str, list]) -> dict[str, list[Any]]:
    values = {k: list(v) for k, v in space.items() if k not in ("schedule", "virtual_stages")}
    values["schedule"] = [_schedule_label(s, v) for s in space.get("schedule", ["1f1b"])
                          for v in (space.get("virtual_stages", [1]) if s == "interleaved" else [1])]
    order = ("tp", "pp", "cp", "micro_batch", "schedule", "sequence_parallel", "recompute", "zero",
             "overlap_grad_reduce", "overlap_param_gather")
    return {k: values[k] for k in order if len(values.get(k, ())) > 1}


def _changed(s: Strategy, axis: str, value: Any, gpus: int) -> Strategy:
    if axis == "schedule":
        if value.startswith("int"):
            return replace(s, schedule="interleaved", virtual_stages=int(value[3:]))
        return replace(s, schedule=value, virtual_stages=1)
    if axis in ("tp", "pp", "cp"):
        degrees = {"tp": s.tp, "pp": s.pp, "cp": s.cp} | {axis: value}
        model_parallel = degrees["tp"] * degrees["pp"] * degrees["cp"]
        if gpus % model_parallel:
            raise SpecError(f"tp·pp·cp = {model_parallel} does not divide the {gpus} GPUs")
        return replace(s, dp=data_parallel(gpus, **degrees), **{axis: value})
    return replace(s, **{axis: value})


def _label(axis: str, value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def neighbours(run: Run, best: Evaluation) -> dict[str, list[Neighbour]]:
    """For each axis the run searched, the best plan with that axis set to each allowed value (dp follows)."""
    if run.model is None or run.cluster is None:
        return {}
    known = {e.strategy: e for e in run.evaluations}
    gpus = run.cluster.gpus
    s0 = best.strategy
    current = s0.to_dict() | {"schedule": _schedule_label(s0.schedule, s0.virtual_stages)}
    out: dict[str, list[Neighbour]] = {}
    for axis, values in _axis_values(run.inputs.get("space", {})).items():
        row = []
        for value in values:
            if value == current[axis]:
                row.append(Neighbour(axis=axis, value=_label(axis, value), evaluation=best, best=True))
                continue
            try:
                s = _changed(s0, axis, value, gpus)
            except SpecError as err:
                row.append(Neighbour(axis=axis, value=_label(axis, value), evaluation=None, reason=str(err)))
                continue
            e = known.get(s) or evaluate(run.model, run.cluster, s)
            row.append(Neighbour(axis=axis, value=_label(axis, value), evaluation=e,
                                 reason="" if e.feasible else "; ".join(e.violations)))
        out[axis] = row
    return out


def importances(run: Run) -> tuple[dict[str, float], str]:
    """Optuna's parameter importances for throughput (PED-ANOVA, needs no scikit-learn), or a note saying why
    there are none."""
    path = run.folder / "study.journal"
    if not path.exists():
        return {}, "no Optuna study in the run folder (an external --storage was used)"
    try:
        import warnings

        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = JournalStorage(JournalFileBackend(str(path)))
        names = optuna.get_all_study_names(storage)
        if not names:
            return {}, "the run's Optuna study is empty"
        study = optuna.load_study(study_name=run.folder.name if run.folder.name in names else names[0],
                                  storage=storage)
        trials = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        varying = [p for p in {k for t in trials for k in t.params} if len({t.params.get(p) for t in trials}) > 1]
        if len(trials) < MIN_TRIALS or len(varying) < 2:
            return {}, (f"not enough to rank parameters: {len(trials)} complete trials (need {MIN_TRIALS}) and "
                        f"{len(varying)} parameters that vary (need 2)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = optuna.importance.get_param_importances(
                study, evaluator=optuna.importance.PedAnovaImportanceEvaluator(), params=sorted(varying),
                target=lambda t: -t.values[0])
        return dict(values), (f"PED-ANOVA importances over the {len(trials)} plans the search evaluated "
                              f"({run.inputs.get('sampler', '?')} sampler): which parameters set the fastest plans "
                              "apart from the rest")
    except Exception as err:  # noqa: BLE001 — a report never fails for its optional plot
        return {}, f"parameter importances are not available: {type(err).__name__}: {err}"
