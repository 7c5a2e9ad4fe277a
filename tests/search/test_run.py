"""A run: --workers auto chooses Ray once, before the bulk of the work, only when the work left wins back Ray's
start-up; Ctrl-C keeps a partial
ranking that --resume completes without evaluating a plan twice; progress lines on a non-terminal."""

import io
import itertools
import json
from types import SimpleNamespace

import pytest

from autoplan.report.live import Progress, progress_console
from autoplan.search import executors, run
from autoplan.search.exhaustive import search
from autoplan.search.folder import RunFolder
from autoplan.search.run import AutoExecutor, SearchInterrupted, run_search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster

MODEL = get_model("gpt-1.7b")
CLUSTER = load_cluster("dgx-a100-80g", 16)


def _plans():
    plans, _ = enumerate_plans(MODEL, 16, load_space(fixed={"cp": 1, "zero": 1}), 64)
    return plans


class FakeRay:
    """Stands in for RayExecutor: evaluates in this process, remembers that it was started."""

    started = 0

    def __init__(self, workers):
        FakeRay.started += 1
        self.workers = workers

    def map(self, model, cluster, batches):
        for b in batches:
            yield executors.evaluate_batch(model, cluster, b)

    def close(self):
        pass


def _ticking_clock(step):
    counter = itertools.count()
    return lambda: step * next(counter)


def test_auto_executor_stays_serial_for_short_searches(monkeypatch):
    FakeRay.started = 0
    monkeypatch.setattr(executors, "RayExecutor", FakeRay)
    auto = AutoExecutor(workers=2)                      # Ray's 10 s start: this search is milliseconds of work
    result = search(MODEL, CLUSTER, _plans(), top_k=5, executor=auto)
    assert FakeRay.started == 0 and auto.workers == 1 and result.leaderboard
    assert auto.choice.startswith("serial")


def test_auto_executor_chooses_once_before_the_rest_and_keeps_the_ranking(monkeypatch):
    FakeRay.started = 0
    monkeypatch.setattr(executors, "RayExecutor", FakeRay)
    auto = AutoExecutor(workers=2, start_s=0.0, clock=_ticking_clock(1.0))   # slow plans, a Ray that starts at once
    # a top 40: 65 plans simulated, five batches (a top 5 takes one batch: nothing left to decide on)
    chosen = search(MODEL, CLUSTER, _plans(), top_k=40, executor=auto)
    serial = search(MODEL, CLUSTER, _plans(), top_k=40)
    assert FakeRay.started == 1 and auto.workers == 2 and auto.choice.startswith("Ray")
    assert [e.strategy for e in chosen.leaderboard] == [e.strategy for e in serial.leaderboard]
    assert len(chosen.evaluations) == len(serial.evaluations)
    # decided on the first batch after the leaderboard filled: every later batch ran on "Ray"
    assert auto.serial_seconds > 0 and auto._plans < len(serial.evaluations)


def test_auto_executor_weighs_the_work_left_against_rays_start():
    made = []
    auto = AutoExecutor(workers=2, start_s=10.0, clock=_ticking_clock(0.1), make_ray=lambda n: made.append(n) or
                        SimpleNamespace(workers=n, map=None, close=lambda: None))
    auto.serial_seconds, auto._plans = 1.0, 10        # 0.1 s a plan
    auto._decide(100, 1)                               # 10 s left, 3.75 s saved on 2 CPUs: not worth 2 × 10 s
    assert not made and auto.choice.startswith("serial")
    auto._decided = False
    auto._decide(1000, 1)                              # 100 s left: 37.5 s saved
    assert made == [2] and auto.workers == 2


def test_one_worker_never_starts_ray(monkeypatch):
    FakeRay.started = 0
    monkeypatch.setattr(executors, "RayExecutor", FakeRay)
    search(MODEL, CLUSTER, _plans(), top_k=5, executor=AutoExecutor(workers=1, start_s=0.0))
    assert FakeRay.started == 0


def test_interrupt_keeps_partial_ranking_and_resume_completes(monkeypatch, tmp_path):
    plans = _plans()                                    # a top 40: 65 plans simulated, in batches of 16
    (tmp_path / "full").mkdir()
    full = run_search(MODEL, CLUSTER, plans, tmp_path / "full", top_k=40, workers=0, sampler="exhaustive")
    real = executors.evaluate
    calls = {"n": 0}

    def interrupting(model, cluster, s):
        calls["n"] += 1
        if calls["n"] == 20:
            raise KeyboardInterrupt
        return real(model, cluster, s)

    folder = tmp_path / "run"
    folder.mkdir()
    monkeypatch.setattr(executors, "evaluate", interrupting)
    with pytest.raises(SearchInterrupted) as stop:
        run_search(MODEL, CLUSTER, plans, folder, top_k=40, workers=0, sampler="exhaustive")
    partial = stop.value.partial
    assert 0 < len(partial.evaluations) < 20 and partial.leaderboard
    assert partial.leaderboard == sorted(partial.leaderboard, key=lambda e: e.metrics.step_time)

    monkeypatch.setattr(executors, "evaluate", real)
    resumed = run_search(MODEL, CLUSTER, plans, folder, top_k=40, workers=0, sampler="exhaustive")
    assert [e.strategy for e in resumed.leaderboard] == [e.strategy for e in full.leaderboard]
    lines = [json.loads(x)["plan"] for x in (folder / "evaluations.jsonl").read_text().splitlines()]
    assert len(lines) == len(set(lines)), "a plan was evaluated twice"
    assert resumed.reused == len(partial.evaluations)


def test_progress_prints_plain_lines_when_not_a_terminal():
    out, now = io.StringIO(), [0.0]
    progress = Progress(progress_console(out), valid=100, what="plans", clock=lambda: now[0], plain_every=2.0)
    with progress:
        for done in range(1, 7):
            now[0] = float(done)
            progress(done, 50, [])
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0] == "autoplan: 2/50 plans (100 valid), 1.0 plans/s, 2.0 s; no plan fits yet"
    assert all(line.startswith("autoplan: ") and "/50 plans" in line and "plans/s" in line for line in lines)


def test_a_torn_record_is_cut_off_so_later_records_survive(tmp_path):
    plans = _plans()[:3]
    recorder = RunFolder(tmp_path).recorder()
    recorder(executors.evaluate(MODEL, CLUSTER, plans[0]))
    recorder.close()
    with (tmp_path / "evaluations.jsonl").open("a") as f:
        f.write('{"plan": "torn')
    assert list(run.load_known(tmp_path)) == [plans[0]]
    recorder = RunFolder(tmp_path).recorder()
    recorder(executors.evaluate(MODEL, CLUSTER, plans[1]))
    recorder.close()
    assert list(run.load_known(tmp_path)) == plans[:2]
    assert (tmp_path / "evaluations.jsonl").read_text().splitlines()[-1].startswith('{"plan": ')


@pytest.mark.slow
def test_ctrl_c_stops_in_seconds_and_writes_the_partial_leaderboard(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    cmd = [sys.executable, "-m", "autoplan", "search", "--model", "gpt3", "--gpus", "1024", "--sampler", "tpe",
           "--budget", "3000", "--workers", "0", "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("*/evaluations.jsonl")) or \
            len(next(tmp_path.glob("*/evaluations.jsonl")).read_text().splitlines()) < 20:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
        time.sleep(0.1)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 3.0
    assert proc.returncode == 130 and "Traceback" not in err and "--resume" in err, err[-3000:]
    board = json.loads(next(tmp_path.glob("*/leaderboard.json")).read_text())
    assert board["inputs"]["interrupted"] is True and board["leaderboard"]


def test_first_ctrl_c_stops_after_the_batch_in_flight_second_at_once():
    import os
    import signal

    seen = []
    before = signal.signal(signal.SIGINT, signal.default_int_handler)   # a shell may start pytest ignoring SIGINT
    stop = run.StopBetweenBatches(lambda done, total, board: seen.append(done))
    with stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            stop(3, 10, [])
        assert seen == [3]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    restored = signal.signal(signal.SIGINT, before)
    assert restored is signal.default_int_handler
