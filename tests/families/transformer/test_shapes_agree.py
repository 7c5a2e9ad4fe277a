"""The simulator's closed-form group shapes agree with the networkx placement."""

import itertools

from autoplan.hardware.network import shape_of
from autoplan.hardware.topology import describe_group
from autoplan.families.strategy import Strategy
from autoplan.specs import load_cluster


def test_group_shapes_match_graph_placement():
    cluster = load_cluster("dgx-a100-80g", 256)
    for tp, pp, cp in itertools.product([1, 2, 4, 8, 16], [1, 2, 4, 8], [1, 2, 4]):
        if 256 % (tp * pp * cp):
            continue
        s = Strategy(tp=tp, pp=pp, cp=cp, dp=256 // (tp * pp * cp))
        for kind in ("tp", "cp", "dp", "pp"):
            fast, graph = shape_of(cluster, s, kind), describe_group(cluster, s, kind)
            assert (fast.per_node, fast.nodes) == (graph.gpus_per_node, graph.nodes), (kind, s.short())
