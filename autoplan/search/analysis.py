"""What a report shows beyond the record, derived here below the report: a run folder read back, the Pareto
front, simulated steps of the best plans (timelines, traces), one-axis neighbours of the best plan and the
parameter importances of the run's Optuna study. The report draws the plain data this hands it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from autoplan.errors import SpecError
from autoplan.search.exhaustive import rank_key, same_plan
from autoplan.search.folder import RunFolder
from autoplan.sim.simulate import CriticalPath, Evaluation, Simulation, critical_path, evaluate, simulate_step
from autoplan.specs import ClusterSpec, ModelSpec, load_cluster
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.families.strategy import AXES

TRACES = 1
"""Steps simulated in full (timeline, trace) for this many of the best plans by default: the best plan's (a
search's report draws only its timeline; each more trace of GPT-3/1024's best plans cost 0.13-0.20 s of CPU).
``autoplan report RUN --traces N`` writes more."""


@dataclass(frozen=True, kw_only=True)
class Run:
    """A search run as its folder holds it."""

    folder: Path
    inputs: dict
    """inputs.json: model, cluster, gpus, global batch, the space's axes, top k, sampler, budget, seed."""
    evaluations: tuple[Evaluation, ...]
    """Every evaluation recorded in the run (also those of resumed sessions)."""
    model: ModelSpec | None = None
    cluster: ClusterSpec | None = None
    missing: str = ""
    """Why the model or cluster could not be rebuilt (then no timeline, neighbours or model arguments)."""
    summary: dict = field(default_factory=dict)
    """The search's counts from leaderboard.json (valid, out of memory, pruned, seconds), if present."""
    plans: tuple[Strategy, ...] | None = None
    """The space's valid plans, when the search that just enumerated them hands them over (else enumerated again
    from inputs.json where needed)."""
    current: bool = False
    """The evaluations were made just now by this code (the search that hands them over): a plan's evaluation is
    reused instead of scored again (a run read back is scored again: the model may have changed since)."""

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
        """``gpt3-175b on 1024 × H100-SXM5-80GB (dgx-h100-80g), sequences of 2,048 tokens, global batch 1,536
        (3.15M tokens per step)``."""
        from autoplan.specs.batch import heading

        i = self.inputs
        batches = tuple(i.get("space", {}).get("global_batch", ())) or (i.get("global_batch", "?"),)
        seq = self.model.seq_len if self.model is not None else None
        return heading(i.get("model", "?"), i.get("gpus", "?"), i.get("gpu", "?"), i.get("cluster", "?"), seq, batches,
                       self.model is not None and self.model.structure is not None)

    def plan(self, rank: int) -> Evaluation:
        """The plan at ``rank`` (1 = best)."""
        n = len(self.ranked)
        if n == 0:
            raise SpecError(f"run {str(self.folder)!r} has no plan that fits in memory")
        if not 1 <= rank <= n:
            raise SpecError(f"rank {rank} is out of range: run {self.folder.name!r} has {n} ranked plans (1–{n})")
        return self.ranked[rank - 1]


def _specs(folder: RunFolder, inputs: dict) -> tuple[ModelSpec | None, ClusterSpec | None, str]:
    saved = folder.load_specs()            # saved but refused (damaged, edited): the folder is refused, one line
    if saved is not None:
        return saved[0], saved[1], ""
    try:
        return get_model(inputs["model"]), load_cluster(inputs["cluster"], inputs["gpus"]), ""
    except (SpecError, KeyError) as err:
        return None, None, f"cannot rebuild the model or cluster of this run: {err}"


def load_run(path: str | Path) -> Run:
    """The run in folder ``path``; SpecError (one line) if it is not a readable run folder."""
    folder = RunFolder.existing(path)
    inputs = folder.read_inputs()
    model, cluster, missing = _specs(folder, inputs)
    return Run(folder=folder.path, inputs=inputs, evaluations=tuple(folder.load_evaluations().values()),
               model=model, cluster=cluster, missing=missing, summary=folder.read_summary())


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
    """Simulated steps of the ``n`` best plans (every micro-batch, with what set each task's start), for traces,
    the timeline and the critical path."""
    if run.model is None or run.cluster is None:
        return []
    return [simulate_step(run.model, run.cluster, e.strategy, why=True) for e in run.ranked[:n]]


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
    return {k: values[k] for k in AXES if k != "virtual_stages" and len(values.get(k, ())) > 1}


_DEGREES = ("tp", "pp", "cp", "spatial", "channel", "filter")
"""Axes whose product with dp is the GPU count (the last three: CNN degrees, 1 for transformers)."""


def _changed(s: Strategy, axis: str, value: Any, gpus: int) -> Strategy:
    if axis == "schedule":
        if value.startswith("int"):
            return replace(s, schedule="interleaved", virtual_stages=int(value[3:]))
        return replace(s, schedule=value, virtual_stages=1)
    if axis in _DEGREES:
        degrees = {k: getattr(s, k) for k in _DEGREES} | {axis: value}
        model_parallel = math.prod(degrees.values())
        if gpus % model_parallel:
            raise SpecError(f"{'·'.join(_DEGREES[:3])} = {model_parallel} does not divide the {gpus} GPUs"
                            if axis in _DEGREES[:3] else f"the model-parallel degrees ({model_parallel}) do not "
                            f"divide the {gpus} GPUs")
        return replace(s, dp=gpus // model_parallel, **{axis: value})
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
    current = asdict(s0) | {"schedule": _schedule_label(s0.schedule, s0.virtual_stages)}
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
            e = known.get(s)
            if e is None:
                # a plan the same as another on this cluster (selective recompute beside fused attention) scores as it
                same = known.get(same_plan(run.cluster, s))
                e = replace(same, strategy=s) if same is not None else evaluate(run.model, run.cluster, s)
            row.append(Neighbour(axis=axis, value=_label(axis, value), evaluation=e,
                                 reason="" if e.feasible else "; ".join(e.violations)))
        out[axis] = row
    return out


MIN_PLANS = 10
"""Evaluated plans needed before parameter importances mean anything."""
TOP_SHARE = 0.1
"""The best share of the evaluated plans that PED-ANOVA sets against all of them (γ', Watanabe et al. 2023)."""


def importances(run: Run) -> tuple[dict[str, float], str]:
    """Which search axes set the fastest evaluated plans apart, from the run's record (no Optuna study needed):
    PED-ANOVA over categorical parameters (Watanabe et al., IJCAI 2023, arXiv 2304.10255, Eq. 6), as Optuna's
    ``PedAnovaImportanceEvaluator`` computes it: per axis, the Pearson divergence of the distribution of its values
    among the best ``TOP_SHARE`` of the evaluated plans (by throughput; a plan that does not fit counts 0) from
    their distribution among all of them, each a categorical Parzen estimator with a uniform prior of weight 1
    over the axis's values in the space; normalised to sum to 1. Or a note saying why there are none."""
    sampler = str(run.inputs.get("sampler", "?"))
    space = _axis_values(run.inputs.get("space", {}))
    plans = [(_params(e.strategy), e.metrics.tokens_per_s if e.feasible else 0.0) for e in run.evaluations]
    varying = [k for k in space if len({p[k] for p, _ in plans}) > 1]
    if len(plans) < MIN_PLANS or len(varying) < 2:
        return {}, (f"not enough to rank parameters: {len(plans)} evaluated plans (need {MIN_PLANS}) and "
                    f"{len(varying)} parameters that vary (need 2)")
    ranked = sorted(-x for _, x in plans)
    cutoff = ranked[math.ceil(TOP_SHARE * len(plans)) - 1]
    top = [p for p, x in plans if -x <= cutoff]
    raw = {}
    for axis in varying:
        choices = list(dict.fromkeys([_label(axis, v) for v in space[axis]] + [p[axis] for p, _ in plans]))
        p_top = _parzen([p[axis] for p in top], choices)
        p_all = _parzen([p[axis] for p, _ in plans], choices)
        raw[axis] = sum(b * (a / b - 1) ** 2 for a, b in zip(p_top, p_all))
    total = sum(raw.values())
    values = {k: v / total if total else 1 / len(raw) for k, v in sorted(raw.items(), key=lambda kv: -kv[1])}
    return values, (f"PED-ANOVA importances over the {len(plans)} plans the search evaluated ({sampler} sampler): "
                    "which parameters set the fastest plans apart from the rest")


def _params(s: Strategy) -> dict[str, str]:
    """A plan's value on each search axis, as the report labels them (the schedule with its virtual stages)."""
    out = {k: _label(k, getattr(s, k)) for k in AXES if k != "virtual_stages"}
    out["schedule"] = _schedule_label(s.schedule, s.virtual_stages)
    return out


def _parzen(observed: list[str], choices: list[str]) -> list[float]:
    """The probability of each choice under a categorical Parzen estimator of ``observed`` with a uniform prior of
    weight 1, plus 1e-12 (Optuna's ``build_parzen_estimator_on_grid``: a kernel per distinct value observed,
    weighted by its count, and the prior's, weighted 1; a value's kernel puts 1 on it and 1/(d+1) on every choice,
    d the distinct values, normalised)."""
    n, k = len(observed), len(choices)
    counts = {c: 0 for c in choices}
    for value in observed:
        counts[value] += 1
    spread = 1.0 / (sum(1 for c in choices if counts[c]) + 1)
    row = 1.0 + k * spread
    return [((counts[c] + n * spread) / row + 1.0 / k) / (n + 1) + 1e-12 for c in choices]


@dataclass(frozen=True, kw_only=True)
class Analysis:
    """Everything a report draws beyond the run's record."""

    pareto: list[Evaluation]
    sims: list[Simulation]
    """Simulated steps of the best plans, best first."""
    neighbours: dict[str, list[Neighbour]]
    importances: dict[str, float]
    importance_note: str
    critical: CriticalPath | None = None
    """The chain of tasks that sets the best plan's step, and the other streams' slack."""
    elasticity: list[dict] = field(default_factory=list)
    """Elasticity of the best plan's step time to each hardware parameter (``search.whatif``)."""
    whatifs: dict | None = None
    """What ``autoplan whatif RUN`` left in the folder (whatif.json), if anything."""


def hardware_elasticity(run: Run) -> list[dict]:
    """The best plan's elasticities (``search.whatif.elasticities``), with the run's space for HBM capacity."""
    from autoplan.search.whatif import elasticities, elasticity_dicts
    from autoplan.search.space import enumerate_plans, space_from_axes

    if run.model is None or run.cluster is None or not run.leaderboard:
        return []
    best = run.leaderboard[0] if run.current else evaluate(run.model, run.cluster, run.leaderboard[0].strategy)
    if not best.feasible:
        return []
    if run.plans is not None:
        plans = list(run.plans)
    else:
        try:
            space = space_from_axes(run.inputs.get("space", {}), "inputs.json space")
            plans = enumerate_plans(run.model, run.cluster.gpus, space, best.strategy.global_batch)[0]
        except SpecError:
            plans = []
    return elasticity_dicts(elasticities(run.model, run.cluster, best, plans))


def saved_whatifs(run: Run) -> dict | None:
    """whatif.json of the run folder, if ``autoplan whatif`` left one and it is readable."""
    import json

    from autoplan.search.whatif import WHATIF

    path = run.folder / WHATIF
    try:
        return json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None


def analyse(run: Run, traces: int = TRACES) -> Analysis:
    """The analysis of ``run`` that its report draws."""
    values, note = importances(run)
    sims = simulate_top(run, traces)
    return Analysis(pareto=pareto_front(list(run.evaluations)), sims=sims,
                    neighbours=neighbours(run, run.leaderboard[0]) if run.leaderboard else {},
                    importances=values, importance_note=note, critical=critical_path(sims[0]) if sims else None,
                    elasticity=hardware_elasticity(run), whatifs=saved_whatifs(run))
