"""FP8 and BF16 GEMMs at the 700 W power limit, measured on one H100 and one H200 (cluster_specs/calibration/
h{1,2}00-power-limit.json, by benchmarks/device/power_limit.py; figures in benchmarks/bench_power_limit.py): the
spec's FP8 efficiency, which came from timings in short bursts, still gives the FP8 / BF16 time GEMMs keep when they
run for seconds. A microbenchmark, not rows validate counts."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

from autoplan.hardware.compute import gemm_time
from autoplan.specs import load_cluster

_SPEC = importlib.util.spec_from_file_location(
    "bench_power_limit", Path(__file__).resolve().parents[2] / "benchmarks" / "bench_power_limit.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

GPUS = list(bench.FILES)


@pytest.mark.parametrize("label", GPUS)
def test_each_file_times_every_shape_in_every_phase(label):
    data = bench.load(bench.FILES[label])
    names = {s["name"] for s in data["shapes"]}
    assert len(names) == 11 and data["device"].startswith("NVIDIA H")
    for phase in ("sustained_1_bf16", "sustained_2_fp8", "sustained_3_fp8", "sustained_4_bf16"):
        assert set(data[phase]["per_call_s"]) == names and all(v > 0 for v in data[phase]["per_call_s"].values())
    assert data["seconds"] >= 20


@pytest.mark.parametrize("label", GPUS)
def test_the_power_limit_binds_in_the_sustained_phases(label):
    data = bench.load(bench.FILES[label])
    clocks = {phase: mhz for phase, mhz, _ in bench.phase_clocks(data, bench.FILES[label].with_name(
        bench.FILES[label].stem + "-smi.csv"))}
    assert all(clocks[p] < 1600 for p in bench.SUSTAINED[False] + bench.SUSTAINED[True])
    # a GEMM held at the limit loses speed against the same GEMM in a burst, FP8 more than BF16
    assert statistics.geometric_mean(bench.ratios(data, bench.sustained_s)) > \
        statistics.geometric_mean(bench.ratios(data, bench.burst_s))


@pytest.mark.parametrize("spec", ["dgx-h100-80g", "dgx-h800-80g"])
@pytest.mark.parametrize("label", GPUS)
def test_the_spec_fp8_efficiency_gives_the_sustained_fp8_to_bf16_time_within_two_percent(spec, label):
    gpu = load_cluster(spec, 8).gpu
    matched = bench.matching_fp8_efficiency(gpu, bench.load(bench.FILES[label]))
    assert gpu.fp8_gemm_efficiency == pytest.approx(matched, rel=0.02)


def test_one_gpu_alone_runs_no_slower_than_the_spec_s_eight_busy_ones():
    # the spec's clock is MSMF's mean over eight busy GPUs: one GPU alone, sustained, is 0-10 % faster
    gpu = load_cluster("dgx-h100-80g", 8).gpu
    data = bench.load(bench.FILES["H100 SXM"])
    for fp8 in (False, True):
        over = statistics.geometric_mean(gemm_time(gpu, s["m"], s["n"], s["k"], fp8=fp8)
                                         / bench.sustained_s(data, s["name"], fp8) for s in data["shapes"])
        assert 1.0 < over < 1.10
