"""The stage orders the fast path compiles (sim/orders.py) are schedule.py's, step for step."""

from __future__ import annotations

import pytest

from autoplan.sim import orders
from autoplan.sim.schedule import stage_order


def _cases():
    for schedule in ("1f1b", "interleaved", "gpipe", "zb-h1", "zbv", "dualpipev", "dualpipe"):
        for p in (1, 2, 3, 4, 8):
            for m in (1, 2, 3, 5, 7, 8, 16, 17, 24, 33):
                for v in ((2, 3) if schedule == "interleaved" else (1,)):
                    if schedule == "interleaved" and m % p:
                        continue
                    if schedule == "dualpipe" and (p % 2 or m % 2):
                        continue
                    yield schedule, p, m, v


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved", "gpipe", "zb-h1", "zbv", "dualpipev", "dualpipe"])
def test_orders_are_the_schedules(schedule):
    for sched, p, m, v in _cases():
        if sched != schedule:
            continue
        want = [(i, q, st.forward, st.micro_batch, st.chunk, orders.PARTS[st.part])
                for i in range(p) for q, st in enumerate(stage_order(sched, i, p, m, v))]
        got = list(zip(*(c.tolist() for c in orders.orders(sched, p, m, v))))
        assert got == want, (sched, p, m, v)
