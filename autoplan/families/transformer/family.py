"""The transformer families this package registers, with the frameworks that launch their plans."""

from dataclasses import replace

from autoplan.families.transformer.dense import DENSE as _DENSE
from autoplan.families.transformer.export import LAUNCHERS
from autoplan.families.transformer.moe import MOE as _MOE

DENSE = replace(_DENSE, launchers=LAUNCHERS)
"""Dense decoder-only transformers (Megatron-LM, torchtitan, DeepSpeed)."""
MOE = replace(_MOE, launchers=LAUNCHERS)
"""Mixtures of experts."""

FAMILIES = (DENSE, MOE)
"""Dense decoder-only transformers and mixtures of experts."""
