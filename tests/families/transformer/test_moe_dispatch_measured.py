"""The MoE layer's routing kernels against Megatron-Core 0.9's routing code timed on one H100
(cluster_specs/calibration/h100-moe-dispatch.json, by benchmarks/device/moe_dispatch.py; figures in
benchmarks/bench_moe_dispatch.py), at Grok-1's shapes. A microbenchmark, not rows validate counts; no constant was
fitted to it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.families.transformer import moe_layer as moe
from autoplan.specs import load_cluster
from autoplan.validate import files
from autoplan.validate.transformer import model_of, run_case

DATA = json.loads((Path(__file__).resolve().parents[3] / "cluster_specs" / "calibration"
                   / "h100-moe-dispatch.json").read_text())
PIECES = {"router": ("router", "router.routing", "router.dgrad", "router.wgrad", "router.routing.bwd"),
          "permute": ("permute", "permute.bwd"), "unpermute": ("unpermute", "unpermute.bwd"),
          "sort_chunks": ("sort_chunks", "sort_chunks.bwd")}
TOTAL_PCT = 10.0
"""Written: the model's permute, unpermute and sort ops sum to +9.1 % of the measured kernels over every case
(2026-11-28; every piece with the router's then two small kernels summed to +1.2 %, 2026-11-27)."""
MOVED = ("permute", "unpermute", "sort_chunks")
"""The pieces whose kernels move the tokens (bytes set their time); the router's are latency-bound, priced apart."""
SORT_PCT = 15.0
"""Written: each sort 6-8 % under the measured kernels (a gradient fill of the script's included)."""


@pytest.fixture(scope="module")
def grok():
    path = files.default_files()[2]
    case = next(c for c in files.load(path)["cases"] if c["id"] == "dgxc-v24.11.1-h100-bf16-grok1-314b-32gpu")
    return model_of(case["model"], path), run_case(case, path).plan


def _modelled(grok, tokens: int, local: int) -> dict[str, float]:
    model, plan = grok
    cluster = load_cluster("dgx-h100-80g", 64)
    cluster = replace(cluster, gpu=replace(cluster.gpu, speed_variability=0.0))
    # the script's routing: dropless, as NeMo 1.x's Megatron-Core 0.9 ran it without a capacity
    model = replace(model, seq_len=tokens * plan.tp, capacity_factor=0.0, pad_to_capacity=False)
    plan = replace(plan, cp=1, ep=model.experts // local, etp=4)
    lay = moe.moe_layer(model, cluster, moe.layer_key(plan)).compute
    ops = {op.name: op.seconds for op in lay.forward + lay.backward}
    return {piece: sum(ops.get(n, 0.0) for n in names) for piece, names in PIECES.items()}


def test_routing_kernels_sum_within_the_written_margin(grok):
    measured = modelled = 0.0
    for r in DATA["rows"]:
        model = _modelled(grok, r["tokens"], r["local_experts"])
        for piece in MOVED:
            if f"{piece}_fwd_bwd_kernel_s" in r:
                measured += r[f"{piece}_fwd_bwd_kernel_s"]
                modelled += model[piece]
    assert abs(100 * (modelled / measured - 1)) < TOTAL_PCT


def test_the_router_lies_between_its_kernels_alone_and_each_with_a_whole_launch(grok):
    # the profiler's kernel time leaves out the gap between dependent kernels that a step's timeline pays; the model
    # prices each of the router's small kernels at the GPU's launch-and-tail overhead (router.router_kernels): more
    # than the kernels alone, less than each measured kernel with a whole launch on top
    overhead = load_cluster("dgx-h100-80g", 64).gpu.kernel_overhead
    for r in DATA["rows"]:
        model = _modelled(grok, r["tokens"], r["local_experts"])["router"]
        kernels, measured = r["router_fwd_bwd_kernels"], r["router_fwd_bwd_kernel_s"]
        assert measured < model < measured + kernels * overhead


def test_each_local_expert_sort_is_priced_within_the_written_margin(grok):
    sorts = [r for r in DATA["rows"] if r["local_experts"] > 1]
    assert sorts
    for r in sorts:
        model = _modelled(grok, r["tokens"], r["local_experts"])["sort_chunks"]
        assert abs(100 * (model / r["sort_chunks_fwd_bwd_kernel_s"] - 1)) < SORT_PCT
