"""`autoplan report`, `show` and `export` on a run folder; bad folders and ranks are one line and exit code 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoplan.cli import main
from autoplan.search.analysis import load_run


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_show(small_run):
    r = cli("show", str(small_run))
    assert r.exit_code == 0, r.output
    run = load_run(small_run)
    assert run.leaderboard[0].strategy.short() in r.output and "llama3-8b" in r.output
    r = cli("show", str(small_run), "--top", "2", "--json")
    rows = json.loads(r.output)["leaderboard"]
    assert [row["plan"] for row in rows] == [e.strategy.short() for e in run.leaderboard[:2]]
    board = json.loads((small_run / "leaderboard.json").read_text())["leaderboard"]
    assert rows[0]["step_s"] == round(board[0]["metrics"]["step_time_s"], 4)


def test_show_beyond_the_top_k_says_so(small_run):
    r = cli("show", str(small_run), "--top", "8")
    assert r.exit_code == 0 and "not an exact ranking" in r.output


def test_export_megatron_and_torchtitan(small_run):
    run = load_run(small_run)
    # Megatron-LM runs ZeRO ≤ 1 only: export the best such plan below the top (the default space has ZeRO-2/3 too)
    rank = next(i for i, e in enumerate(run.ranked, 1) if i > 1 and e.strategy.zero <= 1)
    r = cli("export", str(small_run), "--rank", str(rank), "--format", "megatron")
    assert r.exit_code == 0, r.output
    s = run.ranked[rank - 1].strategy
    assert f"--tensor-model-parallel-size {s.tp} \\" in r.output
    assert f"--micro-batch-size {s.micro_batch} \\" in r.output and "--num-query-groups 8 \\" in r.output
    assert r.output.splitlines()[0].startswith(f"# rank {rank} of {small_run.name}: {s.short()}")
    r = cli("export", str(small_run), "--format", "torchtitan")      # rank 1: tp1 pp1 dp16 z2, FSDP2
    assert r.exit_code == 0 and "def autoplan_plan() -> Trainer.Config:" in r.output, r.output
    assert f"config.parallelism.tensor_parallel_degree = {run.ranked[0].strategy.tp}" in r.output


def test_report_command_rebuilds(small_run, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(small_run, folder)
    (folder / "report.html").unlink()
    r = cli("report", str(folder))
    assert r.exit_code == 0, r.output
    assert (folder / "report.html").exists() and str(folder / "report.html") in r.output
    traces = lambda: sorted(p.name for p in folder.glob("trace_rank*"))  # noqa: E731
    assert traces() == ["trace_rank1.json.gz"]
    assert cli("report", str(folder), "--traces", "3").exit_code == 0
    assert traces() == ["trace_rank1.json.gz", "trace_rank2.json.gz", "trace_rank3.json.gz"]
    r = cli("report", str(folder), "--traces", "2")           # a rebuild with fewer leaves no stale trace behind
    assert r.exit_code == 0 and str(folder / "trace_rank2.json.gz") in r.output
    assert traces() == ["trace_rank1.json.gz", "trace_rank2.json.gz"]
    r = cli("report", str(folder), "--traces", "0")
    assert r.exit_code == 2 and "--traces" in r.output


@pytest.mark.parametrize("args,needle", [
    (("show", "/no/such/run"), "does not exist"),
    (("report", "/no/such/run"), "does not exist"),
    (("export", "/no/such/run"), "does not exist"),
])
def test_missing_run_folder(args, needle):
    r = cli(*args)
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("rank", ["0", "99"])
def test_rank_out_of_range(small_run, rank):
    r = cli("export", str(small_run), "--rank", rank)
    assert r.exit_code == 2 and "out of range" in r.output and len(r.output.strip().splitlines()) == 1


def test_folder_without_inputs(tmp_path):
    r = cli("show", str(tmp_path))
    assert r.exit_code == 2 and "not a run folder" in r.output


def test_zero_2_plan_export(tmp_path):
    r = cli("search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--zero", "2", "--pp", "1",
            "--top", "3", "--out", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    folder = json.loads(r.output)["run"]
    r = cli("export", folder, "--format", "megatron")             # ZeRO-2 runs as Megatron-FSDP
    assert r.exit_code == 0 and "--data-parallel-sharding-strategy optim_grads \\" in r.output, r.output
    r = cli("export", folder, "--format", "torchtitan")
    assert r.exit_code == 0 and 'fsdp_reshard_after_forward = "never"' in r.output
    best = json.loads((Path(folder) / "best_plan.json").read_text())
    assert "--use-megatron-fsdp" in best["megatron"]["args"] and "megatron" in best["launch_with"]
    r = cli("export", folder, "--format", "deepspeed")
    assert r.exit_code == 0 and '"stage": 2' in r.output


def test_a_search_its_budget_cut_short_says_so_in_its_summary_show_and_report(tmp_path):
    r = cli("search", "--model", "gpt-1.7b", "--gpus", "8", "--budget", "3", "--top", "3", "--workers", "0",
            "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "left unsimulated at the --budget of 3" in " ".join(r.output.split())
    folder = next(tmp_path.iterdir())
    summary = json.loads((folder / "leaderboard.json").read_text())["summary"]
    assert summary["simulated"] == 3 and summary["unproven"] > 0
    assert "not proven exact" in cli("show", str(folder)).output
    assert "not proven exact" in (folder / "report.html").read_text()
