"""autoplan's DLRM plan beside TorchRec's embedding sharding planner, without importing torch.

The planner's inputs as plain keyword arguments taken from an autoplan cluster and model (``Topology``,
``ParameterConstraints``), a per-table plan with explicit ranks (TorchRec's, or autoplan's own) turned into
autoplan's ``TablePlan``s, and such a plan scored by autoplan's DLRM cost model (``families/dlrm/sharding.py``).
``benchmarks/bench_torchrec.py`` builds the TorchRec objects from these values when torchrec is installed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm.embedding import CW_WIDTH
from autoplan.families.dlrm.family import embedding_room
from autoplan.specs.cluster import ClusterSpec
from autoplan.families.dlrm.spec import SHARDINGS, EmbeddingTable
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

FUSED = "fused"
"""TorchRec EmbeddingComputeKernel of a sharded table kept in HBM, optimizer fused into the backward (FBGEMM TBE)."""
DENSE = "dense"
"""TorchRec's compute kernel of a data-parallel table."""
BYTES_PER_MS_PER_BYTES_PER_S = 1e-3
"""TorchRec's planner takes bandwidths in bytes per millisecond (torchrec/distributed/planner/constants.py)."""
SHORT = {"table_wise": "TW", "row_wise": "RW", "column_wise": "CW", "table_row_wise": "TWRW", "data_parallel": "DP"}
"""TorchRec's abbreviations of its ShardingType values (planner stats report)."""


def topology_kwargs(cluster: ClusterSpec, gpus: int, hbm_cap: float) -> dict[str, object]:
    """``torchrec.distributed.planner.Topology`` arguments for ``gpus`` GPUs of ``cluster`` with ``hbm_cap`` bytes
    per GPU for embeddings: compute device ``cuda`` (estimates only), the node as the local world, the datasheet
    rates times the cluster file's efficiencies (the rates autoplan's own model uses)."""
    gpu, node = cluster.gpu, min(gpus, cluster.domain_gpus)
    intra = cluster.tiers[0]
    inter = cluster.tier_spanning(gpus) if gpus > node else cluster.tiers[min(1, len(cluster.tiers) - 1)]
    per_ms = BYTES_PER_MS_PER_BYTES_PER_S
    return {"world_size": gpus, "compute_device": "cuda", "local_world_size": node, "hbm_cap": int(hbm_cap),
            "hbm_mem_bw": gpu.hbm_bandwidth * gpu.memory_efficiency * per_ms,
            # both per GPU and direction: TorchRec's default inter_host_bw is one 100 Gb/s NIC per GPU
            "intra_host_bw": intra.bandwidth * intra.efficiency * per_ms,
            "inter_host_bw": inter.bandwidth * inter.efficiency * per_ms}


def constraint_kwargs(table: EmbeddingTable, kinds: tuple[str, ...] = SHARDINGS) -> dict[str, object]:
    """``ParameterConstraints`` arguments for ``table``: the sharding kinds it may take (its pin if it has one),
    HBM kernels only (autoplan models no UVM caching), column shards of autoplan's width, its pooling factor."""
    allowed = (table.sharding,) if table.sharding else kinds
    return {"sharding_types": list(allowed), "compute_kernels": [FUSED, DENSE], "min_partition": CW_WIDTH,
            "pooling_factors": [table.pooling]}


def table_plans(model: ModelSpec, world: int, chosen: dict[str, tuple[str, list[int]]]) -> tuple[sh.TablePlan, ...]:
    """autoplan ``TablePlan``s of a plan given as table name → (sharding type, ranks of its shards in order);
    ValueError naming the table if one is missing, of an unknown kind, or on a rank outside ``world``."""
    out = []
    for t in model.structure.tables:
        if t.name not in chosen:
            raise ValueError(f"the plan has no sharding for table {t.name!r}")
        kind, ranks = chosen[t.name]
        if kind not in SHARDINGS:
            raise ValueError(f"table {t.name!r}: sharding {kind!r} is not one of {', '.join(SHARDINGS)}")
        if not ranks or not all(0 <= r < world for r in ranks):
            raise ValueError(f"table {t.name!r}: ranks {ranks} are not within 0..{world - 1}")
        out.append(sh.TablePlan(kind, tuple(ranks)))
    return tuple(out)


def shard_ranks(plan: sh.TablePlan, shards: int) -> list[int]:
    """Ranks for ``shards`` shards of a table placed as ``plan``: its GPUs in order, repeated if it has fewer."""
    return [plan.gpus[i % len(plan.gpus)] for i in range(shards)]


@dataclass(frozen=True)
class Score:
    """A per-table plan as autoplan's DLRM model sees it: the step and the fullest GPU's embedding bytes."""

    times: sh.StepTimes
    embedding_bytes: float
    room: float

    @property
    def step_s(self) -> float:
        return self.times.total

    @property
    def fits(self) -> bool:
        return self.embedding_bytes <= self.room


def score(model: ModelSpec, cluster: ClusterSpec, s: Plan, plans: tuple[sh.TablePlan, ...]) -> Score:
    """Step time and embedding memory of ``plans`` (one per table, explicit GPUs) under autoplan's DLRM model."""
    ctx = sh.context(model, cluster, s)
    loads = sh.start_loads(ctx)
    for i, plan in enumerate(plans):
        sh.apply(ctx, loads, i, plan)
    return Score(sh.step_times(ctx, loads), max(loads.memory), embedding_room(model, cluster, s))


def kind_counts(plans: tuple[sh.TablePlan, ...]) -> str:
    """``TW 20 RW 4 DP 2``: tables per sharding kind, in TorchRec's order of kinds."""
    n = Counter(p.kind for p in plans)
    return " ".join(f"{SHORT[k]} {n[k]}" for k in SHARDINGS if n[k])


def agreement(a: tuple[sh.TablePlan, ...], b: tuple[sh.TablePlan, ...]) -> float:
    """Share of tables given the same sharding kind by both plans (ranks are labels: any permutation is as good)."""
    return sum(x.kind == y.kind for x, y in zip(a, b, strict=True)) / len(a)
