"""The DLRM's element-wise ("other") ops: MLP bias + ReLU epilogues and the interaction input's cast and concat,
checked against their byte counts in closed form (Lin et al. 2022 §IV-D: memory-bound ops priced by bytes moved)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.hardware import compute
from autoplan.families.dlrm import sharding as sh
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster

A100 = load_cluster("dgx-a100-80g", 8)
SPEC = get_model("dlrm-criteo").structure


def _hbm() -> float:
    return A100.gpu.hbm_bandwidth * A100.gpu.memory_efficiency


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 1 << 17), n=st.integers(1, 4096))
def test_epilogue_moves_two_then_three_passes_of_the_output(b, n):
    fwd, bwd = sh.epilogue_times(A100, b, n)
    out = b * n * sh.ACT_BYTES
    assert fwd == pytest.approx(2 * out / _hbm() + A100.gpu.kernel_overhead)
    assert bwd == pytest.approx(3 * out / _hbm() + A100.gpu.kernel_overhead)


@pytest.mark.parametrize("b", [1024, 8192, 65536])
def test_mlp_times_are_the_gemms_plus_one_epilogue_per_layer(b):
    widths = SPEC.top_widths()
    fwd, bwd = sh._mlp_times(A100, widths, b)
    pairs = list(zip(widths, widths[1:]))
    gemm_f = sum(compute.gemm_time(A100.gpu, b, n, k) for k, n in pairs)
    gemm_b = sum(compute.gemm_time(A100.gpu, b, k, n) + compute.gemm_time(A100.gpu, k, n, b) for k, n in pairs)
    hidden = sum(n for _, n in pairs) * b * sh.ACT_BYTES
    assert fwd - gemm_f == pytest.approx(2 * hidden / _hbm() + len(pairs) * A100.gpu.kernel_overhead)
    assert bwd - gemm_b == pytest.approx(3 * hidden / _hbm() + len(pairs) * A100.gpu.kernel_overhead)


@pytest.mark.parametrize("b", [4096, 32768])
def test_interaction_input_casts_fp32_embeddings_and_concatenates(b):
    f, d = SPEC.features, SPEC.bottom_mlp[-1]
    assert SPEC.embedding_bytes == 4
    fwd, bwd = sh.interaction_input_times(A100, SPEC, b)
    cast = b * (f - 1) * d * (4 + sh.ACT_BYTES)
    concat = 2 * b * f * d * sh.ACT_BYTES
    assert fwd == pytest.approx((cast + concat) / _hbm() + 2 * A100.gpu.kernel_overhead)
    assert bwd == pytest.approx(cast / _hbm() + A100.gpu.kernel_overhead)


def test_half_precision_tables_need_no_cast():
    half = replace(SPEC, embedding_bytes=sh.ACT_BYTES)
    fwd, bwd = sh.interaction_input_times(A100, half, 8192)
    assert bwd == 0.0
    assert fwd == pytest.approx(2 * 8192 * SPEC.features * SPEC.bottom_mlp[-1] * sh.ACT_BYTES / _hbm()
                                + A100.gpu.kernel_overhead)


def test_the_interaction_input_enters_the_context_beside_the_dot_product():
    from autoplan.families.strategy import Strategy
    model, b = get_model("dlrm-criteo"), 8192
    ctx = sh.context(model, A100, Strategy(dp=8, micro_batch=b, global_batch=8 * b))
    dot, extra = sh._interaction_times(A100, SPEC, b), sh.interaction_input_times(A100, SPEC, b)
    assert ctx.dense_fwd[1] == pytest.approx(dot[0] + extra[0])
    assert ctx.dense_bwd[1] == pytest.approx(dot[1] + extra[1])
    assert ctx.dense_fwd[0] == pytest.approx(sh._mlp_times(A100, SPEC.bottom_widths(), b)[0])
