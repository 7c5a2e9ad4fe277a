"""Reading a run folder back, the Pareto front, one-axis neighbours of the best plan, parameter importances."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from autoplan.errors import SpecError
from autoplan.report.write import write_report_safely
from autoplan.search.analysis import Run, analyse, importances, load_run, neighbours, pareto_front
from autoplan.search.folder import SPECS, RunFolder
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


def test_load_run(small_run):
    run = load_run(small_run)
    assert run.model is not None and run.model.name == "llama3-8b" and run.cluster.gpus == 16 and not run.missing
    assert run.top_k == 5 and len(run.leaderboard) == 5
    board = json.loads((small_run / "leaderboard.json").read_text())["leaderboard"]
    assert [e.strategy.to_dict() for e in run.leaderboard] == [row["strategy"] for row in board]
    assert run.summary["simulated"] == len(run.evaluations)
    assert run.plan(1) is run.leaderboard[0]


@pytest.mark.parametrize("rank", [0, -1, 10_000])
def test_rank_out_of_range(small_run, rank):
    with pytest.raises(SpecError, match="out of range"):
        load_run(small_run).plan(rank)


def test_not_a_run_folder(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_run(tmp_path / "nope")
    with pytest.raises(SpecError, match="not a run folder"):
        load_run(tmp_path)


def test_pareto_front_is_exactly_the_undominated_plans(small_run):
    run = load_run(small_run)
    front = pareto_front(list(run.evaluations))
    feasible = run.ranked

    def dominates(a, b):
        return (a.peak_memory <= b.peak_memory and a.metrics.tokens_per_s >= b.metrics.tokens_per_s
                and (a.peak_memory < b.peak_memory or a.metrics.tokens_per_s > b.metrics.tokens_per_s))

    assert front and run.ranked[0] in front
    for e in front:
        assert not any(dominates(o, e) for o in feasible)
    for e in feasible:
        if e not in front:
            assert any(dominates(f, e) or (f.peak_memory <= e.peak_memory and
                                           f.metrics.tokens_per_s >= e.metrics.tokens_per_s) for f in front)
    mems = [e.peak_memory for e in front]
    assert mems == sorted(mems)


def test_neighbours_change_one_axis(small_run):
    run = load_run(small_run)
    best = run.leaderboard[0]
    nbrs = neighbours(run, best)
    space = run.inputs["space"]
    assert set(nbrs) == {k for k, v in space.items() if len(v) > 1 and k not in ("schedule", "virtual_stages")} | (
        {"schedule"} if len(space["schedule"]) > 1 or len(space["virtual_stages"]) > 1 else set())
    for axis, row in nbrs.items():
        assert sum(n.best for n in row) == 1
        for n in row:
            if n.evaluation is None:
                assert n.reason
                continue
            s = n.evaluation.strategy
            assert s.dp * s.tp * s.pp * s.cp == 16
            if not n.best:
                assert n.evaluation.feasible or n.reason
            if n.evaluation.feasible and not n.best:
                fresh = evaluate(run.model, run.cluster, s)
                assert fresh.metrics.step_time == pytest.approx(n.evaluation.metrics.step_time, rel=1e-12)


def test_importances_or_a_note(small_run):
    values, note = importances(load_run(small_run))
    assert note
    if values:
        assert sum(values.values()) == pytest.approx(1.0) and len(values) >= 2


def test_importances_need_no_optuna_study(small_run):
    # an exhaustive run keeps no study; its importances come from evaluations.jsonl
    assert not (small_run / "study.journal").exists()
    values, note = importances(load_run(small_run))
    assert values and "PED-ANOVA" in note


def test_importances_are_optunas_ped_anova():
    # the same trials and choices: the categorical Parzen estimators and the Pearson divergence of Optuna's evaluator
    import warnings

    import optuna

    from autoplan.search.analysis import TOP_SHARE, _parzen
    rng = __import__("random").Random(3)
    dists = {"a": optuna.distributions.CategoricalDistribution(["x", "y", "z"]),
             "b": optuna.distributions.CategoricalDistribution(["u", "v"]),
             "c": optuna.distributions.CategoricalDistribution(["p", "q", "r", "s"])}
    study = optuna.create_study(direction="maximize")
    trials = []
    for _ in range(60):
        params = {"a": rng.choice("xyz"), "b": rng.choice("uv"), "c": rng.choice("pqr")}
        value = (3 if params["a"] == "x" else 0) + (1 if params["b"] == "u" else 0) + rng.random()
        trials.append((params, value))
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.PedAnovaImportanceEvaluator(), target=lambda t: -t.value)
    cutoff = sorted(-v for _, v in trials)[math.ceil(TOP_SHARE * len(trials)) - 1]
    top = [p for p, v in trials if -v <= cutoff]
    raw = {}
    for k, d in dists.items():
        p_top, p_all = _parzen([p[k] for p in top], list(d.choices)), _parzen([p[k] for p, _ in trials], list(d.choices))
        raw[k] = sum(b * (a / b - 1) ** 2 for a, b in zip(p_top, p_all))
    got = {k: v / sum(raw.values()) for k, v in raw.items()}
    assert got == pytest.approx(want, rel=1e-9)


def test_unknown_model_is_noted_and_saved_specs_fix_it(small_run, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(small_run, folder)
    inputs = json.loads((folder / "inputs.json").read_text())
    inputs.pop("specs")                                    # a folder that kept no model and cluster whole
    (folder / "inputs.json").write_text(json.dumps(inputs | {"model": "my-model-from-a-file"}))
    (folder / SPECS).unlink(missing_ok=True)
    run = load_run(folder)
    assert run.model is None and "unknown model" in run.missing
    RunFolder(folder).save_specs(get_model("llama3-8b"), load_cluster("dgx-h100-80g", 16))
    assert isinstance(load_run(folder), Run) and load_run(folder).model.name == "llama3-8b"


def test_report_failure_is_a_warning(tmp_path, capsys):
    write_report_safely(RunFolder(tmp_path))
    assert "warning: report not written" in capsys.readouterr().err


def test_analyse_hands_the_report_plain_data(small_run):
    run = load_run(small_run)
    a = analyse(run, traces=2)
    assert a.pareto == pareto_front(list(run.evaluations))
    assert len(a.sims) == 2 and a.sims[0].timeline.makespan > 0
    assert set(a.neighbours) == set(neighbours(run, run.leaderboard[0]))
    assert (a.importances, a.importance_note) == importances(run)


def test_the_search_hands_the_report_its_plans_and_the_page_is_the_folders(tmp_path, monkeypatch):
    """The search enumerates its space once and hands the plans and its fresh evaluations to the report (the best
    plan is not scored again): the page is the one ``autoplan report`` draws from the folder read back."""
    from click.testing import CliRunner

    import autoplan.search.space as space
    from autoplan.cli import main
    from autoplan.report.write import write_report

    calls = []
    real = space.enumerate_plans
    monkeypatch.setattr(space, "enumerate_plans", lambda *a, **k: calls.append(a) or real(*a, **k))
    r = CliRunner().invoke(main, ["search", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--top",
                                  "5", "--out", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    assert len(calls) == 1
    folder = tmp_path / json.loads(r.output[r.output.index("{"):])["run"].split("/")[-1]
    written = (folder / "report.html").read_text()
    write_report(load_run(folder))
    assert len(calls) == 2                         # read back, the report enumerates the space itself
    assert (folder / "report.html").read_text() == written
