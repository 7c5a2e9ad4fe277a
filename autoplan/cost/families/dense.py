"""The dense decoder-only transformer (GPT, Llama, Nemotron, …) under Megatron-LM's DP/TP/PP/CP plans."""

from __future__ import annotations

from autoplan.cost import passes, plan
from autoplan.cost.memory import memory_per_stage, peak_memory
from autoplan.specs.strategy import violations


class DenseTransformer:
    """Costs from ``cost/passes.py``, ``cost/plan.py`` and ``cost/memory.py``; validity from ``specs.strategy``."""

    name = "dense"
    axes = ("dp", "tp", "pp", "cp")

    violations = staticmethod(violations)
    step_costs = staticmethod(plan.step_costs)
    lower_bound = staticmethod(plan.lower_bound)
    memory = staticmethod(memory_per_stage)
    peak_memory = staticmethod(peak_memory)
    collectives = staticmethod(plan.collectives)
    block_ops = staticmethod(passes.layer_ops)
