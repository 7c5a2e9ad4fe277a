"""The transformer families this package registers."""

from autoplan.families.transformer.dense import DENSE
from autoplan.families.transformer.moe import MOE

FAMILIES = (DENSE, MOE)
"""Dense decoder-only transformers and mixtures of experts."""
