"""Chrome traces of a simulated step: plain or gzip'd JSON with the same events, and bounded in size."""

from __future__ import annotations

import gzip
import json

import pytest

from autoplan.sim.simulate import simulate_step
from autoplan.sim.trace import MAX_EVENTS, trace_events, write_trace
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster


def _spans(events: list[dict]) -> list[dict]:
    return [e for e in events if e["ph"] == "X"]


@pytest.fixture(scope="module")
def tiny_step(tiny_gpt, a100_8):
    s = Strategy(tp=2, pp=2, dp=2, global_batch=2 * 12, schedule="interleaved", virtual_stages=2, zero=1)
    return simulate_step(tiny_gpt, a100_8, s), tiny_gpt.layers // (s.pp * s.chunks)


def test_gzip_trace_holds_the_same_events_as_the_plain_one(tiny_step, tmp_path):
    sim, layers = tiny_step
    write_trace(tmp_path / "t.json", sim.lowered, sim.timeline, layers)
    write_trace(tmp_path / "t.json.gz", sim.lowered, sim.timeline, layers)
    plain = (tmp_path / "t.json").read_bytes()
    packed = (tmp_path / "t.json.gz").read_bytes()
    assert plain.startswith(b"{") and packed[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(packed)) == json.loads(plain)
    assert len(packed) < len(plain) / 4


def test_small_step_shows_every_task_and_its_layers(tiny_step):
    sim, layers = tiny_step
    events = trace_events(sim.lowered, sim.timeline, layers)
    tasks = sim.lowered.tasks
    shown = sum(d > 0 for d in tasks.duration)
    spans = _spans(events)
    assert sum(e["cat"] != "layer" for e in spans) == shown
    assert sum(e["cat"] == "layer" for e in spans) == layers * len(sim.lowered.meta)
    end = max(e["ts"] + e["dur"] for e in spans)
    assert end == pytest.approx(sim.timeline.makespan * 1e6, rel=1e-6)


def test_a_chunk_of_one_layer_gets_no_nested_layer_span(tiny_step):
    sim, _ = tiny_step
    spans = _spans(trace_events(sim.lowered, sim.timeline, 1))
    assert not any(e["cat"] == "layer" for e in spans)
    assert len(spans) == sum(d > 0 for d in sim.lowered.tasks.duration)


def test_over_the_bound_layers_go_then_tasks_merge_into_spans(tiny_step):
    sim, layers = tiny_step
    tasks = sim.lowered.tasks
    shown = sum(d > 0 for d in tasks.duration)
    names = sum(e["ph"] == "M" for e in trace_events(sim.lowered, sim.timeline))
    no_layers = trace_events(sim.lowered, sim.timeline, layers, max_events=names + shown)
    assert len(_spans(no_layers)) == shown
    bound = names + shown // 3
    merged = trace_events(sim.lowered, sim.timeline, layers, max_events=bound)
    spans = _spans(merged)
    assert len(merged) <= bound
    assert sum(e["args"]["tasks"] for e in spans) == shown
    busy = sum(e["args"]["busy_us"] for e in spans)
    assert busy == pytest.approx(sum(tasks.duration) * 1e6, rel=1e-6)
    assert all(e["args"]["busy_us"] <= e["dur"] * (1 + 1e-9) + 1e-3 for e in spans)


def test_gpt3_on_64_gpus_with_many_micro_batches_stays_within_the_bound(tmp_path):
    model, cluster = get_model("gpt3"), load_cluster("dgx-a100-80g", 64)
    s = Strategy(tp=8, pp=8, dp=1, micro_batch=1, global_batch=1536, schedule="1f1b", sequence_parallel=True,
                 recompute="full", zero=1)
    sim = simulate_step(model, cluster, s)
    layers = model.layers // s.pp
    assert layers * len(sim.lowered.meta) > MAX_EVENTS          # every layer of every pass would not fit
    path = tmp_path / "trace_rank1.json.gz"
    write_trace(path, sim.lowered, sim.timeline, layers)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    assert len(events) <= MAX_EVENTS
    assert path.stat().st_size < 5e6


@pytest.mark.parametrize("schedule,names", [("zb-h1", {"F", "B", "W"}), ("zbv", {"F", "B", "W"}),
                                            ("dualpipev", {"F", "B", "W", "F&B"})])
def test_zero_bubble_traces_name_their_passes(tiny_gpt, a100_8, schedule, names):
    # B: input gradients, W: weight gradients, F&B: DualPipeV's fused forward and backward; ".c1" the V's second chunk
    s = Strategy(pp=2, dp=4, global_batch=4 * 8, schedule=schedule)
    sim = simulate_step(tiny_gpt, a100_8, s)
    passes = [e["name"] for e in _spans(trace_events(sim.lowered, sim.timeline)) if e["cat"] == "pass"]
    assert {n.split(".")[0].rstrip("0123456789") for n in passes} == names
    assert ("F0.c1" in passes) == (schedule != "zb-h1")


@pytest.mark.parametrize("why", [False, True])
@pytest.mark.parametrize("schedule,v,m", [("1f1b", 1, 6), ("interleaved", 2, 8), ("zbv", 1, 8), ("dualpipe", 1, 8)])
def test_trace_json_is_json_dumps_of_the_events(tiny_gpt, a100_8, schedule, v, m, why):
    """The same text with and without the critical path's track and marks (a timeline that records causes: the
    report's)."""
    from autoplan.sim.trace import trace_json
    s = Strategy(dp=2, tp=1, pp=4, micro_batch=1, global_batch=2 * m, schedule=schedule, virtual_stages=v, zero=1)
    sim = simulate_step(tiny_gpt, a100_8, s, why=why)
    for layers in (0, 1, 2):
        for bound in (MAX_EVENTS, 40):
            want = json.dumps({"traceEvents": trace_events(sim.lowered, sim.timeline, layers, max_events=bound),
                               "displayTimeUnit": "ms"}, separators=(",", ":"))
            assert trace_json(sim.lowered, sim.timeline, layers, max_events=bound) == want
