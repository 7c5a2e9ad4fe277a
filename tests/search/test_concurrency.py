"""Searches started together never share a run folder, and a crash never leaves a half-written leaderboard
(files are written to a temporary file and renamed)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from autoplan.report import write
from autoplan.report.write import write_run
from autoplan.search.folder import RunFolder
from autoplan.search.run import run_search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


def test_folders_asked_for_at_once_are_distinct(tmp_path):
    got: list[Path] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        got.append(RunFolder.create(tmp_path, "20260101-000000-gpt3-175b-1024gpu").path)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == len(set(got)) == 8 and all(p.is_dir() for p in got)


def _result(tmp_path: Path, top: int):
    model, cluster = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
    plans, _ = enumerate_plans(model, 16, load_space(fixed={"cp": 1, "zero": 1, "recompute": "none"}), 64)
    folder = tmp_path / f"search-{top}"
    folder.mkdir()
    return run_search(model, cluster, plans, folder, sampler="exhaustive", top_k=top, workers=0)


def test_a_crash_while_writing_leaves_the_previous_leaderboard_whole(tmp_path, monkeypatch):
    inputs = {"model": "gpt-1.7b", "gpus": 16, "gpu": "A100", "cluster": "dgx-a100-80g", "global_batch": 64}
    monkeypatch.setattr(write, "write_report_safely", lambda *a, **k: None)
    folder = tmp_path / "run"
    folder.mkdir()
    write_run(RunFolder(folder), inputs, _result(tmp_path, 3))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    longer = _result(tmp_path, 5)

    real_fdopen = os.fdopen

    class Dying:
        """A file that writes half of what it is given, then the process 'dies'."""

        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "fdopen", lambda fd, mode="r", *a, **k: Dying(real_fdopen(fd, mode, *a, **k)))
    with pytest.raises(KeyboardInterrupt):
        write_run(RunFolder(folder), inputs, longer)
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}
    assert after == before, "a leaderboard file was changed by a write that did not finish"
    assert len(json.loads(after["leaderboard.json"])["leaderboard"]) == 3


@pytest.mark.slow
def test_killed_writers_never_leave_half_a_file(tmp_path):
    """kill -9 a process that rewrites a large leaderboard.json in a loop, at random moments: what is left is
    always a whole file."""
    target = tmp_path / "leaderboard.json"
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from autoplan.files import write_atomic
        rows = [{{"rank": i, "plan": "tp8 pp8 dp16 mb1 int3 sp z1", "step_s": i / 7}} for i in range(40000)]
        n = 0
        while True:
            n += 1
            write_atomic(Path({str(target)!r}), json.dumps({{"n": n, "leaderboard": rows}}))
            if n == 1:
                print("ready", flush=True)
    """)
    rng = random.Random(0)
    for _ in range(8):
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.3))
        p.send_signal(signal.SIGKILL)
        p.wait()
        data = json.loads(target.read_text())
        assert len(data["leaderboard"]) == 40000


@pytest.mark.slow
def test_two_searches_started_at_once_use_two_folders(tmp_path):
    args = [sys.executable, "-m", "autoplan", "search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64",
            "--zero", "1", "--cp", "1", "--workers", "0", "--out", str(tmp_path), "--json"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    runs = [Path(json.loads(out)["run"]) for out, _ in outs]
    assert runs[0] != runs[1] and {p.parent for p in runs} == {tmp_path}
    boards = [json.loads((r / "leaderboard.json").read_text())["leaderboard"] for r in runs]
    assert boards[0] == boards[1]
    for r in runs:
        plans = [json.loads(line)["plan"] for line in (r / "evaluations.jsonl").read_text().splitlines()]
        assert len(plans) == len(set(plans)), "two searches wrote into one record"
