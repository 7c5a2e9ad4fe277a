"""The dense and MoE families' cheap bounds (``step.quick_bound``, ``moe.quick_bound``), which order the exhaustive
search: never above their ``lower_bound`` for any schedule, layout, recompute, offload, EP overlap or host, and close
to it where the layers carry the step."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from autoplan.families.catalog import get_model
from autoplan.families.registry import lower_bound, quick_bound, violations
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.step import quick_bound as dense_quick_bound
from autoplan.specs.cluster import load_cluster
from autoplan.specs.plan import SCHEDULES
from tests.families.transformer.test_moe import SMALL


@st.composite
def plans(draw):
    """A plan of the tiny GPT or GPT-1.7B on 64 GPUs: any schedule, uneven ends, recompute (partial too), CP
    exchange, activation offload and gradient accumulation."""
    tp, pp, cp = (draw(st.sampled_from(x)) for x in ([1, 2, 4], [1, 2, 4, 8], [1, 2]))
    schedule = draw(st.sampled_from(SCHEDULES))
    v = draw(st.sampled_from([2, 3, 4])) if schedule == "interleaved" else 1
    dp = 64 // (tp * pp * cp)
    recompute = draw(st.sampled_from(["none", "selective", "full"]))
    return Strategy(tp=tp, pp=pp, dp=dp, cp=cp, micro_batch=draw(st.sampled_from([1, 2])),
                    global_batch=dp * 2 * pp * draw(st.integers(1, 8)), schedule=schedule, virtual_stages=v,
                    sequence_parallel=tp > 1 and draw(st.booleans()), recompute=recompute,
                    recompute_layers=draw(st.sampled_from([0, 0, 1])) if recompute == "full" else 0,
                    activation_offload_layers=draw(st.sampled_from([0, 0, 2])) if pp == 1 and recompute == "none"
                    else 0,
                    cp_comm=draw(st.sampled_from(["p2p", "a2a"])), zero=draw(st.sampled_from([0, 1, 2])),
                    gradient_accumulation_fusion=draw(st.booleans()),
                    first_stage_layers=draw(st.sampled_from([0, 0, 1])))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(plans(), st.sampled_from(["tiny", "gpt-1.7b"]), st.sampled_from(["dgx-a100-80g", "dgx-h100-80g"]))
def test_the_quick_bound_is_never_above_the_lower_bound(tiny_gpt, s, name, spec):
    # real clusters keep their host floor (host_launch), which only lengthens passes
    model = tiny_gpt if name == "tiny" else get_model(name)
    assume(not violations(model, 64, s))
    cluster = load_cluster(spec, 64)
    quick = dense_quick_bound(model, cluster, s)
    assert 0.0 < quick <= lower_bound(model, cluster, s)


def test_gpt3s_quick_bound_is_within_a_few_percent_of_its_lower_bound():
    # 12 layers a stage next to the last stage's output layer (a third of a layer) and the optimizer step
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    s = Strategy(tp=4, pp=8, dp=32, micro_batch=2, global_batch=1536, schedule="interleaved", virtual_stages=12,
                 sequence_parallel=True, zero=1)
    assert quick_bound(model) is dense_quick_bound
    assert dense_quick_bound(model, cluster, s) == pytest.approx(lower_bound(model, cluster, s), rel=0.05)
    assert dense_quick_bound(model, cluster, s) < lower_bound(model, cluster, s)


def test_families_without_a_quick_bound_say_so():
    assert quick_bound(get_model("resnet50")) is None and quick_bound(get_model("dlrm-criteo")) is None


@st.composite
def moe_plans(draw):
    """A plan of a small MoE (0-5 dense leading layers) on 32 GPUs: any schedule, EP and its overlap, recompute."""
    pp = draw(st.sampled_from([1, 2, 4]))
    schedule = draw(st.sampled_from(SCHEDULES))
    v = 2 if schedule == "interleaved" else 1
    dp = 32 // pp
    return Strategy(pp=pp, dp=dp, ep=draw(st.sampled_from([1, 2, 4, 8])), micro_batch=1,
                    global_batch=dp * 2 * pp * draw(st.integers(1, 4)), schedule=schedule, virtual_stages=v,
                    recompute=draw(st.sampled_from(["none", "selective", "full"])),
                    ep_overlap=draw(st.booleans()), zero=draw(st.sampled_from([0, 1])))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(moe_plans(), st.integers(0, 5))
def test_the_moe_quick_bound_is_never_above_the_lower_bound(s, dense):
    model, cluster = replace(SMALL, dense_layers=dense), load_cluster("dgx-h100-80g", 32)
    assume(not violations(model, 32, s))
    assert 0.0 < quick_bound(model)(model, cluster, s) <= lower_bound(model, cluster, s)
