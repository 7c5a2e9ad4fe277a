"""DLRM plans as NVIDIA's DeepLearningExamples code runs them: the all-to-all in the AMP dtype
(``DLRMSpec.pooled_comm_bytes``), distributed-embeddings' ``memory_balanced`` table placement and collectives issued
through Horovod (TensorFlow 2, ``DLRMSpec.framework``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm import sharding_search as ss
from autoplan.families.dlrm.family import memory
from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.dlrm.spec import dlrm_from_data
from autoplan.families.strategy import Strategy

A100 = load_cluster("dgx-a100-80g", 8)
BASE = get_model("dlrm-criteo")


def _with(**kw):
    return replace(BASE, name="dlrm-" + "-".join(f"{k}{v}" for k, v in kw.items()),
                   structure=replace(BASE.structure, **kw))


def _plan(world: int = 8, batch: int = 65536) -> Strategy:
    return Strategy(dp=world, micro_batch=batch // world, global_batch=batch, sharding="table_wise")


def _reference_deal(sizes: list[int], world: int) -> list[list[int]]:
    # an independent oracle: walk the tables largest first (ties: larger index first) and hand them out
    # 0, 1, ..., w-1, w-1, ..., 1, 0, 0, 1, ... (a boustrophedon deal)
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], i), reverse=True)
    out: list[list[int]] = [[] for _ in range(world)]
    for k, i in enumerate(order):
        lap, pos = divmod(k, world)
        out[pos if lap % 2 == 0 else world - 1 - pos].append(i)
    return out


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 10**6), min_size=1, max_size=60), world=st.integers(1, 16))
def test_memory_balanced_deals_the_tables_forth_and_back(sizes, world):
    buckets = ss.memory_balanced_buckets(tuple(sizes), world)
    assert len(buckets) == world
    assert sorted(i for b in buckets for i in b) == list(range(len(sizes)))
    assert [sorted(b) for b in buckets] == [sorted(b) for b in _reference_deal(sizes, world)]
    counts = [len(b) for b in buckets]
    assert max(counts) - min(counts) <= 1


def test_criteo_26_tables_on_8_gpus_put_the_8_largest_on_8_gpus_and_4_tables_on_gpus_6_and_7():
    sizes = tuple(t.rows * t.dim for t in BASE.structure.tables)
    buckets = ss.memory_balanced_buckets(sizes, 8)
    largest = sorted(range(26), key=lambda i: sizes[i], reverse=True)[:8]
    assert [b[0] for b in buckets] == largest
    assert [len(b) for b in buckets] == [3, 3, 3, 3, 3, 3, 4, 4]


def test_memory_balanced_plan_places_every_table_where_the_deal_puts_it():
    model = _with(table_placement="memory_balanced")
    plan = ss.search(sh.context(model, A100, _plan()), A100.gpu.hbm_bytes)
    owner = {i: g for g, b in enumerate(ss.memory_balanced_buckets(
        tuple(t.rows * t.dim for t in BASE.structure.tables), 8)) for i in b}
    assert all(p.kind == "table_wise" and p.gpus == (owner[i],) for i, p in enumerate(plan.tables))
    assert [sum(1 for p in plan.tables if p.gpus == (g,)) for g in range(8)] == [3, 3, 3, 3, 3, 3, 4, 4]


@pytest.mark.parametrize("world", [2, 4, 8])
def test_fp16_all_to_all_halves_every_sent_and_received_byte_and_nothing_else(world):
    s, cluster = _plan(world), A100
    fp32, fp16 = BASE, _with(pooled_comm_bytes=2)
    a, b = sh.context(fp32, cluster, s), sh.context(fp16, cluster, s)
    la, lb = sh.start_loads(a), sh.start_loads(b)
    for i in range(len(BASE.structure.tables)):
        where = sh.TablePlan("table_wise", (i % world,))
        sh.apply(a, la, i, where)
        sh.apply(b, lb, i, where)
    assert lb.send == pytest.approx([x / 2 for x in la.send])
    assert lb.recv == pytest.approx([x / 2 for x in la.recv])
    assert (lb.lookup_s, lb.lookup_b, lb.memory, lb.ids) == (la.lookup_s, la.lookup_b, la.memory, la.ids)
    # a table of dim D sends B·D·2·(n-1)/n bytes from its owner in fp16
    d = BASE.structure.tables[0].dim
    assert max(lb.send) == pytest.approx(max(sum(1 for i in range(26) if i % world == g) for g in range(world))
                                         * s.global_batch * d * 2 * (world - 1) / world)


def test_fp16_all_to_all_shortens_the_exposed_communication_and_its_buffers():
    s = _plan()
    fp32 = ss.search(sh.context(BASE, A100, s), A100.gpu.hbm_bytes)
    fp16 = ss.search(sh.context(_with(pooled_comm_bytes=2), A100, s), A100.gpu.hbm_bytes)
    assert fp16.times.fwd_a2a + fp16.times.bwd_a2a < fp32.times.fwd_a2a + fp32.times.bwd_a2a
    assert fp16.times.total < fp32.times.total
    assert memory(_with(pooled_comm_bytes=2), A100, s)[0].buffers < memory(BASE, A100, s)[0].buffers


def test_one_gpu_has_no_all_to_all_whatever_its_bytes():
    one, s = A100, _plan(1, 32768)
    t32 = ss.search(sh.context(BASE, one, s), one.gpu.hbm_bytes).times
    t16 = ss.search(sh.context(_with(pooled_comm_bytes=2), one, s), one.gpu.hbm_bytes).times
    assert t16 == t32


@pytest.mark.parametrize("kw, needle", [
    ({"table_placement": "round_robin"}, "table_placement 'round_robin' is not one of planner, memory_balanced"),
    ({"table_placement": "memory_balanced", "bottom_mlp_placement": "rank0"}, "needs a data-parallel bottom MLP"),
    ({"pooled_comm_bytes": 0}, "pooled_comm_bytes must be a positive integer, got 0"),
    ({"pooled_comm_bytes": 2.5}, "pooled_comm_bytes must be a positive integer, got 2.5"),
    ({"framework": "mpi"}, "framework 'mpi' is not one of pytorch, horovod"),
])
def test_bad_options_are_refused_with_the_value(kw, needle):
    with pytest.raises(SpecError, match=needle):
        replace(BASE.structure, **kw)


def test_a_model_file_may_set_both_options():
    spec = dlrm_from_data({"tables": [{"rows": 10, "dim": 4}], "dense_features": 3, "bottom_mlp": [4],
                           "top_mlp": [8, 1], "pooled_comm_bytes": 2, "table_placement": "memory_balanced",
                           "framework": "horovod"}, "f")
    assert (spec.pooled_comm_bytes, spec.table_placement, spec.framework) == (2, "memory_balanced", "horovod")
    assert (BASE.structure.pooled_comm_bytes, BASE.structure.table_placement, BASE.structure.framework) == (
        4, "planner", "pytorch")


@pytest.mark.parametrize("world, batch", [(2, 8192), (8, 65536), (8, 16384)])
def test_horovod_adds_half_a_cycle_before_each_all_to_all(world, batch):
    # a rank-0 bottom MLP hides no communication: the forward and the backward all-to-all each wait half of
    # Horovod's 1 ms cycle for their negotiation round, once per micro-batch
    s = replace(_plan(world, batch), micro_batch=batch // world // 2)
    rank0 = _with(bottom_mlp_placement="rank0")
    plain = ss.search(sh.context(rank0, A100, s), A100.gpu.hbm_bytes)
    hvd = ss.search(sh.context(_with(bottom_mlp_placement="rank0", framework="horovod"), A100, s), A100.gpu.hbm_bytes)
    assert plain.tables == hvd.tables
    assert hvd.times.fwd_a2a - plain.times.fwd_a2a == pytest.approx(0.5e-3)
    assert hvd.times.bwd_a2a - plain.times.bwd_a2a == pytest.approx(0.5e-3)
    assert hvd.times.total - plain.times.total == pytest.approx(2 * 0.5e-3 * 2)


def test_horovod_waits_where_the_data_parallel_bottom_mlp_cannot_hide_them():
    # the wait sits on the communication stream: the bottom MLP overlaps it as it overlaps the all-to-all
    s = _plan()
    plain = ss.search(sh.context(_with(table_placement="memory_balanced"), A100, s), A100.gpu.hbm_bytes).times
    hvd = ss.search(sh.context(_with(table_placement="memory_balanced", framework="horovod"), A100, s),
                    A100.gpu.hbm_bytes).times
    assert 0 < hvd.total - plain.total <= 2 * 0.5e-3 + 1e-12
    assert (hvd.fwd_compute, hvd.bwd_compute, hvd.reduce) == (plain.fwd_compute, plain.bwd_compute, plain.reduce)


def test_one_process_issues_no_horovod_op():
    one, s = A100, _plan(1, 32768)
    plain = ss.search(sh.context(BASE, one, s), one.gpu.hbm_bytes).times
    assert ss.search(sh.context(_with(framework="horovod"), one, s), one.gpu.hbm_bytes).times == plain
