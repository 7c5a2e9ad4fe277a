"""Embedding tables of a DLRM sharded over GPUs: what each GPU looks up, sends and stores under a per-table sharding,
the data-distribution-aware lookup time (pooling factor, table size, access skew), and the per-GPU loads a
sharding plan adds up to (Lin et al. 2022, "Building a performance model for deep learning recommendation model
training on GPUs", arXiv 2201.07821, §IV: embedding lookups, all-to-all; TorchRec's sharding types)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from autoplan.specs.cluster import GPUSpec
from autoplan.families.dlrm.spec import EmbeddingTable

ID_BYTES = 8
"""Bytes per lookup index (TorchRec KeyedJaggedTensor int64 values)."""
POOLED_BYTES = 4
"""Bytes per value of a pooled embedding as the lookup kernel writes it (fp32, the tables' precision); what the
all-to-all carries is ``DLRMSpec.pooled_comm_bytes``."""
ROW_STATE_BYTES = 4
"""Optimizer state per table row: FBGEMM's fused exact row-wise Adagrad keeps one fp32 per row."""
CW_WIDTH = 32
"""Width of one column-wise shard (this model's choice; TorchRec's planner picks the shard count)."""


@dataclass(frozen=True, slots=True)
class Shard:
    """One piece of a table on one GPU: its rows and width, and the lookups it serves per micro-batch."""

    table: int
    """Index of the table in the model."""
    gpu: int
    rows: float
    """Rows it holds."""
    width: int
    """Values per row it holds."""
    lookups: float
    """Rows it reads per micro-batch."""
    outputs: float
    """Pooled vectors (of ``width``) it produces per micro-batch and sends in the all-to-all (0: none)."""
    skew: float


@lru_cache(maxsize=65536)
def harmonic(n: float, alpha: float) -> float:
    """Generalised harmonic number H(n, α) = Σ_{i ≤ n} i^-α, exact up to 64 terms, else Euler–Maclaurin."""
    if n <= 64:
        return sum(i ** -alpha for i in range(1, int(n) + 1))
    # Euler–Maclaurin: ∫_1^n x^-α dx + (1 + n^-α)/2 (Abramowitz & Stegun 1964, 23.1.30)
    head = math.log(n) if abs(alpha - 1.0) < 1e-9 else (n ** (1.0 - alpha) - 1.0) / (1.0 - alpha)
    return head + 0.5 * (1.0 + n ** -alpha)


def hit_rate(rows: float, cached_rows: float, skew: float) -> float:
    """Share of lookups that find their row among the ``cached_rows`` hottest of ``rows`` Zipf(``skew``) rows."""
    # Zipf popularity p_i ∝ i^-α: the top-C rows take H(C, α)/H(R, α) of the lookups (Breslau et al. 1999, §3)
    if rows <= 0:
        return 0.0
    if cached_rows >= rows:
        return 1.0
    if cached_rows < 1:
        return 0.0
    return harmonic(cached_rows, skew) / harmonic(rows, skew)


def lookup_bytes(shard: Shard, value_bytes: int) -> float:
    """Bytes of embedding rows a shard reads in one forward (pooling × batch rows of its width)."""
    return shard.lookups * shard.width * value_bytes


def output_bytes(shard: Shard) -> float:
    """Bytes of pooled vectors a shard writes in one forward (one fp32 vector of its width per output)."""
    return shard.outputs * shard.width * POOLED_BYTES


def shard_hit_rate(cache_bytes: float, shard: Shard, value_bytes: int) -> float:
    """Share of a shard's lookups served by a ``cache_bytes`` cache holding its hottest rows (Zipf ``skew``)."""
    return hit_rate(shard.rows, cache_bytes / (shard.width * value_bytes), shard.skew) if cache_bytes > 0 else 0.0


def hot_bytes(gpu: GPUSpec, shard: Shard, value_bytes: int) -> float:
    """Of ``lookup_bytes``, the bytes of rows found in the GPU's L2 (0 where the spec gives no L2 bandwidth)."""
    if not gpu.l2_bandwidth:
        return 0.0
    return lookup_bytes(shard, value_bytes) * shard_hit_rate(gpu.l2_cache_bytes, shard, value_bytes)


def lookup_seconds(gpu: GPUSpec, shard: Shard, value_bytes: int, hot: float | None = None) -> float:
    """Seconds of a shard's forward lookups: rows served from L2 at its bandwidth, the rest from HBM (``hot``: its
    ``hot_bytes`` where the caller has them already).

    Lin et al. 2022 §IV-B: the embedding kernel is memory-bound and its effective bandwidth depends on the index
    distribution, table size and pooling factor; here through the L2 hit rate of the hot rows (Zipf ``skew``).
    """
    hbm = gpu.hbm_bandwidth * gpu.memory_efficiency
    l2 = gpu.l2_bandwidth * gpu.memory_efficiency if gpu.l2_bandwidth else hbm
    hot = hot_bytes(gpu, shard, value_bytes) if hot is None else hot
    cold = lookup_bytes(shard, value_bytes) - hot
    # pooled outputs written once to HBM (roofline, Williams et al. 2009)
    return hot / l2 + cold / hbm + output_bytes(shard) / hbm


def shard_bytes(shard: Shard, value_bytes: int) -> float:
    """Bytes a shard keeps on its GPU: rows and their row-wise optimizer state."""
    return shard.rows * (shard.width * value_bytes + ROW_STATE_BYTES)


def column_shards(table: EmbeddingTable, gpus: int) -> int:
    """Column-wise shards of a table: dim / CW_WIDTH, at most one per GPU (1: it cannot be split)."""
    return max(1, min(gpus, table.dim // CW_WIDTH))


def shards_of(table: EmbeddingTable, index: int, kind: str, gpus: tuple[int, ...], world: int,
              batch: int) -> tuple[Shard, ...]:
    """The shards of ``table`` under sharding ``kind`` on ``gpus`` (one GPU for table-wise, one per column shard,
    a node's GPUs for table-row-wise, all for row-wise and data-parallel), for a global micro-batch of ``batch``
    samples over ``world`` GPUs (TorchRec ShardingType semantics)."""
    lookups, local = batch * table.pooling, batch / world
    if kind == "table_wise":
        return (Shard(index, gpus[0], table.rows, table.dim, lookups, batch, table.skew),)
    if kind == "column_wise":
        width = table.dim // len(gpus)
        return tuple(Shard(index, g, table.rows, width, lookups, batch, table.skew) for g in gpus)
    if kind in ("row_wise", "table_row_wise"):
        k = len(gpus)
        # rows split in contiguous blocks; hashed ids spread the hot rows over the blocks (uniform load)
        return tuple(Shard(index, g, table.rows / k, table.dim, lookups / k, batch, table.skew) for g in gpus)
    if kind == "data_parallel":
        return tuple(Shard(index, g, table.rows, table.dim, local * table.pooling, 0.0, table.skew) for g in gpus)
    raise ValueError(f"unknown sharding {kind!r}")
