"""Megatron-Core's combined 1F1B (``ep_overlap``) on the host: each layer's schedule nodes add their host time to the
race the dispatcher's sync starts (``moe_layer.COMBINED_1F1B_NODES`` × ``COMBINED_1F1B_NODE_LAUNCHES`` launches),
and a full-iteration CUDA graph, which issues nothing from the host, pays none of it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import graphs
from autoplan.families.transformer import moe_layer as moe
from autoplan.specs.cluster import load_cluster

QWEN = get_model("qwen3-30b")
B200 = load_cluster("dgx-b200", 8)
PLAN = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, zero=1, ep=8)


def _waits(cluster, s: Strategy) -> tuple[float, float]:
    lay = moe.moe_layer(QWEN, cluster, moe.layer_key(s)).compute
    return (sum(op.seconds for op in lay.forward if op.name == "host.wait"),
            sum(op.seconds for op in lay.backward if op.name == "host.wait.bwd"))


def test_a_host_bound_layer_waits_the_nodes_host_time_longer():
    # a host far slower than the GPU binds from the sync on: every launch-equivalent the nodes add is waited for
    slow = replace(B200, gpu=replace(B200.gpu, host_launch=5e-3))
    plain, paired = _waits(slow, PLAN), _waits(slow, replace(PLAN, ep_overlap=True))
    nodes_f, nodes_b = moe.COMBINED_1F1B_NODES
    per_node = moe.COMBINED_1F1B_NODE_LAUNCHES * slow.gpu.host_launch
    assert paired[0] - plain[0] == pytest.approx(nodes_f * per_node, rel=1e-9)
    assert paired[1] - plain[1] == pytest.approx(nodes_b * per_node, rel=1e-9)


@pytest.mark.parametrize("host_launch", [1e-9, 1e-6, 2e-5, 6e-5, 1e-4, 5e-3])
def test_the_nodes_never_cost_more_than_their_host_time(host_launch):
    # whatever the host's speed, the GPU waits at least as long as without the nodes and at most their host time
    # longer (a host with slack behind the GPU hides part or all of it)
    cluster = replace(B200, gpu=replace(B200.gpu, host_launch=host_launch))
    plain, paired = _waits(cluster, PLAN), _waits(cluster, replace(PLAN, ep_overlap=True))
    per_node = moe.COMBINED_1F1B_NODE_LAUNCHES * host_launch
    for before, after, nodes in zip(plain, paired, moe.COMBINED_1F1B_NODES):
        assert before - 1e-15 <= after <= before + nodes * per_node + 1e-15


def test_a_full_iteration_graph_pays_no_node_time():
    s = replace(PLAN, ep_overlap=True, cuda_graphs=True)
    assert _waits(graphs.graphed(B200, s), s) == (0.0, 0.0)


def test_the_overlap_and_its_absence_are_cached_apart():
    assert moe.layer_key(PLAN) != moe.layer_key(replace(PLAN, ep_overlap=True))
