"""Gradient-accumulation fusion's epilogue against its timings on one H100 (cluster_specs/calibration/
h100-wgrad-accumulate.json, by benchmarks/device/wgrad_accumulate.py; figures in benchmarks/bench_wgrad_accumulate.py):
the H100 spec's ``epilogue_exposure`` is what those timings give, and ``gemm_time`` adds it as measured."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.hardware.compute import BF16, gemm_time
from autoplan.hardware.microbenchmarks import epilogue_exposure
from autoplan.specs import load_cluster

DATA = json.loads((Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration"
                   / "h100-wgrad-accumulate.json").read_text())
GPU = replace(load_cluster("dgx-h100-80g", 8).gpu, speed_variability=0.0)
RATIO_PCT = 2.0
"""Written: accumulate / plain summed over the FP32-buffer GEMMs, measured 1.078, model 1.076 (2026-11-28; the
spec's exposure is one number for both buffers)."""


def _mean(row: dict, key: str) -> float:
    return (row[key] + row[key + "_2"]) / 2


def _timings(rows: list[dict]) -> list[tuple[int, float, float, float]]:
    return [(r["m"] * r["n"], r["out_bytes"] - BF16, _mean(r, "accumulate_s"), _mean(r, "mm_s")) for r in rows]


def test_the_file_is_an_h100_sweep_of_both_buffers_in_two_passes():
    rows = DATA["wgrad"]
    assert DATA["device"].startswith("NVIDIA H100") and len(rows) > 200
    assert {r["out_bytes"] for r in rows} == {4.0, 8.0}
    assert all(r["accumulate_s"] > 0 and r["accumulate_s_2"] > 0 and r["mm_s_2"] > 0 for r in rows)


def test_the_spec_exposure_is_what_the_timings_give():
    assert GPU.epilogue_exposure == pytest.approx(epilogue_exposure(GPU, _timings(DATA["wgrad"])), abs=0.01)


@pytest.mark.parametrize("out_bytes", [4.0, 8.0])
def test_each_buffer_alone_gives_about_the_same_exposure(out_bytes):
    rows = [r for r in DATA["wgrad"] if r["out_bytes"] == out_bytes]
    assert epilogue_exposure(GPU, _timings(rows)) == pytest.approx(GPU.epilogue_exposure, abs=0.05)


def test_the_model_adds_the_fp32_accumulation_the_h100_spent():
    rows = [r for r in DATA["wgrad"] if r["out_bytes"] == 8.0]
    measured = sum(_mean(r, "accumulate_s") for r in rows) / sum(_mean(r, "mm_s") for r in rows)
    plain = sum(gemm_time(GPU, r["m"], r["n"], r["k"]) for r in rows)
    model = sum(gemm_time(GPU, r["m"], r["n"], r["k"], 1, False, 8.0) for r in rows) / plain
    bare = replace(GPU, epilogue_exposure=0.0)
    assert sum(gemm_time(bare, r["m"], r["n"], r["k"], 1, False, 8.0) for r in rows) == pytest.approx(plain, rel=1e-3)
    assert 100 * abs(model / measured - 1) <= RATIO_PCT


def test_exposure_is_added_only_beyond_a_16_bit_output_and_never_below_the_roofline():
    m, n, k = 8192, 8192, 4096
    assert gemm_time(GPU, m, n, k, 1, False, BF16) == gemm_time(replace(GPU, epilogue_exposure=0.0), m, n, k)
    wide = gemm_time(GPU, m, n, k, 1, False, 8.0) - gemm_time(GPU, m, n, k)
    assert wide == pytest.approx(GPU.epilogue_exposure * 6 * m * n / (GPU.hbm_bandwidth * GPU.memory_efficiency))
    tiny_k = gemm_time(GPU, m, n, 16, 1, False, 8.0)         # memory-bound: the roofline already moves the bytes
    roofline = (2 * (m * 16 + 16 * n) + 8 * m * n) / (GPU.hbm_bandwidth * GPU.memory_efficiency) + GPU.kernel_overhead
    assert tiny_k == pytest.approx(roofline)
