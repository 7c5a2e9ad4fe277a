"""Ray: batches of plans on a local multi-node cluster give the serial leaderboard (slow: starts Ray)."""

import os

import pytest

from autoplan.search.exhaustive import search
from autoplan.search.executors import RayExecutor, SerialExecutor
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def test_multi_node_ray_matches_serial(ray_cluster):
    model, spec = get_model("gpt-7.5b"), load_cluster("dgx-a100-80g", 32)
    plans, _ = enumerate_plans(model, 32, load_space(fixed={"cp": 1}), 128)
    serial = search(model, spec, plans, top_k=5, executor=SerialExecutor())
    executor = RayExecutor(address=ray_cluster.address)
    try:
        assert executor.workers == 2
        distributed = search(model, spec, plans, top_k=5, executor=executor)
    finally:
        executor.close()
    assert [e.strategy for e in distributed.leaderboard] == [e.strategy for e in serial.leaderboard]
    assert [e.metrics.step_time for e in distributed.leaderboard] == [e.metrics.step_time for e in serial.leaderboard]


def test_unreachable_address_fails_fast():
    from autoplan.errors import SpecError

    with pytest.raises(SpecError, match="cannot reach"):
        RayExecutor(address="127.0.0.1:1")
