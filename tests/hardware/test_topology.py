"""Cluster graph, Megatron rank placement, and the closed-form group placement against graph-routed link load."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.hardware import topology
from autoplan.hardware.topology import (_all_flows, all_groups, build_graph, class_flows, coords_of, describe_group,
                                        group_links, group_ranks, link_load, link_sharing, link_sharing_on_graph,
                                        rank_of)
from autoplan.errors import SpecError
from autoplan.families.strategy import Strategy
from autoplan.specs import load_cluster

A100 = "dgx-a100-80g"


def _cluster(gpus: int, gpus_per_node: int = 8, leaf_gpus: int | None = None, spine: bool = True):
    """The A100 cluster reshaped: node size, su size (leaf tier reach) and whether a spine tier exists."""
    base = load_cluster(A100)
    nvlink, leaf, top = base.tiers
    tiers = (nvlink, replace(leaf, gpus=leaf_gpus or leaf.gpus), top) if spine else (nvlink, replace(leaf, gpus=0))
    return replace(base, gpus_per_node=gpus_per_node, nodes=gpus // gpus_per_node, tiers=tiers)


def _nic_links(load: dict) -> dict:
    return {link: n for link, n in load.items() if any(node[0] == "nic" for node in link)}


def test_graph_of_one_node_is_gpus_around_an_nvswitch():
    graph = build_graph(load_cluster(A100, 8))
    assert graph.number_of_nodes() == 9 and graph.number_of_edges() == 8
    assert graph.graph["cluster"] == A100
    assert all(data["tier"] == "nvlink" and data["bandwidth"] == 300e9 for *_, data in graph.edges(data=True))


def test_graph_of_four_nodes_has_a_nic_per_gpu_and_a_leaf_per_rail():
    graph = build_graph(load_cluster(A100, 32))
    # 32 GPUs + 4 NVSwitch fabrics + 32 NICs + 8 rail leaves; 4 nodes fit one su, so no spine
    assert graph.number_of_nodes() == 32 + 4 + 32 + 8
    assert graph.number_of_edges() == 32 * 3
    assert graph.edges[("gpu", 11), ("nic", 11)] == {"bandwidth": 25e9, "tier": "ib-leaf"}
    assert graph.has_edge(("nic", 11), ("leaf", 0, 3))


def test_graph_of_several_sus_has_non_blocking_spine_links():
    graph = build_graph(load_cluster(A100, 1024))  # 128 nodes in sus of 20: 6 full and one of 8
    assert graph.number_of_nodes() == 1024 * 2 + 128 + 7 * 8 + 8
    assert graph.number_of_edges() == 1024 * 3 + 7 * 8
    assert graph.edges[("leaf", 0, 5), ("spine", 5)] == {"bandwidth": 20 * 25e9, "tier": "ib-spine"}
    assert graph.edges[("leaf", 6, 5), ("spine", 5)]["bandwidth"] == 8 * 25e9


def test_graph_of_16384_gpus():
    graph = build_graph(load_cluster(A100, 16384))
    assert graph.number_of_edges() == 16384 * 3 + 103 * 8


def test_rank_order_puts_tp_consecutive_and_pp_farthest_apart():
    s = Strategy(tp=4, cp=2, dp=3, pp=2)
    for rank in range(s.gpus):
        assert rank_of(s, **coords_of(s, rank)) == rank
    assert rank_of(s, tp=1) == 1 and rank_of(s, cp=1) == 4 and rank_of(s, dp=1) == 8 and rank_of(s, pp=1) == 24
    assert group_ranks(s, "tp", {"dp": 1}) == [8, 9, 10, 11]
    assert group_ranks(s, "pp", {"tp": 3, "cp": 1, "dp": 2}) == [23, 47]
    for kind in ("tp", "cp", "dp", "pp"):
        groups = all_groups(s, kind)
        assert sorted(r for g in groups for r in g) == list(range(s.gpus))
        assert len(groups) == s.gpus // getattr(s, kind)
    with pytest.raises(SpecError):
        rank_of(s, tp=4)
    with pytest.raises(SpecError):
        all_groups(s, "ep")


def test_megatron_plan_on_1024_a100s():
    cluster, s = load_cluster(A100, 1024), Strategy(tp=8, pp=8, dp=16)
    tp = describe_group(cluster, s, "tp")
    assert (tp.size, tp.gpus_per_node, tp.nodes, tp.tier, tp.max_link_sharing) == (8, 8, 1, "nvlink", 1)
    dp = describe_group(cluster, s, "dp")
    assert (dp.size, dp.gpus_per_node, dp.nodes) == (16, 1, 16)
    assert dp.tier == "ib-spine"  # DP groups of stage 1 (nodes 16..31) straddle the first su boundary
    load = link_load(cluster, s, "dp")
    nics = _nic_links(load)
    assert max(nics.values()) == 1
    node0_nics = {node for link in nics for node in link if node[0] == "nic" and node[1] < 8}
    assert node0_nics == {("nic", i) for i in range(8)}  # the node's 8 DP groups each leave through their own NIC
    assert dp.max_link_sharing == max(load.values())


def test_tp4_dp_groups_have_two_gpus_per_node():
    cluster, s = load_cluster(A100, 1024), Strategy(tp=4, pp=8, dp=32)
    dp = describe_group(cluster, s, "dp")
    assert (dp.gpus_per_node, dp.nodes) == (2, 16)
    assert max(_nic_links(link_load(cluster, s, "dp")).values()) == 1


def test_a_group_inside_one_su_reaches_only_the_leaf_tier():
    cluster, s = load_cluster(A100, 64), Strategy(tp=8, dp=8)
    dp = describe_group(cluster, s, "dp")
    assert (dp.tier, dp.nodes, dp.max_link_sharing) == ("ib-leaf", 8, 1)
    assert describe_group(cluster, s, "pp").max_link_sharing == 0


@pytest.mark.parametrize("plan", [dict(tp=8, dp=4, pp=4), dict(tp=2, cp=2, dp=2, pp=8), dict(tp=1, dp=8, pp=16),
                                  dict(tp=4, cp=4, pp=8), dict(tp=2, dp=6, pp=4)])
def test_consecutive_pipeline_stages_sit_on_different_nodes(plan):
    s = Strategy(**plan)
    assert s.tp * s.cp * s.dp >= 8
    for ranks in all_groups(s, "pp"):
        nodes = [r // 8 for r in ranks]
        assert all(a != b for a, b in zip(nodes, nodes[1:]))


def test_a_ring_across_nodes_leaves_on_the_senders_rail():
    graph = build_graph(_cluster(64, leaf_gpus=16))  # 2 nodes per su
    links = group_links(graph, [3, 21])  # node 0 local 3 -> node 2 local 5, su 0 -> su 1
    assert frozenset({("leaf", 0, 3), ("spine", 3)}) in links  # outbound on rail 3
    assert frozenset({("gpu", 19), ("nvswitch", 2)}) in links  # lands on node 2's rail-3 GPU, then NVLink to 21
    assert frozenset({("leaf", 1, 5), ("spine", 5)}) in links  # return hop on rail 5
    assert group_links(graph, [7]) == set()


@settings(max_examples=150, deadline=None)
@given(factors=st.lists(st.sampled_from(["tp", "cp", "dp", "pp"]), min_size=5, max_size=6),
       gpus_per_node=st.sampled_from([4, 8]), leaf_gpus=st.sampled_from([8, 16, 24, 160]), spine=st.booleans(),
       kind=st.sampled_from(["tp", "cp", "dp", "pp"]))
def test_closed_form_agrees_with_graph_routed_link_load(factors, gpus_per_node, leaf_gpus, spine, kind):
    """Each drawn name doubles that degree: 5 or 6 factors of 2 make plans of 32 or 64 GPUs."""
    s = Strategy(**{k: 2 ** factors.count(k) for k in ("tp", "cp", "dp", "pp")})
    _assert_agrees(_cluster(s.gpus, gpus_per_node, leaf_gpus, spine), s, kind)


@pytest.mark.parametrize("plan", [dict(tp=3, dp=4, pp=4), dict(tp=6, dp=2, pp=4), dict(tp=12, cp=2, pp=2)])
def test_uneven_placements_agree_with_graph_routed_link_load(plan):
    s = Strategy(**plan)
    for kind in ("tp", "cp", "dp", "pp"):
        _assert_agrees(_cluster(s.gpus, 4, 8), s, kind)


def _assert_agrees(cluster, s, kind):
    graph, load = build_graph(cluster), link_load(cluster, s, kind)
    placement = describe_group(cluster, s, kind)
    assert placement.max_link_sharing == max(load.values(), default=0)
    g = cluster.gpus_per_node
    groups = all_groups(s, kind)
    assert placement.size == len(groups[0])
    assert placement.nodes == max(len({r // g for r in ranks}) for ranks in groups)
    assert placement.gpus_per_node == max(max(sum(r // g == n for r in ranks) for n in range(cluster.nodes))
                                          for ranks in groups)
    tiers = {graph.edges[tuple(link)]["tier"] for ranks in groups for link in group_links(graph, ranks)}
    outermost = max(tiers, key=[t.name for t in cluster.tiers].index, default=cluster.tiers[0].name)
    assert placement.tier == outermost


# ------------------------------------------------------------------------------ link sharing (contention)


def _classes(p: int) -> tuple:
    return (tuple(("pp", i, i + 1) for i in range(p - 1)) + tuple(("pp", i + 1, i) for i in range(p - 1))
            + tuple(("dp", i) for i in range(p)) + (("tied",),) * (p > 1))


@settings(max_examples=40, deadline=None)
@given(factors=st.lists(st.sampled_from(["tp", "cp", "dp", "pp"]), min_size=4, max_size=6),
       gpus_per_node=st.sampled_from([4, 8]), leaf_gpus=st.sampled_from([8, 16, 24, 160]), spine=st.booleans(),
       oversubscription=st.sampled_from([1.0, 2.0, 4.0]))
def test_fast_link_sharing_agrees_with_flows_routed_over_the_networkx_graph(factors, gpus_per_node, leaf_gpus, spine,
                                                                            oversubscription):
    s = Strategy(**{k: 2 ** factors.count(k) for k in ("tp", "cp", "dp", "pp")})
    cluster = _cluster(s.gpus, gpus_per_node, leaf_gpus, spine)
    if spine:
        cluster = replace(cluster, tiers=cluster.tiers[:2] + (replace(cluster.tiers[2], oversubscription=oversubscription),))
    classes = _classes(s.pp)
    assert link_sharing(cluster, s, classes) == link_sharing_on_graph(build_graph(cluster), cluster, s, classes)


@settings(max_examples=40, deadline=None)
@given(factors=st.lists(st.sampled_from(["tp", "cp", "dp", "pp"]), min_size=2, max_size=8),
       gpus_per_node=st.sampled_from([4, 8]))
def test_every_class_at_once_is_each_class_on_its_own(factors, gpus_per_node):
    s = Strategy(**{k: 2 ** factors.count(k) for k in ("tp", "cp", "dp", "pp")})
    cluster = _cluster(max(s.gpus, gpus_per_node), gpus_per_node)
    classes = _classes(s.pp)
    src, dst, rate, cls = _all_flows(cluster, s, classes)
    for k, flow in enumerate(classes):
        one = class_flows(cluster, s, flow)
        assert [x[cls == k].tolist() for x in (src, dst, rate)] == [x.tolist() for x in one]


def test_two_stages_sending_into_one_share_its_nics_and_the_dp_ring():
    # pp 3, TP 8 per node: stage 1's NICs take stage 0's forward sends, stage 2's backward sends and its DP ring
    s = Strategy(tp=8, dp=2, pp=3)
    rows = link_sharing(load_cluster(A100, s.gpus), s, (("pp", 0, 1), ("pp", 2, 1), ("dp", 1)))
    assert ((0, 1.0), (1, 1.0), (2, 1.0)) in rows               # every flow at the NIC's full rate


def test_an_oversubscribed_spine_overloads_the_classes_crossing_it_alone():
    # 4 nodes per su: stage 0 (4 nodes) sends to stage 1 (the next su) through its leaves' uplinks; at 4:1 they
    # carry a quarter of what the nodes send, 1:1 all of it
    s = Strategy(tp=8, dp=4, pp=2)
    base = _cluster(s.gpus, 8, 32)
    assert link_sharing(base, s, (("pp", 0, 1),)) == ()
    four = replace(base, tiers=base.tiers[:2] + (replace(base.tiers[2], oversubscription=4.0),))
    assert link_sharing(four, s, (("pp", 0, 1),)) == (((0, 4.0),),)
    assert build_graph(four).edges[("leaf", 0, 0), ("spine", 0)]["bandwidth"] == 4 * 25e9 / 4


def test_hierarchical_rings_cross_domains_on_every_rail():
    # DP 16 of TP 1 over two nodes: NCCL's 8 channels each leave on their own NIC (network.py _ring)
    s = Strategy(tp=1, dp=16)
    src, dst, rate = class_flows(load_cluster(A100, 16), s, ("dp", 0))
    crossing = [(a, b) for a, b in zip(src.tolist(), dst.tolist()) if a // 8 != b // 8]
    assert sorted(a % 8 for a, _ in crossing) == sorted(list(range(8)) * 2)
    assert all(a % 8 == b % 8 for a, b in crossing)


def test_what_ifs_that_change_only_the_gpus_share_link_sharing():
    """Link sharing is cached per network (name, GPUs, NVLink domains, tiers): a cluster whose GPUs alone changed
    gets the same rows, and one whose network changed gets its own, as if computed afresh."""
    from autoplan.hardware import topology

    base = load_cluster("dgx-h100-80g", 64)
    s = Strategy(tp=2, pp=4, dp=8, global_batch=64)
    classes = (("pp", 0, 1), ("dp", 1))
    rows = link_sharing(base, s, classes)
    assert rows
    for change in ({"compute": 1.1}, {"memory": 1.1}, {"hbm_bandwidth": 0.9}, {"network": 0.5},
                   {"oversubscription": 4.0}, {"latency": 2.0}):
        other = base.scaled(**change)
        fresh = topology._sharing.__wrapped__(other, topology._Degrees(s.tp, s.cp, s.dp, s.pp), classes)
        assert link_sharing(other, s, classes) == fresh
        if set(change) <= {"compute", "memory", "hbm_bandwidth"}:
            assert link_sharing(other, s, classes) is rows


@pytest.mark.skipif(topology._tally is None, reason="autoplan.hardware._links was not built (no C compiler when installed)")
@settings(max_examples=60, deadline=None)
@given(factors=st.lists(st.sampled_from(["tp", "cp", "dp", "pp"]), min_size=4, max_size=8),
       gpus_per_node=st.sampled_from([4, 8]), leaf_gpus=st.sampled_from([8, 16, 24, 160]), spine=st.booleans(),
       oversubscription=st.sampled_from([1.0, 2.0, 4.0]))
def test_the_c_tally_of_link_sharing_is_numpys(factors, gpus_per_node, leaf_gpus, spine, oversubscription):
    # hardware/_links.c against the numpy tally of topology._sharing: the same rows, bit for bit
    s = Strategy(**{k: 2 ** factors.count(k) for k in ("tp", "cp", "dp", "pp")})
    cluster = _cluster(s.gpus, gpus_per_node, leaf_gpus, spine)
    if spine:
        cluster = replace(cluster, tiers=cluster.tiers[:2] + (replace(cluster.tiers[2], oversubscription=oversubscription),))
    args = (cluster, topology._Degrees(s.tp, s.cp, s.dp, s.pp), _classes(s.pp))
    try:
        got = topology._sharing.__wrapped__(*args)
        topology.USE_COMPILED = False
        want = topology._sharing.__wrapped__(*args)
    finally:
        topology.USE_COMPILED = True
    assert repr(got) == repr(want)
