"""The job's slowest GPU: identical GPUs compute at spread speeds, and a synchronous step waits for the slowest
(``GPUSpec.speed_variability``, ``GPUSpec.pace``, ``specs.cluster.expected_max_normal``)."""

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.errors import SpecError
from autoplan.hardware.compute import gemm_time, memory_time
from autoplan.specs.cluster import expected_max_normal, load_cluster, slowest_pace


@pytest.mark.parametrize("n, closed_form", [(1, 0.0), (2, 1 / math.sqrt(math.pi)), (3, 1.5 / math.sqrt(math.pi)),
                                            (4, 3 / (2 * math.sqrt(math.pi)) * (1 + 2 / math.pi * math.asin(1 / 3)))])
def test_expected_maximum_of_normals_matches_its_closed_forms(n, closed_form):
    # E[max] of 2, 3 and 4 standard normals in closed form (David & Nagaraja 2003, order statistics)
    assert expected_max_normal(n) == pytest.approx(closed_form, abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 4096))
def test_the_slowest_of_more_gpus_is_slower(n):
    assert expected_max_normal(n + 1) > expected_max_normal(n)
    # Blom's approximation Φ⁻¹((n − 0.375)/(n + 0.25)) lies within 0.03 of the mean maximum
    from statistics import NormalDist
    if n > 1:
        assert expected_max_normal(n) == pytest.approx(NormalDist().inv_cdf((n - 0.375) / (n + 0.25)), abs=0.03)


def test_pace_is_one_for_one_gpu_or_no_spread_and_the_slowest_draw_otherwise():
    assert slowest_pace(0.0, 1024) == 1.0 and slowest_pace(0.05, 1) == 1.0
    assert slowest_pace(0.017, 2) == pytest.approx(1 / (1 + 0.017 / math.sqrt(math.pi)))


def test_a_cluster_sets_its_gpus_job_size_and_gemms_slow_with_it():
    small, large = load_cluster("dgx-h100-80g", 8), load_cluster("dgx-h100-80g", 1024)
    assert (small.gpu.job_gpus, large.gpu.job_gpus) == (8, 1024)
    assert small.with_gpus(64).gpu.job_gpus == 64
    assert replace(small, nodes=4).gpu.job_gpus == 32
    m = n = k = 8192
    ratio = (gemm_time(large.gpu, m, n, k) - large.gpu.kernel_overhead) / (
        gemm_time(small.gpu, m, n, k) - small.gpu.kernel_overhead)
    assert ratio == pytest.approx(small.gpu.pace / large.gpu.pace, rel=1e-12) and ratio > 1.02
    # memory-bound kernels do not spread (Sinha et al. SC'22's memory-bound PageRank: 0.4 %)
    assert memory_time(large.gpu, 1e9) == memory_time(small.gpu, 1e9)


def test_a_spec_without_spread_keeps_every_gpu_at_the_median():
    c = load_cluster("dgx-h100-80g", 2048)
    flat = replace(c, gpu=replace(c.gpu, speed_variability=0.0))
    assert flat.gpu.pace == 1.0 and flat.gpu.sustained_clock == c.gpu.clock_ratio


def test_a_speed_spread_out_of_range_is_refused(tmp_path):
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "cluster_specs" / "dgx-h100-80g.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("speed_variability = 0.017", "speed_variability = 0.9", 1))
    with pytest.raises(SpecError, match="speed_variability"):
        load_cluster(str(bad))
