"""The dense decoder-only transformer (GPT, Llama, Nemotron, …) under Megatron-LM's DP/TP/PP/CP plans."""

from __future__ import annotations

from autoplan.cost import passes, plan
from autoplan.cost.families.base import Family
from autoplan.cost.memory import memory_per_stage, peak_memory
from autoplan.specs.strategy import violations


DENSE = Family("dense", ("dp", "tp", "pp", "cp"), violations=violations, step_costs=plan.step_costs,
               lower_bound=plan.lower_bound, memory=memory_per_stage, peak_memory=peak_memory,
               collectives=plan.collectives, block_ops=passes.layer_ops)
"""Costs from ``cost/passes.py``, ``cost/plan.py`` and ``cost/memory.py``; validity from ``specs.strategy``."""
