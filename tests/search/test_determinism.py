"""Same inputs and seed, same leaderboard, byte for byte: exhaustive and TPE in this process, and serial against
Ray (slow). Only the wall-clock seconds and, between serial and Ray, how many plans were simulated (Ray keeps
more batches in flight) may differ."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoplan.cli import main

PROBLEM = ["--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--top", "8", "--zero", "1"]


SAMPLERS = [["--sampler", "exhaustive"], ["--sampler", "tpe", "--budget", "40", "--seed", "5"]]


def search(out: Path, *extra: str) -> Path:
    r = CliRunner().invoke(main, ["search", *PROBLEM, "--out", str(out), "--json", *extra])
    assert r.exit_code == 0, r.output
    return Path(json.loads(r.stdout)["run"])


def files(folder: Path) -> dict:
    """What must not change between two runs of the same inputs (the seconds taken aside)."""
    board = json.loads((folder / "leaderboard.json").read_text())
    summary = {k: v for k, v in board["summary"].items() if k != "seconds"}
    md = re.sub(r"in \d+\.\d s\.$", "in … s.", (folder / "leaderboard.md").read_text(), flags=re.M)
    return {"leaderboard.csv": (folder / "leaderboard.csv").read_bytes(), "leaderboard.md": md,
            "leaderboard": board["leaderboard"], "inputs": board["inputs"], "summary": summary,
            "inputs.json": (folder / "inputs.json").read_bytes(),
            "evaluations.jsonl": (folder / "evaluations.jsonl").read_bytes()}


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_same_inputs_same_files(tmp_path, sampler):
    a = files(search(tmp_path / "a", "--workers", "0", *sampler))
    b = files(search(tmp_path / "b", "--workers", "0", *sampler))
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], f"{name} differs between two runs of the same inputs"
    assert len(a["leaderboard"]) == 8


def test_the_seed_matters(tmp_path):
    """(So that the test above compares something a seed steers.)"""
    one, two = (files(search(tmp_path / s, "--workers", "0", "--sampler", "random", "--budget", "30", "--seed", s))
                for s in ("1", "2"))
    assert one["evaluations.jsonl"] != two["evaluations.jsonl"]


@pytest.mark.slow
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_serial_and_ray_give_the_same_leaderboard(tmp_path, monkeypatch, sampler):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    serial = files(search(tmp_path / "serial", "--workers", "0", *sampler))
    ray = files(search(tmp_path / "ray", "--workers", "2", *sampler))
    assert ray["leaderboard.csv"] == serial["leaderboard.csv"]
    assert ray["leaderboard"] == serial["leaderboard"]
    table = [line for line in serial["leaderboard.md"].splitlines() if line.startswith("|")]
    assert [line for line in ray["leaderboard.md"].splitlines() if line.startswith("|")] == table
    if "tpe" in sampler:     # the sampler sees the same plans in the same batches: the same trials
        assert ray["evaluations.jsonl"] == serial["evaluations.jsonl"]
