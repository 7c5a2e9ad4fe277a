"""DeepSeek-V3's mechanisms in the MoE cost model, against closed forms: node-limited routing (route_nodes), FP8
dispatch bytes, FP8 GEMMs under a precision, recompute modules (norms, MLA up-projections, SwiGLU), and their
validity rules."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from autoplan.families.transformer import moe_layer as moe
from autoplan.hardware import network
from autoplan.hardware.compute import BF16, FP8
from autoplan.families.transformer import moe as fam
from autoplan.errors import SpecError
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.frameworks import megatron_violations
from autoplan.families.transformer.validity import knob_violations, violations

SMALL = ModelSpec(name="small-moe", layers=8, hidden=512, heads=8, ffn_hidden=2048, vocab=1024, seq_len=512,
                  activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False,
                  dropout=False, experts=64, top_k=8, moe_ffn_hidden=256, shared_experts=1, dense_layers=1)
MLA = replace(SMALL, name="small-mla", q_lora_rank=96, kv_lora_rank=64, qk_rope_head_dim=32, head_dim=64,
              v_head_dim=64)


@pytest.fixture(scope="module")
def h800():
    return load_cluster("dgx-h800-80g", 64)


def _plan(**kw) -> Strategy:
    return Strategy(**{**dict(dp=64, global_batch=128, zero=1), **kw})


# ------------------------------------------------------------------------------------- node-limited routing

@given(m=st.integers(1, 8), ep=st.sampled_from([16, 32, 64]), top_k=st.sampled_from([2, 4, 8]))
def test_inter_node_copies_per_token_are_the_reached_remote_nodes(m, ep, top_k):
    model = replace(SMALL, top_k=top_k, route_nodes=m)
    shape = network.group_shape(8, ep, 1)
    nodes = ep // 8
    # DeepSeek-V3 §3.2.2: one IB crossing per target node, at most min(M, top_k, nodes) nodes, 1/nodes of them local
    assert moe.inter_node_copies(model, shape) == pytest.approx(min(m, top_k, nodes) * (nodes - 1) / nodes)
    # the bound the brief of node-limited routing states: at most M·h per token over IB, never above top_k·h
    assert moe.inter_node_copies(model, shape) <= min(m, top_k)
    unlimited = replace(model, route_nodes=0)
    assert moe.inter_node_copies(unlimited, shape) == pytest.approx(top_k * (ep - 8) / ep)
    assert moe.inter_node_copies(model, shape) <= moe.inter_node_copies(unlimited, shape) + 1e-12


def test_routing_inside_one_node_crosses_no_network():
    assert moe.inter_node_copies(replace(SMALL, route_nodes=4), network.group_shape(8, 8, 1)) == 0.0


def test_without_node_limit_the_all_to_all_is_the_pairwise_exchange(h800):
    s = _plan(ep=32)
    assert moe.routed_a2a_time(SMALL, h800, s, BF16) == network.all_to_all(h800, moe.ep_shape(h800, s),
                                                                         moe.dispatch_bytes(SMALL, s))


def test_node_limited_all_to_all_is_the_slower_of_ib_and_nvlink(h800):
    model, s = replace(SMALL, route_nodes=2), _plan(ep=32)
    shape = moe.ep_shape(h800, s)
    tokens = moe.local_tokens(model, s)
    inter = BF16 * tokens * model.hidden * 2 * 3 / 4                  # 2 of 4 nodes reached, 3/4 of them remote
    intra = BF16 * tokens * model.top_k * model.hidden * 7 / 8        # copies forwarded inside the target node
    nvl, ib = h800.tiers[0], network._inter_tier(h800, shape)
    want = max(intra / network._rate(nvl, intra), inter / network._rate(ib, inter)) + 3 * ib.latency + 7 * nvl.latency
    assert moe.routed_a2a_time(model, h800, s, BF16) == pytest.approx(want)
    assert moe.routed_a2a_time(model, h800, s, BF16) < moe.routed_a2a_time(SMALL, h800, s, BF16)


def test_route_nodes_needs_experts_and_a_count():
    with pytest.raises(SpecError, match="route_nodes"):
        ModelSpec(name="d", layers=2, hidden=64, heads=2, ffn_hidden=128, vocab=100, seq_len=64, route_nodes=4)
    with pytest.raises(SpecError, match="route_nodes"):
        replace(SMALL, route_nodes=-1)


def test_the_catalog_deepseek_v3_routes_to_four_nodes():
    assert get_model("deepseek-v3").route_nodes == 4


# ------------------------------------------------------------------------------------------------ FP8 dispatch

@given(ep=st.sampled_from([2, 8, 32]), mb=st.integers(1, 3))
def test_an_deepseek_fp8_moves_one_byte_and_a_scale_per_128_values_and_combine_stays_bf16(ep, mb):
    s = _plan(ep=ep, micro_batch=mb, precision="fp8-blockwise", deepseek_fp8=True)
    copies = moe.local_tokens(SMALL, s) * SMALL.top_k * SMALL.hidden
    assert moe.dispatch_bytes(SMALL, s) == pytest.approx(copies * (FP8 + 4 / 128))
    assert moe.combine_bytes(SMALL, s) == pytest.approx(copies * BF16)
    # Megatron-LM's blockwise recipe, tensor-wise FP8 (Transformer Engine) and BF16 dispatch in BF16
    for precision in ("bf16", "fp8", "fp8-blockwise"):
        assert moe.dispatch_bytes(SMALL, _plan(ep=ep, micro_batch=mb, precision=precision)) == copies * BF16


def test_an_deepseek_fp8_needs_the_blockwise_recipe_and_experts_in_parallel_and_megatron_has_none():
    assert any("deepseek_fp8" in v for v in knob_violations(SMALL, 8, _plan(ep=8, precision="fp8", deepseek_fp8=True)))
    assert any("deepseek_fp8" in v for v in knob_violations(
        SMALL, 8, _plan(ep=1, dp=8, precision="fp8-blockwise", deepseek_fp8=True)))
    s = _plan(ep=8, precision="fp8-blockwise", deepseek_fp8=True)
    assert not knob_violations(SMALL, 8, s)
    assert any("dispatches BF16" in v for v in megatron_violations(SMALL, s))
    assert not any("dispatch" in v for v in megatron_violations(SMALL, replace(s, deepseek_fp8=False)))


def test_a_layer_s_all_to_alls_are_an_deepseek_fp8_and_a_bf16_combine(h800):
    s = _plan(ep=32, precision="fp8-blockwise", deepseek_fp8=True)
    lay = moe.moe_layer(SMALL, h800, moe.layer_key(s))
    want = (moe.routed_a2a_time(SMALL, h800, s, FP8 + 4 / 128) + moe.routed_a2a_time(SMALL, h800, s, BF16))
    assert lay.a2a_forward == pytest.approx(want)
    assert lay.a2a_forward < moe.moe_layer(SMALL, h800, moe.layer_key(_plan(ep=32))).a2a_forward


# ------------------------------------------------------------------------------------------------- FP8 GEMMs

def test_fp8_runs_the_expert_mla_and_shared_gemms_in_fp8_and_keeps_their_flops(h800):
    bf, f8 = _plan(ep=8), _plan(ep=8, precision="fp8-blockwise")
    a, b = (moe.moe_layer(MLA, h800, moe.layer_key(x)).compute for x in (bf, f8))
    gemms = {"expert.fc1", "expert.fc2", "shared.fc1", "shared.fc2", "kv_down", "kv_up", "q_down", "q_up", "o_proj"}
    flops = {op.name: op.flops for op in a.forward if op.name in gemms}
    assert set(flops) == gemms
    assert {op.name: op.flops for op in b.forward if op.name in gemms} == flops
    # an FP8 GEMM moves 1-byte operands (compute.gemm_op), and each FP8 linear layer has its input cast
    bytes_bf = {op.name: op.bytes for op in a.forward}
    assert all(op.bytes < bytes_bf[op.name] for op in b.forward if op.name in gemms)
    assert {f"{g}.quantize" for g in gemms if not g.startswith("shared")} <= {op.name for op in b.forward}
    assert not any(op.name.endswith("quantize") for op in a.forward)
    # the router stays BF16 (DeepSeek-V3 §3.3.1: gating in its original precision)
    assert next(op for op in b.forward if op.name == "router").bytes == next(
        op for op in a.forward if op.name == "router").bytes


def test_plans_differing_in_precision_do_not_share_pass_costs(h800):
    bf, f8 = _plan(ep=8, pp=2, dp=32), _plan(ep=8, pp=2, dp=32, precision="fp8-blockwise")
    # tiny GEMMs: the FP8 casts may cost more than the GEMMs save; what matters is that the costs differ
    assert fam.pass_costs(SMALL, h800, f8)[(True, False, False)].seconds != fam.pass_costs(
        SMALL, h800, bf)[(True, False, False)].seconds


# ----------------------------------------------------------------------------------------- recompute modules

def test_recompute_modules_runs_the_norms_mla_up_projections_and_swiglu_again(h800):
    lay = moe.moe_layer(MLA, h800, moe.layer_key(_plan(ep=8, recompute="modules"))).compute
    assert {op.name for op in lay.recompute} == {"norm1", "norm2", "kv_up", "q_up", "expert.activation",
                                                  "shared.activation"}
    assert lay.recompute_collectives == ()


def test_recompute_modules_drops_the_norm_outputs_qkv_and_fc2_inputs(h800):
    model = MLA
    none, mods = _plan(ep=8), _plan(ep=8, recompute="modules")
    # recompute none keeps the flash log-sum-exp, so does modules (the attention core is not recomputed)
    d0, m0 = fam.moe_activation_bytes(model, none, True)
    d1, m1 = fam.moe_activation_bytes(model, mods, True)
    sb, a, h = model.seq_len, model.heads, model.hidden
    rows = model.experts // 8 * moe.expert_rows(model, none)
    norms = 2 * 2 * sb * h                                            # two BF16 norm outputs
    qkv = 2 * sb * a * (2 * model.qk_head_dim + model.value_dim)      # Q, K, V of the up-projections
    assert d0 - d1 == pytest.approx(norms + qkv)
    fc2_inputs = 2 * rows * model.moe_ffn_hidden + 2 * sb * model.moe_ffn_hidden
    assert m0 - m1 == pytest.approx(norms + qkv + fc2_inputs)
    assert m1 > fam.moe_activation_bytes(model, _plan(ep=8, recompute="full"), True)[1]


def test_fp8_keeps_linear_inputs_in_one_byte():
    bf, f8 = _plan(ep=8), _plan(ep=8, precision="fp8-blockwise")
    rows = SMALL.experts // 8 * moe.expert_rows(SMALL, bf)
    # the routed copies' fc1 input h and fc2 input f per row, one byte instead of two
    routed = rows * (SMALL.hidden + SMALL.moe_ffn_hidden)
    dense_bf, moe_bf = fam.moe_activation_bytes(SMALL, bf, True)
    dense_f8, moe_f8 = fam.moe_activation_bytes(SMALL, f8, True)
    assert dense_bf > dense_f8
    shared_fc2 = SMALL.seq_len * SMALL.moe_ffn_hidden
    assert (moe_bf - moe_f8) - (dense_bf - dense_f8) == pytest.approx(routed + shared_fc2 - SMALL.seq_len
                                                                      * SMALL.ffn_hidden)


def test_recompute_modules_is_only_for_moe_models():
    dense = ModelSpec(name="d", layers=2, hidden=64, heads=2, ffn_hidden=128, vocab=100, seq_len=64)
    assert any("modules" in v for v in violations(dense, 1, Strategy(global_batch=1, recompute="modules")))


# --------------------------------------------------------------------------------- the published layout

@settings(deadline=None, max_examples=1)
@given(st.just(None))
def test_deepseek_v3_s_published_layout_fits_without_full_recompute_only_with_its_features(_):
    model, cluster = get_model("deepseek-v3"), load_cluster("dgx-h800-80g", 2048)
    plan = dict(tp=1, pp=16, dp=128, ep=64, global_batch=15360, zero=1, first_stage_layers=3, last_stage_layers=2)
    assert not evaluate(model, cluster, Strategy(**plan, recompute="none")).feasible
    assert not evaluate(model, cluster, Strategy(**plan, recompute="modules")).feasible
    e = evaluate(model, cluster, Strategy(**plan, recompute="modules", precision="fp8-blockwise"))
    assert e.feasible and e.metrics.step_time < evaluate(
        model, cluster, Strategy(**plan, recompute="full", precision="fp8-blockwise")).metrics.step_time


# ------------------------------------------------------------------------------------ zero-bubble schedules

def _zb(schedule: str, **kw) -> Strategy:
    v = 2 if schedule in ("zbv", "dualpipev") else 1
    return _plan(**{**dict(pp=2, dp=32, ep=8, global_batch=256, schedule=schedule, virtual_stages=v), **kw})


@pytest.mark.parametrize("schedule", ["zb-h1", "zbv", "dualpipev"])
def test_a_moe_backward_splits_into_b_and_its_weight_gradient_gemms(h800, schedule):
    s = _zb(schedule)
    w = fam.step_costs(MLA, h800, s).weight_grad
    assert w is not None
    dense, mo = fam._layers(MLA, h800, moe.layer_key(s))
    wgrad = sum(op.seconds for op in mo.compute.backward if op.name.endswith(".wgrad"))
    first, mid, last = fam.chunk_layers(MLA.layers, s)
    assert w[(False, False)].seconds == pytest.approx(mid * wgrad)
    # W is part of the backward it splits, never more
    passes = fam.pass_costs(MLA, h800, s)
    for (first_, last_), cost in w.items():
        assert 0 < cost.seconds < dict(passes[(False, first_, last_)].parts)["compute"]
    assert fam.step_costs(MLA, h800, _zb("1f1b")).weight_grad is None


def test_dualpipev_hides_all_to_alls_in_its_pairs_not_with_ep_overlap(h800):
    assert any("dualpipev" in v for v in fam.violations(MLA, 64, _zb("dualpipev", ep_overlap=True)))
    s = _zb("dualpipev")
    moe.moe_layer(MLA, h800, moe.layer_key(s))
    cost = fam.pass_costs(MLA, h800, s)[(True, False, False)]
    plain = fam.pass_costs(MLA, h800, _zb("zbv"))[(True, False, False)]
    # the whole all-to-all stays a communication part of the pass: the fused pair hides it and charges the
    # compute beside it the SMs its kernels hold (costs.overlapped); a pass outside a pair pays nothing more
    assert dict(cost.parts) == pytest.approx(dict(plain.parts))


def test_dualpipe_pairs_cost_their_hidden_communication_20_of_the_sms(h800):
    from autoplan.families.costs import PAIR_COMM_SMS, overlapped
    from autoplan.sim.workload import lower
    s = _zb("dualpipev")
    low = lower(MLA, h800, s)
    passes = fam.pass_costs(MLA, h800, s)
    fwd, bwd = passes[(True, False, False)], passes[(False, False, False)]
    # DeepSeek-V3 §3.2.2: 20 of an H800's 132 SMs
    pair = overlapped(fwd, bwd, PAIR_COMM_SMS / 132)
    assert pair.seconds > overlapped(fwd, bwd).seconds
    # the lowered step's fused pairs of a middle stage (neither end of the V) are priced so
    assert any(c.seconds == pytest.approx(pair.seconds, rel=1e-12) for c in low._costs)


def test_check_lists_the_dispatch_and_combine_whose_times_make_the_layer_s_all_to_alls(h800):
    model, s = replace(MLA, route_nodes=2), _plan(ep=32, precision="fp8-blockwise", deepseek_fp8=True)
    rows = [c for c in fam.collectives(model, h800, s) if c.group == "ep"]
    assert [r.when.split(",")[0] for r in rows] == ["dispatch", "combine"]
    assert rows[0].nbytes < rows[1].nbytes
    assert sum(r.seconds for r in rows) == pytest.approx(moe.moe_layer(model, h800, moe.layer_key(s)).a2a_forward)
