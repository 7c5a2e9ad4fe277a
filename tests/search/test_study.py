"""Samplers share one contract: they respect the budget, never evaluate a plan twice, handle infeasible plans,
and leave a study optuna can load; a run resumes without evaluating a finished plan again."""

import json

import optuna
import pytest

from autoplan.search.run import RECORD, load_known, run_search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


@pytest.fixture(scope="module")
def problem():
    model, cluster = get_model("gpt-7.5b"), load_cluster("dgx-h100-80g", 32)
    plans, _ = enumerate_plans(model, 32, load_space(fixed={"cp": 1}), 256)
    return model, cluster, plans


def _evaluated(folder):
    return [json.loads(line)["plan"] for line in (folder / "evaluations.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("sampler", ["exhaustive", "tpe", "nsga2", "random"])
def test_sampler_contract(tmp_path, problem, sampler):
    model, cluster, plans = problem
    budget = 40
    result = run_search(model, cluster, plans, tmp_path, sampler=sampler, budget=budget, seed=1, top_k=5)
    seen = _evaluated(tmp_path)
    assert len(seen) == len(set(seen)), "a plan was evaluated twice"
    if sampler != "exhaustive":
        assert len(seen) <= budget
    assert result.leaderboard, "no feasible plan found"
    steps = [e.metrics.step_time for e in result.leaderboard]
    assert steps == sorted(steps)
    assert all(e.feasible for e in result.leaderboard)
    if sampler == "exhaustive":
        # an exact search keeps no Optuna study unless --storage asks for one: evaluations.jsonl is its record
        assert not (tmp_path / "study.journal").exists()
        return
    study = optuna.load_study(study_name=tmp_path.name, storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "study.journal"))))
    assert len(study.trials) >= len(seen)
    assert all("feasible" in t.user_attrs and "peak_memory_gib" in t.user_attrs for t in study.trials)


def test_exhaustive_search_records_a_study_where_storage_names_one(tmp_path, problem):
    model, cluster, plans = problem
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    (tmp_path / "run").mkdir()
    run_search(model, cluster, plans, tmp_path / "run", sampler="exhaustive", top_k=5, storage=url)
    seen = _evaluated(tmp_path / "run")
    study = optuna.load_study(study_name="run", storage=url)
    assert len(study.trials) == len(seen)


def test_same_seed_same_leaderboard(tmp_path, problem):
    model, cluster, plans = problem
    a = run_search(model, cluster, plans, tmp_path / "a", sampler="tpe", budget=30, seed=7, top_k=5) \
        if (tmp_path / "a").mkdir() is None else None
    b = run_search(model, cluster, plans, tmp_path / "b", sampler="tpe", budget=30, seed=7, top_k=5) \
        if (tmp_path / "b").mkdir() is None else None
    assert [e.strategy for e in a.leaderboard] == [e.strategy for e in b.leaderboard]


def test_resume_reuses_finished_plans(tmp_path, problem):
    model, cluster, plans = problem
    first = run_search(model, cluster, plans, tmp_path, sampler="exhaustive", top_k=5)
    n = len(first.evaluations)
    assert len(load_known(tmp_path)) == n
    again = run_search(model, cluster, plans, tmp_path, sampler="exhaustive", top_k=5)
    assert again.evaluations == [] and again.reused == n
    assert [e.strategy for e in again.leaderboard] == [e.strategy for e in first.leaderboard]


def test_resume_after_a_torn_record(tmp_path, problem):
    model, cluster, plans = problem
    full = run_search(model, cluster, plans, tmp_path / "full", sampler="exhaustive", top_k=5) \
        if (tmp_path / "full").mkdir() is None else None
    part = tmp_path / "part"
    part.mkdir()
    run_search(model, cluster, plans, part, sampler="exhaustive", top_k=5)
    data = (part / RECORD).read_bytes()
    (part / RECORD).write_bytes(data[: len(data) // 2])      # as if killed mid-write
    kept = len(load_known(part))
    resumed = run_search(model, cluster, plans, part, sampler="exhaustive", top_k=5)
    assert resumed.reused == kept
    assert [e.strategy for e in resumed.leaderboard] == [e.strategy for e in full.leaderboard]


def test_every_search_has_one_signature():
    import inspect

    from autoplan.search.exhaustive import search
    from autoplan.search.study import sampled_search

    def shape(fn):
        sig = inspect.signature(fn)
        return [(p.name, p.kind) for p in sig.parameters.values()], sig.return_annotation

    assert shape(search) == shape(sampled_search)
    assert shape(search)[1] == "SearchResult"


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_a_resumed_run_counts_what_it_reused(tmp_path, problem, sampler):
    model, cluster, plans = problem
    first = run_search(model, cluster, plans, tmp_path, sampler=sampler, budget=30, seed=2, top_k=5)
    again = run_search(model, cluster, plans, tmp_path, sampler=sampler, budget=30, seed=2, top_k=5)
    assert again.reused == 30 and not again.evaluations
    assert again.out_of_memory == first.out_of_memory
    assert [e.strategy for e in again.leaderboard] == [e.strategy for e in first.leaderboard]
