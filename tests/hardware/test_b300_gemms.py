"""dgx-b300's GEMM clock, FP8 efficiency and MXFP8 ratio reproduce the microbenchmark they were solved from: Transformer
Engine's GEMM profiling of one hidden-4096 layer's 12 GEMMs on a B300 (cluster_specs/calibration/b300-te-gemm-profiling.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoplan.families.transformer.layer import fp8_gemm_gpu
from autoplan.hardware.compute import gemm_time
from autoplan.specs.cluster import load_cluster

DATA = json.loads((Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration"
                   / "b300-te-gemm-profiling.json").read_text())
GPU = load_cluster("dgx-b300").gpu


def _ms(fp8: bool, phase: str | None = None, gpu=GPU) -> float:
    shapes = [s for name, rows in DATA["shapes_mkn"].items() if phase in (None, name) for s in rows]
    return 1e3 * sum(gemm_time(gpu, m, n, k, fp8=fp8) for m, k, n in shapes)      # the file writes M x K x N


@pytest.mark.parametrize("precision, fp8", [("bf16", False), ("fp8_current", True)])
def test_the_layer_total_is_the_measured_one(precision, fp8):
    assert _ms(fp8) == pytest.approx(DATA["per_layer_ms"][precision]["total"], rel=0.005)


def test_mxfp8_gemms_take_the_measured_ratio_of_tensor_scaled_ones():
    # the GPU as an MXFP8 layer's GEMMs see it (layer.fp8_gemm_gpu): the pre-quantized MXFP8 total, 5 % slower
    assert _ms(True, gpu=fp8_gemm_gpu(GPU, "mxfp8")) == pytest.approx(DATA["per_layer_ms"]["mxfp8"]["total"], rel=0.005)
    assert fp8_gemm_gpu(GPU, "fp8-current") == GPU and fp8_gemm_gpu(GPU, "fp8") == GPU


@pytest.mark.parametrize("phase", ["fprop", "dgrad", "wgrad"])
def test_each_pass_is_within_a_few_percent(phase):
    # the spec has one rate for every GEMM; the measured forward is 4 % faster than the backward's GEMMs
    for precision, fp8 in (("bf16", False), ("fp8_current", True)):
        assert _ms(fp8, phase) == pytest.approx(DATA["per_layer_ms"][precision][phase], rel=0.06)
