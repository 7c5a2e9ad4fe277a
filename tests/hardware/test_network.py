"""Collective times: the ring closed form, monotonicity in bandwidth, and predicted nccl-tests bus bandwidth
against the measured figures of public.yaml's ``collective_bandwidth`` section (hard-coded below by id)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.hardware import network as nw
from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.families.strategy import Strategy

GB = 1e9
BIG = 8 * 1024**3          # 8 GiB: nccl-tests' large-message plateau
A100 = "dgx-a100-80g"
H100 = "dgx-h100-80g"


def _with_ib_bandwidth(cluster: ClusterSpec, per_gpu: float) -> ClusterSpec:
    nvlink, *ib = cluster.tiers
    return replace(cluster, tiers=(nvlink, *(replace(t, bandwidth=per_gpu) for t in ib)))


def _busbw(op: str, cluster: ClusterSpec, g: nw.GroupShape, nbytes: float = BIG) -> float:
    fn = {"all_reduce": nw.all_reduce, "reduce_scatter": nw.reduce_scatter, "all_gather": nw.all_gather,
          "all_to_all": nw.all_to_all}[op]
    return nw.bus_bandwidth(op, g.size, nbytes, fn(cluster, g, nbytes))


# ------------------------------------------------------------------------------------------------- group shapes


def test_stride_follows_megatron_rank_order():
    s = Strategy(tp=2, cp=2, dp=4, pp=8)
    assert (nw.stride(s, "tp"), nw.stride(s, "cp"), nw.stride(s, "dp"), nw.stride(s, "pp")) == (1, 2, 4, 16)
    with pytest.raises(ValueError):
        nw.stride(s, "ep")


@pytest.mark.parametrize("size,step,per_node,nodes", [
    (8, 1, 8, 1), (4, 2, 4, 1), (16, 1, 8, 2), (16, 8, 1, 16), (8, 4, 2, 4), (2, 1, 2, 1), (4, 16, 1, 4),
])
def test_group_shape(size, step, per_node, nodes):
    g = nw.group_shape(8, size, step)
    assert (g.size, g.per_node, g.nodes) == (size, per_node, nodes)
    assert g.span == step * (size - 1) + 1


# --------------------------------------------------------------------------------------------------- closed form


def _flat(cluster: ClusterSpec) -> ClusterSpec:
    """The cluster without NCCL's small-message bandwidth ramp (every tier at its large-message rate)."""
    return replace(cluster, tiers=tuple(replace(t, half_bandwidth_bytes=0.0) for t in cluster.tiers))


def _ramped_rate(tier, nbytes: float) -> float:
    half = tier.half_bandwidth_bytes
    return tier.bandwidth * tier.efficiency * (nbytes / (nbytes + half) if half else 1.0)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("nbytes", [1.0, 4096.0, 1e6, 1e9, float(BIG)])
def test_single_node_ring_all_reduce_closed_form(n, nbytes):
    cluster = _flat(load_cluster(A100, 8))
    nvl = cluster.tiers[0]
    assert nvl.allreduce_busbw == 0.0                   # the A100 spec has no NVLink SHARP
    g = nw.group_shape(cluster.gpus_per_node, n, 1)
    expected = 2 * (n - 1) / n * nbytes / (nvl.bandwidth * nvl.efficiency) + 2 * (n - 1) * nvl.latency
    assert nw.all_reduce(cluster, g, nbytes) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("nbytes", [4096.0, 16 * 2.0**20, float(BIG)])
def test_single_node_ring_all_reduce_with_the_message_size_ramp(n, nbytes):
    # the spec's NVLink tier reaches half its bus bandwidth at half_bandwidth_bytes: rate·S/(S + S½)
    cluster = load_cluster(A100, 8)
    nvl = cluster.tiers[0]
    g = nw.group_shape(8, n, 1)
    expected = 2 * (n - 1) / n * nbytes / _ramped_rate(nvl, nbytes) + 2 * (n - 1) * nvl.latency
    assert nw.all_reduce(cluster, g, nbytes) == pytest.approx(expected, rel=1e-12)
    if nvl.half_bandwidth_bytes:
        half = nvl.half_bandwidth_bytes
        transfer = nw.all_reduce(cluster, g, half) - 2 * (n - 1) * nvl.latency
        assert nw.bus_bandwidth("all_reduce", n, half, transfer) == pytest.approx(
            nvl.bandwidth * nvl.efficiency / 2, rel=1e-9)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_single_node_reduce_scatter_and_all_gather_closed_form(n):
    cluster = _flat(load_cluster(A100, 8))
    nvl = cluster.tiers[0]
    g = nw.group_shape(8, n, 1)
    expected = (n - 1) / n * BIG / (nvl.bandwidth * nvl.efficiency) + (n - 1) * nvl.latency
    assert nw.reduce_scatter(cluster, g, BIG) == pytest.approx(expected, rel=1e-12)
    assert nw.all_gather(cluster, g, BIG) == pytest.approx(expected, rel=1e-12)


def test_trivial_collectives_are_free():
    cluster = load_cluster(A100, 16)
    one = nw.group_shape(8, 1, 1)
    many = nw.group_shape(8, 16, 1)
    for fn in (nw.all_reduce, nw.reduce_scatter, nw.all_gather, nw.all_to_all):
        assert fn(cluster, one, 1e9) == 0.0
        assert fn(cluster, many, 0.0) == 0.0
    assert nw.send_recv(cluster, True, 0.0) == 0.0


def test_send_recv_uses_nvlink_inside_a_node_and_the_nic_across():
    cluster = _flat(load_cluster(A100, 16))
    nvl, *_, ib = cluster.tiers
    assert nw.send_recv(cluster, True, 1e9) == pytest.approx(1e9 / (nvl.bandwidth * nvl.efficiency) + nvl.latency)
    assert nw.send_recv(cluster, False, 1e9) == pytest.approx(1e9 / (ib.bandwidth * ib.efficiency) + ib.latency)


def test_bus_bandwidth_factors():
    assert nw.bus_bandwidth("all_reduce", 8, 8e9, 1.0) == pytest.approx(8e9 * 2 * 7 / 8)
    for op in ("reduce_scatter", "all_gather", "all_to_all"):
        assert nw.bus_bandwidth(op, 4, 8e9, 2.0) == pytest.approx(4e9 * 3 / 4)


# -------------------------------------------------------------------------------------------------- monotonicity


_OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")


@settings(max_examples=80, deadline=None)
@given(cluster_name=st.sampled_from([A100, H100]), nodes=st.sampled_from([1, 2, 4, 32, 64]),
       size_log=st.integers(1, 9), step_log=st.integers(0, 6), nbytes=st.floats(1.0, 1e11),
       tier=st.integers(0, 2), factor=st.floats(0.01, 0.99), same_node=st.booleans(), nvls_too=st.booleans())
def test_lowering_a_tier_bandwidth_never_speeds_up_a_collective(cluster_name, nodes, size_log, step_log, nbytes,
                                                              tier, factor, same_node, nvls_too):
    cluster = load_cluster(cluster_name, 8 * nodes)
    size, step = 2**size_log, 2**step_log
    g = nw.group_shape(cluster.gpus_per_node, size, step)
    slower_tiers = list(cluster.tiers)
    slower_tiers[tier] = replace(slower_tiers[tier], bandwidth=slower_tiers[tier].bandwidth * factor,
                                 allreduce_busbw=slower_tiers[tier].allreduce_busbw * (factor if nvls_too else 1))
    slower = replace(cluster, tiers=tuple(slower_tiers))
    for op in _OPS:
        fn = getattr(nw, op)
        fast_t, slow_t = fn(cluster, g, nbytes), fn(slower, g, nbytes)
        assert slow_t >= fast_t * (1 - 1e-12), (op, g)
        assert fast_t >= 0.0
    assert nw.send_recv(slower, same_node, nbytes) >= nw.send_recv(cluster, same_node, nbytes) * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(size_log=st.integers(1, 7), step_log=st.integers(0, 4), small=st.floats(1.0, 1e9), grow=st.floats(1.0, 100.0))
def test_collective_time_grows_with_message_size(size_log, step_log, small, grow):
    cluster = load_cluster(H100, 512)
    g = nw.group_shape(8, 2**size_log, 2**step_log)
    for op in _OPS:
        fn = getattr(nw, op)
        assert fn(cluster, g, small * grow) >= fn(cluster, g, small) * (1 - 1e-12)


# ------------------------------------------------------------------------ predicted vs measured bus bandwidth


def test_a100_node_all_reduce_busbw():
    # public.yaml nccl-a100-intranode-allreduce: 230 GB/s busbw at >= 8 GB (nccl-tests #149)
    cluster = load_cluster(A100, 8)
    got = _busbw("all_reduce", cluster, nw.group_shape(8, 8, 1))
    assert got == pytest.approx(230 * GB, rel=0.10)


def test_h100_node_ring_collectives_busbw():
    # public.yaml nccl-h100-intranode-ring: 370 GB/s for ring all-reduce / reduce_scatter / all_gather
    cluster = load_cluster(H100, 8)
    g = nw.group_shape(8, 8, 1)
    for op in ("reduce_scatter", "all_gather"):
        assert _busbw(op, cluster, g) == pytest.approx(370 * GB, rel=0.10), op


def test_h100_node_nvls_all_reduce_busbw():
    # public.yaml nccl-h100-intranode-allreduce-nvls: 480 GB/s busbw at 8-16 GB (NVLink SHARP)
    cluster = load_cluster(H100, 8)
    assert _busbw("all_reduce", cluster, nw.group_shape(8, 8, 1)) == pytest.approx(480 * GB, rel=0.10)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
def test_h100_one_gpu_per_node_busbw_is_one_ndr_nic(op):
    # public.yaml nccl-ndr400-per-nic: 46-48 GB/s per NDR 400 Gb/s NIC (nccl-tests #290)
    cluster = load_cluster(H100, 128)
    g = nw.group_shape(8, 16, 8)                       # 16 nodes, one GPU each (stride 8)
    assert (g.per_node, g.nodes) == (1, 16)
    got = _busbw(op, cluster, g)
    assert got == pytest.approx(47 * GB, rel=0.10)
    assert got <= cluster.tiers[1].bandwidth          # never above the NIC's line rate


def test_a100_two_nodes_4x_hdr_ring_busbw():
    # public.yaml nccl-a100-2node-4xHDR: 86 GB/s (of 100 theoretical), measured with reduce-scatter-like ring
    # traffic; per GPU the 4 HDR NICs of a node give 12.5 GB/s
    cluster = _with_ib_bandwidth(load_cluster(A100, 16), 12.5 * GB)
    g = nw.group_shape(8, 16, 1)
    assert (g.per_node, g.nodes) == (8, 2)
    assert _busbw("reduce_scatter", cluster, g) == pytest.approx(86 * GB, rel=0.10)


def test_a100_two_nodes_4x_hdr_all_reduce_busbw():
    # public.yaml nccl-a100-2node-4xHDR: all_reduce, 2 nodes x 8 A100, 4x HDR per node: 86 GB/s busbw
    cluster = _with_ib_bandwidth(load_cluster(A100, 16), 12.5 * GB)
    g = nw.group_shape(8, 16, 1)
    assert _busbw("all_reduce", cluster, g) == pytest.approx(86 * GB, rel=0.10)


def test_a100_three_nodes_4x_hdr_all_reduce_busbw():
    # public.yaml nccl-a100-3node-4xHDR: 84.8 GB/s average busbw (peak 96), theoretical 100
    cluster = _with_ib_bandwidth(load_cluster(A100, 24), 12.5 * GB)
    g = nw.group_shape(8, 24, 1)
    got = _busbw("all_reduce", cluster, g)
    assert 0.9 * 84.8 * GB <= got <= 96 * GB * 1.1


def test_inter_node_busbw_never_exceeds_the_node_nics():
    # a ring across nodes is bounded by the node's NICs: per_node x per-GPU NIC bandwidth
    cluster = load_cluster(A100, 64)
    ib = cluster.tiers[1]
    for size, step in ((16, 1), (64, 1), (8, 8), (32, 2)):
        g = nw.group_shape(8, size, step)
        assert _busbw("reduce_scatter", cluster, g) <= g.per_node * ib.bandwidth * (1 + 1e-12)


def test_nvls_busbw_is_an_algorithm_bandwidth_so_small_groups_take_the_ring():
    # NVLS's 480 GB/s busbw is measured over the 8 GPUs of a node: each GPU moves its buffer once each way, so a
    # 2-GPU all-reduce cannot reach it; NCCL takes its ring there (busbw = algbw at n = 2)
    h100, nbytes = load_cluster("dgx-h100-80g", 8), 8 * 2**30
    nvl = h100.tiers[0]
    two = nw.all_reduce(h100, nw.group_shape(8, 2, 1), nbytes)
    assert two == pytest.approx(nbytes / nw._rate(nvl, nbytes) + 2 * nvl.latency, rel=1e-12)
    assert nbytes / two <= nvl.bandwidth * nvl.efficiency
    eight = nw.all_reduce(h100, nw.group_shape(8, 8, 1), nbytes)
    assert nw.bus_bandwidth("all_reduce", 8, nbytes, eight) == pytest.approx(480e9 * nbytes / (nbytes + 16 * 2**20),
                                                                            rel=0.01)


@pytest.mark.parametrize("cluster_name", ["dgx-h100-80g", "dgx-a100-80g", "dgx-h800-80g"])
@given(nbytes=st.floats(1e3, 1e10))
def test_a_larger_group_inside_a_node_never_all_reduces_faster(cluster_name, nbytes):
    cluster = load_cluster(cluster_name, 8)
    times = [nw.all_reduce(cluster, nw.group_shape(8, n, 1), nbytes) for n in (2, 4, 8)]
    assert times == sorted(times)
