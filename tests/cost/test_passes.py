"""Chunk-pass costs of a dense plan: unfused gradient accumulation, the CP ring's K/V exchanges, one layer's ops."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.cost import compute, passes
from autoplan.specs.strategy import Strategy


def test_grad_accumulation_of_the_first_and_last_stage_adds_their_embeddings(tiny_gpt, a100_8):
    s = Strategy(dp=8, global_batch=8, gradient_accumulation_fusion=False)
    # tied model on one stage: word and position embedding tensors, final norm scale and bias
    params = 2 * tiny_gpt.layer_params() + tiny_gpt.embedding_params() + tiny_gpt.output_params()
    tensors = 2 * compute.layer_tensors(tiny_gpt) + 2 + 2
    expected = compute.grad_accumulation(a100_8.gpu, params, 4, tensors)
    assert passes.grad_accumulation(tiny_gpt, a100_8, s, 2, first=True, last=True) == expected


def test_layer_ops_add_the_accumulation_only_when_unfused(tiny_gpt, a100_8):
    s = Strategy(dp=8, global_batch=8)
    fused = passes.layer_ops(tiny_gpt, a100_8, s)
    unfused = passes.layer_ops(tiny_gpt, a100_8, replace(s, gradient_accumulation_fusion=False))
    assert unfused["backward"][:-1] == fused["backward"] and unfused["forward"] == fused["forward"]
    assert unfused["backward"][-1] == passes.grad_accumulation(tiny_gpt, a100_8, s, 1)


def test_cp_ring_time_shows_only_in_cp_plans_and_more_in_the_backward(tiny_gpt, a100_8):
    s = Strategy(dp=4, cp=2, global_batch=8)
    costs = passes.pass_costs(tiny_gpt, a100_8, s)
    fwd_cp = dict(costs[(True, False, False)].parts).get("cp", 0.0)
    bwd_cp = dict(costs[(False, False, False)].parts).get("cp", 0.0)
    assert 0 < fwd_cp <= bwd_cp
    no_cp = passes.pass_costs(tiny_gpt, a100_8, Strategy(dp=8, global_batch=8))
    assert all("cp" not in dict(c.parts) for c in no_cp.values())


@pytest.mark.parametrize("fp32, nbytes", [(True, 4), (False, 2)])
def test_gradient_bytes_follow_the_reduction_dtype(fp32, nbytes):
    assert passes.grad_bytes(Strategy(grad_reduce_in_fp32=fp32)) == nbytes
