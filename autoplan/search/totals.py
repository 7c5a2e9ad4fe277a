"""The whole run, not one step: how many steps a token (or sample) budget takes with a plan, and the days,
GPU-hours, energy and cost that follow from its simulated step.

Energy counts each GPU at its TDP while it computes and at its idle power while it waits (bubble, exposed
communication), plus the node's other parts and the data centre's PUE (``ClusterSpec.node_overhead_w``, ``pue``;
the numbers and their sources live in ``cluster_specs/*.toml``). Cost is GPU-hours times a price per GPU-hour.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from autoplan.errors import SpecError
from autoplan.sim.simulate import Evaluation, evaluate
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec

_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
"""Decimal multipliers a budget may end with: 15T tokens, 300B, 2.5M steps ($50M for money)."""

LLAMA3_GOODPUT = 0.9
"""Effective training time of Llama 3 405B's pre-training on 16K H100s: "higher than 90 %" over a 54-day snapshot
with 466 job interruptions (Llama 3 herd paper, arXiv 2407.21783, §3.3.4). Off by default (--goodput 1)."""


def parse_amount(text: str | float | int, what: str) -> float:
    """``15T`` → 1.5e13, ``300B``, ``2.5M``, ``1e6``, ``$50M``, ``16_384``: a positive finite number; SpecError
    naming ``what`` otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*\$?\s*([0-9][0-9_,]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgGtTpP]?)\s*",
                         str(text))
        if not m:
            raise SpecError(f"{what} {text!r} is not an amount; give a number, optionally with K, M, B, T or P "
                            "(e.g. 15T, 300B, 2.5e12)")
        value = float(m.group(1).replace("_", "").replace(",", "")) * _SUFFIX[m.group(2).upper()]
    if not math.isfinite(value) or value <= 0:
        raise SpecError(f"{what} must be a positive number, got {text!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class Budget:
    """What a whole run must do, and how its time turns into money."""

    tokens: float = 0.0
    """Tokens to train on (samples for CNNs and DLRMs, whose "token" is a sample); 0: given as steps."""
    steps: int = 0
    """Optimizer steps to train for; 0: given as tokens."""
    gpu_hour_usd: float = 0.0
    """Price of a GPU-hour; 0: the cluster spec's (``gpu_hour_usd``), if it has one."""
    goodput: float = 1.0
    """Share of the wall-clock time spent on useful training (checkpoints, failures and restarts take the rest);
    1: none lost. ``LLAMA3_GOODPUT`` is Llama 3 405B's."""
    ramp: tuple[tuple[float, int], ...] = ()
    """Batch-size ramp as published runs use it: (tokens up to, global batch) stages before the plan's own batch,
    e.g. Llama 3 405B's ((2.87e12, 1024),) (arXiv 2407.21783 §3.4.1: 8M-token batches until 2.87T tokens, then 16M)."""

    def __post_init__(self) -> None:
        if (self.tokens > 0) == (self.steps > 0):
            raise SpecError("a run budget needs tokens (or samples, epochs) or steps, not both")
        if not 0 < self.goodput <= 1:
            raise SpecError(f"--goodput must be in (0, 1], got {self.goodput!r}")
        if self.gpu_hour_usd < 0 or not math.isfinite(self.gpu_hour_usd):
            raise SpecError(f"--gpu-hour-price must be a positive number, got {self.gpu_hour_usd!r}")
        ends = [t for t, _ in self.ramp]
        if any(b < 1 for _, b in self.ramp) or ends != sorted(set(ends)):
            raise SpecError(f"--batch-ramp stages must have rising token counts and positive batches, got {self.ramp}")
        if self.ramp and self.steps:
            raise SpecError("--batch-ramp needs a token budget (--tokens), not --steps")

    def to_dict(self) -> dict:
        """The budget as recorded in a run's inputs.json (``run_budget``)."""
        out: dict[str, Any] = {"tokens": self.tokens} if self.tokens else {"steps": self.steps}
        if self.gpu_hour_usd:
            out["gpu_hour_usd"] = self.gpu_hour_usd
        if self.goodput != 1.0:
            out["goodput"] = self.goodput
        if self.ramp:
            out["ramp"] = [[t, b] for t, b in self.ramp]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "Budget":
        """The budget an inputs.json recorded; SpecError naming ``where`` if it is malformed."""
        if not isinstance(data, dict) or set(data) - {"tokens", "steps", "gpu_hour_usd", "goodput", "ramp"}:
            raise SpecError(f"{where}: run_budget must be an object with tokens or steps, got {data!r:.80}")
        try:
            ramp = tuple((float(t), int(b)) for t, b in data.get("ramp", ()))
            return cls(tokens=float(data.get("tokens", 0.0)), steps=int(data.get("steps", 0)),
                       gpu_hour_usd=float(data.get("gpu_hour_usd", 0.0)), goodput=float(data.get("goodput", 1.0)),
                       ramp=ramp)
        except (TypeError, ValueError) as err:
            raise SpecError(f"{where}: run_budget is unreadable: {err}") from None


@dataclass(frozen=True, kw_only=True)
class RunTotals:
    """A whole training run of one plan."""

    steps: int
    tokens: float
    """Tokens (samples) the steps train on: the budget rounded up to whole steps."""
    train_s: float
    """Seconds of training: steps times the step time (each ramp stage at its own step time)."""
    wall_s: float
    """Wall-clock seconds: training over the goodput."""
    gpus: int
    gpu_hours: float
    energy_kwh: float | None
    """Facility energy (GPUs, the rest of the nodes, the PUE); None if the cluster spec has no GPU power."""
    cost_usd: float | None
    """GPU-hours times the price; None without a price."""
    power_kw: float | None
    """Mean facility power of the whole cluster while it trains."""
    gpu_hour_usd: float
    busy: float
    """Share of the step the GPUs compute (the rest: bubble and exposed communication), which sets their power."""

    @property
    def days(self) -> float:
        """Wall-clock days."""
        return self.wall_s / 86400

    def to_dict(self) -> dict:
        """Plain JSON (rounded for people)."""
        return {"steps": self.steps, "tokens": self.tokens, "days": _sig(self.days),
                "train_days": _sig(self.train_s / 86400),
                "gpus": self.gpus, "gpu_hours": _sig(self.gpu_hours, 6),
                "energy_mwh": None if self.energy_kwh is None else _sig(self.energy_kwh / 1e3),
                "cost_usd": None if self.cost_usd is None else _sig(self.cost_usd, 6),
                "power_mw": None if self.power_kw is None else round(self.power_kw / 1e3, 3),
                "gpu_hour_usd": self.gpu_hour_usd or None, "busy": round(self.busy, 4)}


def _sig(x: float, digits: int = 5) -> float:
    """``x`` to ``digits`` significant figures (a run of minutes and one of months both keep their figures)."""
    return float(f"{x:.{digits}g}")


def busy_share(m: Any) -> float:
    """Share of the step a GPU computes: everything but the bubble and exposed communication."""
    return min(1.0, max(0.0, 1.0 - m.fraction("bubble") - m.exposed_comm_fraction))


def gpu_power_w(cluster: ClusterSpec, busy: float) -> float | None:
    """Facility watts per GPU: the GPU at TDP while busy and idle otherwise, plus its share of the node's other
    parts, times the PUE; None without a TDP."""
    g = cluster.gpu
    if not g.tdp_w:
        return None
    if g.idle_w >= g.tdp_w:
        raise SpecError(f"cluster {cluster.name}: idle_w {g.idle_w:g} must be below tdp_w {g.tdp_w:g} to price energy")
    # a GPU computes at its power cap (the spec's clock_ratio: training GEMMs run power-capped; Patel et al., ASPLOS
    # 2024: LLM training iterations reach TDP) and waits at idle; without an idle figure it is counted at TDP
    # throughout, as Meta's model cards count training energy (Llama 3.1 MODEL_CARD: peak power per GPU)
    chip = g.idle_w + (g.tdp_w - g.idle_w) * busy if g.idle_w else g.tdp_w
    # PUE = facility power / IT power (The Green Grid; ISO/IEC 30134-2)
    return (chip + cluster.node_overhead_w / cluster.gpus_per_node) * cluster.pue


def tokens_per_step(model: ModelSpec, e: Evaluation) -> int:
    """Tokens (samples) one step of the plan trains on."""
    return e.strategy.global_batch * model.seq_len


def _stages(model: ModelSpec, cluster: ClusterSpec, e: Evaluation,
            budget: Budget) -> list[tuple[int, float, float, int]]:
    """(steps, step time, busy share, global batch) of each stage of the run: the ramp's smaller batches, then the
    plan's own."""
    out = []
    done = 0.0
    total = budget.tokens
    for until, batch in budget.ramp:
        if until <= done or done >= total:
            continue
        s = replace(e.strategy, global_batch=batch)
        staged = evaluate(model, cluster, s)
        if not staged.feasible:
            raise SpecError(f"--batch-ramp: plan {e.strategy.short()} cannot run a global batch of {batch}: "
                            + "; ".join(staged.violations))
        span = min(until, total) - done
        steps = math.ceil(span / (batch * model.seq_len))
        out.append((steps, staged.metrics.step_time, busy_share(staged.metrics), batch))
        done += steps * batch * model.seq_len
    per_step = tokens_per_step(model, e)
    steps = budget.steps if budget.steps else max(0, math.ceil((total - done) / per_step))
    out.append((steps, e.metrics.step_time, busy_share(e.metrics), e.strategy.global_batch))
    return out


def run_totals(model: ModelSpec, cluster: ClusterSpec, e: Evaluation, budget: Budget) -> RunTotals:
    """Steps, days, GPU-hours, energy and cost of training plan ``e`` for ``budget``."""
    if not e.feasible:
        raise SpecError(f"plan {e.strategy.short()} does not run ({'; '.join(e.violations)}): it has no run totals")
    stages = _stages(model, cluster, e, budget)
    steps = sum(n for n, _, _, _ in stages)
    train = sum(n * t for n, t, _, _ in stages)
    busy = sum(n * t * b for n, t, b, _ in stages) / train if train else busy_share(e.metrics)
    wall = train / budget.goodput
    gpus = cluster.gpus
    tokens = sum(n * batch * model.seq_len for n, _, _, batch in stages)
    working = gpu_power_w(cluster, busy)
    waiting = gpu_power_w(cluster, 0.0)
    energy = None
    if working is not None and waiting is not None:
        # the time lost to checkpoints and failures is counted at idle power
        energy = gpus * (working * train + waiting * (wall - train)) / 3.6e6
    price = budget.gpu_hour_usd or cluster.gpu_hour_usd
    gpu_hours = gpus * wall / 3600
    return RunTotals(steps=steps, tokens=float(tokens), train_s=train, wall_s=wall, gpus=gpus, gpu_hours=gpu_hours,
                     energy_kwh=energy, cost_usd=gpu_hours * price if price else None,
                     power_kw=None if working is None else gpus * working / 1e3, gpu_hour_usd=price, busy=busy)


class Costing:
    """Run totals of plans of one model on one cluster for one budget (each plan's computed once); a plan that
    cannot run the whole budget (a ramp batch it cannot take) has None, and ``why`` says why."""

    def __init__(self, model: ModelSpec, cluster: ClusterSpec, budget: Budget) -> None:
        self.model, self.cluster, self.budget = model, cluster, budget
        self._done: dict[Any, RunTotals | None] = {}
        self.why: dict[Any, str] = {}

    def __call__(self, e: Evaluation) -> RunTotals | None:
        if e.strategy not in self._done:
            try:
                self._done[e.strategy] = run_totals(self.model, self.cluster, e, self.budget)
            except SpecError as err:
                self._done[e.strategy] = None
                self.why[e.strategy] = str(err)
        return self._done[e.strategy]

    def describe(self) -> str:
        """The budget and where its energy and price come from, in one line."""
        b, c = self.budget, self.cluster
        unit = "samples" if self.model.seq_len == 1 else "tokens"
        what = f"{short_amount(b.tokens)} {unit}" if b.tokens else f"{b.steps:,} steps"
        parts = [what]
        if b.ramp:
            parts.append("batch ramp " + ", ".join(f"{b_} until {short_amount(t)}" for t, b_ in b.ramp))
        if b.goodput != 1.0:
            parts.append(f"goodput {100 * b.goodput:g} %")
        g = c.gpu
        if g.tdp_w:
            idle = f"idle {g.idle_w:g} W" if g.idle_w else "no idle figure: TDP throughout"
            parts.append(f"power: TDP {g.tdp_w:g} W busy, {idle}, node overhead {c.node_overhead_w:g} W, PUE {c.pue:g}")
        else:
            parts.append(f"no energy: {c.name} gives no GPU TDP")
        price = b.gpu_hour_usd or c.gpu_hour_usd
        parts.append(f"${price:g} per GPU-hour" + ("" if b.gpu_hour_usd else " (cluster spec)") if price
                     else "no price: give --gpu-hour-price")
        return "; ".join(parts)


def costing_of(inputs: dict, model: ModelSpec | None, cluster: ClusterSpec | None) -> Costing | None:
    """The Costing a run's inputs.json asks for (its ``run_budget``), or None."""
    data = inputs.get("run_budget")
    if data is None or model is None or cluster is None:
        return None
    return Costing(model, cluster, Budget.from_dict(data, "inputs.json"))


def short_amount(x: float) -> str:
    """1.5e13 → ``15T``, 3e11 → ``300B``, 2.5e6 → ``2.5M``."""
    for suffix, scale in (("P", 1e15), ("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if x >= scale:
            return f"{x / scale:.4g}{suffix}"
    return f"{x:.4g}"


def epoch_budget(model: ModelSpec, epochs: float, dataset_samples: int | None) -> float:
    """Samples of ``epochs`` passes over the model's training set (its catalog's, or ``dataset_samples``)."""
    from autoplan.families.catalog import epoch_samples

    size = dataset_samples or epoch_samples(model)
    if not size:
        raise SpecError(f"--epochs: autoplan does not know the training-set size of {model.name}; give "
                        "--tokens (samples) or --steps instead")
    return epochs * size
