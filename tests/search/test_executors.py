"""The contract every executor keeps (SerialExecutor, AutoExecutor, RayExecutor): each batch's results come back
in submission order, and a plan whose evaluation raises is recorded as a failed Evaluation, never raised."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.search.executors import AutoExecutor, Executor, RayExecutor, SerialExecutor, evaluate_one
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster

MODEL, CLUSTER = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
PLANS, _ = enumerate_plans(MODEL, 16, load_space(fixed={"zero": 1, "recompute": "none"}), 64)


def _serial() -> Executor:
    return SerialExecutor()


def _auto_serial() -> Executor:
    return AutoExecutor(workers=2, start_s=1e9)


def _auto_switching() -> Executor:
    return AutoExecutor(workers=2, start_s=0.0)


def _ray() -> Executor:
    return RayExecutor(workers=2)


FACTORIES = [_serial, _auto_serial, pytest.param(_auto_switching, marks=pytest.mark.slow),
             pytest.param(_ray, marks=pytest.mark.slow)]


@pytest.fixture(params=FACTORIES)
def executor(request):
    ex = request.param()
    yield ex
    ex.close()


def test_is_an_executor(executor):
    assert isinstance(executor, Executor) and executor.workers >= 1


def test_results_come_back_in_submission_order(executor):
    plans = PLANS[:40]
    batches = [plans[i:i + 3] for i in range(0, len(plans), 3)]
    got = list(executor.map(MODEL, CLUSTER, batches))
    assert [[e.strategy for e in r] for r in got] == batches
    assert [e for r in got for e in r] == [evaluate_one(MODEL, CLUSTER, s) for s in plans]


def test_a_raising_evaluation_is_recorded_not_raised(executor):
    broken = replace(CLUSTER, tiers=())          # every collective looks up a tier: IndexError inside evaluate
    plans = PLANS[:5]
    (results,) = list(executor.map(MODEL, broken, [plans]))
    assert [e.strategy for e in results] == plans
    assert all(e.metrics is None and e.violations[0].startswith("simulator error: IndexError") for e in results)
    assert not any(e.feasible for e in results)


def test_no_batches_no_results(executor):
    assert list(executor.map(MODEL, CLUSTER, [])) == []
