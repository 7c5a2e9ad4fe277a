"""Model families by name, and the questions the simulator, ``check`` and the search ask them.

Every package of ``autoplan.families.PACKAGES`` registers the ``base.ModelFamily`` implementations of its
``family.py``; the engine, the workload and the search do not change. ``ModelSpec.family`` names a model's family.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import replace
from importlib import import_module
from typing import Callable

from autoplan.errors import SpecError
from autoplan.families import PACKAGES
from autoplan.families.base import Launcher, ModelFamily
from autoplan.families.costs import CommNeed, StageMemory, StepCosts
from autoplan.families.strategy import Strategy
from autoplan.hardware.compute import Op
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import part_knobs

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


_OWN_KNOBS: dict[str, frozenset[str]] = {}
"""Family name → the knobs its package declares (its part of the plan)."""
for _package in PACKAGES:
    _names = frozenset(n for part in import_module(f"autoplan.families.{_package}.knobs").PARTS
                       for n, _, _ in part_knobs(part))
    # each package's export.py declares the frameworks that launch its families' plans (LAUNCHERS by family name)
    _launch = getattr(import_module(f"autoplan.families.{_package}.export"), "LAUNCHERS", {})
    for _family in import_module(f"autoplan.families.{_package}.family").FAMILIES:
        register(replace(_family, launchers=_launch.get(_family.name, ())) if _family.name in _launch else _family)
        _OWN_KNOBS[_family.name] = _names
_FAMILY_KNOBS = frozenset().union(*_OWN_KNOBS.values())
"""Every knob some family package declares (the core plan's are everyone's)."""


def foreign_knobs(model: ModelSpec, s: Strategy, said: list[str]) -> list[str]:
    """Reasons for knobs of another family's package set away from their defaults (a family never prices another
    family's knobs: it must refuse them, not ignore them), unless ``said`` already names them."""
    names, defaults, values_of = _foreign(model.family, type(s))
    values = values_of(s)
    if values == defaults:                     # every plan of a family's own space: one comparison
        return []
    out = []
    for name, value, default in zip(names, values, defaults):
        if value != default and not any(name in reason for reason in said):
            out.append(f"{name} {value!r} is another model family's knob; a {model.family} model keeps "
                       f"{default!r}")
    return out


@functools.lru_cache(maxsize=64)
def _foreign(family: str, plan_class: type) -> tuple[tuple[str, ...], tuple, Callable[[Strategy], tuple]]:
    """The knobs another family's package declares (by name), their defaults, and a getter of a plan's values of
    them (every plan of a space's enumeration asks: computed once)."""
    defaults = plan_class.defaults()
    names = tuple(sorted(_FAMILY_KNOBS - _OWN_KNOBS.get(family, frozenset())))
    getter = operator.attrgetter(*names) if len(names) > 1 else lambda s: tuple(getattr(s, n) for n in names)
    return names, tuple(defaults[n] for n in names), getter


FRAMEWORKS: tuple[str, ...] = ("any", *dict.fromkeys(
    launcher.name for family in FAMILIES.values() for launcher in getattr(family, "launchers", ()) if launcher.framework))
"""``search --framework`` values: ``any`` (every valid plan), then each framework some family launches with."""


def launchers(model: ModelSpec) -> tuple[Launcher, ...]:
    """The frameworks that launch ``model``'s plans, its default export format first."""
    return tuple(getattr(family_of(model), "launchers", ()))


def launcher(model: ModelSpec, name: str) -> Launcher:
    """The launcher ``name`` of ``model``'s family; SpecError naming the ones it has."""
    found = {x.name: x for x in launchers(model)}
    if name not in found:
        kind = {"dense": "transformer", "moe": "mixture-of-experts transformer", "cnn": "CNN",
                "dlrm": "DLRM"}.get(model.family, f"{model.family} model")
        have = " or ".join(f"--format {x}" for x in found) or "no format"
        raise SpecError(f"{model.name} is a {kind}: {name} does not launch it; it exports only as {have}")
    return found[name]


def framework_violations(model: ModelSpec, s: Strategy, framework: str) -> list[str]:
    """Why framework ``framework`` cannot launch valid plan ``s`` as planned ([] for ``any``)."""
    if framework == "any":
        return []
    return launcher(model, framework).violations(model, s)


def launch_with(model: ModelSpec, s: Strategy) -> list[str]:
    """The frameworks (or, for a family with one launch, its format) that launch valid plan ``s`` as planned."""
    return [x.name for x in launchers(model) if not x.violations(model, s)]


def violations(model: ModelSpec, gpus: int, s: Strategy) -> list[str]:
    """Every reason ``s`` cannot run ``model`` on ``gpus`` GPUs; [] if valid."""
    out = family_of(model).violations(model, gpus, s)
    return out + foreign_knobs(model, s, out)


def violation_checker(model: ModelSpec, gpus: int) -> Callable[[Strategy, dict], list[str]]:
    """``violations(model, gpus, s)`` for the many plans of a space, as ``check(s, fields)`` (``fields``: ``s``'s
    field values): each of the family's groups of rules (``Family.violation_groups``) asked once per distinct value
    of the fields it reads, the same reasons in the same order."""
    given = getattr(family_of(model), "violation_groups", ())
    if not given:
        return lambda s, fields: violations(model, gpus, s)
    groups = [(operator.itemgetter(*reads), rules, {}) for reads, rules in given]

    def check(s: Strategy, fields: dict) -> list[str]:
        out: list[str] = []
        for key_of, rules, said in groups:
            key = key_of(fields)
            got = said.get(key)
            if got is None:
                got = said[key] = rules(model, gpus, s)
            out += got
        return out + foreign_knobs(model, s, out)

    return check


def quick_bound(model: ModelSpec) -> Callable[[ModelSpec, ClusterSpec, Strategy], float] | None:
    """``model``'s family's cheap bound (never above ``lower_bound``), or None if it has none."""
    return family_of(model).quick_bound


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
