"""MoE costs: the all-to-all's bytes and placement, the grouped GEMM's rows, expert sharding of weights, gradients and
optimizer state, and Megatron-Core's validity rules, against closed forms."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from autoplan.families.transformer import moe_layer as moe
from autoplan.hardware import network
from autoplan.hardware.compute import BF16
from autoplan.families.transformer import moe as fam
from autoplan.families.transformer.memory import GRADIENT_BYTES, OPTIMIZER_BYTES, WEIGHT_BYTES
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

SMALL = ModelSpec(name="small-moe", layers=8, hidden=512, heads=8, ffn_hidden=2048, vocab=1024, seq_len=512,
                  activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False,
                  dropout=False, experts=16, top_k=2, moe_ffn_hidden=256, shared_experts=1, dense_layers=1)


@pytest.fixture(scope="module")
def h100_32():
    return load_cluster("dgx-h100-80g", 32)


def _plan(**kw) -> Strategy:
    base = dict(dp=32, global_batch=64, zero=1)
    return Strategy(**{**base, **kw})


@given(ep=st.sampled_from([2, 4, 8, 16]), mb=st.integers(1, 4), tp=st.sampled_from([1, 2]))
def test_a2a_bytes_leaving_a_gpu_are_tokens_topk_hidden_bf16_times_ep_minus_1_over_ep(ep, mb, tp):
    s = _plan(dp=32 // tp, tp=tp, sequence_parallel=tp > 1, ep=ep, micro_batch=mb)
    tokens = mb * SMALL.seq_len // tp                     # sequence parallelism shards the router's tokens
    assert moe.local_tokens(SMALL, s) == tokens
    assert moe.a2a_bytes_leaving(SMALL, s) == pytest.approx(tokens * 2 * SMALL.hidden * BF16 * (ep - 1) / ep)


def test_an_all_to_all_inside_a_node_is_nvlink_only_and_across_nodes_is_slower(h100_32):
    inside, across = _plan(ep=8), _plan(ep=16)
    assert moe.ep_shape(h100_32, inside) == network.GroupShape(size=8, per_node=8, nodes=1, span=8)
    assert moe.ep_shape(h100_32, across).nodes == 2
    nbytes = moe.dispatch_bytes(SMALL, inside)
    nvl = h100_32.tiers[0]
    rate = nvl.bandwidth * nvl.efficiency * nbytes / (nbytes + nvl.half_bandwidth_bytes)
    # pairwise exchange: 7/8 of the buffer over NVLink, 7 steps of latency
    assert moe.all_to_all_time(h100_32, inside, nbytes) == pytest.approx(7 / 8 * nbytes / rate + 7 * nvl.latency)
    assert moe.all_to_all_time(h100_32, across, nbytes) > moe.all_to_all_time(h100_32, inside, nbytes)


def test_expert_groups_are_laid_out_etp_then_ep_then_edp(h100_32):
    s = _plan(dp=16, tp=2, sequence_parallel=True, ep=4, etp=2)
    assert s.edp == 2 * 16 // (4 * 2) == 4
    assert moe.etp_shape(h100_32, s).span == 2
    assert moe.ep_shape(h100_32, s).span == 2 * 3 + 1          # ep ranks etp apart
    assert moe.edp_shape(h100_32, s) == network.GroupShape(size=4, per_node=1, nodes=4, span=8 * 3 + 1)



def test_expert_and_data_parallel_groups_sit_on_the_nvlink_domain_not_the_tray():
    # GB200 NVL72: trays of 4 GPUs, one NVLink domain of 72 — an MoE group placed like a dense one
    gb200 = load_cluster("gb200-nvl72", 128)
    assert gb200.gpus_per_node == 4 and gb200.domain_gpus == 72
    s = _plan(dp=32, tp=4, sequence_parallel=True, ep=8, etp=4)
    assert moe.ep_shape(gb200, s) == network.GroupShape(size=8, per_node=8, nodes=1, span=4 * 7 + 1)
    assert moe.edp_shape(gb200, s) == network.group_shape(72, s.edp, 32)
    dense = network.shape_of(gb200, s, "dp")
    assert dense.per_node == 18
    model = replace(SMALL, layers=4)
    tray_bound = replace(gb200, nvlink_domain_gpus=4)
    assert fam.step_costs(model, gb200, s).param_gather < fam.step_costs(model, tray_bound, s).param_gather

@given(ep=st.sampled_from([1, 2, 4, 8, 16]), mb=st.integers(1, 3))
def test_grouped_gemm_rows_and_flops_follow_the_token_count(ep, mb):
    s = _plan(ep=ep, micro_batch=mb)
    tokens = mb * SMALL.seq_len
    mean = ep * tokens * SMALL.top_k / SMALL.experts
    assert moe.expert_rows(SMALL, s) == math.ceil(mean * moe.LOAD_IMBALANCE)
    layer = moe.moe_layer(SMALL, load_cluster("dgx-h100-80g", 32), moe.layer_key(s))
    ops = {op.name: op for op in layer.compute.forward}
    local = SMALL.experts // ep
    # every GPU computes about tokens·top_k·imbalance rows through its experts, whatever ep is
    flops = ops["expert.fc1"].flops + ops["expert.fc2"].flops
    assert flops == pytest.approx(2 * local * moe.expert_rows(SMALL, s) * SMALL.expert_params())
    assert flops == pytest.approx(2 * tokens * SMALL.top_k * moe.LOAD_IMBALANCE * SMALL.expert_params(), rel=0.02)


def test_a_capacity_factor_caps_the_imbalance():
    assert moe.imbalance(replace(SMALL, capacity_factor=1.0)) == 1.0
    assert moe.imbalance(replace(SMALL, capacity_factor=2.0)) == moe.LOAD_IMBALANCE
    assert moe.imbalance(SMALL) == moe.LOAD_IMBALANCE


def test_expert_weights_are_sharded_over_ep_etp_and_their_optimizer_over_edp(h100_32):
    s = _plan(pp=2, dp=8, tp=2, sequence_parallel=True, ep=4, etp=2)
    mem = fam.memory(SMALL, h100_32, s)
    dense = fam.dense_per_stage(SMALL, s)
    assert dense == [1, 0]
    for i, m in enumerate(mem):
        moe_layers = 4 - dense[i]
        expert = moe_layers * SMALL.experts * SMALL.expert_params() / (s.ep * s.etp)
        non_expert, got_expert = fam.stage_params(SMALL, s, i)
        assert got_expert == pytest.approx(expert)
        assert m.weights == pytest.approx(WEIGHT_BYTES * (non_expert + expert))
        assert m.gradients == pytest.approx(GRADIENT_BYTES * (non_expert + expert))
        # the distributed optimizer: non-expert state over dp·cp, expert state over edp (Megatron-Core)
        assert m.optimizer == pytest.approx(OPTIMIZER_BYTES * (non_expert / (s.dp * s.cp) + expert / s.edp))
    assert fam.peak_memory(SMALL, h100_32, s) == pytest.approx(max(m.total for m in mem))


def test_more_expert_parallelism_holds_fewer_expert_weights(h100_32):
    totals = [fam.peak_memory(SMALL, h100_32, _plan(ep=ep, recompute="full")) for ep in (1, 2, 4, 8, 16)]
    assert totals == sorted(totals, reverse=True)


def test_dense_layers_fill_the_first_virtual_stages_in_order():
    s = _plan(pp=4, dp=8, schedule="interleaved", virtual_stages=2)
    many = replace(SMALL, dense_layers=3)                 # 8 layers over 4·2 chunks of 1: chunks 0, 1, 2
    assert fam.dense_per_stage(many, s) == [1, 1, 1, 0]
    assert sum(fam.dense_per_stage(SMALL, _plan(pp=2, dp=16))) == SMALL.dense_layers


def test_passes_carry_an_ep_part_only_with_expert_parallelism(h100_32):
    without = fam.pass_costs(SMALL, h100_32, _plan())
    with_ep = fam.pass_costs(SMALL, h100_32, _plan(ep=16))
    assert all(k != "ep" for p in without.values() for k, _ in p.parts)
    for key, p in with_ep.items():
        parts = dict(p.parts)
        assert parts["ep"] > 0
        if not key[0]:
            assert parts["ep"] == pytest.approx(dict(with_ep[(True, key[1], key[2])].parts)["ep"])


def test_a_simulated_moe_step_is_bounded_and_counts_active_flops(h100_32):
    s = _plan(ep=8, recompute="selective")
    e = evaluate(SMALL, h100_32, s)
    assert e.feasible, e.violations
    assert fam.lower_bound(SMALL, h100_32, s) <= e.metrics.step_time
    assert e.metrics.model_tflops_per_gpu == pytest.approx(
        SMALL.model_flops_per_iteration(64) / e.metrics.step_time / 32 / 1e12)


@pytest.mark.parametrize("plan, reason", [
    (dict(ep=3), "experts 16 are not divisible by ep 3"),
    (dict(dp=2, ep=4, pp=16), "ep·etp = 4·1 = 4 does not divide tp·cp·dp = 1·1·2 = 2"),
    (dict(etp=3), "moe_ffn_hidden 256 is not divisible by etp 3"),
    (dict(dp=16, tp=2), "a MoE model with tp 2 needs sequence parallelism"),
    (dict(zero=2), "ZeRO stage 2 is not modelled for MoE models"),
])
def test_invalid_expert_plans_say_why(plan, reason):
    s = _plan(**plan)
    assert any(reason in r for r in fam.violations(SMALL, 32, s)), fam.violations(SMALL, 32, s)


def test_expert_parallelism_on_a_dense_model_is_invalid():
    from autoplan.families.registry import violations

    gpt = get_model("gpt3")
    assert any("need a mixture-of-experts model" in r for r in violations(gpt, 32, _plan(ep=2, global_batch=64)))


def test_ep_overlap_hides_all_to_alls_behind_compute_at_the_sm_share_cost(h100_32):
    # on a host that never binds, so that the overlap's schedule nodes cost nothing (test_combined_1f1b_host.py)
    h100_32 = replace(h100_32, gpu=replace(h100_32.gpu, host_launch=0.0))
    plain, hidden = _plan(ep=16), _plan(ep=16, ep_overlap=True)
    mo = moe.moe_layer(SMALL, h100_32, moe.layer_key(plain))
    fwd = sum(op.seconds for op in mo.compute.forward)
    a2a = mo.a2a_forward
    expected = a2a - min(a2a, fwd) + min(a2a, fwd) * fam.COMM_SM_SHARE
    assert fam._exposed(hidden, a2a, fwd) == pytest.approx(expected)
    assert fam._exposed(plain, a2a, fwd) == a2a
    p, h = fam.pass_costs(SMALL, h100_32, plain), fam.pass_costs(SMALL, h100_32, hidden)
    for key in p:
        assert dict(h[key].parts)["ep"] < dict(p[key].parts)["ep"]
        assert dict(h[key].parts)["compute"] == dict(p[key].parts)["compute"]
    assert evaluate(SMALL, h100_32, hidden).metrics.step_time < evaluate(SMALL, h100_32, plain).metrics.step_time


@pytest.mark.parametrize("pp, v, m, alone", [(1, 1, 8, 1 / 8), (2, 2, 8, (1 + 2) / 16), (8, 4, 128, 31 / 512),
                                             (4, 2, 2, 1.0)])
def test_combined_1f1b_leaves_the_warm_up_and_cool_down_passes_unpaired(pp, v, m, alone):
    # Megatron-Core's combined 1F1B pairs a forward with an adjacent micro-batch's backward: F0, F1B0, …, B(m−1)
    # without a pipeline; interleaved, the (p−1) + (v−1)·p warm-up forwards of an average rank have no partner
    s = Strategy(pp=pp, dp=1, micro_batch=1, global_batch=m, ep_overlap=True,
                 schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v)
    assert fam.unpaired_share(s) == pytest.approx(alone)
    a2a, fwd = 3.0, 2.0
    paired = a2a - fwd + fwd * fam.COMM_SM_SHARE
    assert fam._exposed(s, a2a, fwd, alone) == pytest.approx(alone * a2a + (1 - alone) * paired)


def test_more_micro_batches_hide_more_of_the_all_to_alls(h100_32):
    few, many = (_plan(ep=16, ep_overlap=True, dp=32, global_batch=b) for b in (64, 256))
    ep = [dict(fam.pass_costs(SMALL, h100_32, s)[(True, False, False)].parts)["ep"] for s in (few, many)]
    assert ep[1] < ep[0]


def test_ep_overlap_without_expert_parallelism_is_invalid():
    assert "ep_overlap needs expert parallelism (ep > 1)" in fam.violations(SMALL, 32, _plan(ep_overlap=True))


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1", "zbv"])
def test_ep_overlap_needs_megatron_s_interleaved_pairs_when_pipelined(schedule):
    # Megatron-Core transformer_config.py: EP A2A overlap needs virtual pipeline stages when pp > 1, and no full
    # recompute; a single stage pairs any two micro-batches
    bad = _plan(pp=2, dp=16, ep=4, ep_overlap=True, schedule=schedule, virtual_stages=1)
    assert any("needs the interleaved schedule" in r for r in fam.violations(SMALL, 32, bad))
    ok = _plan(pp=2, dp=16, ep=4, ep_overlap=True, schedule="interleaved", virtual_stages=2)
    assert fam.violations(SMALL, 32, ok) == []
    assert fam.violations(SMALL, 32, _plan(ep=4, ep_overlap=True)) == []                 # pp 1
    assert any("full recompute" in r for r in fam.violations(SMALL, 32, _plan(ep=4, ep_overlap=True,
                                                                               recompute="full")))


def test_plans_that_differ_only_outside_the_passes_share_their_pass_costs(h100_32):
    a = fam.pass_costs(SMALL, h100_32, _plan(ep=4))
    assert fam.pass_costs(SMALL, h100_32, _plan(ep=4, zero=0, global_batch=128)) is a


def test_the_step_breakdown_of_a_moe_plan_shows_its_all_to_alls_and_sums_to_the_step(h100_32):
    e = evaluate(SMALL, h100_32, _plan(ep=16))
    assert e.metrics.breakdown["ep"] > 0
    assert sum(e.metrics.breakdown.values()) == pytest.approx(e.metrics.step_time, rel=1e-6)


@given(pp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 4]), dense=st.integers(0, 5),
       recompute=st.sampled_from(["none", "selective", "full"]), interleaved=st.booleans(), overlap=st.booleans())
def test_the_bound_never_exceeds_the_step_and_the_peak_is_the_fullest_stage(pp, ep, dense, recompute, interleaved,
                                                                           overlap):
    cluster = load_cluster("dgx-h100-80g", 32)
    model = replace(SMALL, dense_layers=dense)
    # Megatron-Core's EP overlap: with pp > 1 only interleaved, never with full recompute
    paired = pp == 1 or interleaved
    s = _plan(pp=pp, dp=32 // pp, ep=ep, recompute=recompute,
              ep_overlap=overlap and ep > 1 and paired and recompute != "full",
              schedule="interleaved" if interleaved and pp > 1 else "1f1b",
              virtual_stages=2 if interleaved and pp > 1 else 1)
    assert fam.violations(model, 32, s) == []
    e = evaluate(model, cluster, s)
    assert fam.lower_bound(model, cluster, s) <= e.metrics.step_time * (1 + 1e-9)
    assert fam.peak_memory(model, cluster, s) == pytest.approx(max(m.total for m in fam.memory(model, cluster, s)))


@given(tp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([2, 4, 8, 16, 32]), etp=st.sampled_from([1, 2, 4]))
def test_ep_group_shapes_match_the_ranks_megatron_core_places(tp, ep, etp):
    # Megatron-Core's expert rank order etp-ep-edp: the EP group of rank 0 is ranks 0, etp, 2·etp, ...
    cluster = load_cluster("dgx-h100-80g", 256)
    s = Strategy(tp=tp, dp=256 // tp, sequence_parallel=tp > 1, ep=ep, etp=etp, global_batch=256)
    ranks = [i * etp for i in range(ep)]
    per_node = max(sum(1 for r in ranks if r // 8 == n) for n in {r // 8 for r in ranks})
    shape = moe.ep_shape(cluster, s)
    assert (shape.size, shape.per_node, shape.nodes, shape.span) == (
        ep, per_node, len({r // 8 for r in ranks}), ranks[-1] + 1)


def test_fp8_param_gather_halves_the_moe_weight_all_gather(h100_32):
    # Megatron-LM --fp8-param-gather: the distributed optimizer all-gathers FP8 weights, experts included (the
    # memory model keeps them in FP8 too)
    model = replace(SMALL, hidden=4096, heads=32, moe_ffn_hidden=4096, ffn_hidden=8192)
    bf16 = _plan(dp=8, tp=4, sequence_parallel=True, ep=8, precision="fp8")
    fp8 = replace(bf16, fp8_param_gather=True)
    ratio = fam.step_costs(model, h100_32, fp8).param_gather / fam.step_costs(model, h100_32, bf16).param_gather
    assert ratio == pytest.approx(0.5, abs=0.03)


def test_the_steps_host_time_adds_to_an_moe_step_once(h100_32):
    # GPUSpec.host_step ends every stage's step, whatever the family (step._optimizer for dense models)
    from autoplan.sim.simulate import score

    s = _plan(dp=16, pp=2, ep=8, micro_batch=1, global_batch=32)
    slow = replace(h100_32, gpu=replace(h100_32.gpu, host_step=0.05))
    assert score(SMALL, slow, s).step_time - score(SMALL, h100_32, s).step_time == pytest.approx(0.05, rel=1e-9)


def _tp_part(model, cluster, s) -> float:
    return sum(x for k, x in fam.pass_costs(model, cluster, s)[(True, False, False)].parts if k == "tp")


def test_tp_comm_overlap_hides_the_attentions_tp_collectives_of_an_moe_layer(h100_32):
    # NeMo's MegatronCommOverlapCallback and Megatron-Core give the attention's qkv and proj TE userbuffers in MoE
    # models too; the experts' fc1/fc2 take the dispatcher's expert-TP collectives instead
    model = replace(SMALL, hidden=8192, heads=64, moe_ffn_hidden=4096, ffn_hidden=8192, shared_experts=0,
                    seq_len=4096)
    s = _plan(dp=4, tp=8, sequence_parallel=True, ep=4)
    plain, overlapped = _tp_part(model, h100_32, s), _tp_part(model, h100_32, replace(s, tp_comm_overlap=True))
    assert 0 < overlapped < plain
    # Megatron-Core turns the overlap off for MLA (TELinear: buffer names other than qkv, proj, fc1, fc2)
    mla = replace(model, q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128)
    assert _tp_part(mla, h100_32, replace(s, tp_comm_overlap=True)) == _tp_part(mla, h100_32, s)


def test_the_moe_layers_tp_collectives_take_the_plans_collective_policy():
    cluster = load_cluster("dgx-h100-80g", 64)
    model = replace(SMALL, hidden=4096, heads=32, moe_ffn_hidden=4096, ffn_hidden=8192)
    s = _plan(dp=4, tp=16, sequence_parallel=True, ep=4)         # TP across two nodes
    assert _tp_part(model, cluster, replace(s, collective_policy="themis")) != _tp_part(model, cluster, s)


def test_zb_h1_holds_the_waiting_weight_gradients_inputs_of_moe_layers_too(h100_32):
    # Qi et al. 2024 §2.3: ZB-H1's worker i holds i chunks whose W waits; an MoE layer keeps its attention's and its
    # routed copies' GEMM inputs and output gradients (fam.moe_weight_grad_bytes), as memory.py prices a dense one's
    model = replace(SMALL, layers=16)
    s = _plan(dp=4, pp=4, ep=4, micro_batch=1, global_batch=64)
    zb = replace(s, schedule="zb-h1")
    last = s.pp - 1
    extra = fam.memory(model, h100_32, zb)[last].activations - fam.memory(model, h100_32, s)[last].activations
    layers = model.layers // s.pp
    assert extra == pytest.approx(last * layers * fam.moe_weight_grad_bytes(model, zb))
    # per routed copy: fc1's input and fc2's output gradient h, fc1's output gradient (gated: 2w) and fc2's input w
    rows = SMALL.experts // 4 * moe.expert_rows(model, zb)
    no_experts = fam.moe_weight_grad_bytes(model, zb) - 2 * rows * (2 * model.hidden + 3 * model.moe_ffn_hidden)
    shared = 2 * model.seq_len * (3 * model.moe_ffn_hidden + model.hidden)
    attention = 2 * model.seq_len * (2 * model.hidden + 2 * model.q_dim + 2 * model.kv_dim)
    assert no_experts == pytest.approx(attention + shared)


def test_unfused_gradient_accumulation_adds_the_embedding_and_output_layer_on_their_stages(h100_32):
    # as a dense model's (passes.grad_accumulation): the end stages accumulate their embedding / output weights too
    model = replace(SMALL, layers=16, dense_layers=0)
    s = _plan(dp=8, pp=4, ep=4, gradient_accumulation_fusion=False)

    def unfused(first: bool, last: bool) -> float:
        costs = [fam.pass_costs(model, h100_32, x)[(False, first, last)].seconds
                 for x in (s, replace(s, gradient_accumulation_fusion=True))]
        return costs[0] - costs[1]
    from autoplan.families.transformer import passes
    for first, last in ((True, False), (False, True)):
        ends = passes.grad_accumulation(model, h100_32, s, 0, first, last).seconds
        assert unfused(first, last) - unfused(False, False) == pytest.approx(ends, rel=1e-9)


def test_the_host_floors_an_moe_models_dense_layers_and_ends(h100_32):
    # passes._pass_costs' host floor for the kernels an MoE layer does not price itself: with a slow host, the first
    # stage's forward lasts at least the host's issue time of its dense layer and its embedding
    slow = replace(h100_32, gpu=replace(h100_32.gpu, host_launch=1e-3))
    s = _plan(dp=16, pp=2, ep=8, micro_batch=1, global_batch=32)
    dense = moe.dense_layer(SMALL, slow, moe.layer_key(s))
    issue = 1e-3 * (len(dense.forward) + len(dense.forward_collectives) + fam._end_launches(SMALL, slow, s)[0])
    quick = fam.pass_costs(SMALL, h100_32, s)[(True, True, False)].seconds
    floored = fam.pass_costs(SMALL, slow, s)[(True, True, False)].seconds
    assert quick < issue <= floored


def test_a_split_backwards_w_waits_for_the_host_on_its_own_kernels(h100_32):
    # zero-bubble schedules issue B and W apart (Qi et al. 2024 §2): each races the host against its own kernels,
    # so W carries its own wait and B keeps only its own (not the whole backward's); together never less
    slow = replace(h100_32, gpu=replace(h100_32.gpu, host_launch=1e-3))
    s = _plan(dp=8, pp=4, ep=4, micro_batch=1, global_batch=32, schedule="zb-h1")
    lay = moe.moe_layer(SMALL, slow, moe.layer_key(s))
    extra, wait_w = lay.split_host
    assert extra >= 0 and wait_w > 0
    plain = replace(s, schedule="1f1b")
    whole = fam.pass_costs(SMALL, slow, plain)[(False, False, False)].seconds
    split = fam.pass_costs(SMALL, slow, s)[(False, False, False)].seconds
    layers = SMALL.layers // s.pp
    assert split == pytest.approx(whole + layers * extra)
    from autoplan.families.transformer import passes
    w = fam.weight_grad_costs(SMALL, slow, s)[(False, False)].seconds
    assert w == pytest.approx(layers * (passes.weight_grad_seconds(lay.compute.backward) + wait_w))
