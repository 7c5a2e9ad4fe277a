"""Megatron's fused scale-mask-softmax takes the scores only when b·(local heads) and s_q are multiples of 4
(FusedScaleMaskSoftmax.is_kernel_available); otherwise the unfused fp32 path adds four element-wise kernels each
way and doubles the softmax's bytes per score."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.transformer import layer
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec

GPT = ModelSpec(name="gpt-h2048", layers=2, hidden=2048, heads=16, ffn_hidden=8192, vocab=50257, seq_len=1024)


@pytest.mark.parametrize("b, heads, s, fused", [(1, 2, 1024, False), (2, 2, 1024, True), (1, 4, 1024, True),
                                                 (3, 2, 1024, False), (1, 12, 2048, True), (1, 4, 1022, False),
                                                 (1, 4, 16, False)])
def test_the_kernel_constraint(b, heads, s, fused):
    assert layer.fused_softmax_applies(b, s, s, heads) is fused


def test_unfused_layer_adds_four_kernels_each_way_and_their_bytes():
    c = load_cluster("dgx-a100-80g", 8)
    assert not c.flash_attention
    fused = layer.layer_compute(GPT, c, 8, 1, False, 2, "full")       # 2·2 heads: fused
    unfused = layer.layer_compute(GPT, c, 8, 1, False, 1, "full")     # 1·2 heads: PyTorch fp32 softmax
    assert len(unfused.forward) == len(fused.forward) + 4
    assert len(unfused.backward) == len(fused.backward) + 4
    assert unfused.recompute == unfused.forward
    scores = 1 * 2 * 1024 * 1024
    extra = [op for op in unfused.forward if op.name.startswith("softmax.")]
    # casts 2+4 and 4+2, scale and masked fill 4+4 bytes a score (forward_torch_softmax)
    assert sum(op.bytes for op in extra) == pytest.approx(28 * scores)
    core = next(op for op in unfused.forward if op.name == "attention.core")
    core_fused = layer.attention_ops(c, GPT, 1, 1024, 1024, 2, GPT.dropout)[0]
    # the softmax reads and writes fp32 instead of 16-bit scores: 4 more bytes a score forward
    assert core.bytes - core_fused.bytes == pytest.approx(4 * scores)


def test_flash_attention_never_takes_the_unfused_path():
    c = load_cluster("dgx-a100-80g", 8)
    c = replace(c, flash_attention=True)
    lay = layer.layer_compute(GPT, c, 8, 1, False, 1, "full")
    assert not any(op.name.startswith("softmax.") for op in lay.forward + lay.backward)
