"""The run folder's JSON codec: every Evaluation, model and cluster comes back equal, and nothing else loads."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.errors import SpecError
from autoplan.search.codec import evaluation_from_data, from_data, specs_from_data, specs_to_data, to_data
from autoplan.search.executors import evaluate_one
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster
from autoplan.families.catalog import list_models
from autoplan.specs.cluster import list_clusters


def _through_json(data: object) -> object:
    return json.loads(json.dumps(data))


def test_many_evaluations_round_trip_exactly():
    model, cluster = get_model("gpt-7.5b"), load_cluster("dgx-a100-80g", 16)
    plans, _ = enumerate_plans(model, 16, load_space(), 64)
    evaluations = [evaluate_one(model, cluster, s) for s in plans[::5]]
    fits = next(e.strategy for e in evaluations if e.feasible)
    broken = evaluate_one(model, replace(cluster, tiers=()), fits)              # a simulator error, recorded
    evaluations.append(broken)
    assert any(e.feasible for e in evaluations) and any(not e.feasible and e.peak_memory for e in evaluations)
    assert broken.violations[0].startswith("simulator error")
    for e in evaluations:
        assert evaluation_from_data(_through_json(to_data(e))) == e


@settings(max_examples=60, deadline=None)
@given(dp=st.integers(1, 64), tp=st.sampled_from([1, 2, 4, 8]), micro_batch=st.integers(1, 8),
       schedule=st.sampled_from(["gpipe", "1f1b", "interleaved"]), sp=st.booleans(),
       recompute=st.sampled_from(["none", "selective", "full"]), zero=st.integers(0, 3),
       overlap=st.booleans(), fp32=st.booleans())
def test_any_plan_round_trips(dp, tp, micro_batch, schedule, sp, recompute, zero, overlap, fp32):
    s = Strategy(dp=dp, tp=tp, pp=2, micro_batch=micro_batch, global_batch=dp * micro_batch * 4, schedule=schedule,
                 virtual_stages=2 if schedule == "interleaved" else 1, sequence_parallel=sp, recompute=recompute,
                 zero=zero, overlap_grad_reduce=overlap, grad_reduce_in_fp32=fp32)
    assert from_data(Strategy, _through_json(to_data(s))) == s


@pytest.mark.parametrize("name", list_clusters())
def test_every_catalog_model_and_cluster_round_trip(name):
    cluster = load_cluster(name, 64)
    for model in list_models():
        assert specs_from_data(_through_json(specs_to_data(model, cluster))) == (model, cluster)


@pytest.mark.parametrize("data", [
    None, [], "x", {"strategy": {"tp": "8"}}, {"strategy": {"dp": 1}, "metrics": {"step_time": 1.0}},
    {"strategy": {"__reduce__": "os.system"}, "metrics": None},
    {"strategy": {"dp": 1}, "metrics": None, "violations": "not a list"},
    {"strategy": {"dp": True}, "metrics": None},
])
def test_malformed_records_are_spec_errors(data):
    with pytest.raises(SpecError):
        evaluation_from_data(data)
