"""The size of a search space: combinations, valid plans, distinct plans, plans that fit, rejection reasons."""

from __future__ import annotations

from autoplan.families.registry import peak_memory
from autoplan.search.exhaustive import distinct_plans
from autoplan.search.space import Space, enumerate_plans
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec


def census(model: ModelSpec, cluster: ClusterSpec, space: Space, global_batch: int) -> dict:
    """Counts at each filter a plan passes before the simulator; a rejected plan may have several reasons."""
    plans, rejected = enumerate_plans(model, cluster.gpus, space, global_batch)
    distinct = distinct_plans(cluster, plans)
    fitting = sum(1 for s in distinct if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes)
    return {"axes": {k: list(v) for k, v in space.axes.items()}, "raw": space.raw_size(), "valid": len(plans),
            "rejected": space.raw_size() - len(plans), "reasons": dict(rejected.most_common()),
            "distinct": len(distinct), "equivalent": len(plans) - len(distinct), "fit": fitting,
            "out_of_memory": len(distinct) - fitting, "memory_capacity_gib": cluster.gpu.hbm_bytes / 2**30}
