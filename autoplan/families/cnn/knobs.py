"""The CNN family's own plan knobs: spatial, channel and filter parallelism (Dryden et al. SC'19, IPDPS'19)."""

from __future__ import annotations

from autoplan.specs.plan import PlanPart, knob


class CNNPlan(PlanPart):
    """Degrees that split each convolution across GPUs beside data and pipeline parallelism (1 for other models)."""

    spatial: int = knob(1, after="cp", degree=True, quiet=True, help="Spatial (domain) parallel degree: each GPU holds a slab of every sample (CNNs).",
                        axis=True, fix_help="Fix spatial parallelism (CNNs).", label=lambda v: f"sd{v}" if v > 1 else "")
    """Spatial parallelism (CNNs): every sample's height (depth in 3D) split across GPUs, halos exchanged."""
    channel: int = knob(1, degree=True, quiet=True, help="Channel parallel degree: input channels of each layer split across GPUs (CNNs).",
                        axis=True, fix_help="Fix channel parallelism (CNNs).", label=lambda v: f"ch{v}" if v > 1 else "")
    """Channel parallelism (CNNs): each layer's input channels (and weights) split across GPUs."""
    filter: int = knob(1, degree=True, quiet=True, help="Filter parallel degree: output channels of each layer split across GPUs (CNNs).",
                       axis=True, fix_help="Fix filter parallelism (CNNs).", label=lambda v: f"fl{v}" if v > 1 else "")
    """Filter parallelism (CNNs): each layer's filters (output channels) split across GPUs."""


PARTS = (CNNPlan,)
"""The parts this package adds to the plan."""
