"""Where a plan's GPUs sit on the network: the cluster graph, Megatron rank placement, per-link ring load, and the
links the simulator's transfer classes share (``link_sharing``, for ``sim/contention.py``).

The graph is a rail-optimised fat tree (DGX SuperPOD reference architecture): GPU ``i`` of an NVLink domain (one node,
or a multi-node NVLink domain such as an NVL72 rack of 18 trays) talks through the domain's NVSwitch fabric and through
its own NIC on rail ``i % domain_gpus``; each scalable unit (su) has one leaf
switch per rail and the leaves of a rail meet at that rail's spine. Links are undirected graph edges; ``bandwidth`` is
per direction.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from autoplan.errors import SpecError
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.plan import RANK_ORDER, Plan

try:
    from autoplan.hardware import _links as _tally
except ImportError:                                     # installed without a C compiler: numpy in _sharing
    _tally = None

USE_COMPILED = True
"""Tally link sharing with the C extension where it was built (tests switch it off to hold numpy to the same
rows)."""

if TYPE_CHECKING:
    import networkx as nx

Node = tuple
"""A graph node: ``("gpu", rank)``, ``("nvswitch", node)``, ``("nic", rank)``, ``("leaf", su, rail)``,
``("spine", rail)``."""
Link = frozenset
"""An undirected link: the frozenset of its two graph nodes."""


@dataclass(frozen=True, kw_only=True)
class GroupPlacement:
    """How the groups of one kind (tp, cp, dp or pp) lie on the cluster; every group of the kind together."""

    size: int
    """GPUs in one group."""
    gpus_per_node: int
    """Members of one group in one NVLink domain (one node unless the cluster sets nvlink_domain_gpus; the most in
    any domain when groups are placed unevenly)."""
    nodes: int
    """NVLink domains (nodes) one group spans (the most of any group)."""
    tier: str
    """Name of the outermost network tier any group's ring crosses (the innermost tier for groups of one GPU)."""
    max_link_sharing: int
    """Most groups whose rings cross one link when all groups run at once (0 if no group uses a link).
    Leaf–spine links carry the bandwidth of every node of their su, so a count there above 1 is not contention
    until it exceeds the su's node count."""


def _nodes_per_su(cluster: ClusterSpec) -> int:
    """Nodes under one leaf per rail: the leaf tier's reach if a spine tier lies beyond it, else the whole cluster."""
    if len(cluster.tiers) >= 3 and cluster.tiers[1].gpus:
        return max(1, cluster.tiers[1].gpus // cluster.domain_gpus)
    return max(1, cluster.domains)


def _check_network(cluster: ClusterSpec) -> None:
    if cluster.domains > 1 and len(cluster.tiers) < 2:
        raise SpecError(f"cluster {cluster.name!r} has {cluster.domains} NVLink domains but no network tier "
                        "between them")


def build_graph(cluster: ClusterSpec) -> nx.Graph:
    """The cluster's network: GPUs, NVSwitch fabrics (one per NVLink domain), NICs, rail leaves and spines, with
    ``bandwidth`` and ``tier`` (a leaf's uplink carries its nodes' bandwidth over the spine's oversubscription)."""
    import networkx as nx       # 0.1 s to import: only the graph's users (describe_group, checks) pay it

    _check_network(cluster)
    g, nodes, tiers = cluster.domain_gpus, cluster.domains, cluster.tiers
    per_su = _nodes_per_su(cluster)
    graph = nx.Graph(cluster=cluster.name, gpus_per_node=g, nodes_per_su=per_su)
    gpus = range(cluster.gpus)
    graph.add_nodes_from(("gpu", i) for i in gpus)
    graph.add_edges_from(((("gpu", i), ("nvswitch", i // g)) for i in gpus),
                         bandwidth=tiers[0].bandwidth, tier=tiers[0].name)
    if nodes == 1:
        return graph
    leaf = tiers[1]
    graph.add_edges_from(((("gpu", i), ("nic", i)) for i in gpus), bandwidth=leaf.bandwidth, tier=leaf.name)
    graph.add_edges_from(((("nic", i), ("leaf", i // g // per_su, i % g)) for i in gpus),
                         bandwidth=leaf.bandwidth, tier=leaf.name)
    sus = -(-nodes // per_su)
    if sus > 1:
        spine = tiers[-1]
        for su in range(sus):
            members = min(per_su, nodes - su * per_su)
            graph.add_edges_from(((("leaf", su, rail), ("spine", rail)) for rail in range(g)),
                                 bandwidth=spine.bandwidth * members / spine.oversubscription, tier=spine.name)
    return graph


def _degree_and_stride(s: Plan, kind: str) -> tuple[int, int]:
    """The group size of ``kind`` and the rank distance between its consecutive members."""
    stride = 1
    for k in RANK_ORDER:
        if k == kind:
            return getattr(s, k), stride
        stride *= getattr(s, k)
    raise SpecError(f"group kind {kind!r} is not one of {', '.join(RANK_ORDER)}")


def rank_of(s: Plan, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
    """The global rank of the GPU with these coordinates, in Megatron's order (tp fastest, pp slowest)."""
    rank, scale = 0, 1
    for kind, coord in zip(RANK_ORDER, (tp, cp, dp, pp)):
        degree = getattr(s, kind)
        if not 0 <= coord < degree:
            raise SpecError(f"{kind} coordinate {coord} is outside 0..{degree - 1}")
        rank += coord * scale
        scale *= degree
    return rank


def coords_of(s: Plan, rank: int) -> dict[str, int]:
    """The tp, cp, dp and pp coordinates of global ``rank``."""
    if not 0 <= rank < s.gpus:
        raise SpecError(f"rank {rank} is outside the plan's {s.gpus} GPUs")
    coords = {}
    for kind in RANK_ORDER:
        rank, coords[kind] = divmod(rank, getattr(s, kind))
    return coords


def group_ranks(s: Plan, kind: str, index: dict[str, int]) -> list[int]:
    """Ranks of the ``kind`` group holding the GPU whose other coordinates are ``index`` (missing ones are 0)."""
    size, stride = _degree_and_stride(s, kind)
    unknown = set(index) - set(RANK_ORDER)
    if unknown:
        raise SpecError(f"unknown coordinates {sorted(unknown)}; use {', '.join(RANK_ORDER)}")
    base = rank_of(s, **{**index, kind: 0})
    return [base + j * stride for j in range(size)]


def _groups(gpus: int, size: int, stride: int) -> list[list[int]]:
    return [[r + j * stride for j in range(size)] for r in range(gpus) if (r // stride) % size == 0]


def all_groups(s: Plan, kind: str) -> list[list[int]]:
    """Every group of ``kind``, each in ring order, ordered by first rank."""
    size, stride = _degree_and_stride(s, kind)
    return _groups(s.gpus, size, stride)


def _route(a: int, b: int, g: int, per_su: int) -> list[Node]:
    """Nodes on the path GPU ``a`` → GPU ``b``: NVSwitch inside a node, else the rail of ``a``'s local index."""
    na, nb = a // g, b // g
    if na == nb:
        return [("gpu", a), ("nvswitch", na), ("gpu", b)]
    rail = a % g
    peer = nb * g + rail  # the GPU on the sender's rail at the far node; NCCL forwards to b over NVLink from there
    path = [("gpu", a), ("nic", a), ("leaf", na // per_su, rail)]
    if na // per_su != nb // per_su:
        path += [("spine", rail), ("leaf", nb // per_su, rail)]
    path += [("nic", peer), ("gpu", peer)]
    if peer != b:
        path += [("nvswitch", nb), ("gpu", b)]
    return path


def _ring_links(ranks: list[int], g: int, per_su: int) -> set[Link]:
    links = set()
    for a, b in zip(ranks, ranks[1:] + ranks[:1]):
        if a != b:
            path = _route(a, b, g, per_su)
            links.update(frozenset(edge) for edge in zip(path, path[1:]))
    return links


def group_links(graph: nx.Graph, ranks: list[int]) -> set[Link]:
    """Links crossed by a ring over ``ranks`` in the given order (including the hop from last back to first)."""
    for r in ranks:
        if ("gpu", r) not in graph:
            raise SpecError(f"rank {r} is not a GPU of cluster {graph.graph.get('cluster')!r}")
    links = _ring_links(list(ranks), graph.graph["gpus_per_node"], graph.graph["nodes_per_su"])
    for link in links:
        if not graph.has_edge(*link):
            raise SpecError(f"graph of {graph.graph.get('cluster')!r} has no link {sorted(link)}; use build_graph")
    return links


def _check_fits(cluster: ClusterSpec, s: Plan) -> None:
    if s.gpus > cluster.gpus:
        raise SpecError(f"the plan needs {s.gpus} GPUs but cluster {cluster.name!r} has {cluster.gpus}")


def link_load(cluster: ClusterSpec, s: Plan, kind: str) -> dict[Link, int]:
    """For every link, how many groups of ``kind`` cross it when all of them run a ring collective at once."""
    _check_fits(cluster, s)
    graph = build_graph(cluster)
    load: Counter[Link] = Counter()
    for ranks in all_groups(s, kind):
        load.update(group_links(graph, ranks))
    return dict(load)


def describe_group(cluster: ClusterSpec, s: Plan, kind: str) -> GroupPlacement:
    """Size, spread, outermost tier and worst link sharing of the ``kind`` groups, without building the graph."""
    _check_fits(cluster, s)
    size, stride = _degree_and_stride(s, kind)
    per_node, nodes, reach, sharing = _placement(cluster.domain_gpus, _nodes_per_su(cluster), s.gpus, size, stride)
    if reach:
        _check_network(cluster)
    tiers = cluster.tiers
    return GroupPlacement(size=size, gpus_per_node=per_node, nodes=nodes,
                          tier=(tiers[0], tiers[min(1, len(tiers) - 1)], tiers[-1])[reach].name,
                          max_link_sharing=sharing)


@functools.lru_cache(maxsize=4096)
def _placement(g: int, per_su: int, gpus: int, size: int, stride: int) -> tuple[int, int, int, int]:
    """(members per node, nodes per group, reach 0 node / 1 leaf / 2 spine, max link sharing)."""
    span = size * stride
    if size == 1:
        return 1, 1, 0, 0
    if gpus <= g or (span <= g and g % span == 0):
        return size, 1, 0, 1  # groups are disjoint and each uses only its own GPUs' NVSwitch ports
    if stride % g == 0:
        per_node, nodes, node_stride = 1, size, stride // g
    elif stride < g and g % stride == 0 and span % g == 0:
        per_node, nodes, node_stride = g // stride, span // g, 1
    else:
        return _enumerate(g, per_su, gpus, size, stride)
    # Every inter-node hop of a group leaves on one rail and lands on a member GPU, so GPU-side links carry one
    # group; only leaf–spine links are shared. A rail's groups tile the used nodes in blocks of `block` nodes.
    used, block = gpus // g, node_stride * nodes
    if node_stride >= per_su:
        return per_node, nodes, 2, min(per_su, used)  # each member in its own su: a leaf uplink serves every node
    if (used - 1) // per_su == 0:
        return per_node, nodes, 1, 1
    diff = [0] * (used // per_su + 2)
    for first in (b * block + q for b in range(used // block) for q in range(node_stride)):
        lo, hi = first // per_su, (first + (nodes - 1) * node_stride) // per_su
        if lo != hi:
            diff[lo] += 1
            diff[hi + 1] -= 1
    load = most = 0
    for step in diff:
        load += step
        most = max(most, load)
    return per_node, nodes, 2 if most else 1, max(1, most)


def _enumerate(g: int, per_su: int, gpus: int, size: int, stride: int) -> tuple[int, int, int, int]:
    """``_placement`` for uneven placements, by routing every ring hop (no graph)."""
    load: Counter[Link] = Counter()
    per_node = nodes = reach = 0
    for ranks in _groups(gpus, size, stride):
        links = _ring_links(ranks, g, per_su)
        load.update(links)
        on_node = Counter(r // g for r in ranks)
        per_node, nodes = max(per_node, max(on_node.values())), max(nodes, len(on_node))
        kinds = {n[0] for link in links for n in link}
        reach = max(reach, 2 if "spine" in kinds else 1 if "nic" in kinds else 0)
    return per_node, nodes, reach, max(load.values(), default=0)


# ----------------------------------------------------------------------------------------------- link sharing

FlowClass = tuple
"""A class of transfers the simulator runs as one task for every replica at once: ``("pp", a, b)`` every GPU of
pipeline stage ``a`` sending to its peer of stage ``b``; ``("dp", i)`` the DP (dp·cp) rings of stage ``i``;
``("tied",)`` the tied-embedding all-reduce between the first and last stage."""


@dataclass(frozen=True)
class _Links:
    """Directed links as integers, with their bandwidths, for one cluster: NVLink out of and into each GPU, its
    NIC out and in (the GPU–NIC and NIC–leaf edges of ``build_graph``, one bandwidth), and every leaf's uplink to
    and downlink from its rail's spine."""

    gpus: int
    domain: int
    per_su: int
    sus: int
    capacity: "np.ndarray"

    def route(self, src: "np.ndarray", dst: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
        """(flow index, link) for every link on each flow's path, as ``_route`` walks the graph."""
        g, n = self.domain, self.gpus
        flow = np.arange(len(src))
        same = src // g == dst // g
        out = [(flow[same], src[same]), (flow[same], n + dst[same])]                  # NVLink out, in
        f, a, b = flow[~same], src[~same], dst[~same]
        rail = a % g
        peer = b // g * g + rail
        out += [(f, 2 * n + a), (f, 3 * n + peer)]                                     # NIC out, NIC in (peer)
        su_a, su_b = a // g // self.per_su, b // g // self.per_su
        up = su_a != su_b
        out += [(f[up], 4 * n + su_a[up] * g + rail[up]),                                # leaf -> spine
                (f[up], 4 * n + (self.sus + su_b[up]) * g + rail[up])]                   # spine -> leaf
        fwd = peer != b
        out += [(f[fwd], peer[fwd]), (f[fwd], n + b[fwd])]                             # NVLink to b from the peer
        return np.concatenate([x for x, _ in out]), np.concatenate([y for _, y in out])


@functools.lru_cache(maxsize=64)
def _links(cluster: ClusterSpec) -> _Links:
    _check_network(cluster)
    n, g, tiers = cluster.gpus, cluster.domain_gpus, cluster.tiers
    per_su = _nodes_per_su(cluster)
    sus = -(-cluster.domains // per_su)
    cap = np.empty(4 * n + 2 * sus * g)
    cap[:2 * n] = tiers[0].bandwidth
    cap[2 * n:4 * n] = tiers[1].bandwidth if len(tiers) > 1 else tiers[0].bandwidth
    spine = tiers[-1]
    members = np.minimum(per_su, cluster.domains - np.arange(sus) * per_su)
    # a leaf's uplinks carry its su's nodes' bandwidth over the oversubscription (build_graph's leaf–spine edges)
    up = np.repeat(spine.bandwidth * members / spine.oversubscription, g)
    cap[4 * n:] = np.concatenate([up, up])
    return _Links(n, g, per_su, sus, cap)


def _flow_rate(cluster: ClusterSpec, src: "np.ndarray", dst: "np.ndarray") -> "np.ndarray":
    """Each flow's rate alone, relative to nothing but itself: its tier's bandwidth per GPU (NVLink inside an
    NVLink domain, else the outermost tier's), as the calibrated collective and send times assume."""
    g, tiers = cluster.domain_gpus, cluster.tiers
    return np.where(src // g == dst // g, tiers[0].bandwidth, tiers[-1].bandwidth)


def class_flows(cluster: ClusterSpec, s: Plan | _Degrees, flow: FlowClass) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
    """(source, destination, rate alone) of every flow of ``flow`` (FlowClass) under Megatron's rank order; a DP
    ring of k members per NVLink domain over several domains is NCCL's k channels, each crossing between domains
    on its own rail (network.py's ``_ring``), the NVLink hops inside a domain as loads on their ports."""
    stage = s.tp * s.cp * s.dp                                      # ranks per pipeline stage (pp is outermost)
    if flow[0] == "pp":
        src = np.arange(stage) + flow[1] * stage
        dst = src + (flow[2] - flow[1]) * stage
        return src, dst, _flow_rate(cluster, src, dst)
    if flow[0] == "tied":
        a = np.arange(stage)
        b = a + (s.pp - 1) * stage
        src, dst = np.concatenate([a, b]), np.concatenate([b, a])
        return src, dst, _flow_rate(cluster, src, dst)
    if flow[0] != "dp":
        raise SpecError(f"unknown flow class {flow!r}; use ('pp', a, b), ('dp', i) or ('tied',)")
    src, dst, rate = _dp_flows(cluster, s, flow[1] * stage)
    return src, dst, _flow_rate(cluster, src, dst) if rate is None else rate


def _dp_flows(cluster: ClusterSpec, s: Plan | _Degrees,
              first: int) -> tuple["np.ndarray", "np.ndarray", "np.ndarray | None"]:
    """``class_flows`` of the DP rings of the stage whose first rank is ``first``; the rates None where they are
    ``_flow_rate``'s (rings inside domains, or spread unevenly)."""
    n = s.dp * s.cp
    members = np.arange(n) * s.tp                                    # one group's ranks, consecutive in (cp, dp)
    bases = np.arange(s.tp) + first
    ranks = (bases[:, None] + members[None, :])                     # [group, member]
    g = cluster.domain_gpus
    per = max(1, min(n, g // s.tp)) if s.tp < g else 1              # members per NVLink domain (group_shape)
    if n <= per or n % per:                 # one domain (an NVLink ring), or members spread unevenly: one ring
        return ranks.ravel(), np.roll(ranks, -1, axis=1).ravel(), None
    src, dst = ranks.ravel(), np.roll(ranks, -per, axis=1).ravel()  # channel of each member to the next domain
    rate = np.full(src.shape, float(cluster.tiers[-1].bandwidth))
    if per > 1:
        # k channels: each GPU's NVLink port carries k − 1 of them (network.py _ring: busbw = min(k·nic, nvl·k/(k−1)))
        rate = np.minimum(rate, cluster.tiers[0].bandwidth / (per - 1))
        inside = ranks.ravel()
        src = np.concatenate([src, inside])
        dst = np.concatenate([dst, np.roll(ranks.reshape(s.tp, -1, per), -1, axis=2).ravel()])
        rate = np.concatenate([rate, rate * (per - 1)])
    return src, dst, rate


def link_sharing(cluster: ClusterSpec, s: Plan, classes: tuple[FlowClass, ...]) -> tuple[tuple[tuple[int, float], ...], ...]:
    """The links the transfers of ``classes`` (FlowClass) share, as rows of (class index, utilisation): the
    fraction of the link's bandwidth the class's flows take while it runs alone at its calibrated rate (> 1:
    the link cannot carry them at that rate, an oversubscribed uplink). Links of one class at most 1 are left
    out (they never slow anything); identical rows are kept once. Routes as ``build_graph``'s graph (tests
    check it against networkx)."""
    _check_fits(cluster, s)
    return placement_sharing(cluster, s.tp, s.cp, s.dp, s.pp, classes)


def placement_sharing(cluster: ClusterSpec, tp: int, cp: int, dp: int, pp: int,
                      classes: tuple[FlowClass, ...]) -> tuple[tuple[tuple[int, float], ...], ...]:
    """``link_sharing`` for the plans of these degrees (cached per cluster, degrees and classes)."""
    if tp * cp * dp * pp > cluster.gpus:
        raise SpecError(f"the plan needs {tp * cp * dp * pp} GPUs but cluster {cluster.name!r} has {cluster.gpus}")
    return _sharing(_network_of(cluster), _Degrees(tp, cp, dp, pp), classes)


_NETWORKS: dict[tuple, ClusterSpec] = {}
"""The first cluster seen with each network (``_network_of``)."""


def _network_of(cluster: ClusterSpec) -> ClusterSpec:
    """The first cluster seen with ``cluster``'s name, GPU count, NVLink domains and tiers: all that link sharing
    reads, so what-ifs that change only the GPUs (compute, HBM, memory: a report's elasticities) share its cache."""
    key = (cluster.name, cluster.nodes, cluster.gpus_per_node, cluster.nvlink_domain_gpus, cluster.tiers)
    if len(_NETWORKS) > 256:
        _NETWORKS.clear()
    return _NETWORKS.setdefault(key, cluster)


class _Degrees(NamedTuple):
    tp: int
    cp: int
    dp: int
    pp: int


def _all_flows(cluster: ClusterSpec, s: _Degrees,
               classes: tuple[FlowClass, ...]) -> tuple["np.ndarray", "np.ndarray", "np.ndarray", "np.ndarray"]:
    """(source, destination, rate alone, class index) of every flow of ``classes``: ``class_flows`` of each, with
    the classes of one kind built at once (stage i's DP rings are stage 0's moved by i stages)."""
    stage = s.tp * s.cp * s.dp
    parts: list[tuple] = []                                     # (class indices, src, dst, rate or None), per kind
    pp = [k for k, f in enumerate(classes) if f[0] == "pp"]
    if pp:
        a = np.array([classes[k][1] for k in pp])[:, None]
        b = np.array([classes[k][2] for k in pp])[:, None]
        src = np.arange(stage)[None, :] + a * stage
        parts.append((pp, src, src + (b - a) * stage, None))
    dp = [k for k, f in enumerate(classes) if f[0] == "dp"]
    if dp:
        src0, dst0, rate0 = _dp_flows(cluster, s, 0)
        shift = np.array([classes[k][1] for k in dp])[:, None] * stage
        parts.append((dp, src0[None, :] + shift, dst0[None, :] + shift,
                      None if rate0 is None else np.broadcast_to(rate0, (len(dp), len(rate0)))))
    for k, f in enumerate(classes):
        if f[0] not in ("pp", "dp"):
            one = class_flows(cluster, s, f)
            parts.append(([k], one[0][None, :], one[1][None, :], one[2][None, :]))
    src = np.concatenate([x[1].ravel() for x in parts])
    dst = np.concatenate([x[2].ravel() for x in parts])
    rate = np.concatenate([(_flow_rate(cluster, x[1], x[2]) if x[3] is None else x[3]).ravel() for x in parts])
    cls = np.concatenate([np.repeat(x[0], x[1].shape[1]) for x in parts])
    return src, dst, rate.astype(float), cls


@functools.lru_cache(maxsize=1024)
def _sharing(cluster: ClusterSpec, s: _Degrees, classes: tuple[FlowClass, ...]) -> tuple[tuple[tuple[int, float], ...], ...]:
    if not classes:
        return ()
    links = _links(cluster)
    src, dst, rate, cls = _all_flows(cluster, s, classes)
    if _tally is not None and USE_COMPILED:
        # the route and the tally below in C (_links.c): the same rows
        return tuple(sorted(_tally.routed_rows(
            np.ascontiguousarray(src, dtype=np.int64), np.ascontiguousarray(dst, dtype=np.int64),
            np.ascontiguousarray(rate, dtype=float), np.ascontiguousarray(cls, dtype=np.int64), links.gpus,
            links.domain, links.per_su, links.sus, links.capacity, len(classes))))
    which, link = links.route(src, dst)
    # every class's load on every link it uses, at once: each (link, class) summed over its flows in route order
    used, index = np.unique(link * len(classes) + cls[which], return_inverse=True)
    link, cls = used // len(classes), used % len(classes)                  # sorted by link, then class
    load = np.round(np.bincount(index, weights=rate[which]) / links.capacity[link], 12)
    first = np.r_[0, np.flatnonzero(np.diff(link)) + 1]
    count = np.diff(np.r_[first, len(link)])
    # a link of one class at most 1 never slows anything; identical rows are kept once
    shared = (count > 1) | (np.maximum.reduceat(load, first) > 1.0)
    if not shared.any():
        return ()
    keep = np.repeat(shared, count)
    group = np.repeat(np.arange(int(shared.sum())), count[shared])
    pos = np.arange(len(group)) - np.repeat(np.cumsum(count[shared]) - count[shared], count[shared])
    width = int(count.max())
    table = np.full((int(shared.sum()), 2 * width), -1.0)       # per link: classes, then their loads
    table[group, pos] = cls[keep]
    table[group, width + pos] = load[keep]
    rows = set()
    for row in table[_distinct_rows(table)].tolist():
        rows.add(tuple((int(c), u) for c, u in zip(row[:width], row[width:]) if c >= 0))
    return tuple(sorted(rows))


def _distinct_rows(table: "np.ndarray") -> "np.ndarray":
    """Index of one of each distinct row of ``table``: rows hashed by a weighted sum, then checked whole (the
    exact ``np.unique(axis=0)``, several times slower, where two distinct rows would hash alike)."""
    # weights in [1, 2) spread by the golden ratio (Weyl's equidistributed sequence k·φ mod 1): no numpy.random,
    # whose import alone costs 20 ms of a command's CPU
    weights = np.modf(np.arange(1, table.shape[1] + 1) * 0.6180339887498949)[0] + 1.0
    _, rep, inverse = np.unique(table @ weights, return_index=True, return_inverse=True)
    if (table[rep].take(inverse.ravel(), axis=0) == table).all():
        return rep
    return np.unique(table, axis=0, return_index=True)[1]


def link_sharing_on_graph(graph: nx.Graph, cluster: ClusterSpec, s: Plan,
                          classes: tuple[FlowClass, ...]) -> tuple[tuple[tuple[int, float], ...], ...]:
    """``link_sharing`` by routing every flow over ``graph`` (``build_graph(cluster)``) edge by edge, each
    direction of an edge a link of its ``bandwidth``: the reference the fast routing is tested against."""
    g, per_su = graph.graph["gpus_per_node"], graph.graph["nodes_per_su"]
    load: dict[tuple, dict[int, float]] = {}
    for k, flow in enumerate(classes):
        for a, b, rate in zip(*(x.tolist() for x in class_flows(cluster, s, flow))):
            path = _route(a, b, g, per_su)
            for edge in zip(path, path[1:]):
                if not graph.has_edge(*edge):
                    raise SpecError(f"graph of {cluster.name!r} has no link {edge}")
                share = load.setdefault(edge, {})
                share[k] = share.get(k, 0.0) + rate / graph.edges[edge]["bandwidth"]
    rows = {tuple((k, round(u, 12)) for k, u in sorted(x.items())) for x in load.values()}
    return tuple(sorted(r for r in rows if len(r) > 1 or r[0][1] > 1.0))
