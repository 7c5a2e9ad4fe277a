"""Mixture-of-experts and MLA fields of ModelSpec: closed-form parameter counts, published totals, input errors."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.specs.model import ModelSpec

MOE = ModelSpec(name="m", layers=6, hidden=64, heads=4, ffn_hidden=256, vocab=100, seq_len=32, activation="swiglu",
                position="rope", norm="rmsnorm", bias=False, tied_embeddings=False, dropout=False, experts=8, top_k=2,
                moe_ffn_hidden=32, shared_experts=1, dense_layers=2)


@pytest.mark.parametrize("name, total, active", [
    # DeepSeek-V3 report (arXiv 2412.19437) abstract: 671B total, 37B activated per token (MTP module excluded)
    ("deepseek-v3", 671e9, 37e9),
    # Mixtral paper (arXiv 2401.04088) §2: 46.7B total (47B), 12.9B active (13B)
    ("mixtral-8x7b", 46.7e9, 12.9e9),
    # Mistral's 8x22B announcement: 141B total, 39B active
    ("mixtral-8x22b", 141e9, 39e9),
    # Qwen3 report (arXiv 2505.09388) Table 2: 235B total, 22B activated
    ("qwen3-235b-a22b", 235e9, 22e9),
])
def test_catalog_moe_models_match_their_published_parameter_counts(name, total, active):
    m = get_model(name)
    assert m.family == "moe"
    assert m.params() == pytest.approx(total, rel=0.02)
    assert m.active_params() == pytest.approx(active, rel=0.03)


def test_gpt_oss_matches_its_model_card():
    # OpenAI gpt-oss model card (arXiv 2508.10925) Table 1: 116.8B total, 5.1B active not counting the embedding
    m = get_model("gpt-oss-120b")
    assert m.params() == pytest.approx(116.8e9, rel=0.01)
    assert m.active_params() - m.vocab * m.hidden == pytest.approx(5.13e9, rel=0.01)


def test_expert_and_layer_parameters_in_closed_form():
    h, f, e = MOE.hidden, MOE.moe_ffn_hidden, MOE.experts
    assert MOE.expert_params() == 3 * h * f                  # gate, up, down
    attention = 4 * h * h                                    # Q, K, V, O (MHA, no bias)
    norms = 2 * h
    moe_layer = attention + norms + h * e + (e + 1) * 3 * h * f
    dense_layer = attention + norms + 3 * h * MOE.ffn_hidden
    assert MOE.moe_layer_params() == moe_layer
    assert MOE.layer_params() == dense_layer
    assert MOE.params() == 2 * dense_layer + 4 * moe_layer + 100 * h + h + 100 * h
    assert MOE.params() - MOE.active_params() == 4 * (e - 2) * 3 * h * f


def test_mla_parameters_in_closed_form():
    m = replace(MOE, heads=4, head_dim=16, q_lora_rank=24, kv_lora_rank=12, qk_rope_head_dim=8, v_head_dim=20)
    h, a = m.hidden, 4
    # DeepSeek-V2 eqs. 9-14: W_DQ, W_UQ (d + d_R per head), W_DKV + W_KR, W_UK + W_UV, W_O
    expected = h * 24 + 24 * a * (16 + 8) + h * (12 + 8) + 12 * a * (16 + 20) + a * 20 * h
    assert m.attention_matmul_params() == expected
    assert m.layer_params() == expected + 3 * h * m.ffn_hidden + 2 * h + (24 + 12)     # + latent norms
    # the core: QK^T over d + d_R = 24 and AV over d_v = 20, i.e. heads × 22 of mean width
    assert m.attention_core_dim == a * 22


def test_model_flops_count_the_active_experts_only():
    dense_part = MOE.layer_forward_flops_per_token() - 2 * MOE.mlp_matmul_params()
    routed = 2 * (MOE.hidden * MOE.experts + (2 + 1) * MOE.expert_params())
    assert MOE.moe_layer_forward_flops_per_token() == pytest.approx(dense_part + routed)
    assert MOE.model_flops_per_token() == pytest.approx(
        3 * (2 * MOE.layer_forward_flops_per_token() + 4 * (dense_part + routed) + 2 * MOE.hidden * MOE.vocab))


@given(top_k=st.integers(1, 8), shared=st.integers(0, 2))
def test_active_params_grow_with_top_k_and_never_exceed_the_total(top_k, shared):
    m = replace(MOE, top_k=top_k, shared_experts=shared)
    assert m.active_params() <= m.params()
    if top_k < 8:
        assert replace(m, top_k=top_k + 1).active_params() > m.active_params()


def test_experts_make_the_family_moe_and_dense_models_are_unchanged():
    assert replace(MOE, family="dense").family == "moe"
    dense = replace(MOE, experts=0, top_k=0, moe_ffn_hidden=0, shared_experts=0, dense_layers=0, family="dense")
    assert not dense.moe and dense.params() == dense.layers * dense.layer_params() + 2 * 100 * 64 + 64


@pytest.mark.parametrize("change, message", [
    (dict(top_k=9), "top_k 9 must be between 1 and experts 8"),
    (dict(top_k=0), "top_k 0 must be between 1 and experts 8"),
    (dict(moe_ffn_hidden=0), "experts 8 need moe_ffn_hidden > 0"),
    (dict(dense_layers=6), "dense_layers 6 must be fewer than layers 6"),
    (dict(experts=0, family="dense"), "top_k, moe_ffn_hidden, shared_experts, dense_layers need experts > 0"),
    (dict(experts=0, top_k=0, moe_ffn_hidden=0, shared_experts=0, dense_layers=0), "family 'moe' needs experts > 0"),
    (dict(capacity_factor=-1.0), "capacity_factor must be 0"),
    (dict(kv_lora_rank=8), "needs qk_rope_head_dim > 0"),
    (dict(q_lora_rank=8), "need kv_lora_rank > 0"),
    (dict(experts=-1), "experts must be a positive integer"),
])
def test_bad_moe_fields_are_one_line_errors(change, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        replace(MOE, **change)
