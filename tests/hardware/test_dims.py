"""N-dimensional network descriptions: validation, the per-dimension builder, and dims derived from cluster tiers."""

from __future__ import annotations

import pytest

from autoplan.hardware.dims import NetworkDim, dims_of, make_dims
from autoplan.errors import SpecError
from autoplan.specs.cluster import load_cluster


def test_make_dims_units() -> None:
    (a, b) = make_dims([4, 8], ["ring", "switch"], [250, 25], [0.5, 2])
    assert (a.size, a.topology, a.bandwidth, a.latency) == (4, "ring", 250e9, 0.5e-6)
    assert (b.size, b.topology, b.bandwidth, b.latency, b.name) == (8, "switch", 25e9, 2e-6, "dim 2")


@pytest.mark.parametrize("kwargs, message", [
    ({"size": 1}, "size of d must be an integer ≥ 2, got 1"),
    ({"size": True}, "got True"),
    ({"topology": "torus"}, "topology of d must be one of ring, switch, fully_connected, got 'torus'"),
    ({"bandwidth": 0.0}, "bandwidth of d must be a positive number of bytes/s, got 0.0"),
    ({"bandwidth": float("nan")}, "got nan"),
    ({"latency": -1e-6}, "latency of d must be a number of seconds ≥ 0, got -1e-06"),
])
def test_dim_validation_names_the_numbers(kwargs: dict, message: str) -> None:
    args = {"size": 4, "topology": "ring", "bandwidth": 1e9, "latency": 1e-6, "name": "d", **kwargs}
    with pytest.raises(SpecError, match=message):
        NetworkDim(**args)


def test_make_dims_lengths_must_agree() -> None:
    with pytest.raises(SpecError, match="got 2 sizes, 1 topologies, 2 bandwidths, 2 latencies"):
        make_dims([4, 8], ["ring"], [1, 2], [1, 2])
    with pytest.raises(SpecError, match="bandwidth values must be numbers, got 'x'"):
        make_dims([4], ["ring"], ["x"], [1])


@pytest.mark.parametrize("gpus, sizes, names", [
    (4, (4,), ("nvlink",)),
    (8, (8,), ("nvlink",)),
    (16, (8, 2), ("nvlink", "ib-leaf")),
    (256, (8, 32), ("nvlink", "ib-leaf")),
    (1024, (8, 128), ("nvlink", "ib-leaf+ib-spine")),
])
def test_dims_of_dgx_h100(gpus: int, sizes: tuple, names: tuple) -> None:
    cluster = load_cluster("dgx-h100-80g", max(gpus, 8))
    dims = dims_of(cluster, gpus)
    assert tuple(d.size for d in dims) == sizes and tuple(d.name for d in dims) == names
    nvlink, ib = cluster.tiers[0], cluster.tiers[1]
    assert dims[0].bandwidth == pytest.approx(nvlink.bandwidth * nvlink.efficiency)
    if len(dims) > 1:
        assert dims[1].bandwidth == pytest.approx(ib.bandwidth * ib.efficiency)
        assert dims[1].latency == cluster.tiers[len(names[1].split("+"))].latency


def test_dims_of_whole_cluster_and_single_gpu(a100_64) -> None:
    assert [d.size for d in dims_of(a100_64)] == [8, 8]
    assert dims_of(a100_64, 1) == ()


@pytest.mark.parametrize("gpus, message", [
    (12, "a group of 12 GPUs is not a whole number of nvlink domains of 8 GPUs"),
    (128, "a group of 128 GPUs does not fit in dgx-a100-80g with 64 GPUs"),
    (0, "--gpus must be a positive integer, got 0"),
])
def test_dims_of_bad_groups(a100_64, gpus: int, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        dims_of(a100_64, gpus)
