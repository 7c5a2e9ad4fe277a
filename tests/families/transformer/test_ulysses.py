"""Context parallelism by all-to-all (DeepSpeed-Ulysses) and hierarchical a2a+p2p: bytes, seconds, validity."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.hardware import network
from autoplan.families.transformer.passes import _cp_ring, pass_costs, ulysses_bytes, ulysses_seconds
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.hardware.support import cp_a2a_degree, hardware_violations
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations

H100 = load_cluster("dgx-h100-80g", 64)
LLAMA = get_model("llama3-8b")


def test_ulysses_bytes_closed_form():
    s = Strategy(tp=2, cp=4, dp=8, global_batch=64, micro_batch=2, cp_comm="a2a")
    q, kv = ulysses_bytes(LLAMA, s)
    # Jacobs et al. 2023 §3: one b·(s/cp) slice of the rank's heads, bf16
    assert q == 2 * 2 * (LLAMA.seq_len // 4) * LLAMA.q_dim // 2
    assert kv == 2 * 2 * (LLAMA.seq_len // 4) * LLAMA.kv_dim // 2


def test_ulysses_seconds_are_four_all_to_alls_on_the_cp_group():
    s = Strategy(tp=1, cp=8, dp=8, global_batch=64, cp_comm="a2a")
    q, kv = ulysses_bytes(LLAMA, s)
    shape = network.group_shape(8, 8, 1)
    expected = 2 * network.all_to_all(H100, shape, q) + 2 * network.all_to_all(H100, shape, kv)
    assert ulysses_seconds(LLAMA, H100, s, 8) == pytest.approx(expected)
    # inside one node: each rank sends (n−1)/n of its bytes over NVLink (pairwise exchange)
    nvl = H100.tiers[0]
    rate = nvl.bandwidth * nvl.efficiency * q / (q + nvl.half_bandwidth_bytes)
    assert network.all_to_all(H100, shape, q) == pytest.approx(7 / 8 * q / rate + 7 * nvl.latency)
    fwd, bwd = _cp_ring(LLAMA, H100, s, attention_forward=1.0)
    assert fwd == bwd == pytest.approx(expected)           # on the critical path: nothing hides them


def test_a2a_plus_p2p_puts_the_all_to_all_inside_the_node():
    s = Strategy(tp=2, cp=8, dp=4, global_batch=64, cp_comm="a2a+p2p")
    assert cp_a2a_degree(s, 8) == 4                         # 8 // tp ranks of the CP group share a node
    assert cp_a2a_degree(replace(s, cp_comm="a2a"), 8) == 8
    assert cp_a2a_degree(replace(s, cp_comm="p2p"), 8) == 1
    p2p, mixed = (pass_costs(LLAMA, H100, replace(s, cp_comm=c)) for c in ("p2p", "a2a+p2p"))
    assert dict(mixed[(True, False, False)].parts)["cp"] != dict(p2p[(True, False, False)].parts)["cp"]


def test_default_p2p_is_unchanged_by_the_knob():
    s = Strategy(tp=1, cp=2, dp=32, global_batch=64)
    assert s.cp_comm == "p2p"
    assert pass_costs(LLAMA, H100, s) == pass_costs(LLAMA, H100, replace(s, cp_comm="p2p"))


def test_ulysses_needs_heads_divisible_by_cp_times_tp():
    model = replace(LLAMA, heads=24, kv_heads=8, head_dim=LLAMA.hidden // 32)
    s = Strategy(tp=2, cp=8, dp=4, global_batch=64, cp_comm="a2a")
    assert any("attention heads 24 are not divisible by cp·tp = 8·2" in r for r in violations(model, 64, s))
    assert not any("cp·tp" in r for r in violations(LLAMA, 64, s))
    mixed = replace(s, cp_comm="a2a+p2p")                   # only the in-node a2a degree must divide the heads
    assert not any("cp·tp" in r for r in violations(model, 64, mixed))
    assert hardware_violations(model, H100, mixed) == []
    bad = replace(model, heads=20, kv_heads=4, head_dim=LLAMA.hidden // 32)
    assert any("tp·(CP ranks per node) = 2·4" in r for r in hardware_violations(bad, H100, mixed))


def test_all_to_all_across_nodes_closed_form():
    # pairwise exchange (Thakur et al. 2005) over 2 nodes of 8: 7/16 of the buffer over NVLink, 8/16 over the
    # NICs, the slower of the two, plus n−1 steps of the inter-node latency
    shape = network.group_shape(8, 16, 1)
    nbytes = 64 * 2**20
    nvl, ib = H100.tiers[0], H100.tier_spanning(shape.span)
    r_nvl = nvl.bandwidth * nvl.efficiency * nbytes / (nbytes + nvl.half_bandwidth_bytes)
    r_ib = ib.bandwidth * ib.efficiency * (nbytes / (nbytes + ib.half_bandwidth_bytes) if ib.half_bandwidth_bytes else 1)
    expected = max(7 / 16 * nbytes / r_nvl, 8 / 16 * nbytes / r_ib) + 15 * ib.latency
    assert network.all_to_all(H100, shape, nbytes) == pytest.approx(expected)


def test_mla_keys_carry_their_rope_part_in_cp_exchanges():
    from autoplan.families.transformer.passes import cp_kv_bytes
    mla = get_model("deepseek-v3")
    s = Strategy(tp=2, cp=2, pp=16, dp=32, global_batch=2048, sequence_parallel=True)
    tokens = mla.seq_len // 2
    # DeepSeek-V2 §2.1.3: 128 key heads of 128 + 64 (decoupled RoPE) and value heads of 128, bf16
    assert cp_kv_bytes(mla, s) == 2 * tokens * 128 * (192 + 128) // 2
    q, kv = ulysses_bytes(mla, s)
    assert q == kv == 2 * tokens * 128 * (192 + 128) // 2 // 2
    # a model without MLA: K and V of head_dim each, as before
    assert cp_kv_bytes(LLAMA, s) == 2 * 2 * (LLAMA.seq_len // 2) * LLAMA.kv_dim // 2


def test_ring_merges_closed_form_for_two_and_four_ranks():
    # Transformer Engine's AttnFuncWithCPAndKVP2P: K/V into the ring buffer (2·kv), the zeroed output (o), a merge of
    # each step's output (3·o on a full step; a step past the diagonal merges half), a copy of the half it needs
    from autoplan.families.transformer.layer import cp_ring_merge_ops
    q, o, kv = 100.0, 100.0, 50.0
    fwd, bwd = cp_ring_merge_ops(H100.gpu, q, o, kv, 2)
    # ring 2: step 1 takes the half-query branch on one rank of two (before = after = 1/2)
    assert fwd.bytes == 2 * (2 * kv + o + 3 * o + 0.5 * (kv + 3 * o) + 0.5 * (q + 1.5 * o))
    assert bwd.bytes == 2 * (4 * kv + 2 * q + 0.5 * (4 * q + 2.5 * kv) + 0.5 * (5 * q + 3 * kv))
    fwd4, _ = cp_ring_merge_ops(H100.gpu, q, o, kv, 4)
    after = (1 + 2 + 3) / 4                                  # ranks below step i take the half-query branch
    assert fwd4.bytes == 2 * (2 * kv + 4 * o + (3 - after) * (kv + 3 * o) + after * (q + 1.5 * o))
    assert fwd4.seconds > fwd.seconds and bwd.seconds > fwd.seconds


def test_a_ring_pays_its_merges_and_ulysses_does_not():
    from autoplan.families.transformer.layer import cp_ring_merge_ops
    from autoplan.families.transformer.passes import cp_kv_bytes
    s = Strategy(tp=1, cp=2, dp=32, global_batch=64)
    huge = 1e3                                               # every K/V exchange hidden behind the attention
    fwd, bwd = _cp_ring(LLAMA, H100, s, attention_forward=huge)
    tokens = LLAMA.seq_len // 2
    mf, mb = cp_ring_merge_ops(H100.gpu, tokens * LLAMA.q_dim, tokens * LLAMA.q_dim, cp_kv_bytes(LLAMA, s) / 2, 2)
    hop = network.send_recv(H100, True, cp_kv_bytes(LLAMA, s))
    assert fwd == pytest.approx(mf.seconds + hop / 2) and bwd == pytest.approx(mb.seconds + hop / 2)
    ulysses = replace(s, cp_comm="a2a")
    assert _cp_ring(LLAMA, H100, ulysses, attention_forward=huge)[0] == pytest.approx(
        ulysses_seconds(LLAMA, H100, ulysses, 2))
