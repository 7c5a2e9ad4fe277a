"""The critical path of pipeline schedules against closed forms: the workload's own task graphs with chosen pass
and transfer times (1F1B, interleaved, ZB-H1, DualPipe), and the critical path of a simulated plan."""

from __future__ import annotations

from collections import Counter

import pytest

from autoplan.families.costs import PassCost
from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.sim.critical import analyse_path, path_dict, task_label
from autoplan.sim.engine import run
from autoplan.sim.simulate import simulate_step
from autoplan.sim.workload import Lowered, _graph, _Shape
from autoplan.specs import load_cluster

# rationally independent pass times: a chain's length pins down how many passes of each kind it holds
F, B, W, FB, H = 1.0, 1.5 ** 0.5, 3 ** 0.5 / 4, 5 ** 0.5, 0.01


def _lowered(schedule: str, p: int, m: int, v: int = 1, hop: float = 0.0, last: float = 1.0) -> tuple[Lowered, object]:
    """The workload's graph of ``schedule`` with F, B (whole backward B + W), W and F&B seconds per pass, ``hop``
    per PP transfer and nothing else; the last stage's passes ``last`` times as long."""
    g = _graph(_Shape(schedule, p, m, v, 0, False, False, False, False, False, False, False, False))
    seconds = []
    for key in g.keys:
        if isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], int):
            x = {True: F, False: B + W, "B": B, "W": W, "F&B": FB}[key[1]] * (last if key[0] == p - 1 else 1.0)
        else:
            x = hop if key == "hop" else 0.0
        seconds.append(x)
    tasks = g.tasks.with_durations([seconds[k] for k in g.tasks.duration])
    lowered = Lowered(tasks, p, [tasks.stream(f"stage{i}.compute") for i in range(p)], g,
                      [PassCost(x, (("compute", x),)) for x in seconds])
    return lowered, run(tasks, g.plan, why=True)


def _counts(lowered: Lowered, chain: tuple[int, ...]) -> Counter:
    return Counter(task_label(lowered, i)[1] for i in chain if lowered.tasks.duration[i] > 0)


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 13), (8, 16)])
def test_1f1b_chain_is_the_first_forward_down_the_last_stage_and_the_last_backward_up(p, m):
    # the last stage slowest (it holds the output layer): the step is the first micro-batch's forward down the
    # pipeline, the last stage's whole steady state, the last micro-batch's backward back up (Narayanan et al.
    # SC'21 §2.2: (p − 1) passes of fill and of drain around m passes of the last stage), each hop a transfer
    lowered, tl = _lowered("1f1b", p, m, hop=H, last=2.0)
    path = analyse_path(lowered, tl)
    closed = (p - 1) * (F + H) + m * 2.0 * (F + B + W) + (p - 1) * (B + W + H)
    assert tl.makespan == pytest.approx(closed, rel=1e-12)
    assert sum(s.seconds for s in path.segments) == pytest.approx(closed, rel=1e-12)
    down = [(i, "compute", "F0", "F0") for i in range(p - 1)]
    up = [(i, "compute", f"B{m - 1}", f"B{m - 1}") for i in reversed(range(p - 1))]
    compute = [(s.stage, s.stream, s.first, s.last) for s in path.segments if s.stream == "compute"]
    assert compute == down + [(p - 1, "compute", "F0", f"B{m - 1}")] + up
    steady = next(s for s in path.segments if s.stage == p - 1)
    assert steady.tasks == 2 * m and steady.share == pytest.approx(m * 2.0 * (F + B + W) / closed)
    sends = [s for s in path.segments if s.stream.startswith("pp_send")]
    assert len(sends) == 2 * (p - 1) and {s.kind for s in sends} == {"send"}
    assert all(s.slack > 0 for s in path.streams if not s.critical)


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 13)])
def test_1f1b_chain_holds_m_plus_p_minus_1_forwards_and_backwards(p, m):
    # free transfers, equal stages: the step is (m + p − 1)(F + B) (Narayanan et al. SC'21 §2.2, bubble (p − 1)/m)
    lowered, tl = _lowered("1f1b", p, m)
    path = analyse_path(lowered, tl)
    assert tl.makespan == pytest.approx((m + p - 1) * (F + B + W), rel=1e-12)
    assert _counts(lowered, path.tasks) == {"forward": m + p - 1, "backward": m + p - 1}


@pytest.mark.parametrize("p, m, v", [(2, 4, 2), (4, 8, 2), (4, 8, 3), (4, 16, 4)])
def test_interleaved_chain_holds_mv_plus_p_minus_1_chunk_passes_of_each_kind(p, m, v):
    # Narayanan et al. SC'21 §2.2.2: v chunks per stage shrink the bubble to (p − 1)/v passes of a stage, so the
    # step is (m·v + p − 1) chunk forwards and backwards
    lowered, tl = _lowered("interleaved", p, m, v)
    path = analyse_path(lowered, tl)
    assert tl.makespan == pytest.approx((m * v + p - 1) * (F + B + W), rel=1e-12)
    assert _counts(lowered, path.tasks) == {"forward": m * v + p - 1, "backward": m * v + p - 1}
    assert sum(s.share for s in path.segments) == pytest.approx(1.0)


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 11), (6, 12)])
def test_zb_h1_chain_leaves_out_p_minus_1_weight_gradients(p, m):
    # Qi et al. 2024 Table 2: ZB-H1's bubble is (p − 1)(T_F + T_B − T_W): the chain runs m + p − 1 F and B and
    # only m − (p − 1) W (the others fill the drain)
    lowered, tl = _lowered("zb-h1", p, m)
    path = analyse_path(lowered, tl)
    assert tl.makespan == pytest.approx(m * (F + B + W) + (p - 1) * (F + B - W), rel=1e-12)
    assert _counts(lowered, path.tasks) == {"forward": m + p - 1, "B": m + p - 1, "W": m - p + 1}


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 10), (6, 12), (8, 16), (8, 32)])
def test_dualpipe_chain_is_fill_fused_pairs_and_drain(p, m):
    # DeepSeek-V3 §3.2.1: both directions fill to the middle (3p/2 forwards, two whole backwards), the steady state
    # is m − p/2 − 2 fused F&B pairs, then the drain (p − 1 input-gradient B, one W); with F = B = W this is
    # Table 2's bubble (PP/2 − 1)(F&B + B − 3W) on m chunk passes of each kind (for B < 4F/3: with a longer B
    # the chain trades fill forwards for drain B passes)
    lowered, tl = _lowered("dualpipe", p, m, 2)
    path = analyse_path(lowered, tl)
    counts = {"forward": 3 * p // 2, "backward": 2, "F&B": m - p // 2 - 2, "B": p - 1, "W": 1}
    assert _counts(lowered, path.tasks) == counts
    closed = 3 * p // 2 * F + 2 * (B + W) + (m - p // 2 - 2) * FB + (p - 1) * B + W
    assert tl.makespan == pytest.approx(closed, rel=1e-12)
    # with F = B = W = 1 and no overlap (F&B = 3): 3m passes plus the bubble (p/2 − 1)(3 + 2 − 3)
    assert 3 * p // 2 + 2 * 2 + (m - p // 2 - 2) * 3 + (p - 1) + 1 == 3 * m + (p // 2 - 1) * 2


def test_simulated_plan_names_its_chain_and_slack():
    model, cluster = get_model("gpt3"), load_cluster("dgx-h100-80g", 1024)
    s = Strategy(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536, zero=1)
    sim = simulate_step(model, cluster, s, why=True)
    path = analyse_path(sim.lowered, sim.timeline)
    assert path.step == sim.timeline.makespan
    assert sum(path.kinds.values()) == pytest.approx(path.step, rel=1e-9)
    steady = max(path.segments, key=lambda seg: seg.seconds)
    assert (steady.stage, steady.stream, steady.first, steady.last) == (7, "compute", "F0", "B95")
    d = path_dict(path)
    assert d["segments"][-1]["kind"] == "optimizer" and 0 < d["segments"][-1]["share"] < 0.01
    assert {x["stream"] for x in d["streams"]} == {"compute", "dp"}
    assert all(x["slack_s"] >= 0 for x in d["streams"])
