"""Transformer Engine's placeholder weight gradients (``memory.dummy_wgrad_bytes``): one 16-bit tensor per distinct
linear weight shape on a GPU when the weight-gradient GEMMs accumulate into Megatron's main_grad, against closed
forms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer import moe as fam, moe_layer
from autoplan.families.transformer.memory import (backward_working_bytes, dense_linear_shapes, dummy_wgrad_bytes,
                                                  memory_per_stage)
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec

CLUSTER = load_cluster("dgx-h100-80g", 64)
LLAMA = ModelSpec(name="llama-like", layers=8, hidden=1024, heads=16, kv_heads=4, ffn_hidden=4096, vocab=32000,
                  seq_len=1024, activation="swiglu", position="rope", norm="rmsnorm", bias=False,
                  tied_embeddings=False, dropout=False)
MOE = ModelSpec(name="small-moe", layers=8, hidden=512, heads=8, ffn_hidden=2048, vocab=1024, seq_len=512,
                activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False,
                dropout=False, experts=16, top_k=2, moe_ffn_hidden=256, shared_experts=1, dense_layers=1)


def _llama_layer(t: int) -> int:
    """Elements of one llama-like layer's four weights on one GPU at TP ``t`` (all four shapes differ)."""
    h, q, kv, f = 1024, 1024, 256, 4096
    return ((q + 2 * kv) * h + h * q + 2 * f * h + h * f) // t


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_each_stage_holds_one_16_bit_tensor_per_weight_shape_and_the_last_the_output_layer_s(tp):
    s = Strategy(tp=tp, pp=2, dp=64 // (2 * tp), sequence_parallel=tp > 1, global_batch=64)
    first, last = memory_per_stage(LLAMA, CLUSTER, s)
    held = backward_working_bytes(LLAMA, s)
    assert first.buffers == 2 * _llama_layer(tp) + held
    assert last.buffers == 2 * (_llama_layer(tp) + LLAMA.vocab // tp * LLAMA.hidden) + held


def test_weights_of_one_shape_share_one_tensor():
    # with an ungated MLP as wide as the model, projection, fc1 and fc2 are all h × h: one tensor for the three
    square = ModelSpec(name="square", layers=2, hidden=512, heads=8, ffn_hidden=512, vocab=1000, seq_len=256,
                       activation="gelu")
    shapes = dense_linear_shapes(square, 1)
    assert len(shapes) == 4 and len(set(shapes)) == 2
    assert dummy_wgrad_bytes(Strategy(), shapes) == 2 * (3 * 512 * 512 + 512 * 512)


@pytest.mark.parametrize("change", [dict(gradient_accumulation_fusion=False), dict(loss_impl="torch"),
                                    dict(zero=2), dict(zero=3)])
def test_no_main_grad_path_keeps_no_placeholders(change):
    assert dummy_wgrad_bytes(Strategy(dp=8, **change), dense_linear_shapes(LLAMA, 1)) == 0


@settings(max_examples=30, deadline=None)
@given(ep=st.sampled_from([1, 2, 4, 8, 16]), etp=st.sampled_from([1, 2]))
def test_an_moe_stage_holds_one_placeholder_per_expert_shape_however_many_experts_it_holds(ep, etp):
    s = Strategy(tp=2, dp=32, sequence_parallel=True, ep=ep, etp=etp, global_batch=64, zero=1)
    h, w, shared = 512, 256 // etp, 256 // 2
    shapes = {(3 * 512 // 2, h), (h, 512 // 2),            # QKV (8 heads, 8 KV heads of 64) and projection, TP 2
              (2 * 2048 // 2, h), (h, 2048 // 2),          # the dense layer's SwiGLU MLP
              (2 * w, h), (h, w), (2 * shared, h), (h, shared),   # every routed expert's, the shared expert's
              (1024 // 2, h)}                              # the output layer
    held = max(backward_working_bytes(MOE, s), fam.moe_backward_working_bytes(MOE, s))
    assert fam.memory(MOE, CLUSTER, s)[0].buffers == 2 * sum(r * c for r, c in shapes) + held


def test_mla_down_projections_are_whole_on_every_tp_rank():
    model = get_model("deepseek-v3")
    shapes = fam.linear_shapes(model, Strategy(tp=4, dp=16, ep=8, global_batch=64), 0, 1)
    assert (model.q_lora_rank, model.hidden) in shapes
    assert (model.kv_lora_rank + model.qk_rope_head_dim, model.hidden) in shapes
    assert (model.heads * model.qk_head_dim // 4, model.q_lora_rank) in shapes


@pytest.mark.parametrize("tp, cp, mb", [(1, 1, 1), (2, 1, 2), (4, 2, 1), (8, 4, 2)])
def test_the_running_backward_holds_fc1_s_output_and_input_gradients(tp, cp, mb):
    # SimuMax dense_module.py: a linear layer's backward holds its output's gradient and writes its input's; the
    # widest of a SwiGLU layer is fc1 (2f/t wide, h wide), over the whole sequence of the micro-batch
    s = Strategy(tp=tp, cp=cp, dp=64 // (tp * cp), micro_batch=mb, global_batch=64, sequence_parallel=tp > 1)
    tokens = LLAMA.seq_len / cp * mb
    assert backward_working_bytes(LLAMA, s) == 2 * tokens * (2 * 4096 / tp + 1024)


def test_an_moe_layer_s_running_backward_holds_the_widest_of_attention_experts_and_shared_experts():
    s = Strategy(tp=2, dp=32, sequence_parallel=True, ep=4, global_batch=64, zero=1)
    rows = MOE.experts // s.ep * moe_layer.expert_rows(MOE, s)
    routed = 2 * rows * (2 * 256 + 512)            # every local expert's routed rows: fc1's 2·moe_ffn and h gradients
    shared = 2 * 512 * (2 * 256 / 2 + 512)         # the shared expert over the whole sequence, TP 2
    attention = 2 * 512 * (3 * 512 / 2 + 512)      # QKV's output and input gradients
    assert fam.moe_backward_working_bytes(MOE, s) == max(routed, shared, attention)
