"""The GB200's and GB300's fused-attention rate is the H100's carried by the speed-up cudnn-frontend's attention
benchmark measured on each over an H200, and their MXFP8 attention's time over BF16's is the one it measured on each
(cluster_specs/calibration/cudnn-attention-training.json)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.families.transformer.layer import attention_ops
from autoplan.hardware.microbenchmarks import (
    attention_efficiency,
    attention_speedup,
    fp8_attention_ratios,
)
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec

ROWS = json.loads((Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration"
                   / "cudnn-attention-training.json").read_text())["rows"]
H100 = load_cluster("dgx-h100-80g")
RACKS = {"gb200-nvl72": "GB200", "gb300-nvl72": "GB300"}


@pytest.mark.parametrize("spec, gpu", list(RACKS.items()))
def test_the_shipped_efficiency_is_the_derived_one(spec, gpu):
    derived = attention_efficiency(load_cluster(spec).gpu, H100.gpu, attention_speedup(ROWS, gpu, "H200"))
    assert load_cluster(spec).gpu.attention_efficiency == pytest.approx(derived, abs=5e-5)


def test_the_speedup_is_the_geometric_mean_of_the_summed_times():
    # 4k: (0.893 + 2.779) / (0.417 + 1.248) = 2.205; 8k: 13.805 / 5.649 = 2.444
    assert attention_speedup(ROWS, "GB200", "H200") == pytest.approx((2.2054 * 2.4438) ** 0.5, rel=1e-4)
    assert attention_speedup(ROWS, "H200", "H200") == 1.0


@pytest.mark.parametrize("spec, gpu", list(RACKS.items()))
def test_a_layer_attention_runs_the_measured_speedup_faster_than_on_the_h100(spec, gpu):
    # the model's own op (layer.attention_ops), one GPU at its median speed: the measured ratio, less the fixed
    # per-kernel time both specs add
    model = ModelSpec(name="llama", layers=1, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256,
                      seq_len=8192)

    def seconds(cluster):
        alone = replace(cluster, gpu=replace(cluster.gpu, job_gpus=1))
        fwd, bwd = attention_ops(alone, model, 2, 8192, 8192, 64, dropout=False)
        return fwd.seconds + bwd.seconds
    assert seconds(H100) / seconds(load_cluster(spec)) == pytest.approx(attention_speedup(ROWS, gpu, "H200"),
                                                                         rel=0.01)


@pytest.mark.parametrize("spec, gpu", list(RACKS.items()))
def test_the_shipped_fp8_ratios_are_the_measured_ones(spec, gpu):
    g = load_cluster(spec).gpu
    fwd, bwd = fp8_attention_ratios(ROWS, gpu)
    assert (g.fp8_attention_fwd_ratio, g.fp8_attention_bwd_ratio) == pytest.approx((fwd, bwd), abs=5e-4)
    assert fwd < 1 < bwd                  # MXFP8's forward is faster than BF16's and its backward slower, on both
