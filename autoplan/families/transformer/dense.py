"""The dense decoder-only transformer (GPT, Llama, Nemotron, …) under Megatron-LM's DP/TP/PP/CP plans."""

from __future__ import annotations

from autoplan.families.transformer import passes, step as plan
from autoplan.families.base import Family
from autoplan.families.transformer.memory import memory_per_stage, peak_memory
from autoplan.families.transformer.validity import VIOLATION_GROUPS, violations


DENSE = Family("dense", ("dp", "tp", "pp", "cp"), violations=violations, step_costs=plan.step_costs,
               lower_bound=plan.lower_bound, memory=memory_per_stage, peak_memory=peak_memory,
               collectives=plan.collectives, block_ops=passes.layer_ops,
               quick_bound=plan.quick_bound, violation_groups=VIOLATION_GROUPS)
"""Costs from ``passes.py``, ``step.py`` and ``memory.py``; validity from ``validity.py``."""
