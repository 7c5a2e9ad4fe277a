"""Attention's deterministic backward against its timings on one H100: FlashAttention-2 through PyTorch
(cluster_specs/calibration/h100-deterministic-attention.json, by benchmarks/device/deterministic_attention.py) and
cuDNN through JAX (h100-cudnn-deterministic-attention.json, by cudnn_deterministic_attention.py); figures in
benchmarks/bench_deterministic_attention.py. The specs' ratios are what they give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoplan.hardware.microbenchmarks import backward_ratio
from autoplan.specs import load_cluster

CALIBRATION = Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration"
DATA = json.loads((CALIBRATION / "h100-deterministic-attention.json").read_text())
CUDNN = json.loads((CALIBRATION / "h100-cudnn-deterministic-attention.json").read_text())


def test_the_file_times_each_shape_both_ways_in_two_passes_on_an_h100():
    rows = [r for r in DATA["rows"] if r["kernel"] == "flash2"]
    assert DATA["device"].startswith("NVIDIA H100") and len(rows) == 12
    assert all(r["fwd_bwd_s"] > r["fwd_s"] > 0 for r in rows)
    assert all(r["dq_bitwise_equal"] for r in rows if r["deterministic"])      # the deterministic path did run


@pytest.mark.parametrize("spec", ["dgx-h100-80g", "dgx-h800-80g", "dgx-a100-80g", "megatron-ci-a100", "megatron-ci-h100"])
def test_the_specs_ratio_is_what_the_timings_give(spec):
    assert load_cluster(spec).gpu.flash2_deterministic_bwd_ratio == pytest.approx(
        backward_ratio(DATA["rows"], "flash2"), abs=0.01)


def test_every_shape_is_slower_deterministic_and_the_forward_is_not():
    for name in {r["name"] for r in DATA["rows"]}:
        rows = [r for r in DATA["rows"] if r["name"] == name and r["kernel"] == "flash2"]
        assert backward_ratio(rows, "flash2") > 1.5
        fwd = {d: sum(r["fwd_s"] for r in rows if r["deterministic"] == d) for d in (True, False)}
        assert fwd[True] == pytest.approx(fwd[False], rel=0.1)


def test_pytorch_refuses_cudnn_attention_deterministic():
    refused = [r for r in DATA["rows"] if r["kernel"] == "cudnn" and r["deterministic"]]
    assert refused and all("error" in r for r in refused)


@pytest.mark.parametrize("spec", ["dgx-h100-80g", "dgx-h800-80g", "megatron-ci-h100"])
def test_cudnns_deterministic_backward_through_jax_sets_the_hopper_specs_ratio(spec):
    rows = CUDNN["rows"]
    assert CUDNN["device"].startswith("NVIDIA H100") and len(rows) == 4
    assert all(r["dq_bitwise_equal"] == r["deterministic"] for r in rows)     # each path did run
    assert load_cluster(spec).gpu.fused_deterministic_bwd_ratio == pytest.approx(
        backward_ratio(rows, "cudnn-jax"), abs=0.01)


def test_below_sm90_the_fused_kernel_has_no_deterministic_figure():
    # Transformer Engine turns its fused attention off there in deterministic mode: FlashAttention-2's applies
    assert load_cluster("dgx-a100-80g").gpu.fused_deterministic_bwd_ratio == 1.0
