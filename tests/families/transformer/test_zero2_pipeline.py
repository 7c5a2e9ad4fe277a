"""ZeRO-2 beside pipeline parallelism (Llama 3's FSDP, arXiv 2407.21783 §3.3.1): the gradients' memory and their
reduce-scatter after every micro-batch's backward, against closed forms."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from autoplan.families.transformer import memory, step as plan
from autoplan.hardware import network
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.strategy import Strategy


def _plan(zero: int, **kw) -> Strategy:
    return Strategy(**{**dict(tp=8, pp=8, dp=16, global_batch=256, zero=zero, sequence_parallel=True), **kw})


@given(fp32=st.booleans(), dp=st.sampled_from([2, 16, 64]))
def test_zero_1_keeps_the_whole_gradient_buffer_and_zero_2_shards_it(fp32, dp):
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 64 * dp)
    one, two = _plan(1, dp=dp, grad_reduce_in_fp32=fp32), _plan(2, dp=dp, grad_reduce_in_fp32=fp32)
    m1, m2 = memory.stage_memory(model, cluster, one, 1), memory.stage_memory(model, cluster, two, 1)
    params = m1.weights / memory.WEIGHT_BYTES
    # Megatron-Core's distributed optimizer (ZeRO-1) reduce-scatters out of a whole main_grad buffer, fp32 or 16-bit
    assert m1.gradients == pytest.approx((4 if fp32 else 2) * params)
    assert m2.gradients == pytest.approx(m1.gradients / dp)
    # one layer's unsharded gradients at the reduction's width wait for their reduce-scatter
    held = memory.backward_working_bytes(model, one)     # the running backward's gradients (test_dummy_wgrad.py)
    assert m2.buffers == pytest.approx((4 if fp32 else 2) * model.layer_params() / 8 + held)
    # ZeRO-1 keeps Transformer Engine's placeholder weight gradients, ZeRO-2 has no main_grad
    assert m1.buffers == memory.dummy_wgrad_bytes(one, memory.dense_linear_shapes(model, one.tp)) + held
    assert m2.optimizer == m1.optimizer


def test_zero_2_reduce_scatters_a_chunk_after_every_backward_not_once_a_step():
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    one, two = _plan(1), _plan(2)
    c1, c2 = plan.step_costs(model, cluster, one), plan.step_costs(model, cluster, two)
    grads = network.group_shape(cluster.domain_gpus, 16, network.stride(two, "cp"))
    assert c2.shard_reduce == pytest.approx(plan.grad_reduce_time(cluster, grads, two, plan.chunk_params(model, two)))
    assert c1.shard_reduce == 0.0 and c2.segment_reduce is None and c2.reduce_all is None
    # the simulated step carries micro-batches × chunks of them on each stage's DP stream
    e = evaluate(model, cluster, two)
    assert e.feasible and e.metrics.step_time > 0


def test_meta_s_llama3_405b_plan_fits_without_recompute_only_with_sharded_gradients():
    model, cluster = get_model("llama3-405b"), load_cluster("dgx-h100-80g", 16384)
    plan_ = dict(tp=8, pp=16, dp=128, global_batch=2048, schedule="interleaved", virtual_stages=4,
                 sequence_parallel=True, recompute="none", first_stage_layers=7, last_stage_layers=7)
    assert not evaluate(model, cluster, Strategy(**plan_, zero=1)).feasible
    assert evaluate(model, cluster, Strategy(**plan_, zero=2)).feasible
