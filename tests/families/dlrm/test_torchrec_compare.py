"""autoplan plans beside TorchRec's planner: planner inputs from a cluster and tables, plans with explicit ranks
scored by autoplan's DLRM model, and (torchrec installed only) TorchRec's planner run on those inputs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.dlrm import sharding as sh
from autoplan.families.dlrm.embedding import CW_WIDTH
from autoplan.families.dlrm.family import embedding_room, sharding_plan
from autoplan.families.dlrm import torchrec_compare as tc
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.dlrm.spec import SHARDINGS, EmbeddingTable
from autoplan.families.strategy import Strategy

ROOT = Path(__file__).resolve().parents[3]
HAS_TORCHREC = importlib.util.find_spec("torchrec") is not None
TABLES = (EmbeddingTable(name="big", rows=20_000_000, dim=128, pooling=3.0, skew=1.0),
          EmbeddingTable(name="mid", rows=300_000, dim=128, pooling=20.0),
          EmbeddingTable(name="small", rows=50, dim=128),
          EmbeddingTable(name="pinned", rows=1_000_000, dim=128, sharding="row_wise"))


def _case(gpus: int = 16):
    base = get_model("dlrm-criteo")
    model = replace(base, structure=replace(base.structure, tables=TABLES))
    return model, load_cluster("dgx-h100-80g", gpus), Strategy(dp=gpus, micro_batch=512, global_batch=gpus * 512)


def _as_ranks(model, plans) -> dict[str, tuple[str, list[int]]]:
    return {t.name: (p.kind, list(p.gpus)) for t, p in zip(model.structure.tables, plans)}


@pytest.mark.parametrize("gpus", [8, 16])
def test_score_of_autoplans_own_plan_is_its_step(gpus):
    """Scoring the planner's own plan at its own ranks gives the step the planner computed for it."""
    model, cluster, s = _case(gpus)
    plan = sharding_plan(model, cluster, s)
    got = tc.score(model, cluster, s, tc.table_plans(model, gpus, _as_ranks(model, plan.tables)))
    assert got.step_s == pytest.approx(plan.times.total, rel=1e-12)
    assert got.embedding_bytes == pytest.approx(max(plan.loads.memory))
    assert got.room == embedding_room(model, cluster, s) and got.fits


def test_moving_a_table_wise_table_onto_a_busy_gpu_never_shortens_the_step():
    """Two table-wise tables on one GPU look up in series: the step is at least that of one per GPU."""
    model, cluster, s = _case(8)
    apart = tuple(sh.TablePlan("table_wise", (i,)) for i in range(4))
    together = (sh.TablePlan("table_wise", (0,)), sh.TablePlan("table_wise", (0,)), *apart[2:])
    assert tc.score(model, cluster, s, together).step_s >= tc.score(model, cluster, s, apart).step_s


def test_table_plans_name_the_table_that_is_wrong():
    model, _, _ = _case(8)
    good = {t.name: ("table_wise", [0]) for t in TABLES}
    with pytest.raises(ValueError, match="'small'"):
        tc.table_plans(model, 8, {k: v for k, v in good.items() if k != "small"})
    with pytest.raises(ValueError, match="'mid'.*grid_shard"):
        tc.table_plans(model, 8, {**good, "mid": ("grid_shard", [0])})
    with pytest.raises(ValueError, match="'big'.*0..7"):
        tc.table_plans(model, 8, {**good, "big": ("table_wise", [8])})


@pytest.mark.parametrize("name,gpus", [("dgx-h100-80g", 8), ("dgx-h100-80g", 64), ("dgx-a100-80g", 16)])
def test_topology_rates_are_the_cluster_files_in_bytes_per_ms(name, gpus):
    cluster = load_cluster(name, gpus)
    kw = tc.topology_kwargs(cluster, gpus, 70e9)
    nvlink, ib = cluster.tiers[0], cluster.tiers[1]
    assert kw["world_size"] == gpus and kw["local_world_size"] == min(gpus, cluster.gpus_per_node)
    assert kw["intra_host_bw"] == pytest.approx(nvlink.bandwidth * nvlink.efficiency / 1000)
    assert kw["inter_host_bw"] == pytest.approx(ib.bandwidth * ib.efficiency / 1000)
    assert kw["hbm_mem_bw"] == pytest.approx(cluster.gpu.hbm_bandwidth * cluster.gpu.memory_efficiency / 1000)
    assert kw["hbm_cap"] == 70_000_000_000 and kw["compute_device"] == "cuda"


def test_constraints_keep_a_pin_and_autoplans_column_width():
    free, pinned = tc.constraint_kwargs(TABLES[1]), tc.constraint_kwargs(TABLES[3])
    assert free["sharding_types"] == list(SHARDINGS) and pinned["sharding_types"] == ["row_wise"]
    assert free["pooling_factors"] == [20.0] and free["min_partition"] == CW_WIDTH
    assert tc.constraint_kwargs(TABLES[1], ("data_parallel",))["sharding_types"] == ["data_parallel"]


@settings(max_examples=40, deadline=None)
@given(kinds=st.lists(st.sampled_from(SHARDINGS), min_size=1, max_size=12), flip=st.integers(0, 11))
def test_agreement_counts_the_tables_of_equal_kind(kinds, flip):
    a = tuple(sh.TablePlan(k, (0,)) for k in kinds)
    assert tc.agreement(a, a) == 1.0
    i = flip % len(kinds)
    other = "table_wise" if kinds[i] != "table_wise" else "row_wise"
    b = tuple(replace(p, kind=other) if j == i else replace(p, gpus=(1,)) for j, p in enumerate(a))
    assert tc.agreement(a, b) == pytest.approx(1 - 1 / len(kinds))


def test_shard_ranks_repeat_the_plans_gpus():
    assert tc.shard_ranks(sh.TablePlan("column_wise", (3, 5, 6, 7)), 4) == [3, 5, 6, 7]
    assert tc.shard_ranks(sh.TablePlan("column_wise", (1, 2)), 4) == [1, 2, 1, 2]
    assert tc.kind_counts((sh.TablePlan("row_wise", (0,)), sh.TablePlan("table_wise", (0,)),
                           sh.TablePlan("table_wise", (1,)))) == "TW 2 RW 1"


@pytest.mark.slow
@pytest.mark.skipif(HAS_TORCHREC, reason="torchrec is installed: the benchmark runs instead of skipping")
def test_benchmark_skips_cleanly_without_torchrec():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_torchrec.py")], capture_output=True,
                       text=True, cwd=ROOT, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert r.returncode == 0, r.stderr
    assert "skipped, torchrec is not importable" in r.stdout


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCHREC, reason="needs the optional torchrec extra (separate environment, README)")
def test_torchrecs_planner_takes_the_converted_inputs_and_its_plan_scores():
    """TorchRec's planner, given these tables' constraints and this cluster's topology, returns a plan of known
    kinds that autoplan scores, within the memory it was given, honouring the pinned table."""
    import torch
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
    from torchrec.distributed.planner.storage_reservations import FixedPercentageStorageReservation
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    model, cluster, s = _case(16)
    room = embedding_room(model, cluster, s)
    ebc = EmbeddingBagCollection(tables=[EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.rows,
                                                            feature_names=[t.name]) for t in TABLES],
                                 device=torch.device("meta"))
    planner = EmbeddingShardingPlanner(
        topology=Topology(**tc.topology_kwargs(cluster, 16, room)), batch_size=s.micro_batch,
        constraints={t.name: ParameterConstraints(**tc.constraint_kwargs(t)) for t in TABLES},
        storage_reservation=FixedPercentageStorageReservation(0.0), debug=False)
    planner.plan(ebc, [EmbeddingBagCollectionSharder()])
    chosen = {o.name: (o.sharding_type, [x.rank for x in o.shards]) for o in planner.get_selected_options()}
    plans = tc.table_plans(model, 16, chosen)
    assert plans[3].kind == "row_wise"
    got = tc.score(model, cluster, s, plans)
    assert got.fits and 0 < got.step_s < float("inf")
