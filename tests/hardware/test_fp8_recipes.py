"""FP8 GEMMs by scaling recipe, measured on one H100 (cluster_specs/calibration/h100-fp8-recipes.json, by
benchmarks/device/fp8_recipes.py; figures in benchmarks/bench_fp8_recipes.py): the spec's fp8_blockwise_gemm_ratio is
the measured blockwise / tensor-wise time, and Megatron-LM's blockwise recipe pays it where DeepSeek-V3's own kernels
do not. A microbenchmark, not rows validate counts."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import layer, moe_layer as moe
from autoplan.specs import load_cluster

DATA = json.loads((Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration"
                   / "h100-fp8-recipes.json").read_text())
H100 = load_cluster("dgx-h100-80g", 64)


def test_the_file_times_every_recipe_of_every_gemm_on_an_h100():
    assert DATA["gpu"].startswith("NVIDIA H100") and len(DATA["rows"]) == 10
    assert all(r[f"{name}_s"] > 0 for r in DATA["rows"] for name in ("bf16", "tensorwise", "rowwise", "blockwise"))


@pytest.mark.parametrize("spec", ["dgx-h100-80g", "dgx-h800-80g"])
def test_the_spec_ratio_is_the_measured_geometric_mean(spec):
    measured = statistics.geometric_mean(r["blockwise_s"] / r["tensorwise_s"] for r in DATA["rows"])
    assert load_cluster(spec).gpu.fp8_blockwise_gemm_ratio == pytest.approx(measured, abs=0.005)


def test_megatron_s_blockwise_gemms_take_the_ratio_and_deepseek_s_kernels_do_not():
    model = get_model("llama3-70b")
    ops = {}
    for key, (precision, own) in {"fp8": ("fp8", False), "block": ("fp8-blockwise", False),
                                  "own": ("fp8-blockwise", True)}.items():
        lay = layer.layer_compute(model, H100, 8, 1, True, 1, "none", precision, False, own)
        ops[key] = {op.name: op.seconds for op in lay.forward}
    # the MLP's fc1 (8192 tokens x 3584 x 8192 on a TP8 shard) is compute-bound: its tile rate sets its time
    overhead = H100.gpu.kernel_overhead
    assert (ops["block"]["fc1"] - overhead) == pytest.approx(1.15 * (ops["fp8"]["fc1"] - overhead), rel=1e-9)
    assert ops["own"]["fc1"] == ops["fp8"]["fc1"]
    mixtral = get_model("mixtral-8x7b")
    s = Strategy(dp=64, pp=1, global_batch=64, zero=1, ep=8, precision="fp8-blockwise")
    expert = {own: {op.name: op.seconds for op in moe.moe_layer(mixtral, H100, moe.layer_key(
        replace(s, deepseek_fp8=own))).compute.forward}["expert.fc1"] for own in (False, True)}
    assert expert[False] > 1.1 * expert[True]
