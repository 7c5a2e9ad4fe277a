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


# ------------------------------------------------------------------------------------------------ on Ray

RAY_ARGS = ["search", "--model", "gpt-7.5b", "--gpus", "64", "--cluster", "dgx-a100-80g", "--global-batch", "512",
            "--sampler", "exhaustive", "--top", "200", "--workers", "2", "--json"]
"""An exhaustive search of 441 plans (a few seconds) on an embedded Ray with 2 workers."""
RAY_KILL_AFTER = 60


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (its embedded Ray: GCS, raylet, workers), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        out += below
        todo += below
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def ray_searches(monkeypatch):
    """Starts ``autoplan search`` on Ray; whatever is left of them (and of their Ray) is killed at the end."""
    monkeypatch.setenv("RAY_AUTH_MODE", os.environ.get("RAY_AUTH_MODE", "disabled"))  # no token files: a throwaway
    started: list[tuple[subprocess.Popen, list[int]]] = []                         # local cluster (test_faults.py)

    def start(*args: str) -> subprocess.Popen:
        p = autoplan(*args)
        started.append((p, []))
        return p

    def watch() -> None:                     # note the Ray processes while their parent lives
        for p, pids in started:
            pids.extend(x for x in _descendants(p.pid) if x not in pids)

    start.watch = watch
    yield start
    for p, pids in started:
        _kill([p.pid] if p.poll() is None else [])
        _kill(pids)
        p.communicate()


def test_kill_9_of_a_ray_search_then_bare_resume_completes_the_run(tmp_path, ray_searches):
    """The main process of a `--workers 2` search killed mid-search (its Ray with it); a bare `--resume` ends with
    the leaderboard of an uninterrupted Ray run, every plan recorded once."""
    whole, out = tmp_path / "whole", tmp_path / "killed"
    uninterrupted = ray_searches(*RAY_ARGS, "--out", str(whole))
    p = ray_searches(*RAY_ARGS, "--out", str(out))
    deadline, folder = time.monotonic() + 240, None
    while time.monotonic() < deadline and p.poll() is None:
        ray_searches.watch()
        folders = list(out.glob("*/"))
        if folders and len(_lines(folders[0])) >= RAY_KILL_AFTER:
            folder = folders[0]
            break
        time.sleep(0.02)
    ray_searches.watch()
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert folder is not None and not (folder / "leaderboard.json").exists(), "not killed mid-search"
    before = {s.short() for s in load_known(folder)}
    finish(autoplan("search", "--resume", str(folder), "--json"))
    finish(uninterrupted)
    (reference,) = whole.glob("*/")
    assert _board(folder) == _board(reference)
    plans = [json.loads(line)["plan"] for line in _lines(folder)]
    assert len(plans) == len(set(plans)), "a plan was evaluated twice"
    assert before <= set(plans)


def test_a_killed_ray_worker_loses_nothing(tmp_path, ray_searches):
    """A Ray worker of a `--workers 2` search killed (kill -9) while it evaluates a batch: Ray runs the batch again,
    the search ends with the leaderboard of an uninterrupted run, and a bare `--resume` of the finished folder
    changes nothing."""
    whole, out = tmp_path / "whole", tmp_path / "worker"
    uninterrupted = ray_searches(*RAY_ARGS, "--out", str(whole))
    p = ray_searches(*RAY_ARGS, "--out", str(out))
    deadline, victim = time.monotonic() + 240, None
    while time.monotonic() < deadline and p.poll() is None and victim is None:
        folders = list(out.glob("*/"))
        if folders and len(_lines(folders[0])) >= RAY_KILL_AFTER // 2:
            busy = [x for x in _descendants(p.pid) if "evaluate_batch" in _cmdline(x)]
            victim = busy[0] if busy else None
        time.sleep(0.02)
    assert victim is not None, "no busy Ray worker was found to kill"
    _kill([victim])
    out_text = finish(p)
    finish(uninterrupted)
    (folder,), (reference,) = out.glob("*/"), whole.glob("*/")
    assert json.loads(out_text)["leaderboard"] and _board(folder) == _board(reference)
    plans = [json.loads(line)["plan"] for line in _lines(folder)]
    assert len(plans) == len(set(plans)), "a retried batch was recorded twice"
    assert not any("worker failed" in line for line in _lines(folder))
    finish(autoplan("search", "--resume", str(folder), "--workers", "0", "--json"))
    assert _board(folder) == _board(reference)


# ------------------------------------------------------------------------------------------------ full disk

def _file_limit(size: int):
    """A preexec hook: files larger than ``size`` bytes cannot be written (EFBIG, as a full disk gives ENOSPC)."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


DISK_ARGS = [a if a != "2" else "0" for a in RAY_ARGS]
"""The search of ``RAY_ARGS`` in this process: a few seconds, a record of about 1 MiB."""


def test_a_full_disk_mid_search_is_one_line_and_the_folder_resumes(tmp_path):
    whole = tmp_path / "whole"
    uninterrupted = autoplan(*DISK_ARGS, "--out", str(whole))
    out = tmp_path / "full"
    p = autoplan(*DISK_ARGS, "--out", str(out), preexec_fn=_file_limit(64 * 1024))
    _, err = p.communicate(timeout=300)
    assert p.returncode == 2, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("autoplan: ")]
    errors = [line for line in err.splitlines() if line.startswith("autoplan: error:")]
    assert not lines and len(errors) == 1 and "--resume" in errors[0] and "Traceback" not in err, err
    (folder,) = out.glob("*/")
    assert 0 < len(load_known(folder)) and not (folder / "leaderboard.json").exists()
    finish(autoplan("search", "--resume", str(folder), "--json"))
    finish(uninterrupted)
    (reference,) = whole.glob("*/")
    assert _board(folder) == _board(reference)
    plans = [json.loads(line)["plan"] for line in _lines(folder)]
    assert len(plans) == len(set(plans))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_run_folder_is_one_line_and_resumes_once_writable(tmp_path):
    killed = _kill_mid_search(tmp_path / "killed")
    mode = killed.stat().st_mode
    os.chmod(killed, 0o555)
    try:
        p = autoplan("search", "--resume", str(killed), "--json")
        _, err = p.communicate(timeout=300)
        assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    finally:
        os.chmod(killed, mode)
    finish(autoplan("search", "--resume", str(killed), "--json"))
    assert (killed / "leaderboard.json").exists()


def test_an_out_folder_that_cannot_be_made_is_one_line(tmp_path):
    for out in ("/proc/autoplan-cannot-be-here", str(tmp_path / "file" / "below")):
        (tmp_path / "file").write_text("a file, not a folder")
        p = autoplan(*ARGS, "--out", out)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2 and err.count("\n") == 1 and "cannot create a run folder there" in err, err
