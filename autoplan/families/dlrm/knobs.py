"""The DLRM family's own plan knob: how the embedding tables are sharded (TorchRec's sharding types)."""

from __future__ import annotations

from autoplan.specs.plan import PlanPart, knob

EMBEDDING_SHARDINGS = ("auto", "table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel")
"""How a DLRM's embedding tables are sharded: the planner's per-table choice, or one kind for every table."""
_SHARDING_LABELS = {"auto": "", "table_wise": "TW", "row_wise": "RW", "column_wise": "CW", "table_row_wise": "TWRW",
                    "data_parallel": "DPemb"}


class DLRMPlan(PlanPart):
    """Embedding sharding of recommendation models."""

    sharding: str = knob("auto", choices=EMBEDDING_SHARDINGS, axis=True,
                         fix_help="Fix the embedding sharding (DLRM models).",
                         help="DLRM embedding sharding: auto (per-table search) or one kind for every table.",
                         label=lambda v: _SHARDING_LABELS[v])
    """Embedding-table sharding of a recommendation model (family ``dlrm``): ``auto`` lets the planner choose each
    table's sharding (greedy plus local search); a kind pins every table not pinned in the model. Dense
    transformers have no embedding tables to shard and take only ``auto``."""


PARTS = (DLRMPlan,)
"""The parts this package adds to the plan."""
