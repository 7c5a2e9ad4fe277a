"""The interface a model family implements: what a plan of one kind of model costs, and which plans are valid.

One implementation per file (``dense.py``, ``moe.py``, ``cnn.py``, ``dlrm.py``), each a ``Family`` of that file's
functions; every registered family passes the shared contract test ``tests/families/test_family_contract.py``. The simulator, ``autoplan check`` and the search ask a
family through ``autoplan.families.registry`` and know nothing else about the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

from autoplan.hardware.compute import Op
from autoplan.families.costs import CommNeed, StepCosts
from autoplan.families.costs import StageMemory
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan


@runtime_checkable
class ModelFamily(Protocol):
    """A kind of model (dense transformer, MoE, …): its costs on a cluster under a plan."""

    name: str
    """The value of ``ModelSpec.family`` this family answers for."""
    axes: tuple[str, ...]
    """The Plan fields naming the parallel degrees it splits the model along (e.g. dp, tp, pp, cp)."""

    def violations(self, model: ModelSpec, gpus: int, s: Plan) -> list[str]:
        """Every reason ``s`` cannot run ``model`` on ``gpus`` GPUs, in words; [] if valid."""
        ...

    def step_costs(self, model: ModelSpec, cluster: ClusterSpec, s: Plan) -> StepCosts:
        """Seconds of every task of one step of valid plan ``s``: passes, communication, optimizer."""
        ...

    def lower_bound(self, model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
        """Seconds no step of plan ``s`` can beat (cheap: the search computes it for every plan)."""
        ...

    def memory(self, model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[StageMemory]:
        """Bytes per GPU of every pipeline stage, first to last."""
        ...

    def peak_memory(self, model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
        """The most bytes any GPU of the plan needs (cheap: the search computes it for every plan)."""
        ...

    def collectives(self, model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[CommNeed]:
        """The collectives and transfers plan ``s`` needs, one entry per kind (for ``autoplan check``)."""
        ...

    def block_ops(self, model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[str, tuple[Op, ...]]:
        """Kernels of one repeated block (a layer) by pass: forward, backward, recompute."""
        ...


QUESTIONS = ("violations", "step_costs", "lower_bound", "memory", "peak_memory", "collectives", "block_ops")
"""The functions every family answers with, by the names ``ModelFamily`` gives them."""


@dataclass(frozen=True)
class Launcher:
    """A framework that launches a family's plans: which plans it cannot run as planned, and the launch text."""

    name: str
    """Its ``--format`` (and ``--framework``) name, e.g. ``megatron``."""
    title: str
    """Its name for people, e.g. ``Megatron-LM``."""
    violations: Callable[[ModelSpec, Plan], list[str]]
    """Every reason it cannot launch a plan of a model as planned, citing its source; [] if it can."""
    text: Callable[..., str]
    """``(plan, model or None, cluster or None, header) -> str``: the launch; SpecError when it cannot."""
    framework: bool = True
    """Selectable with ``search --framework`` (a family's only launch, like a CNN's, is not)."""


def no_violations(model: ModelSpec, s: Plan) -> list[str]:
    """A launcher that takes every valid plan of its family."""
    return []


@dataclass(frozen=True)
class Family:
    """A ``ModelFamily`` made of plain functions, one per question."""

    name: str
    axes: tuple[str, ...]
    violations: Callable[..., list[str]]
    step_costs: Callable[..., StepCosts]
    lower_bound: Callable[..., float]
    memory: Callable[..., list[StageMemory]]
    peak_memory: Callable[..., float]
    collectives: Callable[..., list[CommNeed]]
    block_ops: Callable[..., dict[str, tuple[Op, ...]]]
    default_space: str | None = None
    """The search space ``autoplan search`` uses for these models unless ``--space`` names another."""
    symbolic: Callable[..., float] | None = None
    """The family's own symbolic cost of a plan, ``(model, cluster, unit cluster, s, weights) -> FLOP-equivalents``
    (``families/symbolic.py``); None: the generic score of its ``step_costs`` on the unit cluster."""
    launchers: tuple[Launcher, ...] = ()
    """The frameworks that launch its plans (``autoplan export --format``), the default first."""
    quick_bound: Callable[..., float] | None = None
    """``(model, cluster, s) -> seconds`` no step of ``s`` can beat, never above ``lower_bound`` and far cheaper: the
    exhaustive search orders every plan by it and asks ``lower_bound`` only of those it reaches; None: it orders
    them by ``lower_bound``."""
    violation_groups: tuple[tuple[tuple[str, ...], Callable[..., list[str]]], ...] = ()
    """``violations`` as groups of rules, each ``(fields it reads, (model, gpus, s) -> reasons)``, whose reasons in
    order are ``violations``': a space's enumeration asks each group once per distinct value of its fields
    (``registry.violation_checker``); (): ``violations`` of every plan."""


def family_of_functions(namespace: dict[str, Any], name: str, axes: tuple[str, ...],
                        default_space: str | None = None, launchers: tuple[Launcher, ...] = ()) -> Family:
    """The family whose answers are the functions of ``namespace`` (a module's ``globals()``) named as the
    questions are."""
    return Family(name, axes, default_space=default_space, symbolic=namespace.get("symbolic"), launchers=launchers,
                  quick_bound=namespace.get("quick_bound"), violation_groups=namespace.get("VIOLATION_GROUPS", ()),
                  **{q: namespace[q] for q in QUESTIONS})
