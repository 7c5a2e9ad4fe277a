"""The rank-0 bottom MLP of NVIDIA's DLRM (DeepLearningExamples dlrm/model/distributed.py DistributedDlrm): its
time over the global batch on GPU 0, its output's all-to-all bytes, and the tables placed per get_device_mapping."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm import sharding_search as ss
from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.strategy import Strategy

A100 = load_cluster("dgx-a100-80g", 8)
BASE = get_model("dlrm-criteo")
RANK0 = replace(BASE, name="dlrm-rank0", structure=replace(BASE.structure, bottom_mlp_placement="rank0"))


def _plan(world: int, batch: int = 65536) -> Strategy:
    return Strategy(dp=world, micro_batch=batch // world, global_batch=batch, sharding="table_wise")


def test_an_unknown_placement_is_refused():
    with pytest.raises(SpecError, match="bottom_mlp_placement 'gpu7' is not one of data_parallel, rank0"):
        replace(BASE.structure, bottom_mlp_placement="gpu7")


@pytest.mark.parametrize("world", [2, 4, 8])
def test_rank0_bottom_mlp_runs_over_the_global_batch(world):
    s = _plan(world)
    rank0, dp = sh.context(RANK0, A100, s), sh.context(BASE, A100, s)
    widths = RANK0.structure.bottom_widths()
    assert rank0.dense_fwd[0] == pytest.approx(sh._mlp_times(A100, widths, s.global_batch)[0])
    assert rank0.dense_bwd[0] == pytest.approx(sh._mlp_times(A100, widths, s.global_batch)[1])
    assert dp.dense_fwd[0] == pytest.approx(sh._mlp_times(A100, widths, s.micro_batch)[0])
    assert rank0.dense_fwd[1:] == dp.dense_fwd[1:] and rank0.dense_bwd[1:] == dp.dense_bwd[1:]


@settings(max_examples=30, deadline=None)
@given(world=st.sampled_from([2, 4, 8]), per_gpu=st.integers(1, 4096))
def test_rank0_output_all_to_all_bytes_are_global_batch_times_width_in_fp16(world, per_gpu):
    s = _plan(world, world * per_gpu)
    ctx = sh.context(RANK0, A100, s)
    d = RANK0.structure.bottom_mlp[-1]
    sent = world * per_gpu * d * 2 * (world - 1) / world     # all but GPU 0's own share leave GPU 0
    assert sh.bottom_output_bytes(ctx) == pytest.approx(sent)
    loads = sh.start_loads(ctx)
    assert loads.send == pytest.approx([sent] + [0.0] * (world - 1))
    assert loads.recv == pytest.approx([0.0] + [per_gpu * d * 2.0] * (world - 1))
    assert sh.bottom_output_bytes(sh.context(BASE, A100, s)) == 0.0


def test_rank0_step_puts_the_bottom_mlp_beside_the_lookups_and_exposes_the_all_to_all():
    s = _plan(8)
    ctx = sh.context(RANK0, A100, s)
    plan = ss.search(ctx, A100.gpu.hbm_bytes)
    t, loads = plan.times, plan.loads
    (bot_f, inter_f, top_f), (bot_b, inter_b, top_b) = ctx.dense_fwd, ctx.dense_bwd
    over = A100.gpu.kernel_overhead
    assert loads.lookup_s[0] == 0.0                         # GPU 0 holds no table above 4 GPUs
    assert t.fwd_compute == pytest.approx(max(max(loads.lookup_s), bot_f) + over + inter_f + top_f)
    assert t.bwd_compute == pytest.approx(max(2 * max(loads.lookup_s), bot_b) + over + inter_b + top_b)
    assert t.fwd_a2a > 0 and t.fwd_a2a <= t.bwd_a2a


def _reference_buckets(rows: list[int], count: int) -> list[list[int]]:
    # an independent oracle: largest first; each goes to the open bucket with the smallest row sum, ties to the bucket
    # that has stayed longest at the front of the (stably) sorted list; a full bucket closes
    cap = math.ceil(len(rows) / count)
    order = sorted(range(len(rows)), key=lambda i: rows[i], reverse=True)
    open_, closed = [[] for _ in range(count)], []
    for i in order:
        open_[0].append(i)
        if len(open_[0]) == cap:
            closed.append(open_.pop(0))
        open_ = sorted(open_, key=lambda b: sum(rows[j] for j in b))
    return closed + open_


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5, 8])
def test_tables_follow_nvidias_device_mapping(world):
    rows = tuple(t.rows for t in RANK0.structure.tables)
    buckets = ss.nvidia_buckets(rows, world)
    assert len(buckets) == world
    assert sorted(i for b in buckets for i in b) == list(range(len(rows)))
    expected = _reference_buckets(list(rows), world - 1 if world > 4 else world)
    assert [list(b) for b in buckets] == ([[]] if world > 4 else []) + expected
    cap = math.ceil(len(rows) / (world - 1 if world > 4 else world))
    assert max(len(b) for b in buckets) <= cap
    if world > 4:
        assert buckets[0] == ()


def test_eight_gpus_put_26_tables_on_gpus_1_to_7_at_most_4_each():
    buckets = ss.nvidia_buckets(tuple(t.rows for t in RANK0.structure.tables), 8)
    assert len(RANK0.structure.tables) == 26
    assert buckets[0] == () and all(1 <= len(b) <= 4 for b in buckets[1:])
    ctx = sh.context(RANK0, A100, _plan(8))
    plan = ss.search(ctx, A100.gpu.hbm_bytes)
    owner = {i: g for g, b in enumerate(buckets) for i in b}
    assert all(p.kind == "table_wise" and p.gpus == (owner[i],) for i, p in enumerate(plan.tables))


def test_rank0_slows_an_eight_gpu_step_and_leaves_data_parallel_alone():
    s = _plan(8)
    rank0 = ss.search(sh.context(RANK0, A100, s), A100.gpu.hbm_bytes).times.total
    dp = ss.search(sh.context(BASE, A100, s), A100.gpu.hbm_bytes).times.total
    assert rank0 > dp
    one = _plan(1, 32768)
    assert (ss.search(sh.context(RANK0, A100, one), A100.gpu.hbm_bytes).times.total
            == pytest.approx(ss.search(sh.context(BASE, A100, one), A100.gpu.hbm_bytes).times.total))


def test_block_ops_time_the_rank0_bottom_mlp_over_the_global_batch():
    from autoplan.families.dlrm.family import block_ops
    s = _plan(8)
    k, n = RANK0.structure.bottom_widths()[:2]
    ops = {op.name: op for op in block_ops(RANK0, A100, s)["forward"]}
    assert ops["bottom_mlp.0"].flops == pytest.approx(2.0 * s.global_batch * k * n)
    base = {op.name: op for op in block_ops(BASE, A100, s)["forward"]}
    assert base["bottom_mlp.0"].flops == pytest.approx(2.0 * s.micro_batch * k * n)
    assert ops["top_mlp.0"].flops == base["top_mlp.0"].flops
