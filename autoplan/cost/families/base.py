"""The interface a model family implements: what a plan of one kind of model costs, and which plans are valid.

One implementation per file (``dense.py``, later MoE, CNN, DLRM); every registered family passes the shared
contract test ``tests/cost/test_family_contract.py``. The simulator, ``autoplan check`` and the search ask a
family through ``autoplan.cost.families`` and know nothing else about the model.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from autoplan.cost.compute import Op
from autoplan.cost.costs import CommNeed, StepCosts
from autoplan.cost.memory import StageMemory
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy


@runtime_checkable
class ModelFamily(Protocol):
    """A kind of model (dense transformer, MoE, …): its costs on a cluster under a plan."""

    name: str
    """The value of ``ModelSpec.family`` this family answers for."""
    axes: tuple[str, ...]
    """The Strategy fields naming the parallel degrees it splits the model along (e.g. dp, tp, pp, cp)."""

    def violations(self, model: ModelSpec, gpus: int, s: Strategy) -> list[str]:
        """Every reason ``s`` cannot run ``model`` on ``gpus`` GPUs, in words; [] if valid."""
        ...

    def step_costs(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> StepCosts:
        """Seconds of every task of one step of valid plan ``s``: passes, communication, optimizer."""
        ...

    def lower_bound(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
        """Seconds no step of plan ``s`` can beat (cheap: the search computes it for every plan)."""
        ...

    def memory(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> list[StageMemory]:
        """Bytes per GPU of every pipeline stage, first to last."""
        ...

    def peak_memory(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
        """The most bytes any GPU of the plan needs (cheap: the search computes it for every plan)."""
        ...

    def collectives(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> list[CommNeed]:
        """The collectives and transfers plan ``s`` needs, one entry per kind (for ``autoplan check``)."""
        ...

    def block_ops(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> dict[str, tuple[Op, ...]]:
        """Kernels of one repeated block (a layer) by pass: forward, backward, recompute."""
        ...
