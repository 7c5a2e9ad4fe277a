"""`autoplan` on a DLRM: search with the family's space and batch, the report, TorchRec export, user errors."""

from __future__ import annotations

import json

from click.testing import CliRunner

from autoplan.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_search_report_and_torchrec_export(tmp_path):
    r = run("search", "--model", "dlrm-criteo", "--gpus", "16", "--out", str(tmp_path), "--workers", "0", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    board = out["leaderboard"]
    assert board and board == sorted(board, key=lambda row: row["step_s"])
    # validate's DLRM runs are on A100s: on the default H100 cluster the prediction is untested
    assert out["measured_accuracy"] is None
    folder = out["run"]
    inputs = json.loads(open(f"{folder}/inputs.json").read())
    assert inputs["global_batch"] == 65536 and "auto" in inputs["space"]["sharding"]
    e = run("export", folder)
    assert e.exit_code == 0 and "ParameterConstraints" in e.output and e.output.count('"cat_') == 26
    bad = run("export", folder, "--format", "megatron")
    assert bad.exit_code == 2 and "only as --format torchrec" in bad.output


def test_simulate_a_pinned_sharding_and_errors_exit_2():
    ok = run("simulate", "--model", "dlrm-dcnv2", "--gpus", "8", "--micro-batch", "1024", "--sharding", "row_wise",
             "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["metrics"]["breakdown_s"]["a2a"] > 0
    dense = run("simulate", "--model", "gpt-1.7b", "--gpus", "8", "--sharding", "row_wise")
    assert dense.exit_code == 2 and "DLRM models only" in dense.output
    pp = run("simulate", "--model", "dlrm-criteo", "--gpus", "8", "--pp", "2")
    assert pp.exit_code == 2 and "pp must be 1" in pp.output


def test_space_counts_data_parallel_criteo_as_not_fitting():
    """Replicating Criteo's 26 tables (~96 GB of fp32 rows) on every GPU cannot fit 80 GiB: the census says so."""
    r = run("space", "--model", "dlrm-criteo", "--gpus", "16", "--json")
    c = json.loads(r.stdout)
    per_sharding = c["valid"] // len(c["axes"]["sharding"])
    assert r.exit_code == 0 and c["out_of_memory"] == per_sharding
