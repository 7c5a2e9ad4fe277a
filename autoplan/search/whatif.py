"""What would change the plan: the best plan's step time and the best plan itself under hardware what-ifs (a
faster NIC, more HBM, a larger NVLink domain, an oversubscribed spine, more GPUs), and the elasticity of the best
plan's step time to each hardware parameter.

A what-if cluster is the baseline's changed through ``ClusterSpec.scaled`` (checked as a cluster file is). Its
search reuses the baseline's space (the same enumerated plans when the GPU count is unchanged, the same axes and
global batch otherwise) and its bounds: the exact, bound-ordered search (``exhaustive.search``) starts with the
baseline's best plan already scored under the change, so every plan whose optimistic bound is above that is
skipped without simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from autoplan.errors import SpecError
from autoplan.families.strategy import Strategy
from autoplan.search.exhaustive import distinct_plans, plan_peak, search
from autoplan.sim.simulate import Evaluation, evaluate
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec

RELATIVE = {"compute": "compute", "hbm": "hbm_bandwidth", "memory": "memory", "nvlink": "nvlink",
            "nic_bw": "network", "latency": "latency"}
"""What-if parameters given as factors (``nic_bw=2x``), by the ``ClusterSpec.scaled`` keyword they set."""
ABSOLUTE = {"nvlink_domain": int, "oversubscription": float, "gpus": int}
"""What-if parameters given as values (``nvlink_domain=72``, ``oversubscription=4`` or ``4:1``, ``gpus=2048``)."""
ALIASES = {"flops": "compute", "hbm_bw": "hbm", "hbm_bandwidth": "hbm", "capacity": "memory", "hbm_gib": "memory",
           "nic": "nic_bw", "network": "nic_bw", "nvlink_bw": "nvlink", "spine": "oversubscription"}
MEANING = {"compute": "GPU peak FLOP/s", "hbm": "HBM bandwidth", "memory": "HBM capacity",
           "nvlink": "NVLink bandwidth", "nic_bw": "NIC and switch bandwidth", "latency": "every tier's latency",
           "nvlink_domain": "GPUs per NVLink domain", "oversubscription": "spine oversubscription (n:1)",
           "gpus": "GPU count"}
ELASTIC = ("compute", "hbm", "nvlink", "nic_bw", "latency", "memory")
"""The parameters whose elasticity the report shows."""
STEP = 0.1
"""Elasticities from ±10 % changes."""


@dataclass(frozen=True)
class Change:
    """One hardware change: a factor for a RELATIVE parameter, a value for an ABSOLUTE one."""

    name: str
    value: float

    @property
    def label(self) -> str:
        """``nic_bw=2x``, ``oversubscription=4:1``, ``gpus=2048``."""
        if self.name in RELATIVE:
            return f"{self.name}={self.value:g}x"
        return f"{self.name}={self.value:g}:1" if self.name == "oversubscription" else f"{self.name}={self.value:g}"


Scenario = tuple[Change, ...]
"""Changes applied together (``nic_bw=2x+hbm=1.5x``)."""


def label(scenario: Scenario) -> str:
    """The scenario as written on the command line."""
    return "+".join(c.label for c in scenario)


def parse_changes(text: str) -> list[Scenario]:
    """Scenarios from ``--vary``: comma-separated, each one change or several joined by ``+``; a factor is
    written ``2x`` (or ``x2``), a value plainly. SpecError names what is wrong and what is allowed."""
    scenarios = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        scenarios.append(tuple(_change(item.strip()) for item in part.split("+")))
    if not scenarios:
        raise SpecError(f"--vary {text!r} names no change; e.g. --vary nic_bw=2x,oversubscription=4")
    return scenarios


def _change(item: str) -> Change:
    allowed = ", ".join([f"{k}=Nx" for k in RELATIVE] + [f"{k}=N" for k in ABSOLUTE])
    name, eq, raw = item.partition("=")
    name = ALIASES.get(name.strip().lower(), name.strip().lower())
    raw = raw.strip().lower()
    if not eq or name not in RELATIVE and name not in ABSOLUTE:
        raise SpecError(f"--vary {item!r}: give one of {allowed}")
    factor = raw.endswith("x") or raw.startswith("x")
    number = raw.strip("x")
    if name == "oversubscription" and number.endswith(":1"):
        number = number[:-2]
    try:
        value = float(number)
    except ValueError:
        raise SpecError(f"--vary {item!r}: {raw!r} is not a number (give {name}="
                        f"{'2x' if name in RELATIVE else '4'})") from None
    if not math.isfinite(value) or value <= 0:
        raise SpecError(f"--vary {item!r}: the value must be a positive number")
    if name in RELATIVE and not factor:
        raise SpecError(f"--vary {item!r}: {name} changes by a factor; write {name}={number}x")
    if name in ABSOLUTE and factor:
        raise SpecError(f"--vary {item!r}: {name} takes a value ({MEANING[name]}), not a factor; e.g. "
                        f"{name}={'72' if name == 'nvlink_domain' else '4' if name == 'oversubscription' else '2048'}")
    if ABSOLUTE.get(name) is int and value != int(value):
        raise SpecError(f"--vary {item!r}: {name} must be a whole number")
    return Change(name, value)


def apply(cluster: ClusterSpec, scenario: Scenario) -> ClusterSpec:
    """``cluster`` with the scenario's changes (``ClusterSpec.scaled``; SpecError if they leave its ranges)."""
    kw: dict = {}
    for c in scenario:
        if c.name in RELATIVE:
            key = RELATIVE[c.name]
            kw[key] = kw.get(key, 1.0) * c.value
        else:
            kw[c.name] = ABSOLUTE[c.name](c.value)
    return cluster.scaled(**kw)


def rescaled(s: Strategy, gpus: int) -> Strategy | None:
    """Plan ``s`` on ``gpus`` GPUs: its model-parallel degrees kept, dp following (None if they do not divide)."""
    model_parallel = s.gpus // s.dp
    if gpus % model_parallel:
        return None
    return replace(s, dp=gpus // model_parallel)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """A what-if's answer."""

    scenario: Scenario
    cluster: ClusterSpec
    same: Evaluation | None
    """The baseline's best plan under the change (None if it cannot run on the changed GPU count)."""
    best: Evaluation | None
    """The best plan of the space under the change (None if none fits)."""
    simulated: int
    """Plans the search simulated (the rest were skipped by their bounds)."""


PlansFor = Callable[[int], list[Strategy]]
"""The baseline space's plans for a GPU count."""


def what_if(model: ModelSpec, cluster: ClusterSpec, plans_for: PlansFor, baseline: Strategy,
            scenario: Scenario) -> Outcome:
    """The baseline plan and the best plan of the same space on the changed cluster."""
    changed = apply(cluster, scenario)
    same_plan = baseline if changed.gpus == baseline.gpus else rescaled(baseline, changed.gpus)
    same = evaluate(model, changed, same_plan) if same_plan is not None else None
    known = {same_plan: same} if same is not None and same.feasible else {}
    result = search(model, changed, plans_for(changed.gpus), top_k=1, known=known)
    best = result.leaderboard[0] if result.leaderboard else None
    return Outcome(scenario=scenario, cluster=changed, same=same, best=best, simulated=len(result.evaluations))


@dataclass(frozen=True, kw_only=True)
class Elasticity:
    """d ln(step time) / d ln(parameter) of the best plan, and the step times it came from."""

    name: str
    value: float
    lower: float
    """Step time with the parameter 10 % lower (the baseline's for memory, which only grows)."""
    higher: float
    """Step time with the parameter 10 % higher (for memory: the best plan of those that then fit)."""
    plan: str = ""
    """The plan behind ``higher`` when it is not the best plan (memory)."""


def elasticities(model: ModelSpec, cluster: ClusterSpec, best: Evaluation,
                 plans: list[Strategy] | None = None) -> list[Elasticity]:
    """Elasticity of the best plan's step time to each of ELASTIC, from ±STEP changes: the plan held fixed (the
    envelope theorem: near the optimum the best step time moves as the best plan's does), except for HBM
    capacity, where only a different plan can gain: the best of the plans of ``plans`` that fit in STEP more
    memory and not in the present (none given: 0)."""
    step = best.metrics.step_time
    up, down = 1.0 + STEP, 1.0 / (1.0 + STEP)
    out = []
    for name in ELASTIC:
        if name == "memory":
            gain = _more_memory(model, cluster, best, plans or [], up)
            t = gain.metrics.step_time if gain is not None else step
            out.append(Elasticity(name=name, value=math.log(t / step) / math.log(up), lower=step, higher=t,
                                  plan=gain.strategy.short() if gain is not None else ""))
            continue
        times = []
        for factor in (down, up):
            e = evaluate(model, cluster.scaled(**{RELATIVE[name]: factor}), best.strategy)
            times.append(e.metrics.step_time if e.metrics is not None else float("nan"))
        out.append(Elasticity(name=name, value=math.log(times[1] / times[0]) / math.log(up / down),
                              lower=times[0], higher=times[1]))
    return out


def _more_memory(model: ModelSpec, cluster: ClusterSpec, best: Evaluation, plans: list[Strategy],
                 factor: float) -> Evaluation | None:
    """The best plan that fits only with ``factor`` times the HBM and beats ``best`` (bound-ordered search)."""
    cap = cluster.gpu.hbm_bytes
    bigger = cluster.scaled(memory=factor)
    newly = []
    for s in distinct_plans(cluster, plans):
        try:
            need = plan_peak(model, cluster, s)
        except Exception:  # noqa: BLE001 — a plan that cannot be priced cannot be the answer
            continue
        if cap < need <= bigger.gpu.hbm_bytes:
            newly.append(s)
    if not newly:
        return None
    # HBM capacity decides only whether a plan fits; a plan's step does not read it (tests/search/test_whatif.py)
    seeded = replace(best, metrics=replace(best.metrics, memory_capacity=bigger.gpu.hbm_bytes))
    result = search(model, bigger, newly + [best.strategy], top_k=1, known={best.strategy: seeded})
    top = result.leaderboard[0] if result.leaderboard else None
    return top if top is not None and top.strategy != best.strategy else None


WHATIF = "whatif.json"
"""The file ``autoplan whatif RUN`` leaves in the run folder (the report shows it)."""


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """What the what-ifs change: a model, a cluster, a space's plans and the best of them."""

    model: ModelSpec
    cluster: ClusterSpec
    plans_for: PlansFor
    best: Evaluation
    title: str
    source: str
    """Where the best plan comes from, in words."""


def baseline_of_space(model: ModelSpec, cluster: ClusterSpec, space: object, global_batch: int,
                      source: str = "") -> Baseline:
    """The best plan of ``space`` on ``cluster`` (an exact search), and the space's plans for any GPU count."""
    from autoplan.search.space import enumerate_plans

    cache: dict[int, list[Strategy]] = {}

    def plans_for(gpus: int) -> list[Strategy]:
        if gpus not in cache:
            cache[gpus] = enumerate_plans(model, gpus, space, global_batch)[0]
        return cache[gpus]

    plans = plans_for(cluster.gpus)
    if not plans:
        raise SpecError(f"the space has no valid plan for {model.name} on {cluster.gpus} GPUs")
    result = search(model, cluster, plans, top_k=1)
    if not result.leaderboard:
        raise SpecError(f"no plan of the space fits in the {cluster.gpu.hbm_bytes / 2**30:.0f} GiB of a "
                        f"{cluster.gpu.name}; nothing to change")
    title = f"{model.name} on {cluster.gpus} × {cluster.gpu.name} ({cluster.name}), global batch {global_batch}"
    return Baseline(model=model, cluster=cluster, plans_for=plans_for, best=result.leaderboard[0], title=title,
                    source=source or f"the best of {len(plans)} plans (exact search, {len(result.evaluations)} "
                                     "simulated)")


def baseline_of_run(run: object) -> Baseline:
    """A run folder's model, cluster and space; its best plan, scored again (the model may have changed since)."""
    from autoplan.search.space import enumerate_plans, space_from_axes

    if run.model is None or run.cluster is None:
        raise SpecError(run.missing or f"run {str(run.folder)!r} has no model or cluster to change")
    if not run.leaderboard:
        raise SpecError(f"run {str(run.folder)!r} has no plan that fits in memory; nothing to change")
    space = space_from_axes(run.inputs.get("space", {}), f"{run.folder}: inputs.json space")
    batch = int(run.inputs.get("global_batch", run.leaderboard[0].strategy.global_batch))
    cache: dict[int, list[Strategy]] = {}

    def plans_for(gpus: int) -> list[Strategy]:
        if gpus not in cache:
            cache[gpus] = enumerate_plans(run.model, gpus, space, batch)[0]
        return cache[gpus]

    best = evaluate(run.model, run.cluster, run.leaderboard[0].strategy)
    if not best.feasible:
        raise SpecError(f"run {run.folder.name!r}: its best plan no longer runs: {'; '.join(best.violations)}")
    return Baseline(model=run.model, cluster=run.cluster, plans_for=plans_for, best=best, title=run.title,
                    source=f"the best plan of run {run.folder.name}")


def _plan_dict(e: Evaluation | None) -> dict | None:
    if e is None:
        return None
    return {"plan": e.strategy.short(), "feasible": e.feasible, "violations": list(e.violations),
            "step_time_s": e.metrics.step_time if e.metrics is not None else None,
            "strategy": e.strategy.to_dict()}


def elasticity_dicts(values: list[Elasticity]) -> list[dict]:
    """Elasticities as plain JSON."""
    return [{"parameter": x.name, "meaning": MEANING[x.name], "elasticity": x.value, "step_time_lower_s": x.lower,
             "step_time_higher_s": x.higher, "plan": x.plan} for x in values]


def answer(base: Baseline, scenarios: list[Scenario], elasticity: bool = True) -> dict:
    """Every what-if of ``scenarios`` on ``base`` and (with ``elasticity``) the best plan's elasticities, as
    plain JSON: what ``autoplan whatif`` prints and leaves in a run folder."""
    step = base.best.metrics.step_time
    rows = []
    for scenario in scenarios:
        o = what_if(base.model, base.cluster, base.plans_for, base.best.strategy, scenario)
        rows.append({"change": label(scenario), "cluster": {"gpus": o.cluster.gpus, "name": o.cluster.name},
                     "baseline_plan": _plan_dict(o.same), "best": _plan_dict(o.best), "simulated": o.simulated,
                     "baseline_step_time_s": step})
    out = {"title": base.title, "source": base.source, "baseline": _plan_dict(base.best), "whatifs": rows}
    if elasticity:
        values = elasticities(base.model, base.cluster, base.best, base.plans_for(base.cluster.gpus))
        out["elasticity"] = elasticity_dicts(values)
    return out
