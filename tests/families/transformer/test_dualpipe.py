"""DualPipe (DeepSeek-V3 §3.2.1, Table 2) in the cost models: parameters ×2 (rank i holds stage i and stage p − 1 − i
of two model copies), their optimizer state sharded over both copies, activations of PP + 1 stages, and its
validity rules (deepseek-ai/DualPipe: an even pp, an even number of micro-batches ≥ 2·pp)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from autoplan.families.transformer import step as plan
from autoplan.families.transformer import moe as fam
from autoplan.families.transformer.memory import memory_per_stage
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.specs.layout import stage_layers
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 4), per=st.integers(2, 4), short=st.tuples(st.integers(0, 1), st.integers(0, 1)),
       tied=st.booleans())
def test_every_rank_holds_two_stages_and_the_ranks_two_models(tiny_gpt, half, per, short, tied):
    p = 2 * half
    short = short if p > 2 else (0, 0)           # uneven ends need a middle stage (Megatron-Core)
    first, last = (per - k if k else 0 for k in short)
    model = replace(tiny_gpt, tied_embeddings=tied, layers=p * per - sum(short))
    s = Strategy(pp=p, dp=1, global_batch=2 * p, schedule="dualpipe", first_stage_layers=first,
                 last_stage_layers=last)
    assert violations(model, p, s) == []
    # DeepSeek-V3 Table 2, "Parameter 2×": the ranks hold two copies of every layer, embedding and output layer
    assert sum(stage_layers(model.layers, s, i) for i in range(p)) == 2 * model.layers
    assert sum(plan.stage_params(model, s, i) for i in range(p)) == pytest.approx(2 * model.params(), rel=1e-12)


def test_deepseek_v3_holds_two_copies_and_pp_plus_one_stages():
    model, cluster = get_model("deepseek-v3"), load_cluster("dgx-h800-80g", 2048)
    kw = dict(pp=16, dp=128, ep=64, zero=1, global_batch=15360, precision="fp8-blockwise", deepseek_fp8=True,
              recompute="modules", first_stage_layers=3, last_stage_layers=2)
    one, two = Strategy(schedule="1f1b", **kw), Strategy(schedule="dualpipe", **kw)
    held = sum(sum(x * y for x, y in zip(fam.stage_params(model, two, i), (1, 64))) for i in range(16))
    assert held == pytest.approx(2 * (model.params() + model.mtp_params()), rel=1e-12)
    a, b = fam.memory(model, cluster, one)[5], fam.memory(model, cluster, two)[5]      # a middle rank: 4 + 4 layers
    assert b.weights == pytest.approx(2 * a.weights) and b.gradients == pytest.approx(2 * a.gradients)
    assert b.optimizer == pytest.approx(a.optimizer)                   # sharded over both copies' replicas
    # Table 2: PP + 1 stages in flight (of 4 layers each) against 1F1B's p − i
    assert b.activations / a.activations == pytest.approx(17 * 4 / ((16 - 5) * 4))


@pytest.mark.parametrize("kw, message", [
    (dict(pp=3, dp=1, global_batch=12), "needs an even pp"),
    (dict(pp=4, dp=1, global_batch=9), "even number of micro-batches ≥ 2·pp (8), got 9"),
    (dict(pp=4, dp=1, global_batch=6), "even number of micro-batches ≥ 2·pp (8), got 6"),
])
def test_dualpipe_rules_name_their_numbers(tiny_gpt, kw, message):
    model = replace(tiny_gpt, layers=12)
    assert any(message in r for r in violations(model, kw["pp"], Strategy(schedule="dualpipe", **kw)))
    assert violations(model, 4, Strategy(schedule="dualpipe", pp=4, dp=1, global_batch=8)) == []


def test_dense_memory_doubles_weights_not_the_optimizer(tiny_gpt, a100_8):
    base = dict(pp=4, dp=2, global_batch=16, zero=1)
    one = memory_per_stage(tiny_gpt, a100_8, Strategy(schedule="1f1b", **base))
    two = memory_per_stage(tiny_gpt, a100_8, Strategy(schedule="dualpipe", **base))
    assert two[1].weights == pytest.approx(2 * one[1].weights)
    assert two[1].optimizer == pytest.approx(one[1].optimizer)


def test_deepseek_v3_dualpipev_idles_for_rank_0_not_for_its_schedule():
    # DualPipeV with Megatron-Core's Et|(tt|)*30mL: rank 0's chunks hold the embedding with one layer and the MTP
    # module with the output head run twice, more compute than two MoE layers; the step is set by rank 0, which
    # idles least, while the other ranks wait for it (README, DeepSeek-V3's mechanisms)
    from autoplan.sim.simulate import simulate_step

    model, cluster = get_model("deepseek-v3"), load_cluster("dgx-h800-80g", 2048)
    s = Strategy(tp=1, pp=16, dp=128, ep=64, zero=1, global_batch=15360, precision="fp8-blockwise", deepseek_fp8=True,
                 recompute="modules", schedule="dualpipev", first_stage_layers=1)
    sim = simulate_step(model, cluster, s)
    busy = [sim.timeline.busy(f"stage{i}.compute") for i in range(16)]
    assert max(range(16), key=busy.__getitem__) == 0
    assert busy[0] > 1.1 * max(busy[1:])
    assert sim.timeline.makespan - busy[0] < min(sim.timeline.makespan - b for b in busy[1:])
