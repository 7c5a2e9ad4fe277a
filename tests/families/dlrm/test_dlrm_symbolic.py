"""The DLRM sharding's symbolic counts (families/dlrm/sharding.py SymbolicCost): closed-form oracles for each term and the
datasheet-rate step they give."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.hardware import compute
from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm.embedding import POOLED_BYTES, hit_rate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.dlrm.spec import EmbeddingTable
from autoplan.families.strategy import Strategy

MB = 1024


def _ctx(gpus: int, *tables: EmbeddingTable) -> sh.Context:
    base = get_model("dlrm-criteo")
    model = replace(base, structure=replace(base.structure, tables=tables))
    return sh.context(model, load_cluster("dgx-h100-80g", gpus), Strategy(dp=gpus, micro_batch=MB,
                                                                           global_batch=gpus * MB))


def _cost(ctx: sh.Context, *plans: sh.TablePlan) -> tuple[sh.SymbolicCost, sh.Loads]:
    loads = sh.start_loads(ctx)
    for i, plan in enumerate(plans):
        sh.apply(ctx, loads, i, plan)
    return sh.symbolic_cost(ctx, loads), loads


def _unit(**kw) -> sh.SymbolicCost:
    zero = dict(lookup_bytes=0.0, a2a_intra=0.0, a2a_inter=0.0, ring_intra=0.0, ring_inter=0.0, reduce_intra=0.0,
                reduce_inter=0.0, bottom_flops=0.0, mlp_flops=0.0, rounds=0, node_rounds=0)
    return sh.SymbolicCost(**{**zero, **kw})


UNIFORM = EmbeddingTable(name="u", rows=10**7, dim=128, pooling=10.0, skew=0.0)


def test_pooled_outputs_are_written_on_every_row_wise_shard():
    # a row-wise shard writes a full-width partial sum for every sample of the micro-batch, whatever its rows
    ctx = _ctx(8, UNIFORM)
    _, loads = _cost(ctx, sh.TablePlan("row_wise", tuple(range(8))))
    assert loads.write_b == [pytest.approx(8 * MB * 128 * POOLED_BYTES)] * 8


def test_cold_and_hot_lookup_bytes_add_up_to_reads_and_writes():
    ctx = _ctx(8, UNIFORM)
    cost, loads = _cost(ctx, sh.TablePlan("table_wise", (3,)))
    reads = 8 * MB * UNIFORM.pooling * 128 * 4
    # skew 0: every row equally likely, the L2 holds cache/row of the rows (Breslau et al. 1999 with α = 0)
    hit = ctx.cluster.gpu.l2_cache_bytes / (128 * 4) / UNIFORM.rows
    assert hit == pytest.approx(hit_rate(UNIFORM.rows, ctx.cluster.gpu.l2_cache_bytes / 512, 0.0))
    assert cost.lookup_hot[3] == pytest.approx(3 * reads * hit)
    assert cost.lookup_cold[3] + cost.lookup_hot[3] == pytest.approx(3 * (reads + 8 * MB * 128 * POOLED_BYTES))
    assert sum(cost.lookup_cold) == cost.lookup_cold[3]        # the other GPUs look nothing up


def test_lookups_are_priced_on_the_busiest_gpu():
    cost = _unit(lookup_cold=(4.0, 1.0), lookup_hot=(0.0, 6.0))
    assert cost.lookup_seconds(hbm=1.0) == 7.0                 # L2 rate not given: hits at the HBM rate
    assert cost.lookup_seconds(hbm=1.0, l2=3.0) == 4.0         # GPU 0: 4; GPU 1: 1 + 6/3 = 3
    assert cost.seconds(1.0, 1.0, 1.0, 1.0, l2=3.0) == 4.0


def test_all_to_all_levels_move_at_once_and_the_node_ring_follows():
    cost = _unit(a2a_intra=8.0, a2a_inter=3.0, ring_intra=2.0, ring_inter=6.0, node_ring=5.0)
    # max(8/4, 3/1) + max(2/4, 6/1) + 5/4, all of it exposed (no bottom MLP)
    assert cost.seconds(hbm=1.0, intra=4.0, inter=1.0, flops=1.0) == pytest.approx(3 + 6 + 1.25)


def test_collectives_hide_behind_the_bottom_mlp_pass_by_pass():
    # a third of the bottom MLP's FLOPs run in the forward, two thirds in the backward
    hidden = _unit(a2a_inter=4.0, bottom_flops=6.0, mlp_flops=6.0)      # 2 per pass vs 2 and 4
    assert hidden.seconds(1.0, 1.0, 1.0, 1.0) == pytest.approx(6.0)
    exposed = _unit(a2a_inter=10.0, bottom_flops=6.0, mlp_flops=9.0)    # 5 per pass vs 2 and 4; 3 FLOPs after it
    assert exposed.seconds(1.0, 1.0, 1.0, 1.0) == pytest.approx(5 + 5 + 3)


def test_an_all_to_all_counts_its_rounds_even_when_no_gpu_sends_pooled_vectors():
    # row-wise tables send nothing table-wise, but every GPU still receives its samples' sums: n-1 rounds each way,
    # beside the reduce-scatter's n-1 each way (Thakur et al. 2005)
    ctx = _ctx(16, UNIFORM)
    cost, loads = _cost(ctx, sh.TablePlan("row_wise", tuple(range(16))))
    assert max(loads.send) == 0 and max(loads.recv) > 0
    assert (cost.rounds, cost.node_rounds) == (2 * 15 * 2, 0)


def test_one_node_rounds_are_nvlink_rounds():
    ctx = _ctx(8, UNIFORM)
    cost, _ = _cost(ctx, sh.TablePlan("table_wise", (0,)))
    assert (cost.rounds, cost.node_rounds) == (0, 2 * 7)
    assert cost.seconds(1.0, 1e30, 1e30, 1e30, latency=1.0, node_latency=0.0) == pytest.approx(
        cost.seconds(1.0, 1e30, 1e30, 1e30))


def test_data_parallel_tables_add_their_optimizer_bytes():
    ctx = _ctx(8, UNIFORM, EmbeddingTable(name="small", rows=1000, dim=128, pooling=5.0))
    tw, _ = _cost(ctx, sh.TablePlan("table_wise", (0,)), sh.TablePlan("table_wise", (1,)))
    dp, _ = _cost(ctx, sh.TablePlan("table_wise", (0,)), sh.TablePlan("data_parallel", tuple(range(8))))
    assert dp.optimizer_bytes - tw.optimizer_bytes == pytest.approx(compute.optimizer_bytes(128e3, 128e3))
    assert tw.optimizer_bytes == compute.optimizer_bytes(ctx.spec.dense_params(), ctx.spec.dense_params())
    assert dp.seconds(1.0, 1.0, 1.0, 1.0) - tw.seconds(1.0, 1.0, 1.0, 1.0) > 30 * 128e3 * 0.99


def test_the_counts_agree_with_the_modelled_step_on_an_ideal_cluster():
    # on a cluster at datasheet rates with no efficiency loss, ramp, kernel overhead or latency, and a free MLP, the
    # counts' seconds equal the step_times of the same plan apart from the index all-to-all they leave out
    ctx = _ctx(16, UNIFORM)
    cl = ctx.cluster
    ideal = replace(cl, gpu=replace(cl.gpu, memory_efficiency=1.0, kernel_overhead=0.0),
                    tiers=tuple(replace(t, efficiency=1.0, latency=0.0, half_bandwidth_bytes=0.0,
                                        allreduce_busbw=0.0) for t in cl.tiers))
    ictx = replace(ctx, cluster=ideal, dense_fwd=(0.0, 0.0, 0.0), dense_bwd=(0.0, 0.0, 0.0))
    plans = (sh.TablePlan("column_wise", (0, 5, 9, 12)),)
    loads = sh.start_loads(ictx)
    sh.apply(ictx, loads, 0, plans[0])
    loads.ids = [0.0] * 16
    t = sh.step_times(ictx, loads)
    cost = sh.symbolic_cost(ictx, loads)
    g, nvl, ib = ideal.gpu, ideal.tiers[0], ideal.tier_spanning(16)
    rest = (cost.mlp_flops - cost.bottom_flops) / g.peak_flops     # the bottom MLP hides behind the all-to-all
    assert 2 * cost.bottom_flops / 3 / g.peak_flops < cost.a2a_inter / 2 / ib.bandwidth
    assert cost.seconds(g.hbm_bandwidth, nvl.bandwidth, ib.bandwidth, g.peak_flops, l2=g.l2_bandwidth) - rest \
        == pytest.approx(t.total, rel=1e-9)


@pytest.mark.parametrize("weights", ["shape", "balance", "launch"])
def test_search_scores_a_dlrm_plan_by_these_counts_over_the_simulators_placement(weights):
    # --cost symbolic / --prefilter: a DLRM's symbolic cost is SymbolicCost.seconds (not the generic score of its
    # step on the unit cluster), over the tables as sharding_plan places them on the weights' unit cluster
    from autoplan.families.dlrm.family import sharding_plan
    from autoplan.families.symbolic import symbolic_cost, symbolic_score, unit_cluster
    model, cluster = get_model("dlrm-criteo"), load_cluster("dgx-h100-80g", 64)
    s = Strategy(dp=64, micro_batch=MB, global_batch=64 * MB)
    unit = unit_cluster(cluster, weights)
    counts = sh.symbolic_cost(sh.context(model, unit, s), sharding_plan(model, unit, s).loads)
    gpu, nvl, ib = cluster.gpu, cluster.tiers[0], cluster.tier_spanning(64)
    rates = (gpu.hbm_bandwidth, nvl.bandwidth, ib.bandwidth, gpu.peak_flops)
    expected = {"shape": counts.seconds(1e30, 1.0, 1.0, 1.0),
                "balance": gpu.peak_flops * counts.seconds(*rates),
                "launch": gpu.peak_flops * counts.seconds(*rates, ib.latency, nvl.latency)}[weights]
    assert symbolic_cost(model, cluster, s, weights) == pytest.approx(expected, rel=1e-12)
    score = symbolic_score(model, cluster, s, weights)
    assert score.score == pytest.approx(expected, rel=1e-12) and score.fits and score.bubble == 0.0
