"""The DLRM family: lookup cost, all-to-all bytes, sharding plans and their memory, validity."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm.embedding import POOLED_BYTES, Shard, column_shards, hit_rate, lookup_seconds
from autoplan.families.dlrm.family import sharding_plan, violations
from autoplan.families.dlrm.sharding_search import search
from autoplan.errors import SpecError
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.dlrm.spec import SHARDINGS, DLRMSpec, EmbeddingTable
from autoplan.families.strategy import Strategy

H100 = load_cluster("dgx-h100-80g", 16)


def _model(tables: tuple[EmbeddingTable, ...]):
    base = get_model("dlrm-criteo")
    return replace(base, structure=replace(base.structure, tables=tables))


def _plan(gpus: int = 16, mb: int = 512, **kw) -> Strategy:
    return Strategy(dp=gpus, micro_batch=mb, global_batch=gpus * mb, **kw)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(10**3, 10**8), pooling=st.floats(1, 100), more=st.floats(1.01, 10), skew=st.floats(0, 1.5))
def test_lookup_time_grows_with_pooling_and_falls_with_skew(rows, pooling, more, skew):
    def t(p: float, a: float) -> float:
        return lookup_seconds(H100.gpu, Shard(0, 0, rows, 128, 1024 * p, 1024, a), 4)

    assert t(pooling * more, skew) > t(pooling, skew)
    assert t(pooling, skew + 0.3) <= t(pooling, skew) * (1 + 1e-12)


def test_hit_rate_closed_forms():
    assert hit_rate(1000, 100, 0.0) == pytest.approx(0.1)                  # uniform: the cached share of rows
    assert hit_rate(1000, 2000, 1.0) == 1.0                                # whole table cached
    assert hit_rate(10, 1, 1.0) == pytest.approx(1 / sum(1 / i for i in range(1, 11)))


@pytest.mark.parametrize("world", [8, 16, 64])
def test_table_wise_all_to_all_bytes_closed_form(world):
    """One table-wise table of dim D: its owner sends B·D·4·(n-1)/n bytes, every GPU receives b·D·4·(n-1)/n."""
    table = EmbeddingTable(name="t", rows=10**6, dim=128, sharding="table_wise")
    model, s = _model((table,)), _plan(world, 1024)
    loads = sharding_plan(model, load_cluster("dgx-h100-80g", world), s).loads
    batch = world * 1024
    assert max(loads.send) == pytest.approx(batch * 128 * POOLED_BYTES * (world - 1) / world)
    assert sum(1 for x in loads.send if x > 0) == 1
    assert all(r == pytest.approx(1024 * 128 * POOLED_BYTES * (world - 1) / world) for r in loads.recv)


def test_row_wise_reduce_scatter_and_data_parallel_need_no_all_to_all():
    tables = (EmbeddingTable(name="a", rows=10**5, dim=128, sharding="row_wise"),
              EmbeddingTable(name="b", rows=100, dim=128, sharding="data_parallel"))
    loads = sharding_plan(_model(tables), H100, _plan()).loads
    assert max(loads.send) == 0
    assert loads.row_wise == pytest.approx(16 * 512 * 128 * POOLED_BYTES)
    assert loads.dp_params == 100 * 128


def test_every_table_is_placed_once_within_memory():
    model, s = get_model("dlrm-criteo"), _plan(16, 1024)
    plan = sharding_plan(model, H100, s)
    assert not plan.unplaced and len(plan.tables) == 26
    assert all(p.kind in SHARDINGS and p.gpus for p in plan.tables)
    stored = sum(plan.loads.memory)
    rows_bytes = sum(t.rows * (t.dim * 4 + 4) for t in model.structure.tables)
    assert stored >= rows_bytes * (1 - 1e-9)                  # every row somewhere (data-parallel ones everywhere)
    e = evaluate(model, H100, s)
    assert e.feasible and e.peak_memory <= H100.gpu.hbm_bytes


def test_memory_is_balanced_by_the_planner():
    """64 equal big table-wise tables on 16 GPUs: four per GPU (placement by least load)."""
    tables = tuple(EmbeddingTable(name=f"t{i}", rows=10**6, dim=128, sharding="table_wise") for i in range(64))
    mem = sharding_plan(_model(tables), H100, _plan()).loads.memory
    assert max(mem) == pytest.approx(min(mem))


def test_tables_that_fit_nowhere_make_the_plan_not_fit():
    huge = (EmbeddingTable(name="huge", rows=10**9, dim=128, sharding="table_wise"),)
    e = evaluate(_model(huge), H100, _plan())
    assert not e.feasible and "GiB per GPU" in e.violations[0]


def test_auto_is_no_slower_than_any_single_kind():
    model = get_model("dlrm-dcnv2")
    cluster = load_cluster("dgx-h100-80g", 16)
    auto = evaluate(model, cluster, _plan(16, 1024)).metrics.step_time
    for kind in SHARDINGS:
        e = evaluate(model, cluster, _plan(16, 1024, sharding=kind))
        assert not e.feasible or e.metrics.step_time >= auto * (1 - 1e-9)


def test_local_search_never_hurts_the_greedy_plan():
    model = get_model("dlrm-criteo")
    ctx = sh.context(model, H100, _plan(16, 1024))
    room = H100.gpu.hbm_bytes
    assert search(ctx, room).times.total <= search(ctx, room, local_search=False).times.total * (1 + 1e-12)


def test_symbolic_cost_has_no_hardware_in_it_but_the_l2_size():
    model = get_model("dlrm-criteo")
    s = _plan(16, 1024, sharding="table_wise")
    a100 = load_cluster("dgx-a100-80g", 16)
    counts = [sh.symbolic_cost(sh.context(model, c, s), sharding_plan(model, c, s).loads) for c in (H100, a100)]
    assert counts[0].key == counts[1].key
    assert counts[0].lookup_hot != counts[1].lookup_hot          # 50 MB vs 40 MB of L2
    same_l2 = replace(a100, gpu=replace(a100.gpu, l2_cache_bytes=H100.gpu.l2_cache_bytes))
    assert sh.symbolic_cost(sh.context(model, same_l2, s), sharding_plan(model, same_l2, s).loads) == counts[0]


def test_validity():
    model = get_model("dlrm-criteo")
    assert violations(model, 16, _plan()) == []
    assert any("dp must be" in r for r in violations(model, 16, Strategy(dp=8, tp=2, global_batch=16)))
    assert any("zero" in r.lower() for r in violations(model, 16, _plan(zero=1)))
    assert any("divisible" in r for r in violations(model, 16, Strategy(dp=16, micro_batch=3, global_batch=64)))
    dense = get_model("gpt3")
    assert "embedding sharding row_wise applies to DLRM models only" in evaluate(
        dense, H100, _plan(sharding="row_wise")).violations
    assert "no DLRM structure" in violations(dense, 16, _plan())[0]


@pytest.mark.parametrize("knob", [{"precision": "fp8"}, {"fp8_param_gather": True}, {"tp_comm_overlap": True},
                                  {"cp_comm": "a2a"}, {"ep_overlap": True}])
def test_knobs_a_dlrm_does_not_model_are_refused_not_ignored(knob):
    (name, value), = knob.items()
    reasons = violations(get_model("dlrm-criteo"), 16, _plan(**knob))
    assert any(r.startswith(f"{name} {value!r} is not modelled for a DLRM") for r in reasons), reasons


def test_spec_errors_name_the_numbers():
    with pytest.raises(SpecError, match="rows must be a positive integer"):
        EmbeddingTable(name="t", rows=0, dim=8)
    with pytest.raises(SpecError, match="sharding 'diagonal'"):
        EmbeddingTable(name="t", rows=1, dim=8, sharding="diagonal")
    with pytest.raises(SpecError, match="dot interaction needs every table dim"):
        DLRMSpec(tables=(EmbeddingTable(name="t", rows=1, dim=8),), dense_features=1, bottom_mlp=(16,), top_mlp=(1,))


def test_catalog_models_have_sources_and_samples_as_tokens():
    for name in ("dlrm-criteo", "dlrm-dcnv2", "dlrm-synthetic-100b"):
        m = get_model(name)
        assert m.family == "dlrm" and m.source and m.seq_len == 1
    assert len(get_model("dlrm-criteo").structure.tables) == 26
    assert get_model("dlrm-criteo").structure.interaction_width == 479      # MLPerf reference ln_top[0]


def test_a_dlrm_from_a_model_file(tmp_path):
    from autoplan.families.catalog import load_model

    path = tmp_path / "mine.toml"
    path.write_text('[model]\nsource = "test"\n[model.dlrm]\ndense_features = 13\nbottom_mlp = [64, 32]\n'
                    'top_mlp = [64, 1]\n[[model.dlrm.tables]]\nrows = 1000\ndim = 32\npooling = 4\n'
                    '[[model.dlrm.tables]]\nname = "c"\nrows = 10\ndim = 32\nsharding = "data_parallel"\n')
    m = load_model(path)
    assert m.family == "dlrm" and [t.name for t in m.structure.tables] == ["table_0", "c"]
    assert evaluate(m, H100, _plan()).feasible
    path.write_text('[model]\n[model.dlrm]\ndense_features = 13\nbottom_mlp = [32]\ntop_mlp = [1]\n'
                    '[[model.dlrm.tables]]\nrows = 10\n')
    with pytest.raises(SpecError, match="needs rows and dim"):
        load_model(path)


@settings(max_examples=40, deadline=None)
@given(kinds=st.lists(st.sampled_from(SHARDINGS), min_size=1, max_size=6),
       rows=st.lists(st.integers(10, 10**7), min_size=6, max_size=6), world=st.sampled_from([8, 16, 32]))
def test_stored_and_sent_bytes_are_conserved(kinds, rows, world):
    """Whatever the placement: every row is stored once (data-parallel: once per GPU, with a dense gradient) with
    its row state (one per column shard), and the pooled vectors of the table-, column- and table-row-wise tables
    are sent once, less the 1/n share that stays home."""
    tables = tuple(EmbeddingTable(name=f"t{i}", rows=r, dim=128, sharding=k)
                   for i, (k, r) in enumerate(zip(kinds, rows)))
    cluster, s = load_cluster("dgx-h100-80g", world), _plan(world, 256)
    loads = search(sh.context(_model(tables), cluster, s), float("inf")).loads
    replicas = [world if t.sharding == "data_parallel" else 1 for t in tables]
    states = [column_shards(t, world) if t.sharding == "column_wise" else 1 for t in tables]
    stored = sum(n * t.rows * (t.dim * 4 + 4 * c + (t.dim * 4 if n > 1 else 0))
                 for t, n, c in zip(tables, replicas, states))
    assert sum(loads.memory) == pytest.approx(stored, rel=1e-9)
    batch = world * 256
    sent = sum(batch * t.dim * POOLED_BYTES * (world - 1) / world for t in tables
               if t.sharding in ("table_wise", "column_wise", "table_row_wise"))
    assert sum(loads.send) == pytest.approx(sent, rel=1e-9)


def test_collective_policy_prices_the_dlrm_collectives():
    # issue 16: DP/EP/embedding collectives take the plan's policy; Themis is never slower than the baseline order
    from dataclasses import replace as _replace

    from autoplan.sim.simulate import evaluate
    from autoplan.families.catalog import get_model
    from autoplan.specs.cluster import load_cluster
    from autoplan.families.strategy import Strategy

    model, cluster = get_model("dlrm-criteo"), load_cluster("dgx-h100-80g", 64)
    s = Strategy(dp=64, micro_batch=1024, global_batch=65536)
    steps = {p: evaluate(model, cluster, _replace(s, collective_policy=p)) for p in ("nccl", "baseline", "themis")}
    assert all(e.feasible for e in steps.values())
    assert steps["themis"].metrics.step_time <= steps["baseline"].metrics.step_time * (1 + 1e-9)
