"""TP-comm overlap: the chunk-pipeline closed forms and bounds, and a pass never slower than without overlap."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.transformer import tp_overlap
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


@settings(max_examples=200, deadline=None)
@given(gemm=_t, chunk_share=st.floats(1.0, 2.0), comm=_t, chunks=st.integers(2, 16), tail=st.booleans())
def test_overlap_never_slower_than_none_and_never_faster_than_the_larger(gemm, chunk_share, comm, chunks, tail):
    chunk = gemm * chunk_share / chunks              # split GEMMs are never faster in sum (wave quantization)
    exposed = tp_overlap.pipelined(gemm, chunk, comm, chunks, tail)
    assert 0.0 <= exposed <= comm                     # never slower than the unoverlapped gemm + comm
    assert gemm + exposed >= max(gemm, comm) * (1 - 1e-12)


@pytest.mark.parametrize("model, tp, precision", [("gpt3-175b", 4, "bf16"), ("gpt3-175b", 8, "fp8"),
                                                  ("llama3-70b", 4, "bf16"), ("gpt-7.5b", 2, "bf16")])
def test_pass_with_overlap_is_never_slower_and_compute_is_unchanged(model, tp, precision):
    m = get_model(model)
    h100 = load_cluster("dgx-h100-80g", 64)
    cluster = replace(h100, gpu=replace(h100.gpu, host_launch=0.0))   # the GPU side (the host floor: test_passes)
    s = Strategy(tp=tp, pp=4, dp=16 // tp, global_batch=64, sequence_parallel=True, precision=precision,
                 recompute="full")
    assert violations(m, 64, s) == []
    plain, over = pass_costs(m, cluster, s), pass_costs(m, cluster, replace(s, tp_comm_overlap=True))
    for key in plain:
        p, o = dict(plain[key].parts), dict(over[key].parts)
        assert o["compute"] == p["compute"]
        assert o.get("tp", 0.0) <= p["tp"] * (1 + 1e-12)
        assert over[key].seconds <= plain[key].seconds * (1 + 1e-12)


def test_overlap_hides_part_of_the_tp_time_of_gpt3_on_h100():
    m = get_model("gpt3-175b")
    cluster = load_cluster("dgx-h100-80g", 128)
    s = Strategy(tp=4, pp=8, dp=4, global_batch=256, sequence_parallel=True, schedule="interleaved",
                 virtual_stages=12, zero=1)
    plain = dict(pass_costs(m, cluster, s)[(True, False, False)].parts)["tp"]
    over = dict(pass_costs(m, cluster, replace(s, tp_comm_overlap=True))[(True, False, False)].parts)["tp"]
    assert 0 < over < plain


@pytest.mark.parametrize("tp, sp", [(1, False), (8, False)])
def test_overlap_needs_sequence_parallel_and_tp(tp, sp):
    s = Strategy(tp=tp, pp=64 // tp, dp=1, global_batch=64, sequence_parallel=sp, tp_comm_overlap=True)
    reasons = violations(get_model("gpt3-175b"), 64, s)
    assert any("tp_comm_overlap needs sequence parallelism and tp > 1" in r for r in reasons)
