"""Chunked multi-dimensional collectives: ring closed forms, conservation of bytes, Themis never slower than
the baseline (hypothesis over random networks), determinism and input validation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.hardware.dims import NetworkDim, make_dims
from autoplan.hardware.themis import OPS, collective, phase
from autoplan.errors import SpecError

GB = 1e9


def ring(n: int, gb_per_s: float = 100.0, latency: float = 5e-6) -> NetworkDim:
    return NetworkDim(size=n, topology="ring", bandwidth=gb_per_s * GB, latency=latency)


@pytest.mark.parametrize("n", [2, 3, 8, 64])
@pytest.mark.parametrize("policy", ["baseline", "themis"])
def test_single_ring_all_reduce_closed_form(n: int, policy: str) -> None:
    S, B, a = 1e9, 100 * GB, 5e-6
    r = collective((ring(n, 100.0, a),), "all_reduce", S, policy=policy, chunks=1)
    assert r.time == pytest.approx(2 * (n - 1) / n * S / B + 2 * (n - 1) * a, rel=1e-12)
    bw_time = 2 * (n - 1) / n * S / B
    assert r.utilisation == pytest.approx((bw_time / (bw_time + 2 * (n - 1) * a),), rel=1e-12)


@pytest.mark.parametrize("chunks", [1, 4, 64])
def test_single_ring_chunks_pipeline(chunks: int) -> None:
    """Chunks share the links one after another; latency delays each chunk but does not hold the links, so k
    chunks cost the bytes once plus one phase's latency."""
    n, S, B, a = 8, 1e9, 100 * GB, 5e-6
    r = collective((ring(n, 100.0, a),), "reduce_scatter", S, chunks=chunks)
    assert r.time == pytest.approx((n - 1) / n * S / B + (n - 1) * a, rel=1e-12)
    assert r.busy == pytest.approx(((n - 1) / n * S / B,), rel=1e-12)


def test_reduce_scatter_and_all_gather_are_halves_of_all_reduce() -> None:
    dims = make_dims([4, 8], ["ring", "switch"], [200, 50], [1, 5])
    ar = collective(dims, "all_reduce", 2**30, chunks=1)
    rs = collective(dims, "reduce_scatter", 2**30, chunks=1)
    ag = collective(dims, "all_gather", 2**30, chunks=1)
    assert rs.time + ag.time == pytest.approx(ar.time)
    assert rs.sent == pytest.approx(ag.sent)


def test_baseline_two_dims_per_dimension_bytes() -> None:
    """Hierarchical all-reduce: dim 1 carries 2(n1-1)/n1·S, dim 2 carries 2(n2-1)/n2·S/n1 (Themis's baseline)."""
    S = 1e9
    dims = make_dims([4, 16], ["ring", "ring"], [100, 25], [0, 0])
    r = collective(dims, "all_reduce", S, chunks=8)
    assert r.sent == pytest.approx((2 * 3 / 4 * S, 2 * 15 / 16 * S / 4))


def test_steps_per_topology() -> None:
    assert [NetworkDim(size=8, topology=t, bandwidth=GB, latency=1.0).steps
            for t in ("ring", "switch", "fully_connected")] == [7, 3, 1]
    assert phase(NetworkDim(size=5, topology="switch", bandwidth=GB, latency=1.0), 5e9) == (4e9, 3 + 4.0)


def test_themis_balances_a_fast_first_dimension() -> None:
    """2D: baseline leaves the slow second dimension mostly idle; Themis fills it and is faster."""
    dims = make_dims([8, 2], ["ring", "ring"], [370, 47], [1, 5])
    base = collective(dims, "all_reduce", 2**30, policy="baseline")
    them = collective(dims, "all_reduce", 2**30, policy="themis")
    assert them.time < 0.97 * base.time
    assert base.utilisation[1] < 0.7 < 0.95 < them.utilisation[1]
    assert {o[0] for o in them.orders} == {0, 1}
    assert not them.fell_back


def test_empty_network_costs_nothing() -> None:
    r = collective((), "all_reduce", 1e9)
    assert (r.time, r.busy, r.bandwidth_utilisation) == (0.0, (), 0.0)


topologies = st.sampled_from(["ring", "switch", "fully_connected"])
dim_st = st.builds(lambda n, t, b, a: NetworkDim(size=n, topology=t, bandwidth=b * GB, latency=a),
                   st.integers(2, 16), topologies, st.floats(1, 900), st.sampled_from([0.0, 5e-7, 1e-6, 1e-5]))
case = dict(dims=st.lists(dim_st, min_size=1, max_size=4).map(tuple), op=st.sampled_from(OPS),
            nbytes=st.sampled_from([1e3, 1e6, 64 * 2**20, 2**30]), chunks=st.sampled_from([1, 2, 3, 8, 64]),
            intra=st.sampled_from(["fifo", "scf"]))


@settings(max_examples=150, deadline=None)
@given(**case)
def test_themis_never_slower_and_never_more_loaded(dims, op, nbytes, chunks, intra) -> None:
    base = collective(dims, op, nbytes, policy="baseline", chunks=chunks, intra=intra)
    them = collective(dims, op, nbytes, policy="themis", chunks=chunks, intra=intra)
    assert them.time <= base.time
    assert max(them.busy) <= max(base.busy) * (1 + 1e-9)  # the bottleneck dimension's load never grows


@settings(max_examples=150, deadline=None)
@given(**case, policy=st.sampled_from(["baseline", "themis"]))
def test_bytes_are_conserved_across_dimensions(dims, op, nbytes, chunks, intra, policy) -> None:
    """Any dimension order sends (P-1)/P·S per reduce-scatter or all-gather in total (the shares telescope)."""
    P = math.prod(d.size for d in dims)
    r = collective(dims, op, nbytes, policy=policy, chunks=chunks, intra=intra)
    halves = 2 if op == "all_reduce" else 1
    assert sum(r.sent) == pytest.approx(halves * (P - 1) / P * nbytes, rel=1e-9)
    assert r.time >= max(r.busy) * (1 - 1e-12)
    assert 0 < r.bandwidth_utilisation <= 1 + 1e-12
    assert all(0 <= u <= 1 + 1e-12 for u in r.utilisation)


@settings(max_examples=60, deadline=None)
@given(**case)
def test_more_bandwidth_is_never_slower_for_the_baseline(dims, op, nbytes, chunks, intra) -> None:
    faster = tuple(NetworkDim(size=d.size, topology=d.topology, bandwidth=2 * d.bandwidth, latency=d.latency)
                   for d in dims)
    assert (collective(faster, op, nbytes, chunks=chunks, intra=intra).time
            <= collective(dims, op, nbytes, chunks=chunks, intra=intra).time * (1 + 1e-12))


def test_deterministic() -> None:
    dims = make_dims([4, 8, 4], ["fully_connected", "ring", "switch"], [250, 100, 25], [0.5, 0.5, 0.5])
    runs = [collective(dims, "all_reduce", 2**30, policy="themis", chunks=64, intra="scf") for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("kwargs, message", [
    ({"op": "broadcast"}, "--op must be one of all_reduce"),
    ({"policy": "fastest"}, "--policy must be one of baseline, themis, got 'fastest'"),
    ({"intra": "lifo"}, "intra-dimension order must be one of fifo, scf"),
    ({"nbytes": 0}, "--bytes must be a positive finite number of bytes, got 0"),
    ({"nbytes": math.inf}, "got inf"),
    ({"chunks": 0}, "--chunks must be an integer in [1, 4096], got 0"),
    ({"chunks": 2.5}, "got 2.5"),
])
def test_bad_input_names_the_value(kwargs: dict, message: str) -> None:
    args = {"op": "all_reduce", "nbytes": 1e9, **kwargs}
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        collective((ring(4),), args.pop("op"), args.pop("nbytes"), **args)


def test_a_slower_greedy_schedule_falls_back_to_the_baseline() -> None:
    """Two chunks, latency only on the outer ring: the greedy order is slower here, so the baseline's is kept."""
    dims = make_dims([4, 8], ["ring", "ring"], [25, 25], [0, 5])
    base = collective(dims, "all_reduce", 1e6, policy="baseline", chunks=2)
    them = collective(dims, "all_reduce", 1e6, policy="themis", chunks=2)
    assert them.fell_back
    assert (them.time, them.busy, them.sent, them.orders) == (base.time, base.busy, base.sent, base.orders)


def test_smallest_chunk_first_helps_on_equal_bandwidths() -> None:
    """4D, 100 GB/s per dimension, 1 GiB: SCF keeps the dimensions fed better than FIFO (snapshot of this model)."""
    dims = make_dims([4, 8, 8, 4], ["ring", "fully_connected", "ring", "switch"], [100] * 4, [0.5] * 4)
    fifo = collective(dims, "all_reduce", 2**30, policy="themis", intra="fifo")
    scf = collective(dims, "all_reduce", 2**30, policy="themis", intra="scf")
    base = collective(dims, "all_reduce", 2**30, policy="baseline")
    assert base.bandwidth_utilisation == pytest.approx(1 / 3, abs=0.01)
    assert scf.time < 0.9 * fifo.time < 0.5 * base.time
    assert scf.bandwidth_utilisation > 0.95
