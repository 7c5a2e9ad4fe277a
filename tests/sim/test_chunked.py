"""A chunked collective lowered into engine tasks replays its schedule: same time, same per-dimension link load."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.hardware.dims import NetworkDim
from autoplan.hardware.themis import OPS, collective
from autoplan.sim.chunked import lower, simulate
from autoplan.sim.engine import Tasks, run

GB = 1e9
dim_st = st.builds(lambda n, t, b, a: NetworkDim(size=n, topology=t, bandwidth=b * GB, latency=a),
                   st.integers(2, 16), st.sampled_from(["ring", "switch", "fully_connected"]), st.floats(1, 900),
                   st.sampled_from([0.0, 5e-7, 1e-5]))


def _named(dims: tuple[NetworkDim, ...]) -> tuple[NetworkDim, ...]:
    return tuple(NetworkDim(size=d.size, topology=d.topology, bandwidth=d.bandwidth, latency=d.latency,
                            name=f"d{i}") for i, d in enumerate(dims))


@settings(max_examples=80, deadline=None)
@given(dims=st.lists(dim_st, min_size=1, max_size=4).map(tuple).map(_named), op=st.sampled_from(OPS),
       nbytes=st.sampled_from([1e6, 64 * 2**20]), chunks=st.sampled_from([1, 3, 16]),
       intra=st.sampled_from(["fifo", "scf"]), policy=st.sampled_from(["baseline", "themis"]))
def test_engine_replays_the_schedule(dims, op, nbytes, chunks, intra, policy):
    ct = collective(dims, op, nbytes, policy=policy, chunks=chunks, intra=intra)
    timeline = simulate(ct)
    assert timeline.makespan == pytest.approx(ct.time, rel=1e-9, abs=1e-15)
    for d, busy in zip(dims, ct.busy):
        assert timeline.busy(f"{d.name}.links") == pytest.approx(busy, rel=1e-9, abs=1e-15)
    assert len(timeline.tasks) == 2 * sum(len(dims) * (2 if op == "all_reduce" else 1) for _ in range(chunks))


def test_chunks_wait_for_a_predecessor_and_overlap_across_dimensions():
    dims = _named((NetworkDim(size=8, topology="switch", bandwidth=300 * GB, latency=1e-6),
                   NetworkDim(size=16, topology="switch", bandwidth=50 * GB, latency=5e-6)))
    tasks = Tasks()
    gate = tasks.add(tasks.stream("compute"), 1e-3, label="backward")
    ct = collective(dims, "all_reduce", 2**28, policy="themis", chunks=16)
    lower(ct, tasks, after=(gate,))
    timeline = run(tasks)
    assert timeline.makespan == pytest.approx(1e-3 + ct.time)
    spans = {name: [(s, e) for s, e, r in zip(timeline.start, timeline.end, tasks.resource)
                    if tasks.resources[r] == name and e > s] for name in ("d0.links", "d1.links")}
    # some chunk crosses dimension 1 while another crosses dimension 0: chunks overlap across dimensions
    assert any(s0 < e1 and s1 < e0 for s0, e0 in spans["d0.links"] for s1, e1 in spans["d1.links"])
