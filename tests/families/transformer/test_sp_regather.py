"""Sequence parallelism's backward re-gather of the column-parallel inputs (Megatron-LM / Transformer Engine):
two extra all-gathers of b·s·h per dense layer's backward, priced like the backward's other TP collectives."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import layer, tp_overlap
from autoplan.families.transformer.passes import pass_costs
from autoplan.hardware import compute, network
from autoplan.specs.cluster import load_cluster


@pytest.mark.parametrize("tp, sp, extra", [(8, True, 2), (4, True, 2), (8, False, 0), (1, False, 0)])
def test_backward_has_the_forward_collectives_and_one_all_gather_per_column_parallel_layer(tp, sp, extra):
    m, c = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 8)
    lay = layer.layer_compute(m, c, tp, 1, sp, 1, "none")
    assert lay.backward_collectives[:len(lay.forward_collectives)] == lay.forward_collectives
    regather = lay.backward_collectives[len(lay.forward_collectives):]
    # the gathered input is the full b·s·h bf16 tensor (Korthikanti et al. 2022 §4.2.2)
    assert regather == (compute.Collective("all_gather", compute.BF16 * m.seq_len * m.hidden),) * extra


def test_pass_tp_seconds_grow_by_exactly_the_two_all_gathers():
    m, c = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 8)
    c = replace(c, gpu=replace(c.gpu, host_launch=0.0))
    s = Strategy(tp=8, pp=1, dp=1, global_batch=4, sequence_parallel=True)
    parts = {k: dict(v.parts) for k, v in pass_costs(m, c, s).items()}
    fwd, bwd = parts[(True, False, False)]["tp"], parts[(False, False, False)]["tp"]
    ag = network.all_gather(c, network.shape_of(c, s, "tp"), compute.BF16 * m.seq_len * m.hidden)
    # closed form: a middle chunk's backward = its forward's collectives + 2 all-gathers per layer
    assert bwd == pytest.approx(fwd + 2 * m.layers * ag, rel=1e-12)


def test_tp_comm_overlap_exposes_what_the_dgrad_gemm_cannot_hide():
    m, c = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 8)
    s = Strategy(tp=8, pp=1, dp=1, global_batch=4, sequence_parallel=True, tp_comm_overlap=True)
    shapes = layer.layer_gemm_shapes(m, 8, 1, 1)
    comm = network.all_gather(c, network.shape_of(c, s, "tp"), compute.BF16 * m.seq_len * m.hidden)
    dgrad = {n: compute.gemm_time(c.gpu, shapes[n][0], shapes[n][2], shapes[n][1]) for n in ("qkv", "fc1")}
    wgrad = {n: compute.gemm_time(c.gpu, shapes[n][2], shapes[n][1], shapes[n][0]) for n in ("qkv", "fc1")}
    _, bwd = tp_overlap.layer_exposed(m, c, s)
    ring = sum(tp_overlap.pipelined(compute.gemm_time(c.gpu, shapes[n][0], shapes[n][2], shapes[n][1]),
                                    compute.gemm_time(c.gpu, -(-shapes[n][0] // 8), shapes[n][2], shapes[n][1]),
                                    comm, 8) for n in ("proj", "fc2"))
    # closed form: the row-parallel ring exchanges plus, per column-parallel layer, max(0, comm − GEMM) beside
    # the wgrad (reduce-scatter) and beside the dgrad (re-gather); GQA's small QKV dgrad leaves some exposed
    expected = ring + sum(max(0.0, comm - wgrad[n]) + max(0.0, comm - dgrad[n]) for n in ("qkv", "fc1"))
    assert bwd == pytest.approx(expected, rel=1e-12)
    assert comm > dgrad["qkv"]


@pytest.mark.parametrize("precision", ["fp8", "fp8-current"])
def test_fp8_gathers_move_one_byte_and_scatters_two(precision):
    # Transformer Engine casts before it gathers (LayerNormLinear's FP8 norm output, the FP8 output gradient of a
    # row-parallel layer, the saved FP8 input re-gathered for the wgrad); the reduce-scatters stay 16-bit
    m, c = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 8)
    lay = layer.layer_compute(m, c, 4, 1, True, 1, "none", precision)
    values = m.seq_len * m.hidden
    kinds = {(x.kind, x.nbytes) for x in lay.backward_collectives}
    assert kinds == {("all_gather", compute.FP8 * values), ("reduce_scatter", compute.BF16 * values)}
    bf16 = layer.layer_compute(m, c, 4, 1, True, 1, "none")
    assert {x.nbytes for x in bf16.backward_collectives} == {compute.BF16 * values}


def test_tp_overlap_hides_the_smaller_fp8_gathers_better(monkeypatch):
    m, c = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 8)
    fp8 = Strategy(tp=4, dp=2, sequence_parallel=True, tp_comm_overlap=True, global_batch=8, precision="fp8")
    shape = network.shape_of(c, fp8, "tp")
    values = m.seq_len * m.hidden
    assert network.all_gather(c, shape, compute.FP8 * values) < network.reduce_scatter(c, shape, compute.BF16 * values)
    fwd, bwd = tp_overlap.layer_exposed(m, c, fp8)
    monkeypatch.setattr(layer, "gathered_bytes", lambda v, _fp8: compute.BF16 * v)   # as if gathered in 16 bits
    wide_fwd, wide_bwd = tp_overlap.layer_exposed(m, c, fp8)
    assert fwd <= wide_fwd and bwd <= wide_bwd and fwd + bwd < wide_fwd + wide_bwd
