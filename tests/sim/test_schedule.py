"""Pipeline schedules: completeness, in-flight limits, and the closed-form makespans of GPipe, 1F1B and
interleaved 1F1B (Narayanan et al. SC'21 §2.2), simulated on the engine with unit passes and free communication."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.specs.layout import inflight_layer_chunks
from autoplan.sim.engine import Tasks, Timeline, run
from autoplan.sim.schedule import Step, max_in_flight, stage_order
from autoplan.families.strategy import Strategy


def _orders(schedule: str, p: int, m: int, v: int = 1) -> list[tuple[Step, ...]]:
    return [tuple(stage_order(schedule, i, p, m, v)) for i in range(p)]


def _pipeline(schedule: str, p: int, m: int, v: int, f: float, b: float) -> tuple[Timeline, list[int]]:
    """Run the schedule on the engine: one stream per stage, a chunk's forward takes f/v, its backward b/v.

    Dependencies follow workload.lower with zero-time PP transfers: the forward of virtual stage k+1 after the
    forward of k (same micro-batch), the backward of the last virtual stage after its forward, the backward of
    k after the backward of k+1. Tasks are added only once their dependencies exist, stage by stage in
    schedule order, so a schedule that deadlocks fails here.
    """
    orders = _orders(schedule, p, m, v)
    tasks = Tasks()
    streams = [tasks.stream(f"stage{i}.compute") for i in range(p)]
    last_vs = p * v - 1
    ids: dict[tuple[bool, int, int], int] = {}
    pos = [0] * p
    while any(pos[i] < len(orders[i]) for i in range(p)):
        progressed = False
        for i in range(p):
            while pos[i] < len(orders[i]):
                step = orders[i][pos[i]]
                vs = step.chunk * p + i
                need = []
                if step.forward and vs > 0:
                    need.append((True, step.micro_batch, vs - 1))
                if not step.forward:
                    need.append((True, step.micro_batch, vs))
                    if vs < last_vs:
                        need.append((False, step.micro_batch, vs + 1))
                if any(k not in ids for k in need):
                    break
                ids[(step.forward, step.micro_batch, vs)] = tasks.add(
                    streams[i], (f if step.forward else b) / v, tuple(ids[k] for k in need),
                    kind="F" if step.forward else "B")
                pos[i] += 1
                progressed = True
        assert progressed, f"{schedule} p={p} m={m} v={v} deadlocks at positions {pos}"
    return run(tasks), streams


# ------------------------------------------------------------------------------------------------- completeness


@settings(max_examples=60, deadline=None)
@given(schedule=st.sampled_from(["gpipe", "1f1b", "interleaved"]), p=st.integers(1, 8), k=st.integers(1, 4),
       v=st.integers(2, 4), extra=st.integers(0, 7))
def test_every_pass_exactly_once_and_backward_after_forward(schedule, p, k, v, extra):
    if schedule == "interleaved":
        m = k * p                                     # Megatron's interleaved schedule needs m divisible by p
    else:
        m, v = k + extra, 1
    for stage, order in enumerate(_orders(schedule, p, m, v)):
        forwards = [(s.micro_batch, s.chunk) for s in order if s.forward]
        backwards = [(s.micro_batch, s.chunk) for s in order if not s.forward]
        expected = sorted((j, c) for j in range(m) for c in range(v))
        assert sorted(forwards) == expected, (schedule, stage)
        assert sorted(backwards) == expected, (schedule, stage)
        assert len(order) == 2 * m * v
        seen = set()
        for s in order:
            if s.forward:
                seen.add((s.micro_batch, s.chunk))
            else:
                assert (s.micro_batch, s.chunk) in seen, f"backward of {s} before its forward on stage {stage}"


def test_gpipe_runs_all_forwards_then_all_backwards():
    order = stage_order("gpipe", 1, 4, 5)
    assert [s.forward for s in order] == [True] * 5 + [False] * 5


def test_unknown_schedule_is_rejected():
    with pytest.raises(ValueError, match="unknown schedule"):
        stage_order("zero-bubble", 0, 2, 4)


def test_max_in_flight_counts_live_forwards():
    order = [Step(True, 0, 0), Step(True, 1, 0), Step(False, 0, 0), Step(True, 2, 0), Step(False, 1, 0),
             Step(False, 2, 0)]
    assert max_in_flight(order) == 2
    assert max_in_flight([]) == 0


# ------------------------------------------------------------------------------------------------ in-flight limits


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 12), m=st.integers(1, 40))
def test_1f1b_holds_at_most_p_minus_i_micro_batches(p, m):
    for i in range(p):
        peak = max_in_flight(stage_order("1f1b", i, p, m))
        assert peak <= p - i
        assert peak == min(p - i, m)                  # SC'21 §2.2.1: stage i stashes p − i micro-batches
        s = Strategy(pp=p, global_batch=m)
        assert peak == inflight_layer_chunks(s, i)


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 12), m=st.integers(1, 24))
def test_gpipe_holds_every_micro_batch(p, m):
    for i in range(p):
        assert max_in_flight(stage_order("gpipe", i, p, m)) == m
    assert inflight_layer_chunks(Strategy(pp=p, global_batch=m, schedule="gpipe"), 0) == m


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 8), v=st.integers(2, 4), k=st.integers(1, 4))
def test_interleaved_max_in_flight_matches_megatron_warmup(p, v, k):
    m = k * p
    s = Strategy(pp=p, global_batch=m, schedule="interleaved", virtual_stages=v)
    for i in range(p):
        peak = max_in_flight(stage_order("interleaved", i, p, m, v))
        expected = min((p - i - 1) * 2 + (v - 1) * p + 1, m * v)
        assert peak == expected, (i, p, v, m)
        assert inflight_layer_chunks(s, i) == expected


# ----------------------------------------------------------------------------------------- closed-form makespans


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 8, 13])
def test_gpipe_and_1f1b_makespan_and_bubble(schedule, p, m):
    f, b = 1.0, 2.0                                  # B = 2F, uniform stages
    tl, streams = _pipeline(schedule, p, m, 1, f, b)
    assert tl.makespan == pytest.approx((m + p - 1) * (f + b), rel=1e-12)
    for i in range(p):
        busy = tl.busy(f"stage{i}.compute")
        assert busy == pytest.approx(m * (f + b))
        bubble = (tl.makespan - busy) / tl.makespan
        assert bubble == pytest.approx((p - 1) / (m + p - 1), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("f,b", [(1.0, 1.0), (1.0, 3.0), (0.5, 2.5)])
def test_gpipe_makespan_holds_for_any_forward_backward_ratio(f, b):
    p, m = 4, 6
    tl, _ = _pipeline("gpipe", p, m, 1, f, b)
    assert tl.makespan == pytest.approx((m + p - 1) * (f + b), rel=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_interleaved_bubble_shrinks_by_v(p, v, k):
    # SC'21 §2.2.2: with v chunks per rank (each pass F/v, B/v) the bubble is (p−1)(F+B)/v
    m, f, b = k * p, 1.0, 2.0
    tl, _ = _pipeline("interleaved", p, m, v, f, b)
    assert tl.makespan == pytest.approx((m + (p - 1) / v) * (f + b), rel=1e-9)
    plain, _ = _pipeline("1f1b", p, m, 1, f, b)
    bubble_plain = plain.makespan - m * (f + b)
    bubble_inter = tl.makespan - m * (f + b)
    assert bubble_inter == pytest.approx(bubble_plain / v, rel=1e-9)


def test_1f1b_is_not_slower_than_gpipe_and_holds_fewer_activations():
    p, m = 4, 12
    g, _ = _pipeline("gpipe", p, m, 1, 1.0, 2.0)
    o, _ = _pipeline("1f1b", p, m, 1, 1.0, 2.0)
    assert o.makespan == pytest.approx(g.makespan)
    assert max_in_flight(stage_order("1f1b", 0, p, m)) < max_in_flight(stage_order("gpipe", 0, p, m))
