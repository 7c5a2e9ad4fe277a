"""Step-level costs of a dense plan with closed forms: pipeline transfers (scatter/gather), CP ring K/V
blocks, DDP buckets, parameters per stage and the optimizer step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.hardware import compute, network
from autoplan.families.transformer import passes, step as plan
from autoplan.families.transformer.step import pp_hop_time
from autoplan.families.strategy import Strategy
from autoplan.specs.plan import data_parallel


def _interleaved(**kw) -> Strategy:
    base = dict(tp=2, pp=4, dp=8, micro_batch=1, global_batch=64, schedule="interleaved", virtual_stages=2)
    return Strategy(**{**base, **kw})


def test_hop_is_a_send_of_one_tp_share_plus_the_receivers_all_gather(tiny_gpt, a100_64):
    s = _interleaved()
    full = 2 * s.micro_batch * tiny_gpt.seq_len * tiny_gpt.hidden
    same_node = network.shape_of(a100_64, s, "pp").nodes == 1
    expected = (network.send_recv(a100_64, same_node, full / s.tp)
                + network.all_gather(a100_64, network.shape_of(a100_64, s, "tp"), full))
    assert pp_hop_time(tiny_gpt, a100_64, s, same_node) == pytest.approx(expected, rel=1e-12)


def test_sequence_parallel_sends_its_shard_without_a_gather(tiny_gpt, a100_64):
    s = _interleaved(sequence_parallel=True)
    full = 2 * s.micro_batch * tiny_gpt.seq_len * tiny_gpt.hidden
    assert pp_hop_time(tiny_gpt, a100_64, s, False) == pytest.approx(network.send_recv(a100_64, False, full / s.tp))


def test_cp_ring_block_is_k_and_v_of_the_ranks_tokens_and_tp_share(tiny_gpt):
    s = Strategy(tp=2, cp=4, dp=8, micro_batch=2, global_batch=16)
    assert passes.cp_kv_bytes(tiny_gpt, s) == 2 * 2 * 2 * (256 // 4) * 256 // 2


def test_pp_activation_is_one_micro_batch_of_bf16_hidden_states(tiny_gpt):
    s = Strategy(pp=2, cp=2, dp=16, micro_batch=4, global_batch=64)
    assert plan.pp_activation_bytes(tiny_gpt, s) == 2 * 4 * 128 * 256


@pytest.mark.parametrize("dp, bucket", [(8, 40e6), (40, 40e6), (64, 64e6), (1024, 1024e6)])
def test_ddp_bucket_is_forty_million_or_a_million_per_replica(dp, bucket):
    assert plan.bucket_params(Strategy(dp=dp, global_batch=dp)) == bucket


def test_grad_segments_count_buckets_and_stop_at_the_cap(tiny_gpt):
    big = replace(tiny_gpt, hidden=8192, ffn_hidden=32768, heads=64)
    s = Strategy(dp=8, global_batch=8)
    expected = min(plan.MAX_BUCKETS, -(-plan.chunk_params(big, s) // 40e6))
    assert plan.grad_segments(big, s) == expected == plan.MAX_BUCKETS
    assert plan.grad_segments(tiny_gpt, s) == 1


def test_stage_params_sum_to_the_model_plus_the_tied_copy(tiny_gpt):
    s = Strategy(pp=4, dp=2, global_batch=8)
    total = sum(plan.stage_params(tiny_gpt, s, i) for i in range(4))
    assert total == pytest.approx(tiny_gpt.params() + tiny_gpt.vocab * tiny_gpt.hidden, rel=1e-12)


def test_optimizer_shards_its_update_under_zero(tiny_gpt, a100_8):
    s = Strategy(dp=8, global_batch=8, zero=1)
    params = plan.stage_params(tiny_gpt, s, 0)
    expected = compute.memory_time(a100_8.gpu, plan.megatron_optimizer_bytes(s, params, params / 8),
                                   kernels=plan.MEGATRON_OPTIMIZER_KERNELS)
    assert plan.optimizer_seconds(tiny_gpt, a100_8, s, 0) == expected
    assert plan.optimizer_seconds(tiny_gpt, a100_8, replace(s, zero=0), 0) > expected


def test_megatron_optimizer_bytes_are_the_buffer_passes_and_the_step_over_the_shard():
    s = Strategy(dp=8, global_batch=8, zero=1)
    # fp32 gradient buffer: zero (4), NaN-check norm (4) and 1/dp scaling (4 + 4) of every held parameter
    assert plan.megatron_optimizer_bytes(s, 1.0, 0.0) == 16
    # grad norm (4), fused Adam (read weight, grad, m, v; write weight, m, v: 28), fp32 to bf16 copy (4 + 2)
    assert plan.megatron_optimizer_bytes(s, 0.0, 1.0) == 38
    # one replica: nothing to scale; 16-bit grads: the passes move half, the step first copies them to fp32 (2 + 4)
    assert plan.megatron_optimizer_bytes(Strategy(global_batch=8), 1.0, 0.0) == 8
    half = replace(s, grad_reduce_in_fp32=False)
    assert (plan.megatron_optimizer_bytes(half, 1.0, 0.0), plan.megatron_optimizer_bytes(half, 0.0, 1.0)) == (8, 44)
    # bf16 moments: Adam moves 2 · 2 · 2 bytes less; FP8 weights: the copy writes one byte
    assert plan.megatron_optimizer_bytes(replace(s, optimizer_moments="bf16"), 0.0, 1.0) == 30
    assert plan.megatron_optimizer_bytes(replace(s, fp8_param_gather=True), 0.0, 1.0) == 37


@pytest.mark.parametrize("gpus, tp, pp, cp, dp", [(64, 8, 4, 1, 2), (1024, 8, 8, 2, 8), (8, 1, 1, 1, 8)])
def test_data_parallel_is_what_the_model_parallel_degrees_leave(gpus, tp, pp, cp, dp):
    assert data_parallel(gpus, tp, pp, cp) == dp
    assert Strategy(dp=dp, tp=tp, pp=pp, cp=cp).gpus == gpus


def test_check_lists_one_entry_per_group_that_communicates(tiny_gpt, a100_64):
    s = Strategy(tp=2, pp=2, cp=2, dp=8, global_batch=64, zero=1)
    groups = [(c.group, c.op) for c in plan.collectives(tiny_gpt, a100_64, s)]
    assert groups == [("tp", "all_reduce"), ("tp", "all_reduce"), ("cp", "send_recv"), ("pp", "send_recv"),
                      ("tp", "all_gather"), ("dp", "reduce_scatter"), ("dp", "all_gather")]
    assert plan.collectives(tiny_gpt, a100_64, Strategy(dp=64, global_batch=64))[0].op == "all_reduce"


@pytest.mark.parametrize("pp, schedule", [(1, "1f1b"), (4, "1f1b"), (4, "interleaved"), (4, "zb-h1")])
def test_the_steps_host_time_adds_to_the_step_once(tiny_gpt, a100_8, pp, schedule):
    # GPUSpec.host_step: the step's own host work ends every stage's step (each stage's optimizer) with the GPU idle,
    # so the step grows by exactly that much whatever the pipeline
    from autoplan.sim.simulate import score

    s = Strategy(pp=pp, dp=8 // pp, micro_batch=1, global_batch=32, schedule=schedule,
                 virtual_stages=2 if schedule == "interleaved" else 1)
    slow = replace(a100_8, gpu=replace(a100_8.gpu, host_step=0.05))
    before, after = score(tiny_gpt, a100_8, s), score(tiny_gpt, slow, s)
    assert after.step_time - before.step_time == pytest.approx(0.05, rel=1e-9)
    assert plan.optimizer_seconds(tiny_gpt, slow, s, 0) - plan.optimizer_seconds(tiny_gpt, a100_8, s, 0) == (
        pytest.approx(0.05, rel=1e-12))


@pytest.mark.parametrize("limit", [4, 16, 100])
def test_deferred_output_wgrads_move_from_the_last_chunks_backward_to_the_last_ranks_tail(tiny_gpt, a100_64, limit):
    # Megatron-Core --defer-embedding-wgrad-compute --wgrad-deferral-limit N: the output layer's wgrad GEMM of the
    # first min(N, m) micro-batches runs after the schedule on the rank holding it; the work only moves
    s = _interleaved()
    deferred = replace(s, embedding_wgrad_deferral=limit)
    before, after = plan.step_costs(tiny_gpt, a100_64, s), plan.step_costs(tiny_gpt, a100_64, deferred)
    wgrad = passes.weight_grad_seconds(passes.kernels.output_compute(
        tiny_gpt, a100_64, s.tp, s.cp, s.sequence_parallel, s.micro_batch, passes.fused_loss(s))[1])
    moved = wgrad * min(limit, s.micro_batches)
    for key, cost in before.passes.items():
        lighter = moved / s.micro_batches if (not key[0] and key[2]) else 0.0
        assert after.passes[key].seconds == pytest.approx(cost.seconds - lighter, rel=1e-12)
    tails = [a - b for a, b in zip(after.optimizer, before.optimizer)]
    assert tails[:-1] == [0.0] * (s.pp - 1) and tails[-1] == pytest.approx(moved, rel=1e-12)


def test_deferral_needs_a_pipeline_and_fused_gradient_accumulation(tiny_gpt):
    from autoplan.families.transformer.validity import violations
    from autoplan.families.transformer.export import megatron_parallel_args
    s = _interleaved(embedding_wgrad_deferral=22)
    assert not violations(tiny_gpt, 64, s)
    args = megatron_parallel_args(s, tiny_gpt.layers)
    assert "--defer-embedding-wgrad-compute" in args and "--wgrad-deferral-limit 22" in args
    for bad in (dict(pp=1, dp=32, schedule="1f1b", virtual_stages=1), dict(gradient_accumulation_fusion=False)):
        assert any("embedding_wgrad_deferral 22 needs pp > 1" in r for r in violations(tiny_gpt, 64, replace(s, **bad)))
