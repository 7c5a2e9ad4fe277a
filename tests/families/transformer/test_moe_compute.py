"""MoE compute fidelity: the grouped GEMM's time by tokens per expert, sliding-window attention, GPT-OSS's clamped
SwiGLU, FP8 expert GEMMs and the host's exposure after the dispatcher's sync, against closed forms."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from autoplan.hardware import compute

from autoplan.families.transformer import layer
from autoplan.families.transformer import moe_layer as moe
from autoplan.hardware.compute import BF16, Op
from autoplan.errors import SpecError
from autoplan.sim.simulate import score
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

H100 = load_cluster("dgx-h100-80g", 64)
GPU = H100.gpu


# ------------------------------------------------------------------------------------------ grouped GEMM

@given(m=st.integers(1, 8192), extra=st.integers(1, 4096), experts=st.sampled_from([1, 4, 16, 32]),
       n=st.sampled_from([768, 1536, 5760]), k=st.sampled_from([768, 2048, 2880]))
def test_grouped_gemm_time_never_falls_as_tokens_per_expert_grow(m, extra, experts, n, k):
    assert moe.grouped_gemm_time(GPU, experts, m + extra, n, k) >= moe.grouped_gemm_time(GPU, experts, m, n, k)


@pytest.mark.parametrize("experts", [4, 16, 32])
def test_grouped_gemm_is_the_dense_gemms_of_its_experts(experts):
    # one cuBLAS GEMM per expert: the time of `experts` dense GEMMs of m rows each, at any m
    for m in (16, 1024, 65536):
        assert moe.grouped_gemm_time(GPU, experts, m, 5760, 2880) == pytest.approx(
            experts * compute.gemm_time(GPU, m, 5760, 2880))


def test_grouped_gemm_efficiency_reaches_a_large_dense_gemm_at_large_m_and_falls_at_small_m():
    n, k = 5760, 2880
    dense = 2.0 * 65536 * n * k / compute.gemm_time(GPU, 65536, n, k) / GPU.peak_flops
    large = moe.grouped_gemm_efficiency(GPU, 16, 65536, n, k)
    assert large == pytest.approx(dense, rel=1e-9)
    # MegaBlocks (arXiv 2211.15841) §5: a few tokens per expert leave the tensor cores mostly idle
    assert moe.grouped_gemm_efficiency(GPU, 16, 16, n, k) < 0.25 * large
    effs = [moe.grouped_gemm_efficiency(GPU, 16, m, n, k) for m in (16, 64, 256, 4096)]
    assert effs == sorted(effs)


def test_fp8_grouped_gemm_is_faster_than_bf16_for_large_experts():
    assert moe.grouped_gemm_time(GPU, 8, 4096, 3072, 4096, fp8=True) < moe.grouped_gemm_time(GPU, 8, 4096, 3072, 4096)


# ------------------------------------------------------------------------------------ sliding window

def _model(**kw) -> ModelSpec:
    base = dict(name="w", layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn_hidden=2880, vocab=1000,
                seq_len=4096)
    return ModelSpec(**{**base, **kw})


@given(s=st.sampled_from([1024, 4096, 8192]), w=st.integers(1, 8192), share=st.sampled_from([0, 9, 18, 36]))
def test_attended_keys_closed_form(s, w, share):
    m = _model(window=w, window_layers=share) if share else _model()
    windowed = min(s / 2, w + layer.FLASH_BLOCK)
    f = share / 36
    assert layer.attended_keys(m, s) == pytest.approx((1 - f) * s / 2 + f * windowed)
    assert layer.attended_keys(m, s) <= s / 2


def test_window_on_every_layer_when_window_layers_is_zero():
    assert layer.attended_keys(_model(window=128), 4096) == 128 + layer.FLASH_BLOCK


def test_windowed_attention_flops_and_time_follow_the_keys():
    full, half = _model(), _model(window=128, window_layers=18)
    f_full, _ = layer.attention_ops(H100, full, 1, 4096, 4096, 64, False)
    f_half, b_half = layer.attention_ops(H100, half, 1, 4096, 4096, 64, False)
    assert f_full.flops == pytest.approx(4.0 * 4096 * 2048 * 64 * 64)
    assert f_half.flops == pytest.approx(4.0 * 4096 * (1024 + (128 + 128) / 2) * 64 * 64)
    assert f_half.seconds < f_full.seconds and b_half.flops == pytest.approx(2.5 * f_half.flops)


@pytest.mark.parametrize("kw, needle", [
    (dict(window=128, window_layers=40), "window_layers 40 exceeds layers 36"),
    (dict(window_layers=4), "window_layers 4 needs a window > 0"),
    (dict(window=-1), "window must be a positive integer"),
    (dict(glu_clamp=-7.0), "glu_clamp must be 0"),
])
def test_window_and_clamp_fields_are_checked(kw, needle):
    with pytest.raises(SpecError, match=needle):
        _model(**kw)


def test_gpt_oss_catalog_follows_its_config():
    m = get_model("gpt-oss-120b")
    assert (m.window, m.window_layers, m.glu_clamp) == (128, 18, 7.0)
    assert m.windowed_share == 0.5


# ------------------------------------------------------------------------------------------ activation

@pytest.mark.parametrize("clamp, activation", [(0.0, "swiglu"), (7.0, "swiglu"), (0.0, "gelu")])
def test_expert_activation_bytes(clamp, activation):
    m = replace(get_model("gpt-oss-120b"), glu_clamp=clamp, activation=activation)
    values = 1000 * 5760
    fwd, bwd, kf, kb = moe.activation_ops(m, GPU, values)
    full = BF16 * values
    if clamp:
        # two clamps and a concatenation (read and write each), then the fused unit (read full, write half)
        assert (fwd.bytes, bwd.bytes, kf, kb) == (5.5 * full, 5.5 * full, 4, 3)
    elif m.gated:
        assert (fwd.bytes, bwd.bytes, kf, kb) == (1.5 * full, 2.25 * full, 1, 1)
    else:
        assert (fwd.bytes, bwd.bytes, kf, kb) == (2 * full, 3 * full, 1, 1)


@pytest.mark.parametrize("probs_bytes, fwd, bwd", [(BF16, 12, 12), (4, 28, 36)])
def test_expert_fc2_bias_is_applied_per_expert_in_eager_pytorch(probs_bytes, fwd, bwd):
    # Megatron-Core TEGroupedMLP._apply_bias: t + b * p per local expert, cat, .to(dtype); with BF16 probabilities
    # the product, the sum and the copy are BF16 and the cast is none; FP32 ones (HybridEP's) widen all three
    m, experts, values = get_model("gpt-oss-120b"), 2, 1000 * 2880
    (f, nf), = moe.fc2_bias_ops(m, GPU, experts, values, probs_bytes)[0]
    (b, nb), = moe.fc2_bias_ops(m, GPU, experts, values, probs_bytes)[1]
    assert (f.bytes, b.bytes) == (fwd * experts * values, bwd * experts * values)
    assert f.seconds == compute.memory_time(GPU, f.bytes, 2 * experts + 2)
    assert moe.fc2_bias_ops(replace(m, bias=False), GPU, experts, values, probs_bytes) == ([], [])


def test_only_experts_with_biases_pay_for_them():
    s = moe.layer_key(Strategy(dp=64, pp=1, global_batch=64, zero=1, ep=64))
    oss = get_model("gpt-oss-120b")
    names = {op.name for op in moe.moe_layer(oss, H100, s).compute.forward}
    assert "expert.fc2.bias" in names
    plain = moe.moe_layer(replace(oss, bias=False), H100, s).compute
    assert not {op.name for op in plain.forward + plain.backward} & {"expert.fc2.bias", "expert.fc2.bias.bwd"}


# ------------------------------------------------------------------------------------------- host sync

def _ops(n: int, seconds: float) -> list[tuple[Op, int]]:
    return [(Op("k", 0.0, 0.0, seconds), 1)] * n


@given(n=st.integers(1, 50), g=st.floats(1e-6, 1e-3), h=st.floats(0, 1e-3))
def test_host_exposure_closed_forms(n, g, h):
    # after a sync the host issues kernel i at i·h: host-bound (h ≥ g) the GPU ends at n·h + g, else at h + n·g
    synced = compute.host_exposed(h, _ops(n, g), synced=True)
    expected = 0.0 if h == 0 else (n * (h - g) + g if h >= g else h)
    assert synced == pytest.approx(expected, rel=1e-9, abs=1e-15)
    # without a sync the host only binds when it issues slower than the GPU runs
    assert compute.host_exposed(h, _ops(n, g), synced=False) == pytest.approx(max(0.0, n * (h - g)), abs=1e-15)


def test_host_constant_moves_moe_layers_not_large_dense_ones():
    node = load_cluster("dgx-h100-80g", 8)
    assert node.gpu.host_launch > 0
    quiet = replace(node, gpu=replace(node.gpu, host_launch=0.0))
    s = Strategy(dp=8, pp=1, global_batch=64, zero=1)
    dense = get_model("llama3-8b")
    assert score(dense, quiet, s).step_time == score(dense, node, s).step_time
    m, e = get_model("qwen3-30b-a3b"), Strategy(dp=8, pp=1, global_batch=64, zero=1, ep=8)
    lay = moe.moe_layer(m, node, moe.layer_key(e))
    assert any(op.name == "host.wait" for op in lay.compute.forward)
    assert not any(op.name.startswith("host") for op in moe.moe_layer(m, quiet, moe.layer_key(e)).compute.forward)


def _host_wait(lay) -> float:
    return sum(op.seconds for op in lay.compute.forward if op.name == "host.wait")


def test_drop_and_pad_routing_never_syncs_the_host():
    # Megatron-Core MoEAlltoAllTokenDispatcher: with --moe-pad-expert-input-to-capacity the split sizes are the
    # capacity (a host value), so the forward's wait is the unsynced closed form max(0, launches·h − GPU busy)
    node = load_cluster("dgx-h100-80g", 8)
    e = moe.layer_key(Strategy(dp=8, pp=1, global_batch=64, zero=1, ep=8, micro_batch=2))
    dropless = replace(get_model("qwen3-30b-a3b"), capacity_factor=1.0)
    padded = replace(dropless, pad_to_capacity=True)
    synced, free = moe.moe_layer(dropless, node, e), moe.moe_layer(padded, node, e)
    assert _host_wait(free) < _host_wait(synced)
    # the same kernels either way (capacity 1.0 is the balanced load): only the host's exposure differs
    busy = [op for op in free.compute.forward if not op.name.startswith("host")]
    assert [op.name for op in busy] == [op.name for op in synced.compute.forward if not op.name.startswith("host")]
    assert free.a2a_forward == synced.a2a_forward


def test_megatron_core_0_10s_padded_permute_syncs_as_dropless_does():
    # core_v0.10.0 moe_utils.permute: masked_select sizes the permutation on the host, padding or not
    node = load_cluster("dgx-h100-80g", 8)
    e = moe.layer_key(Strategy(dp=8, pp=1, global_batch=64, zero=1, ep=8, micro_batch=2))
    dropless = replace(get_model("qwen3-30b-a3b"), capacity_factor=1.0)
    padded = replace(dropless, pad_to_capacity=True)
    syncing = replace(padded, padded_permute_syncs=True)
    # its masked_selects' own kernels (MASKED_SELECT_KERNELS) may fill part of the wait, never more than they take
    selects = next(op.seconds for op in moe.moe_layer(syncing, node, e).compute.forward
                   if op.name == "permute.masked_select")
    assert _host_wait(moe.moe_layer(syncing, node, e)) == pytest.approx(
        _host_wait(moe.moe_layer(dropless, node, e)), abs=selects)
    assert _host_wait(moe.moe_layer(syncing, node, e)) > _host_wait(moe.moe_layer(padded, node, e))


@pytest.mark.parametrize("kw, needle", [({"capacity_factor": 0.0, "pad_to_capacity": True}, "needs a capacity_factor"),
                                        ({"capacity_factor": 1.0, "pad_to_capacity": "yes"}, "must be true or false"),
                                        ({"capacity_factor": 1.0, "padded_permute_syncs": 1}, "must be true or false")])
def test_pad_to_capacity_is_checked(kw, needle):
    with pytest.raises(SpecError, match=needle):
        replace(get_model("qwen3-30b-a3b"), **kw)


# ----------------------------------------------------------------------------------------------- FP8

def test_fp8_moe_layer_runs_expert_gemms_in_fp8_with_their_casts():
    m = get_model("qwen3-235b-a22b")
    quiet = replace(H100, gpu=replace(H100.gpu, host_launch=0.0))
    bf16 = Strategy(dp=8, pp=8, global_batch=64, zero=1, ep=8)
    fp8 = replace(bf16, precision="fp8")
    assert moe.layer_key(fp8).precision == "fp8"
    ops16 = {op.name: op for op in moe.moe_layer(m, quiet, moe.layer_key(bf16)).compute.forward}
    ops8 = {op.name: op for op in moe.moe_layer(m, quiet, moe.layer_key(fp8)).compute.forward}
    assert ops8["expert.fc1"].seconds < ops16["expert.fc1"].seconds
    assert {"expert.fc1.quantize", "expert.fc2.quantize"} <= set(ops8) and "expert.fc1.quantize" not in ops16
    assert ops8["qkv"].seconds < ops16["qkv"].seconds                  # the attention block's GEMMs too


PADDING = ["expert.fp8_padding", "expert.fp8_unpadding", "expert.fp8_unpadding.bwd", "expert.fp8_padding.bwd"]


@pytest.mark.parametrize("precision", ["fp8", "fp8-current", "fp8-blockwise"])
def test_fp8_experts_pad_unaligned_token_counts_and_unpad_them_with_a_copy_each_way(precision):
    # Megatron-Core TEGroupedMLP: Transformer Engine's Fp8Padding before fc1, Fp8Unpadding after fc2 (dropless routing
    # leaves each expert's count unaligned), each a read and a write of the experts' rows of h BF16 values
    m = get_model("qwen3-235b-a22b")
    s = Strategy(dp=8, pp=8, global_batch=64, zero=1, ep=8, precision=precision)
    lay = moe.moe_layer(m, H100, moe.layer_key(s)).compute
    names = [op.name for op in lay.forward + lay.backward]
    assert [n for n in names if "padding" in n] == PADDING
    rows = m.experts // s.ep * moe.expert_rows(m, s)
    ops = {op.name: op for op in lay.forward + lay.backward}
    assert all(ops[n].bytes == 2 * BF16 * rows * m.hidden for n in PADDING)
    assert names.index("expert.fp8_padding") < names.index("expert.fc1") < names.index("expert.fp8_unpadding")


@pytest.mark.parametrize("model, kw", [(get_model("qwen3-235b-a22b"), dict(precision="bf16")),
                                       (replace(get_model("qwen3-235b-a22b"), capacity_factor=1.0), {}),
                                       (replace(get_model("qwen3-235b-a22b"), capacity_factor=1.0,
                                                pad_to_capacity=True), {}),
                                       (get_model("qwen3-235b-a22b"), dict(precision="fp8-blockwise",
                                                                           deepseek_fp8=True))])
def test_no_padding_in_bf16_with_aligned_equal_counts_or_deepseek_s_own_stack(model, kw):
    # a force-balanced or padded-to-capacity load gives each expert 4096·8·8/128 = 2048 rows (a multiple of 16);
    # DeepSeek-V3's own stack (its FP8 dispatch) runs no Transformer Engine padding
    s = Strategy(**{**dict(dp=8, pp=8, global_batch=64, zero=1, ep=8, precision="fp8"), **kw})
    lay = moe.moe_layer(model, H100, moe.layer_key(s)).compute
    assert not [op for op in lay.forward + lay.backward if "padding" in op.name]


# ------------------------------------------------------------------------------------ local-expert sort

@pytest.mark.parametrize("ep, sorted_", [(8, False), (4, True), (2, True)])
def test_tokens_are_sorted_into_local_experts_only_when_a_gpu_holds_several(ep, sorted_):
    # Megatron-Core token_dispatcher.py: sort_chunks_by_idxs after the dispatch and before the combine when
    # num_local_experts > 1, a copy of the permuted tokens each way (and each backward)
    m = get_model("mixtral-8x7b")
    lay = moe.moe_layer(m, H100, moe.layer_key(Strategy(dp=64, pp=1, global_batch=64, zero=1, ep=ep))).compute
    names = [op.name for op in lay.forward + lay.backward]
    expected = ["sort_chunks", "unsort_chunks", "unsort_chunks.bwd", "sort_chunks.bwd"] if sorted_ else []
    assert [n for n in names if "sort_chunks" in n] == expected
    ops = {op.name: op for op in lay.forward + lay.backward}
    for name in expected:
        assert ops[name].bytes == ops["permute"].bytes


def test_current_scaling_casts_each_local_experts_rows_apart_delayed_scaling_all_at_once():
    # Transformer Engine's split_quantize: one fused multi-tensor cast under delayed scaling, each expert's own
    # amax, scale and cast under current scaling (cast.cpp, "only have fused kernel for FP8 delayed scaling")
    model = replace(get_model("mixtral-8x7b"), experts=64)
    ops = {}
    for precision in ("fp8", "fp8-current"):
        s = moe.layer_key(Strategy(ep=8, dp=8, global_batch=64, precision=precision))
        lay = moe.moe_layer(model, H100, s).compute
        ops[precision] = {op.name: op for op in lay.forward + lay.backward}
    local = 64 // 8
    for name in ("expert.fc1.quantize", "expert.fc2.quantize", "expert.fc1.quantize_grad", "expert.fc2.quantize_grad"):
        delayed, current = ops["fp8"][name], ops["fp8-current"][name]
        assert delayed.seconds == pytest.approx(compute.memory_time(GPU, delayed.bytes, 1))
        assert current.seconds == pytest.approx(compute.memory_time(GPU, current.bytes, 4 * local))


def test_megatron_core_0_10s_padded_permutation_runs_its_masked_selects():
    # core_v0.10.0 moe_utils.permute/unpermute: 19 forward and 8 backward small kernels against 0.9's padded 5 and 3
    e = moe.layer_key(Strategy(dp=8, pp=1, global_batch=64, zero=1, ep=8, micro_batch=2))
    padded = replace(get_model("qwen3-30b-a3b"), capacity_factor=1.0, pad_to_capacity=True)
    names = lambda model: {op.name: op for op in (lambda c: c.forward + c.backward)(moe.moe_layer(model, H100, e).compute)}
    plain, syncing = names(padded), names(replace(padded, padded_permute_syncs=True))
    assert "permute.masked_select" not in plain and "permute.masked_select.bwd" not in plain
    tokens = moe.local_tokens(padded, e)
    for name, kernels in zip(("permute.masked_select", "permute.masked_select.bwd"), moe.MASKED_SELECT_KERNELS):
        op = syncing[name]
        assert op.seconds == pytest.approx(compute.memory_time(GPU, kernels * BF16 * tokens * padded.experts, kernels))
    assert (moe.MASKED_SELECT_KERNELS[0] + 5, moe.MASKED_SELECT_KERNELS[1] + 3) == (19, 8)
