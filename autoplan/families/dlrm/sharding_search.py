"""The embedding sharding planner: each table's sharding kind and GPUs, chosen greedily (largest tables first, the
kind that keeps the modelled step shortest) and improved by local search, never past a GPU's memory.

Placement is hardware-free (the GPU with the fewest lookup and all-to-all bytes that has room), so that a plan
with pinned kinds places its tables the same way whichever cost model ranks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm.embedding import column_shards
from autoplan.specs.cluster import ClusterSpec
from autoplan.families.dlrm.spec import SHARDINGS
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan


MULTI_START_TABLES = 32
"""Models with at most this many tables also search from every all-one-kind start (cost: 6× the search)."""


@dataclass(frozen=True)
class ShardingPlan:
    """Every table's sharding, the loads they add up to and the step they give; ``unplaced`` names the tables
    that fit on no GPU (then the plan does not fit)."""

    tables: tuple[sh.TablePlan, ...]
    loads: sh.Loads
    times: sh.StepTimes
    unplaced: tuple[str, ...] = ()


def allowed_kinds(ctx: sh.Context, index: int) -> tuple[str, ...]:
    """Shardings table ``index`` may take: its pin, else the plan's kind, else every kind that applies."""
    table = ctx.spec.tables[index]
    if table.sharding:
        return (table.sharding,)
    if ctx.strategy.sharding != "auto":
        return (ctx.strategy.sharding,)
    kinds = [k for k in SHARDINGS if k != "column_wise" or column_shards(table, ctx.world) > 1]
    if ctx.world <= ctx.node_size:           # one node: table-row-wise is row-wise
        kinds.remove("table_row_wise")
    return tuple(kinds)


def _need(ctx: sh.Context, index: int, kind: str, gpus: tuple[int, ...]) -> dict[int, float]:
    """Bytes each GPU would store for table ``index`` sharded as ``kind`` on ``gpus`` (``sharding.footprint``)."""
    out: dict[int, float] = {}
    for g, _, _, _, _, memory, _, _, dense_grad in sh.footprint(ctx, index, kind, gpus)[0]:
        out[g] = out.get(g, 0.0) + memory + (dense_grad or 0.0)
    return out


def _fits(loads: sh.Loads, need: dict[int, float], room: float) -> bool:
    return all(loads.memory[g] + b <= room for g, b in need.items())


def _busy(loads: sh.Loads, g: int) -> tuple[float, int]:
    return loads.lookup_b[g] + loads.send[g], g


def place(ctx: sh.Context, loads: sh.Loads, index: int, kind: str, room: float) -> sh.TablePlan | None:
    """Table ``index`` sharded as ``kind`` on the least busy GPUs (by bytes) with room; None if none has."""
    world, table = ctx.world, ctx.spec.tables[index]
    if kind in ("row_wise", "data_parallel"):
        choices = [tuple(range(world))]
    elif kind == "table_row_wise":
        nodes = range(-(-world // ctx.node_size))
        order = sorted(nodes, key=lambda n: (sum(_busy(loads, g)[0] for g in sh.node_gpus(ctx, n)), n))
        choices = [sh.node_gpus(ctx, n) for n in order]
    else:
        count = column_shards(table, world) if kind == "column_wise" else 1
        order = sorted(range(world), key=lambda g: _busy(loads, g))
        per = table.rows * (table.dim // count * ctx.spec.embedding_bytes + 4)
        free = [g for g in order if loads.memory[g] + per <= room]
        choices = [tuple(sorted(free[:count]))] if len(free) >= count else []
    for gpus in choices:
        if _fits(loads, _need(ctx, index, kind, gpus), room):
            return sh.TablePlan(kind, gpus)
    return None


def _order(ctx: sh.Context) -> list[int]:
    """Tables by descending lookup traffic, then size (the ones that matter most are placed first)."""
    tables = ctx.spec.tables
    return sorted(range(len(tables)), key=lambda i: (-tables[i].pooling * tables[i].dim, -tables[i].params, i))


def _try(ctx: sh.Context, loads: sh.Loads, index: int, kind: str, room: float) -> tuple[float, sh.TablePlan] | None:
    plan = place(ctx, loads, index, kind, room)
    if plan is None:
        return None
    sh.apply(ctx, loads, index, plan)
    t = sh.step_times(ctx, loads).total
    sh.apply(ctx, loads, index, plan, -1.0)
    return t, plan


def _best(ctx: sh.Context, loads: sh.Loads, index: int, room: float) -> sh.TablePlan | None:
    found = [r for k in allowed_kinds(ctx, index) if (r := _try(ctx, loads, index, k, room)) is not None]
    return min(found, key=lambda r: r[0])[1] if found else None


def _start(ctx: sh.Context, room: float, kind: str | None) -> tuple[sh.Loads, dict[int, sh.TablePlan], list[str]]:
    """Tables placed in ``_order``: each as ``kind`` where allowed and placeable, else its greedy best."""
    loads = sh.start_loads(ctx)
    plans: dict[int, sh.TablePlan] = {}
    unplaced = []
    for i in _order(ctx):
        best = None
        if kind in allowed_kinds(ctx, i):
            best = place(ctx, loads, i, kind, room)
        best = best or _best(ctx, loads, i, room)
        if best is None:
            unplaced.append(ctx.spec.tables[i].name)
            continue
        sh.apply(ctx, loads, i, best)
        plans[i] = best
    return loads, plans, unplaced


def search(ctx: sh.Context, room: float, local_search: bool = True) -> ShardingPlan:
    """Greedy placement in ``_order``, then sweeps that re-shard one table at a time while the step shrinks; with
    ``local_search`` also from every all-one-kind start (the best result wins, ties to the earlier start)."""
    if all(allowed_kinds(ctx, i) == ("table_wise",) for i in range(len(ctx.spec.tables))):
        if ctx.rank0:
            return nvidia_plan(ctx)
        if ctx.spec.table_placement == "memory_balanced":
            sizes = tuple(t.rows * t.dim for t in ctx.spec.tables)
            return fixed_plan(ctx, memory_balanced_buckets(sizes, ctx.world))
    starts: list[str | None] = [None]
    if local_search and ctx.strategy.sharding == "auto" and len(ctx.spec.tables) <= MULTI_START_TABLES:
        starts += list(SHARDINGS)
    best: tuple[float, sh.Loads, dict[int, sh.TablePlan], list[str]] | None = None
    for kind in starts:
        loads, plans, unplaced = _start(ctx, room, kind)
        if local_search and not unplaced:
            _improve(ctx, loads, plans, room)
        total = sh.step_times(ctx, loads).total + (float("inf") if unplaced else 0.0)
        if best is None or total < best[0] * (1 - 1e-9):
            best = (total, loads, plans, unplaced)
    _, loads, plans, unplaced = best
    tables = tuple(plans.get(i, sh.TablePlan("unplaced", ())) for i in range(len(ctx.spec.tables)))
    return ShardingPlan(tables, loads, sh.step_times(ctx, loads), tuple(unplaced))


def nvidia_buckets(rows: tuple[int, ...], world: int) -> tuple[tuple[int, ...], ...]:
    """Table indices per GPU as NVIDIA DLRM places them (dlrm/utils/distributed.py get_device_mapping and
    distribute_to_buckets): above 4 GPUs GPU 0 (the bottom MLP's) holds no table; the tables, largest first (ties by
    index), each go to the open bucket with the fewest rows (ties: the order the last stable sort left), a bucket
    closing at ceil(tables / buckets) tables; closed buckets take the first GPUs in closing order, open ones follow."""
    count = world - 1 if world > 4 else world
    cap = -(-len(rows) // count)
    buckets: list[list[int]] = [[] for _ in range(count)]
    closed: list[list[int]] = []
    for i in sorted(range(len(rows)), key=lambda j: (-rows[j], j)):
        buckets[0].append(i)
        if len(buckets[0]) == cap:
            closed.append(buckets.pop(0))
        buckets.sort(key=lambda b: sum(rows[j] for j in b))
    out = [tuple(b) for b in closed + buckets]
    return tuple([(), *out] if world > 4 else out)


def memory_balanced_buckets(sizes: tuple[int, ...], world: int) -> tuple[tuple[int, ...], ...]:
    """Table indices per GPU as distributed-embeddings' ``memory_balanced`` strategy deals them (NVIDIA-Merlin
    distributed-embeddings dist_model_parallel.py DistEmbeddingStrategy.apply_stragety): the tables sorted by
    ``sizes`` (elements) descending, ties to the larger index, dealt forth and back over the GPUs, so that GPU i takes
    places i, 2w-1-i, 2w+i, 4w-1-i, ... of that order (w GPUs); table counts differ by at most 1."""
    ranked = [i for _, i in sorted(zip(sizes, range(len(sizes))), reverse=True)]
    return tuple(tuple(ranked[g::2 * world] + ranked[2 * world - 1 - g::2 * world]) for g in range(world))


def nvidia_plan(ctx: sh.Context) -> ShardingPlan:
    """Every table table-wise on the GPU NVIDIA's mapping gives it, whatever the memory (a plan that overflows a GPU
    is flagged by the family's memory check)."""
    return fixed_plan(ctx, nvidia_buckets(tuple(t.rows for t in ctx.spec.tables), ctx.world))


def fixed_plan(ctx: sh.Context, buckets: tuple[tuple[int, ...], ...]) -> ShardingPlan:
    """Every table table-wise on the GPU whose bucket holds it, whatever the memory (a plan that overflows a GPU is
    flagged by the family's memory check)."""
    owner = {i: g for g, bucket in enumerate(buckets) for i in bucket}
    loads = sh.start_loads(ctx)
    tables = tuple(sh.TablePlan("table_wise", (owner[i],)) for i in range(len(ctx.spec.tables)))
    for i, plan in enumerate(tables):
        sh.apply(ctx, loads, i, plan)
    return ShardingPlan(tables, loads, sh.step_times(ctx, loads))


def _improve(ctx: sh.Context, loads: sh.Loads, plans: dict[int, sh.TablePlan], room: float) -> None:
    current = sh.step_times(ctx, loads).total
    for _ in range(sh.SEARCH_PASSES):
        improved = False
        for i in _order(ctx):
            if len(allowed_kinds(ctx, i)) == 1 and allowed_kinds(ctx, i)[0] in ("row_wise", "data_parallel"):
                continue
            sh.apply(ctx, loads, i, plans[i], -1.0)
            best = _best(ctx, loads, i, room) or plans[i]
            sh.apply(ctx, loads, i, best)
            t = sh.step_times(ctx, loads).total
            if t < current * (1 - 1e-9):
                plans[i], current, improved = best, t, True
            else:
                sh.apply(ctx, loads, i, best, -1.0)
                sh.apply(ctx, loads, i, plans[i])
        if not improved:
            return


@lru_cache(maxsize=256)
def sharding_plan(model: ModelSpec, cluster: ClusterSpec, s: Plan, room: float) -> ShardingPlan:
    """The planner's plan for ``model`` under ``s`` with ``room`` bytes per GPU for embeddings (cached)."""
    return search(sh.context(model, cluster, s), room)
