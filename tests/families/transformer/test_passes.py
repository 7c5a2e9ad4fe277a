"""Chunk-pass costs of a dense plan: unfused gradient accumulation, the CP ring's K/V exchanges, one layer's ops."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from autoplan.hardware import compute

from autoplan.families.transformer import layer
from autoplan.families.costs import split_backward
from autoplan.families.transformer import passes
from autoplan.families.strategy import Strategy
from autoplan.specs.model import ModelSpec


def test_grad_accumulation_of_the_first_and_last_stage_adds_their_embeddings(tiny_gpt, a100_8):
    s = Strategy(dp=8, global_batch=8, gradient_accumulation_fusion=False)
    # tied model on one stage: word and position embedding tensors, final norm scale and bias
    params = 2 * tiny_gpt.layer_params() + tiny_gpt.embedding_params() + tiny_gpt.output_params()
    tensors = 2 * layer.layer_tensors(tiny_gpt) + 2 + 2
    expected = compute.grad_accumulation(a100_8.gpu, params, 4, tensors)
    assert passes.grad_accumulation(tiny_gpt, a100_8, s, 2, first=True, last=True) == expected


def test_layer_ops_add_the_accumulation_only_when_unfused(tiny_gpt, a100_8):
    s = Strategy(dp=8, global_batch=8)
    fused = passes.layer_ops(tiny_gpt, a100_8, s)
    unfused = passes.layer_ops(tiny_gpt, a100_8, replace(s, gradient_accumulation_fusion=False))
    assert unfused["forward"] == fused["forward"]
    assert [op.name for op in unfused["backward"][:-1]] == [op.name for op in fused["backward"]]
    assert unfused["backward"][-1] == passes.grad_accumulation(tiny_gpt, a100_8, s, 1)


def test_a_fused_wgrad_reads_and_writes_the_fp32_gradient_an_unfused_one_writes_16_bits(tiny_gpt, a100_8):
    s = Strategy(dp=8, global_batch=8)
    fused = passes.layer_ops(tiny_gpt, a100_8, s)["backward"]
    unfused = passes.layer_ops(tiny_gpt, a100_8, replace(s, gradient_accumulation_fusion=False))["backward"]
    for a, b in zip(fused, unfused):
        if a.name.endswith(".wgrad"):
            k, n = layer.layer_gemm_shapes(tiny_gpt, 1, 1, 1)[a.name.split(".")[0]][2:0:-1]
            # (k×m)·(m×n): the same operands, an output of k·n values moved as 4 + 4 against 2 bytes
            assert a.bytes - b.bytes == (8 - 2) * k * n
            assert a.seconds >= b.seconds
        else:
            assert a == b


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


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("tp,cp", [(1, 1), (2, 1), (1, 2)])
def test_backward_splits_into_input_and_weight_gradients(tiny_gpt, a100_8, recompute, fused, tp, cp):
    # Qi et al. 2024 §2: W is the weight-gradient GEMMs (and accumulation); the rest of the backward is B
    s = Strategy(pp=2, tp=tp, cp=cp, dp=8 // (2 * tp * cp), global_batch=16, schedule="zb-h1", recompute=recompute,
                 gradient_accumulation_fusion=fused)
    costs = passes.pass_costs(tiny_gpt, a100_8, s)
    weights = passes.weight_grad_costs(tiny_gpt, a100_8, s)
    lay = passes.layer(tiny_gpt, a100_8, s)
    wgrad = sum(op.seconds for op in lay.backward if op.name.endswith(".wgrad"))
    assert 0 < wgrad < layer.LayerCompute.seconds(lay.backward)
    for first in (False, True):
        for last in (False, True):
            whole = costs[(False, first, last)]
            b, w = split_backward(whole, weights[(first, last)])
            assert b.seconds + w.seconds == pytest.approx(whole.seconds, rel=1e-12)
            for kind, x in whole.parts:
                assert dict(b.parts)[kind] + dict(w.parts).get(kind, 0.0) == pytest.approx(x, rel=1e-12)
            assert dict(w.parts) == {"compute": w.seconds} and all(x >= 0 for _, x in b.parts)
    middle = weights[(False, False)].seconds
    accumulate = 0.0 if fused else passes.grad_accumulation(tiny_gpt, a100_8, s, 4).seconds
    assert middle == pytest.approx(4 * wgrad + accumulate, rel=1e-12)      # 4 layers per stage


def test_overlapped_pair_hides_each_ones_communication_under_the_others_compute():
    # DeepSeek-V3 §3.2.1 (DualPipe): a forward and a backward chunk overlap communication with computation
    from autoplan.families.costs import overlapped, pass_cost
    f = pass_cost(("compute", 1.0), ("tp", 0.3))
    b = pass_cost(("compute", 2.0), ("recompute", 0.5), ("tp", 3.0), ("cp", 1.0))
    both = overlapped(f, b)
    # F's 0.3 s of TP hide under B's 2.5 s of compute; B's 4 s of communication show 3 s beyond F's 1 s
    assert both.seconds == pytest.approx(1.0 + 2.5 + 3.0)
    assert dict(both.parts) == pytest.approx({"compute": 3.0, "recompute": 0.5, "tp": 2.25, "cp": 0.75})
    assert overlapped(f, b).seconds <= f.seconds + b.seconds
    plain = pass_cost(("compute", 1.0))
    assert overlapped(plain, plain).seconds == 2.0


def test_overlapped_pair_charges_the_hidden_communication_the_sms_its_kernels_hold():
    # DeepSeek-V3 §3.2.2: the communication kernels keep a share of the SMs from the compute that hides them
    from autoplan.families.costs import overlapped, pass_cost
    f = pass_cost(("compute", 1.0), ("tp", 0.3))
    b = pass_cost(("compute", 2.0), ("recompute", 0.5), ("tp", 3.0), ("cp", 1.0))
    free, shared = overlapped(f, b), overlapped(f, b, comm_share=0.25)
    # hidden: F's 0.3 s and 1 s of B's 4 s; what shows is not charged (nothing computes beside it)
    assert shared.seconds - free.seconds == pytest.approx(0.25 * (0.3 + 1.0))
    assert dict(shared.parts)["tp"] == dict(free.parts)["tp"]
    plain = pass_cost(("compute", 1.0))
    assert overlapped(plain, plain, comm_share=0.25).seconds == 2.0


SECONDS = st.floats(0.0, 10.0)


@given(SECONDS, SECONDS, SECONDS, SECONDS, SECONDS, SECONDS, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_an_overlapped_pair_costs_at_least_its_compute_and_more_as_its_kernels_take_more_sms(ca, ta, ea, cb, tb, eb,
                                                                                             share, more):
    # DeepSeek-V3 §3.2.1-3.2.2 (costs.overlapped): a pair never beats its two computes, never costs more than the
    # two passes run apart plus the SMs lent to all of their transfers, and a larger share never makes it cheaper
    from autoplan.families.costs import overlapped, pass_cost
    a = pass_cost(("compute", ca), ("tp", ta), ("ep", ea))
    b = pass_cost(("compute", cb), ("tp", tb), ("ep", eb))
    pair = overlapped(a, b, share).seconds
    assert pair >= ca + cb - 1e-9
    assert pair <= a.seconds + b.seconds + share * (ta + ea + tb + eb) + 1e-9
    assert overlapped(a, b, min(1.0, share + more)).seconds >= pair - 1e-9


@given(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.integers(1, 2),
       st.sampled_from(["1f1b", "interleaved", "zbv", "dualpipe"]), st.sampled_from(["none", "selective", "full"]),
       st.booleans(), st.booleans(), st.integers(0, 3), st.booleans(), st.booleans(), st.booleans(),
       st.integers(1, 8))
def test_passes_read_no_field_they_are_shared_across(tiny_gpt, a100_8, tp, pp, cp, mb, schedule, recompute, sp, gaf,
                                                     zero, ogr, opg, op2p, m):
    # plans that differ only in passes.NOT_READ share one answer: their passes, computed afresh, are the same
    v = 2 if schedule == "interleaved" and pp > 1 else 1
    schedule = schedule if pp > 1 else "1f1b"
    base = Strategy(tp=tp, pp=pp, cp=cp, dp=8 // (tp * pp * cp) or 1, micro_batch=mb, schedule=schedule,
                    virtual_stages=v, recompute=recompute, sequence_parallel=sp and tp > 1,
                    gradient_accumulation_fusion=gaf)
    other = replace(base, zero=zero, overlap_grad_reduce=ogr, overlap_param_gather=opg, overlap_p2p_comm=op2p,
                    global_batch=m * base.dp * mb, dp=base.dp * 2)
    fresh = passes._pass_costs.__wrapped__
    assert fresh(tiny_gpt, a100_8, base) == fresh(tiny_gpt, a100_8, other)
    assert passes.pass_costs(tiny_gpt, a100_8, other) == fresh(tiny_gpt, a100_8, other)


@given(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.integers(1, 2), st.sampled_from(["none", "full"]),
       st.booleans(), st.sampled_from([1, 2, 4]), st.sampled_from(["1f1b", "interleaved", "zbv"]), st.booleans(),
       st.booleans(), st.sampled_from([(0, 0), (1, 0), (0, 1)]))
def test_a_layers_seconds_read_no_pipeline_field(tiny_gpt, a100_8, tp, cp, mb, recompute, sp, pp, schedule, gaf,
                                                 fp32, ends):
    # the layer terms (passes.LAYER_NOT_READ) of plans that differ only in their pipeline layout are the same
    base = Strategy(tp=tp, cp=cp, dp=1, micro_batch=mb, recompute=recompute, sequence_parallel=sp and tp > 1,
                    gradient_accumulation_fusion=gaf)
    other = replace(base, pp=pp, schedule=schedule if pp > 1 else "1f1b",
                    virtual_stages=2 if schedule == "interleaved" and pp > 1 else 1,
                    first_stage_layers=ends[0], last_stage_layers=ends[1])
    fresh = passes._layer_terms.__wrapped__
    assert fresh(tiny_gpt, a100_8, base) == fresh(tiny_gpt, a100_8, other)
    # the gradient dtype is read (the embedding's weight gradient is added to the main grad, embedding_compute)
    assert fp32 or fresh(tiny_gpt, a100_8, base) != fresh(tiny_gpt, a100_8, replace(base, grad_reduce_in_fp32=False))


def test_a_pass_is_never_faster_than_its_host_issues_it(a100_8):
    # costs.host_bound: tiny kernels (a 64-wide model) leave the GPU waiting for the host; the pass lasts exactly the
    # host's issue time, launches · host_launch; a large model's kernels keep the GPU busier than the host
    from autoplan.families.catalog import get_model

    tiny = ModelSpec(name="tiny", layers=4, hidden=64, heads=2, ffn_hidden=256, vocab=128, seq_len=64)
    host = replace(a100_8, gpu=replace(a100_8.gpu, host_launch=100e-6))
    s = Strategy(dp=8, global_batch=8)
    lay = passes.layer(tiny, host, s)
    fwd = passes.pass_costs(tiny, host, s)[(True, False, False)]
    assert fwd.seconds == pytest.approx(100e-6 * 4 * (len(lay.forward) + len(lay.forward_collectives)))
    free = passes.pass_costs(tiny, replace(a100_8, gpu=replace(a100_8.gpu, host_launch=0.0)), s)
    assert free[(True, False, False)].seconds < fwd.seconds
    big = get_model("gpt3")
    s8 = Strategy(tp=8, pp=8, dp=1, global_batch=8)
    assert passes.pass_costs(big, host, s8) == passes.pass_costs(big, replace(host, gpu=replace(host.gpu, host_launch=0.0)), s8)


def test_a_fused_loss_makes_one_pass_over_16_bit_logits(a100_8):
    from autoplan.families.transformer.layer import output_compute

    model = ModelSpec(name="big-vocab", layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=128000, seq_len=2048)
    plain = {op.name: op for op in output_compute(model, a100_8, 1, 1, False, 1)[0]}
    fused = {op.name: op for op in output_compute(model, a100_8, 1, 1, False, 1, True)[0]}
    plain_b = {op.name: op for op in output_compute(model, a100_8, 1, 1, False, 1)[1]}
    logits = 2048 * 128000
    # Megatron's vocab_parallel_cross_entropy, bytes a logit: the fp32 cast 2 + 4, max 4, subtract 8, exp 8, sum 4,
    # divide 8 (38); back, the scaling 8 and the cast to 16 bits 4 + 2 (14); fused: one 16-bit read and one
    # in-place gradient write (4)
    assert plain["cross_entropy"].bytes == 38 * logits and plain_b["cross_entropy.bwd"].bytes == 14 * logits
    assert fused["cross_entropy"].bytes == 4 * logits
    assert fused["cross_entropy"].seconds < plain["cross_entropy"].seconds


@pytest.mark.parametrize("tp, main_grad", [(1, 4), (2, 4), (4, 2)])
def test_embedding_weight_gradient_is_a_dense_table_added_to_the_main_grad(tiny_gpt, a100_8, tp, main_grad):
    _, bwd, _ = layer.embedding_compute(tiny_gpt, a100_8, tp, 1, False, 1, main_grad)
    table = next(op for op in bwd if op.name == "embedding.wgrad")
    # its vocab/tp rows (padded to 128·tp) zero-filled and read back in 16 bits, the main grad read and written
    rows = -(-tiny_gpt.vocab // (128 * tp)) * 128
    assert table.bytes == rows * tiny_gpt.hidden * (2 + 2 + 2 * main_grad)
    # every micro-batch, whatever its tokens; counted in the backward's W part (weight gradients)
    assert layer.embedding_compute(tiny_gpt, a100_8, tp, 1, False, 4, main_grad)[1][-1].bytes == table.bytes
    assert passes.weight_grad_seconds(bwd) == pytest.approx(sum(op.seconds for op in bwd))
