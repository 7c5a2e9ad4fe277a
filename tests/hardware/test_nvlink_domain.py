"""Multi-node NVLink domains (GB200 NVL72) and explicit network dimensions in the cost model."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from autoplan.hardware import network, policy
from autoplan.families.transformer import step as plan
from autoplan.hardware.dims import dims_of, dims_of_shape, explicit_dims
from autoplan.hardware.themis import collective
from autoplan.hardware.topology import build_graph, describe_group, group_links
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster
from autoplan.specs.cluster import NetworkDimension

NVL72 = load_cluster("gb200-nvl72", 1152)
B200 = load_cluster("dgx-b200", 1152)  # same GPU and NVLink 5 rates, NVLink domain of one 8-GPU node


@pytest.mark.parametrize("tp", [8, 9, 12, 16, 18, 24, 32, 36, 64, 72])
def test_tp_up_to_72_stays_in_the_nvlink_domain_across_trays(tp):
    g = network.group_shape(NVL72.domain_gpus, tp, 1)
    assert (g.per_node, g.nodes) == (tp, 1)
    # priced as if the 72 GPUs were one node: the trays' boundaries do not matter to NVLink
    one_node = replace(NVL72, gpus_per_node=72, nvlink_domain_gpus=0, nodes=16)
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        assert network.COLLECTIVES[op](NVL72, g, 64e6) == network.COLLECTIVES[op](one_node, g, 64e6)


@pytest.mark.parametrize("tp", [16, 32, 64])
def test_tp_beyond_a_node_is_faster_in_an_nvl72_domain_than_over_infiniband(tp):
    shape = {c.name: network.group_shape(c.domain_gpus, tp, 1) for c in (NVL72, B200)}
    assert shape["dgx-b200"].nodes > 1
    # bandwidth-bound sizes: a 64-rank NVLink ring's 126 steps of latency are priced as NCCL's ring (network.py)
    assert network.all_reduce(NVL72, shape["gb200-nvl72"], 512e6) < network.all_reduce(B200, shape["dgx-b200"], 512e6)


def test_graph_has_one_nvswitch_fabric_per_rack_and_placement_agrees():
    cluster = load_cluster("gb200-nvl72", 144)
    graph = build_graph(cluster)
    assert graph.has_edge(("gpu", 0), ("nvswitch", 0)) and graph.has_edge(("gpu", 71), ("nvswitch", 0))
    assert graph.has_edge(("gpu", 72), ("nvswitch", 1))
    ring = group_links(graph, list(range(72)))
    assert {graph.edges[tuple(link)]["tier"] for link in ring} == {"nvlink"}
    s = Strategy(tp=72, dp=2)
    tp, dp = describe_group(cluster, s, "tp"), describe_group(cluster, s, "dp")
    assert (tp.gpus_per_node, tp.nodes, tp.tier) == (72, 1, "nvlink")
    assert (dp.gpus_per_node, dp.nodes) == (1, 2) and dp.tier != "nvlink"
    for kind in ("tp", "dp"):
        fast = network.shape_of(cluster, s, kind)
        graph_view = describe_group(cluster, s, kind)
        assert (fast.per_node, fast.nodes) == (graph_view.gpus_per_node, graph_view.nodes)


@pytest.mark.parametrize("stride, size", [(1, 8), (1, 72), (1, 144), (4, 18), (4, 288), (8, 144), (72, 16),
                                          (2, 576), (36, 32)])
def test_explicit_dimensions_of_a_group_multiply_to_its_size(stride, size):
    dims = explicit_dims(NVL72, stride, size)
    assert math.prod(d.size for d in dims) == size
    inside = [d for d in dims if d.name == "nvlink"]
    assert (inside[0].size if inside else 1) == min(size, max(1, 72 // stride))


@given(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=4), st.integers(0, 6), st.integers(1, 8))
def test_power_of_two_dimensions_tile_every_aligned_group(sizes, log_stride, log_size):
    dims = tuple(NetworkDimension(name=f"d{i}", size=n, topology="ring", bandwidth=1e11, latency=1e-6)
                 for i, n in enumerate(sizes)) + (NetworkDimension(name="rest", size=0, topology="switch",
                                                                     bandwidth=5e10, latency=5e-6),)
    cluster = replace(NVL72, dimensions=dims, nvlink_domain_gpus=0, gpus_per_node=4, nodes=2**14 // 4)
    stride, size = 2**log_stride, 2**log_size
    assert math.prod(d.size for d in explicit_dims(cluster, stride, size)) == size


def test_dims_of_uses_the_explicit_dimensions_and_refuses_groups_that_do_not_tile():
    assert [(d.name, d.size) for d in dims_of(NVL72, 1152)] == [("nvlink", 72), ("infiniband", 16)]
    assert [d.size for d in dims_of(NVL72, 36)] == [36]
    with pytest.raises(Exception, match="does not tile gb200-nvl72's dimensions 72 x rest"):
        dims_of(NVL72, 1024)


@given(st.sampled_from([2, 4, 8, 16]), st.sampled_from([2, 4, 8, 16]),
       st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]), st.floats(1e6, 4e9))
def test_themis_never_slower_than_baseline_on_nvl72_groups(stride, racks, op, nbytes):
    size = 72 // stride * racks
    g = network.group_shape(NVL72.domain_gpus, size, stride)
    times = {p: policy.COLLECTIVES[op](NVL72, g, nbytes, p) for p in ("baseline", "themis")}
    assert times["themis"] <= times["baseline"] * (1 + 1e-12)
    assert policy.COLLECTIVES[op](NVL72, g, nbytes, "nccl") == network.COLLECTIVES[op](NVL72, g, nbytes)


def test_bytes_per_dimension_on_nvl72_baseline_closed_form():
    dims = dims_of_shape(NVL72, network.group_shape(72, 1152, 1), 1e9)
    base = collective(dims, "reduce_scatter", 1e9, policy="baseline")
    # hierarchical reduce-scatter: (n1-1)/n1·S on the NVLink domain, then (n2-1)/n2·S/n1 across racks
    assert base.sent == pytest.approx((1e9 * 71 / 72, 1e9 / 72 * 15 / 16))
    ar = collective(dims, "all_reduce", 1e9, policy="themis")
    assert sum(ar.sent) >= 2 * sum(base.sent) * (1 - 1e-9)  # any order sends at least the baseline's total


def test_tp_collectives_take_the_policy_only_when_the_group_spans_nodes():
    model = load_cluster("dgx-h100-80g", 64)
    gpt = get_model("gpt-1.7b")
    inside, across = Strategy(tp=8, dp=8, global_batch=64), Strategy(tp=16, dp=4, global_batch=64)
    for s, changes in ((inside, False), (across, True)):
        costs = {p: plan.step_costs(gpt, model, replace(s, collective_policy=p)).passes
                 for p in ("nccl", "baseline", "themis")}
        assert (costs["nccl"] != costs["baseline"]) is changes
        tp_time = {p: sum(sec for c in costs[p].values() for kind, sec in c.parts if kind == "tp") for p in costs}
        assert tp_time["themis"] <= tp_time["baseline"] * (1 + 1e-12)
