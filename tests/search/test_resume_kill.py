"""`kill -9` in the middle of a search, then a bare `--resume FOLDER`: the run completes with the leaderboard of an
uninterrupted run (exhaustive, TPE and NSGA-II), the original budget, no plan evaluated twice and none lost
(a real subprocess; slow)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoplan.search.folder import RECORD
from autoplan.search.run import load_known

pytestmark = pytest.mark.slow

# exhaustive with a top 300: about a thousand plans simulated, several seconds in one process
ARGS = ["search", "--model", "gpt3", "--gpus", "1024", "--sampler", "exhaustive", "--top", "300", "--workers", "0",
        "--json"]
KILL_AFTER = 100
"""Evaluations recorded before the kill."""
SAMPLED = {
    "tpe": ["search", "--model", "gpt3", "--gpus", "1024", "--sampler", "tpe", "--budget", "120", "--seed", "1",
            "--workers", "0", "--json"],
    "nsga2": ["search", "--model", "gpt-7.5b", "--gpus", "64", "--cluster", "dgx-a100-80g", "--global-batch", "512",
              "--sampler", "nsga2", "--budget", "120", "--seed", "2", "--workers", "0", "--json"],
}


def autoplan(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "autoplan", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def finish(p: subprocess.Popen, timeout: float = 300) -> str:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    return out


def _lines(folder: Path) -> list[str]:
    path = folder / "evaluations.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def _kill_mid_search(out: Path, args: list[str] = ARGS, after: int = KILL_AFTER) -> Path:
    p = autoplan(*args, "--out", str(out))
    deadline = time.monotonic() + 120
    folder = None
    while time.monotonic() < deadline and p.poll() is None:
        folders = list(out.glob("*/"))
        if folders and len(_lines(folders[0])) >= after:
            folder = folders[0]
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert folder is not None, "the search ended (or never started) before it could be killed"
    assert p.returncode == -signal.SIGKILL
    assert not (folder / "leaderboard.json").exists(), "the search finished before the kill"
    return folder


def _board(folder: Path) -> list[dict]:
    return json.loads((folder / "leaderboard.json").read_text())["leaderboard"]


def test_kill_9_then_resume_completes_the_run(tmp_path):
    whole = tmp_path / "whole"
    uninterrupted = autoplan(*ARGS, "--out", str(whole))
    killed = _kill_mid_search(tmp_path / "killed")
    before = load_known(killed)
    assert len(before) >= KILL_AFTER

    finish(autoplan("search", "--resume", str(killed), "--json"))
    finish(uninterrupted)
    (reference,) = whole.glob("*/")

    assert _board(killed) == _board(reference)
    assert (killed / "leaderboard.csv").read_text() == (reference / "leaderboard.csv").read_text()
    records = [json.loads(line) for line in _lines(killed)]          # every line whole: none torn
    plans = [r["plan"] for r in records]
    assert len(plans) == len(set(plans)), "a plan was evaluated twice"
    recorded = load_known(killed)
    assert set(plans) == {s.short() for s in recorded}, "the human record and the resume record disagree"
    assert {s.short() for s in before} <= set(plans), "a plan evaluated before the kill was lost"
    ranked = [line.split(",")[1] for line in (reference / "leaderboard.csv").read_text().splitlines()[1:]]
    assert len(ranked) == 300 and {r["plan"] for r in records if r["feasible"]} >= set(ranked)


def test_a_record_cut_mid_write_is_repaired_on_resume(tmp_path):
    """The kill can land inside a record: the torn tail is dropped and those plans evaluated again, once."""
    killed = _kill_mid_search(tmp_path / "killed")
    record = killed / RECORD
    data = record.read_bytes()
    record.write_bytes(data[: len(data) - 100])                       # the last record torn
    text = (killed / "evaluations.jsonl").read_text()
    (killed / "evaluations.jsonl").write_text(text[: len(text) - 30])  # and the last line
    kept = len(load_known(killed))
    finish(autoplan(*ARGS, "--resume", str(killed)))
    plans = [json.loads(line)["plan"] for line in _lines(killed)]
    assert len(plans) == len(set(plans)) == len(load_known(killed))
    assert len(load_known(killed)) > kept


@pytest.mark.parametrize("sampler", sorted(SAMPLED))
def test_kill_9_then_bare_resume_equals_an_uninterrupted_sampled_run(tmp_path, sampler):
    args = SAMPLED[sampler]
    budget = int(args[args.index("--budget") + 1])
    whole = tmp_path / "whole"
    uninterrupted = autoplan(*args, "--out", str(whole))
    killed = _kill_mid_search(tmp_path / "killed", args, after=budget // 3)
    before = {s.short() for s in load_known(killed)}
    assert budget // 3 <= len(before) < budget
    finish(autoplan("search", "--resume", str(killed), "--json"))
    finish(uninterrupted)
    (reference,) = whole.glob("*/")
    assert _board(killed) == _board(reference)
    plans = [json.loads(line)["plan"] for line in _lines(killed)]
    assert len(plans) == len(set(plans)) == budget, "the resumed run did not end at the original budget"
    assert before <= set(plans)
    assert sorted(plans) == sorted(json.loads(line)["plan"] for line in _lines(reference))
