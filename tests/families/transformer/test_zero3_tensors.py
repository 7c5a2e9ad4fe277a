"""ZeRO-3 as DeepSpeed of 2021 ran it (``zero3_per_tensor``): one blocking list collective per weight tensor,
closed-form oracles for its per-layer seconds and how they enter a step."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoplan.hardware import network
from autoplan.families.transformer import step as plan, zero3_tensors
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.strategy import Strategy


def _z3(dp: int, **kw) -> Strategy:
    base = dict(dp=dp, micro_batch=1, global_batch=dp, zero=3, recompute="full", zero3_per_tensor=True,
                grad_reduce_in_fp32=False)
    return Strategy(**{**base, **kw})


@pytest.mark.parametrize("name", ["gpt3-175b", "gpt-1.7b", "llama3.1-8b", "llama3.1-70b"])
def test_the_tensors_add_up_to_the_layer(name):
    model = get_model(name)
    assert sum(sum(m) for m in model.layer_tensors()) == model.layer_params()


@pytest.mark.parametrize("name,largest", [("gpt-530b", 20480 * 81920 + 81920), ("gpt3-175b", None)])
def test_gathered_weights_are_deepspeeds_live_parameters_or_the_largest_module(a100_64, name, largest):
    from autoplan.families.transformer import memory
    from autoplan.families.transformer.memory import stage_memory
    model = get_model(name) if name != "gpt-530b" else None
    if model is None:
        from autoplan.specs.model import ModelSpec
        model = ModelSpec(name=name, layers=105, hidden=20480, heads=128, ffn_hidden=81920, vocab=51200, seq_len=2048)
    s = _z3(64)
    # runtime/zero/constants.py (2021): stage3_max_live_parameters 1e9, but fc1 (plus bias) is fetched whole
    want = largest or memory.ZERO3_MAX_LIVE_PARAMETERS
    assert memory.zero3_gathered_elements(model, s) == want
    held = memory.backward_working_bytes(model, s)      # beside the gradients the running backward holds
    assert stage_memory(model, a100_64, s, 0).buffers == pytest.approx(2 * want + held, rel=1e-12)
    per_layer = stage_memory(model, a100_64, Strategy(**{**s.to_dict(), "zero3_per_tensor": False}), 0)
    # per layer: two layers prefetched, and one layer's 16-bit gradients waiting for their reduce-scatter
    assert per_layer.buffers == pytest.approx((2 * 2 + 2) * model.layer_params() + held, rel=1e-12)


def test_slice_copies_read_and_write_the_buffer_with_one_kernel_per_rank(a100_64):
    gpu = a100_64.gpu
    expected = 2 * 1e9 / (gpu.hbm_bandwidth * gpu.memory_efficiency) + 64 * gpu.kernel_overhead
    assert zero3_tensors.list_collective_copies(a100_64, 64, 1e9) == pytest.approx(expected, rel=1e-12)


def test_a_tensor_gather_and_reduce_closed_form(a100_64):
    gpu, shape, nbytes = a100_64.gpu, network.group_shape(8, 64, 1), 3e8
    hbm = gpu.hbm_bandwidth * gpu.memory_efficiency
    k = gpu.kernel_overhead
    # zero the buffer, ring all-gather, copy the 64 slices out
    gather = nbytes / hbm + k + network.all_gather(a100_64, shape, nbytes) + 2 * nbytes / hbm + 64 * k
    assert zero3_tensors.tensor_gather(a100_64, shape, nbytes) == pytest.approx(gather, rel=1e-12)
    # copy into the bucket and divide there, copy the 64 slices in, ring reduce-scatter
    reduce = 4 * nbytes / hbm + 2 * k + 2 * nbytes / hbm + 64 * k + network.reduce_scatter(a100_64, shape, nbytes)
    assert zero3_tensors.tensor_reduce(a100_64, shape, nbytes) == pytest.approx(reduce, rel=1e-12)


def test_layer_gathers_closed_form_skip_the_persistent_tensors(tiny_gpt, a100_64):
    # hidden 256: QKV 196,608 and both MLP matrices 262,144 elements are gathered; the 65,536-element output
    # projection, the biases and the norms stay below DeepSpeed's 1e5 persistence threshold
    shape = network.group_shape(8, 64, 1)
    expected = sum(zero3_tensors.tensor_gather(a100_64, shape, 2 * t) for t in (3 * 256 * 256, 256 * 1024, 1024 * 256))
    forward, regather = zero3_tensors.layer_gathers(tiny_gpt, a100_64, _z3(64), shape)
    assert forward == pytest.approx(expected, rel=1e-12)
    assert regather == 0.0   # every reuse lies within stage3_max_reuse_distance (1e9 elements)


def test_recompute_regathers_what_is_released_before_its_backward():
    # GPT-3 175B: between QKV's, the projection's and fc1's recompute and their backward lie more than 1e9
    # elements of later sub-modules (2 x fc2 alone is 1.2e9); fc2's backward follows its recompute at once
    model, h = get_model("gpt3-175b"), 12288
    cluster = load_cluster("dgx-a100-80g", 1536)
    shape = network.group_shape(8, 1536, 1)
    one = {t: zero3_tensors.tensor_gather(cluster, shape, 2 * t) for t in (3 * h * h, h * h, 4 * h * h)}
    forward, regather = zero3_tensors.layer_gathers(model, cluster, _z3(1536), shape)
    assert forward == pytest.approx(one[3 * h * h] + one[h * h] + 2 * one[4 * h * h], rel=1e-12)
    assert regather == pytest.approx(one[3 * h * h] + one[h * h] + one[4 * h * h], rel=1e-12)
    # no recompute, no re-gather
    assert zero3_tensors.layer_gathers(model, cluster, _z3(1536, recompute="none"), shape)[1] == 0.0


def test_every_gradient_tensor_is_reduce_scattered_on_its_own(tiny_gpt, a100_64):
    shape = network.group_shape(8, 64, 1)
    tensors = [t for m in tiny_gpt.layer_tensors() for t in m]
    assert len(tensors) == 12    # 2 norms x (weight, bias), 4 matrices, 4 biases
    for fp32, nbytes in ((False, 2), (True, 4)):
        expected = sum(zero3_tensors.tensor_reduce(a100_64, shape, nbytes * t) for t in tensors)
        got = zero3_tensors.layer_reduce(tiny_gpt, a100_64, _z3(64, grad_reduce_in_fp32=fp32), shape)
        assert got == pytest.approx(expected, rel=1e-12)


@given(layers=st.integers(1, 200), g=st.floats(0, 1), rg=st.floats(0, 1), r=st.floats(0, 1))
def test_exposed_is_every_collective_in_series(layers, g, rg, r):
    fwd, bwd = zero3_tensors.exposed(layers, g, rg, r)
    assert fwd == pytest.approx(layers * g)
    assert bwd == pytest.approx(layers * (g + rg + r))


def test_per_tensor_step_carries_the_closed_form_and_is_slower(tiny_gpt, a100_64):
    s = _z3(64)
    shape = network.group_shape(8, 64, 1)
    g, rg = zero3_tensors.layer_gathers(tiny_gpt, a100_64, s, shape)
    r = zero3_tensors.layer_reduce(tiny_gpt, a100_64, s, shape)
    fwd = plan.step_costs(tiny_gpt, a100_64, s).passes[(True, True, True)]
    bwd = plan.step_costs(tiny_gpt, a100_64, s).passes[(False, True, True)]
    others = plan.stage_params(tiny_gpt, s, 0) - tiny_gpt.layers * tiny_gpt.layer_params()
    g_other = network.all_gather(a100_64, shape, 2 * others)
    r_other = network.reduce_scatter(a100_64, shape, 2 * others)
    assert dict(fwd.parts)["dp"] == pytest.approx(tiny_gpt.layers * g + g_other, rel=1e-9)
    assert dict(bwd.parts)["dp"] == pytest.approx(tiny_gpt.layers * (g + rg + r) + g_other + r_other, rel=1e-9)
    fsdp = plan.step_costs(tiny_gpt, a100_64, _z3(64, zero3_per_tensor=False)).passes[(False, True, True)]
    assert dict(bwd.parts)["dp"] > dict(fsdp.parts)["dp"]


def test_off_by_default():
    assert Strategy(dp=8, global_batch=8, zero=3).zero3_per_tensor is False


def test_per_rank_terms_grow_with_the_group_at_fixed_bytes():
    model, last = get_model("gpt3-175b"), 0.0
    for n in (384, 768, 1536):
        cluster = load_cluster("dgx-a100-80g", n)
        shape = network.group_shape(8, n, 1)
        total = sum(zero3_tensors.layer_gathers(model, cluster, _z3(n), shape))
        total += zero3_tensors.layer_reduce(model, cluster, _z3(n), shape)
        assert total > last
        last = total


def test_gradients_larger_than_the_reduce_bucket_skip_the_bucket_copy(a100_64):
    gpu, shape, nbytes = a100_64.gpu, network.group_shape(8, 64, 1), 3e8
    hbm = gpu.hbm_bandwidth * gpu.memory_efficiency
    bucketed = zero3_tensors.tensor_reduce(a100_64, shape, nbytes)
    alone = zero3_tensors.tensor_reduce(a100_64, shape, nbytes, bucketed=False)
    assert bucketed - alone == pytest.approx(2 * nbytes / hbm + gpu.kernel_overhead, rel=1e-9)


def test_holders_of_a_split_parameter():
    # 12,288 elements over 1,536 ranks: pieces of 8, every rank holds one; 100 elements over 1,536: 100 ranks
    assert zero3_tensors._holders(12288, 1536) == 1536
    assert zero3_tensors._holders(100, 1536) == 100
    assert zero3_tensors._holders(12289, 1536) == 1366   # pieces of 9: ceil(12289 / 9)


def test_persistent_gather_closed_form(tiny_gpt, a100_64):
    # tiny GPT: per layer the 65,536-element output projection, 4 biases and 2 layer norms (weight, bias) are under
    # the 1e5 threshold; plus the final layer norm
    shape, n, gpu = network.group_shape(8, 64, 1), 64, a100_64.gpu
    h, f = 256, 1024
    per_layer = [h, h, 3 * h, h * h, h, h, h, f, h]
    small = per_layer * tiny_gpt.layers + [h, h]
    nbytes = 2 * sum(small)
    copies = sum(min(n, t) for t in small)     # every tensor here has at least 64 elements, split in whole pieces
    expected = (network.all_gather(a100_64, shape, nbytes) + zero3_tensors.list_collective_copies(a100_64, n, nbytes)
                + 2 * nbytes / (gpu.hbm_bandwidth * gpu.memory_efficiency) + copies * gpu.kernel_overhead)
    assert zero3_tensors.persistent_gather(tiny_gpt, a100_64, _z3(64), shape) == pytest.approx(expected, rel=1e-12)


def test_the_persistent_gather_follows_every_optimizer_step(tiny_gpt, a100_64):
    on, off = (plan.step_costs(tiny_gpt, a100_64, _z3(64, zero3_per_tensor=v)) for v in (True, False))
    extra = zero3_tensors.persistent_gather(tiny_gpt, a100_64, _z3(64), network.group_shape(8, 64, 1))
    assert on.optimizer[0] - off.optimizer[0] == pytest.approx(extra, rel=1e-12)


def test_check_lists_the_per_tensor_collectives_of_a_layer(tiny_gpt, a100_64):
    s, shape = _z3(64), network.group_shape(8, 64, 1)
    needs = {c.op: c for c in plan.collectives(tiny_gpt, a100_64, s) if c.group == "dp"}
    assert needs["all_gather"].seconds == pytest.approx(zero3_tensors.layer_gathers(tiny_gpt, a100_64, s, shape)[0])
    assert needs["all_gather"].nbytes == 2 * (3 * 256 * 256 + 2 * 256 * 1024)     # the gathered tensors only
    assert needs["reduce_scatter"].seconds == pytest.approx(zero3_tensors.layer_reduce(tiny_gpt, a100_64, s, shape))
