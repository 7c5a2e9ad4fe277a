"""DeepSeek-V3's multi-token-prediction modules (arXiv 2412.19437 §2.2) in the MoE family: their parameters against
the report's 685B = 671B + 14B, their passes as one more MoE block, projection and output head on the stage holding
the output layer, and every parameter on exactly one stage (one embedding copy where the output stage lacks it)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st


from autoplan.families.transformer import layer
from autoplan.families.transformer import mtp
from autoplan.families.transformer.layer import LayerCompute
from autoplan.families.transformer import moe as fam
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.specs.layout import holds_output
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations

DEEPSEEK = get_model("deepseek-v3")
SMALL = ModelSpec(name="small-mtp", layers=9, hidden=512, heads=8, ffn_hidden=2048, vocab=1024, seq_len=512,
                  activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False,
                  dropout=False, experts=16, top_k=4, moe_ffn_hidden=256, shared_experts=1, dense_layers=1,
                  mtp_layers=1)


@pytest.fixture(scope="module")
def h800():
    return load_cluster("dgx-h800-80g", 64)


def test_deepseek_v3_mtp_is_the_reports_14b_beside_671b():
    # §2.2 / HF model card: 685B = 671B main model + 14B MTP module, which the checkpoint stores with its own copy
    # of the shared embedding and output head (2·V·h)
    assert DEEPSEEK.mtp_layers == 1
    assert DEEPSEEK.params() / 1e9 == pytest.approx(671, abs=0.5)
    assert (DEEPSEEK.mtp_params() + 2 * DEEPSEEK.vocab * DEEPSEEK.hidden) / 1e9 == pytest.approx(14, abs=0.6)
    assert DEEPSEEK.mtp_params() - DEEPSEEK.moe_layer_params() == 2 * 7168 * 7168 + 3 * 7168   # M_k and 3 norms


def test_a_dense_model_with_mtp_is_a_violation():
    dense = ModelSpec(name="dense-mtp", layers=4, hidden=256, heads=4, ffn_hidden=1024, vocab=512, seq_len=128,
                      mtp_layers=1)
    assert any("multi-token prediction" in r for r in violations(dense, 1, Strategy()))


def _plan(pp: int, schedule: str, **kw) -> Strategy:
    return Strategy(**{"pp": pp, "dp": 64 // pp, "ep": 8, "zero": 1, "global_batch": 8 * 64,
                       "schedule": schedule} | kw)


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(0, 3), schedule=st.sampled_from(["1f1b", "zb-h1", "zbv", "dualpipev"]),
       pp=st.sampled_from([2, 4]), mb=st.integers(1, 2))
def test_each_module_adds_a_block_a_projection_and_a_head_to_the_output_passes(h800, depth, schedule, pp, mb):
    layout = dict(first_stage_layers=1) if schedule in ("zbv", "dualpipev") else dict(first_stage_layers=3)
    s = _plan(pp, schedule, micro_batch=mb, **layout)
    model = replace(SMALL, mtp_layers=depth, layers=1 + 2 * (pp - 1) * 4 if "v" in schedule else 3 + 6 * (pp - 1))
    assert violations(model, 64, s) == []
    base = fam.pass_costs(replace(model, mtp_layers=0), h800, s)
    got = fam.pass_costs(model, h800, s)
    block = base[(True, False, False)].seconds / fam.chunk_layers(model.layers, s)[1]     # one MoE layer's forward
    x_f, _, _ = mtp.module_extras(model, h800, s.tp, s.cp, s.sequence_parallel, s.micro_batch)
    out_f = layer.output_compute(model, h800, s.tp, s.cp, s.sequence_parallel, s.micro_batch)[0]
    added = got[(True, False, True)].seconds - base[(True, False, True)].seconds
    # tp 1, cp 1: no collectives beside the block's all-to-alls, which its forward already holds
    assert added == pytest.approx(depth * (block + LayerCompute.seconds(x_f) + LayerCompute.seconds(out_f)),
                                  rel=1e-9, abs=1e-15)
    for key in base:
        if key[2]:
            assert got[key].seconds > base[key].seconds or depth == 0
        else:
            assert got[key] == base[key]                                    # only the output chunk changes


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(0, 2), schedule=st.sampled_from(["1f1b", "interleaved", "zbv", "dualpipev"]),
       pp=st.sampled_from([1, 2, 4]))
def test_every_parameter_sits_on_one_stage(depth, schedule, pp):
    model = replace(SMALL, mtp_layers=depth, layers=8 * pp)
    kw = dict(virtual_stages=2) if schedule == "interleaved" else {}
    s = _plan(pp, schedule if pp > 1 else "1f1b", **kw)
    held = sum(fam.stage_params(model, s, i)[0] * s.tp + fam.stage_params(model, s, i)[1] * s.ep * s.etp
               for i in range(pp))
    # the output stage's copy of the shared embedding (Megatron-Core), unless the first stage is the output stage
    copy = depth and pp > 1 and schedule not in ("zbv", "dualpipev")
    assert held == pytest.approx(model.params() + model.mtp_params() + copy * model.vocab * model.hidden, rel=1e-12)


def test_only_the_output_stage_holds_more_memory(h800):
    for schedule, layout in (("1f1b", dict(first_stage_layers=3, last_stage_layers=2)),
                             ("dualpipev", dict(first_stage_layers=1))):
        s = Strategy(pp=16, dp=128, ep=64, zero=1, global_batch=15360, schedule=schedule,
                     precision="fp8-blockwise", deepseek_fp8=True, recompute="modules", **layout)
        cluster = load_cluster("dgx-h800-80g", 2048)
        with_mtp = fam.memory(DEEPSEEK, cluster, s)
        without = fam.memory(replace(DEEPSEEK, mtp_layers=0), cluster, s)
        for i, (a, b) in enumerate(zip(with_mtp, without)):
            if holds_output(schedule, i, 16):
                assert a.total > b.total and a.activations > b.activations and a.weights > b.weights
            else:
                assert a == b
