"""The files a search run leaves: report.html (every section, plotly.js once, nothing fetched), best_plan.json
and the best plans' traces."""

from __future__ import annotations

import gzip
import json
import re
import shutil

import pytest

from autoplan.report.html import MAX_BARS, timeline_figure
from autoplan.report.write import write_report
from autoplan.search.analysis import load_run
from autoplan.sim.simulate import simulate_step
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster

SECTIONS = ("top-plans", "pareto", "breakdown", "timeline", "critical", "whatif", "sensitivity", "importance", "launch",
            "inputs")
PLOTS = ("fig-pareto", "fig-breakdown", "fig-timeline", "fig-sensitivity", "fig-importance")


def test_search_leaves_every_artefact(small_run):
    names = {p.name for p in small_run.iterdir()}
    assert names >= {"leaderboard.md", "leaderboard.csv", "leaderboard.json", "report.html", "best_plan.json",
                     "trace_rank1.json.gz", "inputs.json", "evaluations.jsonl", "specs.json"}
    assert "trace_rank2.json.gz" not in names     # the best plan's trace only, unless `autoplan report --traces N`
    assert "study.journal" not in names           # an exact search keeps no Optuna study unless --storage names one
    assert not [n for n in names if n.endswith(".pkl")]


def test_report_has_every_section_and_no_network(small_run):
    page = (small_run / "report.html").read_text()
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in page
    for div in PLOTS:
        assert f'id="{div}"' in page
    assert len(re.findall(r"\* plotly\.js v\d", page)) == 1
    assert '<pre id="js-errors" hidden></pre>' in page
    assert not re.search(r"<script[^>]+src=|<link |@import|<img ", page)
    run = load_run(small_run)
    best = run.leaderboard[0].strategy
    # the launch of the first framework that runs the best plan as planned (tp1 pp1 z2: Megatron-FSDP)
    assert best.short() in page and "Launch the best plan (Megatron-LM)" in page and "pretrain_gpt.py" in page
    # how close validate's runs of this GPU and family come out, as the terminal says it
    assert "measured accuracy: validate&#x27;s" in page and "dense transformer runs on the H100-SXM5-80GB" in page


def test_best_plan_json(small_run):
    best = json.loads((small_run / "best_plan.json").read_text())
    board = json.loads((small_run / "leaderboard.json").read_text())["leaderboard"]
    assert best["strategy"] == board[0]["strategy"]
    assert best["metrics"]["step_time_s"] == board[0]["metrics"]["step_time_s"]
    args = best["megatron"]["args"]
    s = best["strategy"]
    assert f"--tensor-model-parallel-size {s['tp']}" in args and f"--global-batch-size {s['global_batch']}" in args
    assert "def autoplan_plan()" in best["torchtitan"] and best["launch_with"]


def test_traces_are_chrome_trace_json(small_run, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(small_run, folder)
    run = load_run(folder)
    write_report(run, traces=3)
    for rank in (1, 2, 3):
        events = json.loads(gzip.decompress((folder / f"trace_rank{rank}.json.gz").read_bytes()))["traceEvents"]
        spans = [e for e in events if e["ph"] == "X"]
        assert spans and all(e["dur"] > 0 for e in spans)
        stages = {e["pid"] for e in spans if e["cat"] != "critical"}
        assert len(stages) == run.ranked[rank - 1].strategy.pp
        chain = [e for e in spans if e["cat"] == "critical"]        # the critical path's own track, below the stages
        assert chain and {e["pid"] for e in chain} == {len(stages)}
        assert sum(e["args"]["share_of_step"] for e in chain) == pytest.approx(1.0, abs=1e-4)


def test_report_regenerates(small_run, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(small_run, folder)
    for name in ("report.html", "best_plan.json", "trace_rank1.json.gz"):
        (folder / name).unlink()
    paths = write_report(load_run(folder))
    assert {p.name for p in paths} >= {"report.html", "best_plan.json", "trace_rank1.json.gz"}
    assert (folder / "report.html").read_text().count('class="plotly-graph-div"') == len(PLOTS)


def test_long_timeline_shows_its_beginning():
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    s = Strategy(dp=32, tp=4, pp=8, micro_batch=1, global_batch=1536, schedule="interleaved", virtual_stages=6,
                 sequence_parallel=True, zero=1)
    sim = simulate_step(model, cluster, s)
    fig, caption = timeline_figure(sim, s.short())
    assert sum(len(t["x"]) for t in fig["data"]) == MAX_BARS
    assert "the first" in caption and "trace_rank1.json.gz" in caption
    rows = {y for t in fig["data"] for y in t["y"]}
    assert "stage 0 · compute" in rows and "stage 7 · compute" in rows


def test_traces_after_the_best_stop_at_the_byte_budget(small_run, tmp_path):
    from autoplan.report.write import write_traces
    from autoplan.search.analysis import simulate_top

    folder = tmp_path / "copy"
    shutil.copytree(small_run, folder)
    run = load_run(folder)
    sims = simulate_top(run, 3)
    assert [p.name for p in write_traces(run, sims, budget=0)] == ["trace_rank1.json.gz"]
    assert not (folder / "trace_rank2.json.gz").exists()
    assert len(write_traces(run, sims)) == 3
