"""Faults on Ray: a worker process killed mid-search loses nothing (its batch runs again) and the leaderboard is
the serial one; a batch whose worker dies every time is recorded as failed and the search still ends.

A worker-process setup hook wraps ``evaluate`` in every Ray worker so that evaluating one chosen plan SIGKILLs
the worker, as ``kill -9`` or the OOM killer would. Slow: starts a local Ray.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from autoplan.search.exhaustive import search
from autoplan.search.executors import RayExecutor, SerialExecutor
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def problem():
    model, cluster = get_model("gpt-7.5b"), load_cluster("dgx-a100-80g", 32)
    plans, _ = enumerate_plans(model, 32, load_space(fixed={"cp": 1}), 128)
    serial = search(model, cluster, plans, top_k=5, executor=SerialExecutor())
    return model, cluster, plans, serial


def killer_hook(victim: str, marker: str | None):
    """A setup hook for Ray workers: evaluating plan ``victim`` kills the worker (once if ``marker`` is given:
    the first worker to get there leaves the marker file; always if None)."""

    def install() -> None:
        import autoplan.search.executors as ex

        real = ex.evaluate

        def evaluate(model, cluster, s):
            if s.short() == victim and (marker is None or not os.path.exists(marker)):
                if marker is not None:
                    Path(marker).touch()
                os.kill(os.getpid(), signal.SIGKILL)
            return real(model, cluster, s)

        ex.evaluate = evaluate

    return install


def _ray_search(model, cluster, plans, hook):
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")          # no token files for a throwaway local cluster
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": hook})
    try:
        executor = RayExecutor(workers=2)
        assert executor.workers == 2
        return search(model, cluster, plans, top_k=5, executor=executor)
    finally:
        ray.shutdown()


def test_a_killed_worker_is_replaced_and_its_batch_retried(problem, tmp_path):
    model, cluster, plans, serial = problem
    victim = serial.leaderboard[0].strategy        # the winner: losing its batch would change the leaderboard
    marker = tmp_path / "killed"
    result = _ray_search(model, cluster, plans, killer_hook(victim.short(), str(marker)))
    assert marker.exists(), "no worker was killed"
    assert [e.strategy for e in result.leaderboard] == [e.strategy for e in serial.leaderboard]
    assert [e.metrics.step_time for e in result.leaderboard] == [e.metrics.step_time for e in serial.leaderboard]
    simulated = [e.strategy for e in result.evaluations]
    assert len(simulated) == len(set(simulated)), "a retried batch was counted twice"
    assert all(not e.violations or "error" not in e.violations[0] for e in result.evaluations)


def test_a_batch_whose_worker_always_dies_is_recorded_and_the_search_ends(problem):
    model, cluster, plans, serial = problem
    victim = serial.leaderboard[0].strategy
    result = _ray_search(model, cluster, plans, killer_hook(victim.short(), None))
    failed = [e for e in result.evaluations if e.violations and e.violations[0].startswith("worker failed:")]
    assert victim in {e.strategy for e in failed}
    assert all(e.metrics is None for e in failed)
    lost = {e.strategy for e in failed}
    survivors = [e.strategy for e in serial.leaderboard if e.strategy not in lost]
    assert [e.strategy for e in result.leaderboard][: len(survivors)] == survivors
