"""Model families by name, and the questions the simulator, ``check`` and the search ask them.

Every package of ``autoplan.families.PACKAGES`` registers the ``base.ModelFamily`` implementations of its
``family.py``; the engine, the workload and the search do not change. ``ModelSpec.family`` names a model's family.
"""

from __future__ import annotations

from autoplan.hardware.compute import Op
from autoplan.families.costs import CommNeed, StepCosts
from importlib import import_module

from autoplan.families import PACKAGES
from autoplan.families.base import ModelFamily
from autoplan.families.costs import StageMemory
from autoplan.errors import SpecError
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

FAMILIES: dict[str, ModelFamily] = {}
"""Every registered family by name."""


def register(family: ModelFamily) -> ModelFamily:
    """Add ``family`` to the registry under its name (replacing one of the same name) and return it."""
    FAMILIES[family.name] = family
    return family


def family_of(model: ModelSpec) -> ModelFamily:
    """The family that costs ``model``."""
    try:
        return FAMILIES[model.family]
    except KeyError:
        raise SpecError(f"model {model.name!r}: family {model.family!r} is not one of "
                        f"{', '.join(sorted(FAMILIES))}") from None


def default_space(model: ModelSpec) -> str:
    """The search space ``autoplan search`` uses for ``model`` unless ``--space`` names another: its family's own
    (``Family.default_space``; CNNs and DLRMs bring their axes), else ``default``."""
    return getattr(family_of(model), "default_space", None) or "default"


for _package in PACKAGES:
    for _family in import_module(f"autoplan.families.{_package}.family").FAMILIES:
        register(_family)


def violations(model: ModelSpec, gpus: int, s: Strategy) -> list[str]:
    """Every reason ``s`` cannot run ``model`` on ``gpus`` GPUs; [] if valid."""
    return family_of(model).violations(model, gpus, s)


def step_costs(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> StepCosts:
    """Seconds of every task of one step of valid plan ``s``."""
    return family_of(model).step_costs(model, cluster, s)


def lower_bound(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
    """Seconds no step of plan ``s`` can beat."""
    return family_of(model).lower_bound(model, cluster, s)


def memory_per_stage(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> list[StageMemory]:
    """Bytes per GPU of every pipeline stage, first to last."""
    return family_of(model).memory(model, cluster, s)


def peak_memory(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
    """The most bytes any GPU of the plan needs."""
    return family_of(model).peak_memory(model, cluster, s)


def collectives(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> list[CommNeed]:
    """The collectives and transfers plan ``s`` needs, one entry per kind."""
    return family_of(model).collectives(model, cluster, s)


def block_ops(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> dict[str, tuple[Op, ...]]:
    """Kernels of one repeated block of ``model`` by pass."""
    return family_of(model).block_ops(model, cluster, s)
