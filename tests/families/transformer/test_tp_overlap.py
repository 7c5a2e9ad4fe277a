"""TP-comm overlap: the chunk-pipeline closed forms and bounds, and a pass never slower than without overlap."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.transformer import layer, tp_overlap
from autoplan.hardware import compute, network
from autoplan.families.transformer.passes import pass_costs
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations

_t = st.floats(1e-6, 1.0)


def test_pipelined_closed_forms():
    # ring exchange, 4 chunks: comm 3 ms in 3 steps of 1 ms beside 2 ms chunks: 2 + 3·2 = 8 ms, GEMM alone 8 ms
    assert tp_overlap.pipelined(8e-3, 2e-3, 3e-3, 4) == pytest.approx(0.0)
    # comm-bound: 1 + 3·max(3, 1) = 10 ms against an 4 ms GEMM: 6 ms exposed, below the 9 ms collective
    assert tp_overlap.pipelined(4e-3, 1e-3, 9e-3, 4) == pytest.approx(6e-3)
    # chunked reduce-scatter exposes its last chunk: 2 + 3·2 + 1 = 9 ms over an 8 ms GEMM
    assert tp_overlap.pipelined(8e-3, 2e-3, 4e-3, 4, exposed_chunk=True) == pytest.approx(1e-3)
    # bulk: what the independent GEMM does not cover
    assert tp_overlap.bulk(3e-3, 1e-3) == pytest.approx(2e-3) and tp_overlap.bulk(1e-3, 3e-3) == 0.0


def test_split_gemms_that_lose_more_than_the_overlap_hides_make_the_overlap_slower_than_none():
    # four chunks on fewer SMs, 1.5 ms each where the whole GEMM takes 4 ms, beside a 0.3 ms collective:
    # 1.5 + 3·1.5 = 6 ms, 2 ms more than the GEMM, where running the two apart costs 0.3 ms more (TE measured
    # slower than no overlap on small GEMMs: Chang et al. 2024, Flux, arXiv 2406.06858 §5.1)
    assert tp_overlap.pipelined(4e-3, 1.5e-3, 0.3e-3, 4) == pytest.approx(2e-3)


@settings(max_examples=200, deadline=None)
@given(gemm=_t, chunk_share=st.one_of(st.just(1.0), st.floats(1.0, 2.0)), comm=_t, chunks=st.integers(2, 16),
       tail=st.booleans())
def test_overlap_never_faster_than_the_larger_and_never_slower_than_none_when_chunks_lose_nothing(
        gemm, chunk_share, comm, chunks, tail):
    chunk = gemm * chunk_share / chunks              # split GEMMs are never faster in sum (wave quantization)
    exposed = tp_overlap.pipelined(gemm, chunk, comm, chunks, tail)
    assert exposed >= 0.0
    assert gemm + exposed >= max(gemm, comm) * (1 - 1e-12)
    if chunk_share == 1.0:
        assert exposed <= comm * (1 + 1e-12)          # the unoverlapped gemm + comm


@pytest.mark.parametrize("model, tp, precision", [("gpt3-175b", 4, "bf16"), ("gpt3-175b", 8, "fp8"),
                                                  ("llama3-70b", 4, "bf16"), ("gpt-7.5b", 2, "bf16")])
def test_a_layer_with_overlap_is_faster_and_compute_is_unchanged(model, tp, precision):
    m = get_model(model)
    h100 = load_cluster("dgx-h100-80g", 64)
    cluster = replace(h100, gpu=replace(h100.gpu, host_launch=0.0))   # the GPU side (the host floor: test_passes)
    s = Strategy(tp=tp, pp=4, dp=16 // tp, global_batch=64, sequence_parallel=True, precision=precision,
                 recompute="full")
    assert violations(m, 64, s) == []
    plain, over = pass_costs(m, cluster, s), pass_costs(m, cluster, replace(s, tp_comm_overlap=True))
    for key in plain:
        assert dict(over[key].parts)["compute"] == dict(plain[key].parts)["compute"]
        if key[0]:
            # a forward and its backward: the backward's bulk overlaps win back more than the forward's split
            # GEMMs may lose
            back = (False, *key[1:])
            assert over[key].seconds + over[back].seconds < plain[key].seconds + plain[back].seconds


def test_overlap_hides_part_of_the_tp_time_of_gpt3_on_h100():
    m = get_model("gpt3-175b")
    cluster = load_cluster("dgx-h100-80g", 128)
    s = Strategy(tp=4, pp=8, dp=4, global_batch=256, sequence_parallel=True, schedule="interleaved",
                 virtual_stages=12, zero=1)

    def tp_seconds(plan):
        costs = pass_costs(m, cluster, plan)
        return [dict(costs[(forward, False, False)].parts).get("tp", 0.0) for forward in (True, False)]

    plain, over = tp_seconds(s), tp_seconds(replace(s, tp_comm_overlap=True))
    assert 0 < sum(over) < sum(plain)
    # the forward's reduce-scatters pipelined on 20-24 SMs cost its GEMMs more than they hide at one micro-batch
    # of 2,048 tokens; the backward's bulk overlaps win it back
    assert over[0] > plain[0] and over[1] < plain[1]


@pytest.mark.parametrize("tp, sp", [(1, False), (8, False)])
def test_overlap_needs_sequence_parallel_and_tp(tp, sp):
    s = Strategy(tp=tp, pp=64 // tp, dp=1, global_batch=64, sequence_parallel=sp, tp_comm_overlap=True)
    reasons = violations(get_model("gpt3-175b"), 64, s)
    assert any("tp_comm_overlap needs sequence parallelism and tp > 1" in r for r in reasons)


def _exposed(precision: str, **knobs) -> float:
    m, cluster = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 64)
    s = Strategy(tp=8, pp=4, dp=2, global_batch=64, sequence_parallel=True, tp_comm_overlap=True,
                 precision=precision, **knobs)
    assert violations(m, 64, s) == []
    return sum(tp_overlap.layer_exposed(m, cluster, s))


def test_fewer_reduce_scatter_sms_leave_the_gemms_more():
    # the GEMM beside a pipelined reduce-scatter runs on the SMs its kernels leave (set_sm_margin)
    assert _exposed("bf16", tp_overlap_rs="24/8") < _exposed("bf16", tp_overlap_rs="24/16") < _exposed("bf16")
    assert _exposed("bf16", tp_overlap_rs="16/16") < _exposed("bf16", tp_overlap_rs="24/16")


def test_an_fp8_buffer_halves_the_forward_reduce_scatters_bytes():
    m, cluster = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 64)
    base = dict(tp=8, pp=4, dp=2, global_batch=64, sequence_parallel=True, tp_comm_overlap=True, precision="fp8")
    plain, fp8_rs = (tp_overlap.layer_exposed(m, cluster, Strategy(**base, tp_overlap_fp8_rs=v)) for v in (False, True))
    assert fp8_rs[0] < plain[0] and fp8_rs[1] == plain[1]       # the backward's bulk reduce-scatters stay 16-bit


def test_a_ring_exchange_reduce_scatter_is_its_pipeline_plus_the_sum_of_the_partials():
    m, cluster = get_model("llama3-70b"), load_cluster("dgx-h100-80g", 64)
    s = Strategy(tp=8, pp=4, dp=2, global_batch=64, sequence_parallel=True, tp_comm_overlap=True,
                 tp_overlap_rs="r/r")
    ring = tp_overlap.layer_exposed(m, cluster, s, ("proj",))[0]
    mm, n, k = layer.layer_gemm_shapes(m, 8, 1, 1)["proj"]
    values = mm * m.hidden
    scatter = network.reduce_scatter(cluster, network.shape_of(cluster, s, "tp"), 2 * values)
    gemm = compute.gemm_time(cluster.gpu, mm, n, k)
    chunk = compute.gemm_time(cluster.gpu, mm // 8, n, k)
    # TE split_overlap_rs_p2p: 7 exchanges beside 8 GEMM chunks, then reduce_bf16 reads 8 partials, writes a shard
    expected = tp_overlap.pipelined(gemm, chunk, scatter, 8) + compute.memory_time(cluster.gpu, 2 * values * (1 + 1 / 8))
    assert ring == pytest.approx(expected)


@pytest.mark.parametrize("knobs, reason", [
    (dict(tp_overlap_fp8_rs=True, precision="fp8"), "need tp_comm_overlap"),
    (dict(tp_overlap_rs="24/8"), "need tp_comm_overlap"),
    (dict(tp_overlap_fp8_rs=True, tp_comm_overlap=True), "needs an FP8 precision")])
def test_reduce_scatter_settings_need_the_overlap_they_set(knobs, reason):
    s = Strategy(tp=8, pp=4, dp=2, global_batch=64, sequence_parallel=True, **knobs)
    assert any(reason in v for v in violations(get_model("llama3-70b"), 64, s))
