"""What-if clusters (``ClusterSpec.scaled``) and the contention keys of cluster files: every change is checked as a
cluster file's values are."""

from __future__ import annotations

import pytest

from autoplan.errors import SpecError
from autoplan.specs.cluster import check_cluster, list_clusters, load_cluster, specs_dir

H100 = load_cluster("dgx-h100-80g", 1024)


def test_factors_scale_what_they_name_and_nothing_else():
    c = H100.scaled(compute=2, hbm_bandwidth=1.5, memory=1.25, nvlink=3, network=2, latency=0.5)
    assert c.gpu.peak_flops == 2 * H100.gpu.peak_flops and c.gpu.fp8_peak_flops == 2 * H100.gpu.fp8_peak_flops
    assert c.gpu.hbm_bandwidth == 1.5 * H100.gpu.hbm_bandwidth and c.gpu.hbm_bytes == 1.25 * H100.gpu.hbm_bytes
    assert c.tiers[0].bandwidth == 3 * H100.tiers[0].bandwidth
    assert c.tiers[0].allreduce_busbw == 3 * H100.tiers[0].allreduce_busbw
    assert [t.bandwidth for t in c.tiers[1:]] == [2 * t.bandwidth for t in H100.tiers[1:]]
    assert [t.latency for t in c.tiers] == [0.5 * t.latency for t in H100.tiers]
    assert (c.gpu.sm_count, c.gpus, c.name, c.gpu.gemm_efficiency) == (H100.gpu.sm_count, 1024, H100.name,
                                                                       H100.gpu.gemm_efficiency)
    assert H100.scaled() == H100


def test_structural_changes_keep_the_spec_consistent():
    c = H100.scaled(nvlink_domain=72, oversubscription=4, gpus=2048)
    assert (c.domain_gpus, c.tiers[0].gpus, c.tiers[-1].oversubscription, c.gpus) == (72, 72, 4.0, 2048)
    assert H100.scaled(nvlink_domain=8) == H100
    assert not H100.scaled(contention=False).contention


@pytest.mark.parametrize("change, match", [
    (dict(compute=1e9), r"under the what-if: peak_tflops in \[gpu\] must be a number in \[0.1, 100000\], got 989000000000"),
    (dict(network=0), "what-if factor must be a positive number"),
    (dict(latency=float("nan")), "what-if factor must be a positive number"),
    (dict(nvlink_domain=20), "nvlink_domain_gpus 20 must be a whole number of nodes of gpus_per_node 8"),
    (dict(oversubscription=0.5), r"oversubscription in \[\[tiers\]\] #3 must be a number in \[1, 64\], got 0.5"),
    (dict(memory=0.01), "memory_reserve_gib 3 in .gpu. leaves nothing of hbm_gib 0.796"),
    (dict(gpus=1020), "does not fill whole"),
])
def test_changes_outside_the_plausible_ranges_are_refused_with_the_numbers(change, match):
    with pytest.raises(SpecError, match=match):
        H100.scaled(**change)


def test_a_cluster_without_a_spine_cannot_be_oversubscribed():
    two_tiers = load_cluster("dgx-a100-80g", 16)
    two_tiers = type(two_tiers)(**{**two_tiers.__dict__, "tiers": two_tiers.tiers[:2]})
    with pytest.raises(SpecError, match="no spine tier"):
        two_tiers.scaled(oversubscription=2)


def test_files_may_set_oversubscription_and_turn_contention_off(tmp_path):
    text = (specs_dir() / "dgx-a100-80g.toml").read_text()
    spine = text.rindex("[[tiers]]")
    text = "contention = false\n" + text[:spine] + "[[tiers]]\noversubscription = 4" + text[spine + len("[[tiers]]"):]
    path = tmp_path / "c.toml"
    path.write_text(text)
    c = load_cluster(str(path), 8)
    assert not c.contention and c.tiers[-1].oversubscription == 4.0 and c.tiers[1].oversubscription == 1.0
    path.write_text(text.replace("oversubscription = 4", "oversubscription = 100"))
    with pytest.raises(SpecError, match=r"oversubscription in \[\[tiers\]\] #3 must be a number in \[1, 64\]"):
        load_cluster(str(path), 8)


def test_builtin_clusters_pass_the_checks_and_are_non_blocking():
    for name in list_clusters():
        c = load_cluster(name, 64)
        check_cluster(c, name)
        assert c.contention and all(t.oversubscription == 1.0 for t in c.tiers)
