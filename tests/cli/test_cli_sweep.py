"""`autoplan sweep` and the whole-run flags of search, show and simulate, from the command line."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from autoplan.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


SMALL = ("--model", "gpt-1.7b", "--global-batch", "64", "--tp", "2", "--zero", "1")
"""A space that searches in well under a second per count."""


def test_sweep_prints_each_count_with_its_run_and_writes_its_folder(tmp_path):
    r = run("sweep", *SMALL, "--gpus", "8..16", "--tokens", "2B", "--workers", "0", "--out", str(tmp_path),
            "--deadline", "30", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert [row["gpus"] for row in out["rows"]] == [8, 16]
    assert all(row["days"] > 0 and row["cost_usd"] > 0 and row["energy_mwh"] > 0 for row in out["rows"])
    assert out["choice"]["gpus"] == 8                       # both meet 30 days; 8 GPUs cost less
    assert out["curve"]["gpus"] == [8, 16]
    folder = tmp_path / out["sweep"].split("/")[-1]
    assert {p.name for p in folder.iterdir()} == {"sweep.json", "sweep.csv", "sweep.md", "report.html"}


def test_a_deadline_that_cannot_be_met_says_by_how_much_and_exits_1(tmp_path):
    r = run("sweep", *SMALL, "--gpus", "8,16", "--tokens", "2T", "--workers", "0", "--out", str(tmp_path),
            "--deadline", "1")
    assert r.exit_code == 1, r.output
    assert "1-day deadline cannot be met: the fastest count, 16 GPUs" in " ".join(r.output.split())


@pytest.mark.parametrize("args, needle", [
    (["--gpus", "16..8", "--tokens", "1B"], "down"),
    (["--gpus", "8..16", "--deadline", "3"], "give --tokens"),
    (["--gpus", "8..16", "--tokens", "15X"], "not an amount"),
    (["--gpus", "8..16", "--tokens", "1B", "--steps", "3"], "one of --tokens"),
    (["--gpus", "8..16", "--tokens", "1B", "--budget", "1M", "--cluster", "gb300-nvl72"], "needs a price"),
    (["--gpus", "8..16", "--goodput", "0.9"], "give --tokens"),
])
def test_bad_sweep_input_is_one_line_exit_2(tmp_path, args, needle):
    r = run("sweep", "--model", "gpt-1.7b", "--out", str(tmp_path), *args)
    assert r.exit_code == 2, r.output
    assert needle in r.output and "Traceback" not in r.output


def test_search_show_and_simulate_carry_the_whole_run(tmp_path):
    r = run("search", *SMALL, "--gpus", "16", "--top", "2", "--out", str(tmp_path), "--tokens", "300B",
            "--gpu-hour-price", "2.5", "--goodput", "0.9", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    first = out["leaderboard"][0]
    assert first["days"] > 0 and first["cost_usd"] == pytest.approx(first["gpu_hours"] * 2.5, rel=1e-4)
    folder = tmp_path / out["run"].split("/")[-1]
    assert json.loads((folder / "inputs.json").read_text())["run_budget"]["goodput"] == 0.9
    rows = list(csv.DictReader((folder / "leaderboard.csv").open()))
    assert float(rows[0]["days"]) == first["days"]
    assert json.loads((folder / "leaderboard.json").read_text())["leaderboard"][0]["run_totals"]["days"] > 0
    shown = run("show", str(folder))
    assert shown.exit_code == 0 and "goodput 90 %" in shown.output and "GPU-h" in shown.output
    sim = run("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--global-batch", "64", "--steps",
              "1000", "--json")
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.output)["run_totals"]["steps"] == 1000


def test_epochs_for_a_cnn_and_samples_for_a_dlrm():
    r = run("simulate", "--model", "resnet50", "--gpus", "8", "--global-batch", "256", "--micro-batch", "32",
            "--epochs", "2", "--json")
    assert r.exit_code == 0, r.output
    totals = json.loads(r.output)["run_totals"]
    assert totals["steps"] == -(-2 * 1281167 // 256)                # ImageNet-1k: 1,281,167 training images
    r = run("simulate", "--model", "dlrm-criteo", "--gpus", "8", "--samples", "4.2B", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["run_totals"]["steps"] == -(-4200000000 // 65536)
    r = run("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--epochs", "1")
    assert r.exit_code == 2 and "training-set size" in r.output
