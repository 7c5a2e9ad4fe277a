"""The flex token dispatcher (DeepEP / HybridEP) against closed forms: a token crosses the inter-node network once
per remote node holding one of its experts, the copies for that node's GPUs forwarded over NVLink."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from autoplan.families.strategy import Strategy
from autoplan.families.transformer import moe_layer as moe
from autoplan.families.transformer.validity import knob_violations
from autoplan.hardware import network
from autoplan.hardware.compute import BF16
from autoplan.sim.simulate import score
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec

QWEN_LIKE = ModelSpec(name="small-moe", layers=4, hidden=512, heads=8, ffn_hidden=2048, vocab=1024, seq_len=512,
                      activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False,
                      dropout=False, experts=128, top_k=8, moe_ffn_hidden=256)


def _plan(**kw) -> Strategy:
    return Strategy(**{**dict(dp=16, global_batch=32, zero=1, ep=16), **kw})


@pytest.fixture(scope="module")
def h100():
    return load_cluster("dgx-h100-80g", 16)


@given(nodes=st.sampled_from([2, 4, 8]), top_k=st.sampled_from([1, 2, 8]))
def test_remote_nodes_reached_is_the_hypergeometric_expectation(nodes, top_k):
    model = replace(QWEN_LIKE, top_k=top_k)
    shape = network.group_shape(8, 8 * nodes, 1)
    per_node = model.experts // nodes
    # each other node holds per_node of the experts; it is missed when all top_k picks fall elsewhere
    missed = math.comb(model.experts - per_node, top_k) / math.comb(model.experts, top_k)
    assert moe.remote_nodes_reached(model, shape) == pytest.approx((nodes - 1) * (1 - missed))
    # never more crossings than the all-to-all's remote copies, nor than remote nodes
    assert moe.remote_nodes_reached(model, shape) <= moe.inter_node_copies(model, shape) + 1e-12
    assert moe.remote_nodes_reached(model, shape) <= nodes - 1
    # top-1 routing: the same crossings as the all-to-all (one copy, off the node with chance (n − 1)/n)
    if top_k == 1:
        assert moe.remote_nodes_reached(model, shape) == pytest.approx(moe.inter_node_copies(model, shape))


def test_flex_over_two_nodes_sends_a_token_once_to_the_other_node(h100):
    s = _plan(moe_dispatcher="flex")
    shape = moe.ep_shape(h100, s)
    assert (shape.nodes, shape.per_node) == (2, 8)
    tokens = moe.local_tokens(QWEN_LIKE, s)
    reached = 1 - math.comb(64, 8) / math.comb(128, 8)                 # the other node holds 64 of the 128 experts
    inter = BF16 * tokens * QWEN_LIKE.hidden * reached
    intra = BF16 * tokens * QWEN_LIKE.top_k * QWEN_LIKE.hidden * 7 / 8
    assert moe.routed_a2a_time(QWEN_LIKE, h100, s, BF16) == pytest.approx(
        network.two_hop_all_to_all(h100, shape, inter, intra))
    # the all-to-all sends 8 × 8/16 = 4 copies of each token across instead of about one: with tokens enough to be
    # bandwidth-bound, the NIC-bound exchange takes about a quarter of the time
    big = replace(QWEN_LIKE, hidden=4096, seq_len=4096)
    ratio = moe.routed_a2a_time(big, h100, s, BF16) / moe.routed_a2a_time(big, h100, _plan(), BF16)
    assert 0.2 < ratio < 0.35


def test_flex_inside_one_node_is_the_all_to_all(h100):
    one_node = load_cluster("dgx-h100-80g", 8)
    s, flex = _plan(dp=8, ep=8), _plan(dp=8, ep=8, moe_dispatcher="flex")
    assert moe.routed_a2a_time(QWEN_LIKE, one_node, flex, BF16) == moe.routed_a2a_time(QWEN_LIKE, one_node, s, BF16)


def test_only_the_alltoall_dispatcher_sorts_tokens_into_local_expert_order(h100):
    # Megatron-Core token_dispatcher.py: sort_chunks_by_idxs in MoEAlltoAllTokenDispatcher only; the flex
    # dispatcher permutes once each way (DeepEP's output by Megatron, HybridEP inside its dispatch)
    def names(s):
        lay = moe.moe_layer(QWEN_LIKE, h100, moe.layer_key(s)).compute
        return [op.name for op in lay.forward + lay.backward]
    alltoall, flex = names(_plan()), names(_plan(moe_dispatcher="flex"))
    assert {"sort_chunks", "unsort_chunks"} <= set(alltoall)
    assert not {"sort_chunks", "unsort_chunks"} & set(flex)
    assert flex.count("permute") == alltoall.count("permute") and flex.count("unpermute") == alltoall.count("unpermute")


def test_flex_shortens_a_two_node_step_and_shows_in_the_label(h100):
    alltoall, flex = score(QWEN_LIKE, h100, _plan()), score(QWEN_LIKE, h100, _plan(moe_dispatcher="flex"))
    assert flex.step_time < alltoall.step_time
    assert "flex" in _plan(moe_dispatcher="flex").short() and "flex" not in _plan().short()


def test_flex_needs_expert_parallelism():
    assert any("dispatcher" in r for r in knob_violations(QWEN_LIKE, 16, _plan(ep=1, moe_dispatcher="flex")))
    assert not any("dispatcher" in r for r in knob_violations(QWEN_LIKE, 16, _plan(moe_dispatcher="flex")))
