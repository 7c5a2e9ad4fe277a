"""Strategy: one parallel plan, the core knobs (``specs/plan.py``) composed with every family's own
(``families/<name>/knobs.py``).

Every field carries a Knob, so adding a knob to a family's part gives it a command-line flag, a search axis (if
``axis``), a label and Megatron arguments without touching the CLI, the search space or the study.
"""

from __future__ import annotations

from importlib import import_module

from autoplan.families import PACKAGES
from autoplan.specs.plan import Knob, Plan, compose, data_parallel  # noqa: F401  (data_parallel: re-exported)

PARTS: tuple[type, ...] = (Plan, *(part for name in PACKAGES
                                   for part in import_module(f"autoplan.families.{name}.knobs").PARTS))
"""The core plan, then each family package's parts."""

Strategy = compose(PARTS, "Strategy", __name__)
"""A parallel plan: frozen, keyword-only; ``Strategy.KNOBS`` are its fields in order, each with its Knob."""

KNOBS = Strategy.KNOBS
"""Strategy's fields in order, each with ``metadata["knob"]``, the one definition of the plan's knobs."""
AXES: tuple[str, ...] = Strategy.AXES
"""The search-space axes, in field order."""


def knob_of(name: str) -> Knob:
    """The Knob of Strategy field ``name``."""
    return Strategy.knob_of(name)
