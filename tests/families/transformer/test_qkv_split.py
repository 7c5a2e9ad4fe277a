"""What a layer does between its QKV GEMM and the attention (Megatron-Core's query reshape under grouped-query
attention, Transformer Engine's fused RoPE, the dQ/dK/dV concatenation): bytes and kernels in closed form."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.transformer.layer import layer_compute, qkv_split_ops
from autoplan.specs import load_cluster

H100 = load_cluster("dgx-h100-80g", 8)
LLAMA = get_model("llama3-8b")               # RoPE, 32 query heads over 8 key-value groups, head dim 128


def test_rope_and_grouped_queries_closed_form():
    tokens, tp = 4096, 2
    fwd, bwd = qkv_split_ops(H100.gpu, LLAMA, tokens, tp)
    q = tokens * (32 // tp) * 128
    kv = tokens * (8 // tp) * 128
    # forward: RoPE reads and writes Q and K, the query reshape copies Q (16-bit); three kernels
    assert fwd[0].bytes == 2 * (2 * (q + kv) + 2 * q) and fwd[0].seconds == pytest.approx(
        fwd[0].bytes / (H100.gpu.hbm_bandwidth * H100.gpu.memory_efficiency) + 3 * H100.gpu.kernel_overhead)
    # backward: RoPE's on dQ and dK, then dQ, dK and dV concatenated (read and written once)
    assert bwd[0].bytes == 2 * (2 * (q + kv) + 2 * (q + 2 * kv))


def test_nothing_for_learned_positions_and_one_key_value_head_a_query_head():
    gpt = replace(LLAMA, position="learned", kv_heads=LLAMA.heads)
    assert qkv_split_ops(H100.gpu, gpt, 4096, 1) == ((), ())
    grouped_only = replace(LLAMA, position="learned")
    fwd, bwd = qkv_split_ops(H100.gpu, grouped_only, 4096, 1)
    assert fwd[0].bytes == 2 * 2 * 4096 * 32 * 128          # the query copy alone; the backward still concatenates


def test_more_tp_ranks_than_groups_keep_one_group_each():
    # Megatron-Core replicates a key-value group over the ranks that share it (num_query_groups_per_partition >= 1)
    fwd, _ = qkv_split_ops(H100.gpu, LLAMA, 1024, 16)
    q, kv = 1024 * 2 * 128, 1024 * 1 * 128
    assert fwd[0].bytes == 2 * (2 * (q + kv) + 2 * q)


def test_the_layer_runs_them_after_the_qkv_gemm_and_before_its_backward():
    lay = layer_compute(LLAMA, H100, 1, 1, False, 1, "none")
    names = [op.name for op in lay.forward]
    assert names.index("qkv.split") == names.index("qkv") + 1
    back = [op.name for op in lay.backward]
    assert back.index("qkv.split.bwd") < back.index("qkv.dgrad")


def test_qk_norms_read_and_write_the_queries_and_keys_once_and_keep_their_inputs():
    # Megatron-Core qk_layernorm (Qwen3): one RMSNorm over the queries, one over the keys; the backward twice the bytes
    from autoplan.families.transformer.memory import activation_bytes_per_layer
    from autoplan.families.strategy import Strategy
    tokens, tp = 4096, 2
    normed = replace(LLAMA, qk_norm=True)
    (split, norm), (norm_b, split_b) = qkv_split_ops(H100.gpu, normed, tokens, tp)
    q, kv = tokens * (32 // tp) * 128, tokens * (8 // tp) * 128
    assert (split, split_b) == tuple(op[0] for op in qkv_split_ops(H100.gpu, LLAMA, tokens, tp))
    assert norm.bytes == 2 * 2 * (q + kv) and norm_b.bytes == 2 * norm.bytes and norm.seconds == pytest.approx(
        norm.bytes / (H100.gpu.hbm_bandwidth * H100.gpu.memory_efficiency) + 2 * H100.gpu.kernel_overhead)
    s = Strategy(tp=tp, global_batch=8)
    extra = activation_bytes_per_layer(normed, s, True) - activation_bytes_per_layer(LLAMA, s, True)
    assert extra == pytest.approx(2 * LLAMA.seq_len * (LLAMA.q_dim + LLAMA.kv_dim) / tp)


def test_qwen3_has_qk_norms_from_the_catalog_and_its_config():
    from autoplan.families.transformer.hf import config_fields
    assert get_model("qwen3-30b-a3b").qk_norm and not LLAMA.qk_norm
    config = {"model_type": "qwen3", "hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16,
              "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072, "vocab_size": 151936,
              "max_position_embeddings": 40960, "hidden_act": "silu"}
    assert config_fields(config)["qk_norm"] is True
    assert "qk_norm" not in config_fields({**config, "model_type": "llama"})
