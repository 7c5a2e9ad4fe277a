"""ZeRO-3 (FSDP-style) costs: per-layer weight gathers and gradient reduce-scatters over the DP group, hidden
behind the layers' compute one layer ahead, with closed-form oracles and monotonic properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoplan.hardware import network
from autoplan.families.transformer import step as plan
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.strategy import Strategy


def _z3(dp: int, **kw) -> Strategy:
    base = dict(dp=dp, micro_batch=1, global_batch=dp * 2, zero=3, recompute="full")
    return Strategy(**{**base, **kw})


def test_layer_gather_is_a_ring_all_gather_of_one_layers_bf16_weights(tiny_gpt, a100_64):
    s = _z3(64)
    shape = network.group_shape(8, 64, 1)
    expected = network.all_gather(a100_64, shape, 2 * tiny_gpt.layer_params())
    assert plan.zero3_layer_gather(tiny_gpt, a100_64, s) == pytest.approx(expected, rel=1e-12)


def test_layer_reduce_scatters_gradients_in_the_reduction_dtype(tiny_gpt, a100_64):
    shape = network.group_shape(8, 64, 1)
    for fp32, nbytes in ((True, 4), (False, 2)):
        s = _z3(64, grad_reduce_in_fp32=fp32)
        expected = network.reduce_scatter(a100_64, shape, nbytes * tiny_gpt.layer_params())
        assert plan.zero3_layer_reduce(tiny_gpt, a100_64, s) == pytest.approx(expected, rel=1e-12)


@given(layers=st.integers(1, 200), fwd=st.floats(0, 1), bwd=st.floats(0, 1), g=st.floats(0, 1), r=st.floats(0, 1))
def test_exposed_time_closed_form(layers, fwd, bwd, g, r):
    f, b = plan.zero3_exposed(layers, fwd, bwd, g, r)
    # prefetch one layer ahead: the first gather and the last reduce-scatter are exposed, the rest only beyond compute
    assert f == pytest.approx(g + (layers - 1) * max(0.0, g - fwd))
    assert b == pytest.approx(g + r + (layers - 1) * max(0.0, g + r - bwd))
    # never less than the ends, never more than running everything serially
    assert g <= f + 1e-12 and f <= layers * g + 1e-9
    assert g + r <= b + 1e-12 and b <= layers * (g + r) + 1e-9


def test_hidden_when_compute_is_longer_and_serial_when_it_is_zero():
    assert plan.zero3_exposed(10, 1.0, 3.0, 0.5, 0.5) == pytest.approx((0.5, 1.0))
    assert plan.zero3_exposed(10, 0.0, 0.0, 0.5, 0.25) == pytest.approx((5.0, 7.5))


def test_step_carries_its_communication_inside_the_passes(tiny_gpt, a100_64):
    c = plan.step_costs(tiny_gpt, a100_64, _z3(64))
    assert c.shard_gather == 0.0 and c.shard_reduce == 0.0 and c.param_gather is None and c.final_gather is None
    assert all(dict(p.parts).get("dp", 0.0) > 0 for p in c.passes.values())


def test_one_replica_has_no_zero3_communication(tiny_gpt, a100_8):
    c = plan.step_costs(tiny_gpt, a100_8, Strategy(dp=1, tp=8, global_batch=2, zero=3))
    assert all("dp" not in dict(p.parts) for p in c.passes.values())


@pytest.mark.parametrize("model, tp", [("gpt3-175b", 8), ("gpt-1.7b", 1)])
def test_step_time_does_not_fall_as_dp_grows_beyond_a_node_at_fixed_per_gpu_batch(model, tp):
    # per-GPU compute stays the same, each GPU still gathers every weight and the ring gets longer
    spec, last = get_model(model), 0.0
    for dp in (16, 32, 64, 128, 256):
        n = dp * tp
        s = Strategy(dp=dp, tp=tp, micro_batch=1, global_batch=dp * 4, zero=3, recompute="full",
                     sequence_parallel=tp > 1)
        c = plan.step_costs(spec, load_cluster("dgx-a100-80g", n), s)
        exposed = sum(dict(p.parts).get("dp", 0.0) for p in c.passes.values())
        assert exposed >= last - 1e-12
        last = exposed
    e = [evaluate(get_model("gpt3-175b"), load_cluster("dgx-a100-80g", 8 * dp),
                  Strategy(dp=dp, tp=8, micro_batch=1, global_batch=dp * 4, zero=3, recompute="full",
                           sequence_parallel=True)).metrics.step_time for dp in (16, 64, 256)]
    assert e == sorted(e)


def test_slower_network_never_speeds_up_a_zero3_step(tiny_gpt):
    from dataclasses import replace
    fast = load_cluster("dgx-a100-80g", 64)
    slow = replace(fast, tiers=(fast.tiers[0],) + tuple(replace(t, bandwidth=t.bandwidth / 4) for t in fast.tiers[1:]))
    s = _z3(64)
    assert evaluate(tiny_gpt, slow, s).metrics.step_time >= evaluate(tiny_gpt, fast, s).metrics.step_time
