"""The sweep report without a browser: the scaling curve's traces, ideal line and threshold mark, and the files."""

from __future__ import annotations

import json

from autoplan.report.html import scaling_figure, sweep_page
from autoplan.report.sweep import sweep_files, sweep_rows
from autoplan.search.sweep import Curve, curve

from tests.search.test_sweep import SWEEP


def _curve(price: float = 2.0) -> Curve:
    return curve(SWEEP, 0.8, gpu_hour_usd=price)


def test_the_curve_draws_throughput_cost_and_their_ideal_lines():
    import plotly.graph_objects as go

    raw = scaling_figure(_curve())
    fig = go.Figure(raw["data"], raw["layout"])                     # plotly.py validates every property
    by_name = {t.name: t for t in fig.data if t.name}
    assert list(by_name["best plan"].y) == [1.0e6, 1.9e6, 3.4e6, 5.4e6]
    assert list(by_name["ideal (linear from the smallest count)"].y) == [1e6, 2e6, 4e6, 8e6]
    cost = by_name["cost per million"]
    assert cost.y[0] < cost.y[-1]                                   # a token costs more as efficiency falls
    flat = [t for t in fig.data if t.name is None and t.yaxis == "y2"]
    assert flat and len(set(flat[0].y)) == 1                        # ideal scaling keeps the cost per token
    assert list(by_name["best plan"].marker.color) == ["#1f77b4"] * 3 + ["#d62728"]   # 8192: efficiency 0.675
    marks = [s for s in fig.layout.shapes if s.type == "line"]
    assert {m.x0 for m in marks} == {8192} and len(marks) == 2      # on both panels
    assert "efficiency < 80 % from 8,192 GPUs" in fig.layout.annotations[-1].text
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    assert fig.layout.xaxis2.title.text == "GPUs" and fig.layout.yaxis.type == "log"


def test_without_a_price_there_is_no_cost_panel():
    fig = scaling_figure(_curve(price=0.0))
    assert {t["name"] for t in fig["data"]} == {"best plan", "ideal (linear from the smallest count)"}
    assert "yaxis2" not in fig["layout"]


def test_the_page_and_files_hold_the_curve_the_table_and_the_choice():
    from autoplan.search.sweep import choose

    inputs = {"model": "m", "efficiency_threshold": 0.8, "space": {"tp": [1, 2]}}
    choice = choose(SWEEP, 60.0, None)
    rows = sweep_rows(SWEEP)
    assert [r["gpus"] for r in rows] == [1024, 2048, 4096, 8192] and rows[3]["efficiency_pct"] == 67.5
    page = sweep_page("a <b> title", "sub", _curve(), [["1", "p"]], ["GPUs", "plan"], choice.message, inputs)
    assert 'id="fig-scaling"' in page and "a &lt;b&gt; title" in page and "2,048 GPUs" in page
    from plotly.offline import get_plotlyjs
    assert page.count(get_plotlyjs()) == 1 and "Plotly.newPlot" in page       # plotly.js inlined once


def test_the_files_of_a_real_sweep(tiny_gpt, a100_8):
    from autoplan.search.space import Space
    from autoplan.search.sweep import choose, run_sweep
    from autoplan.search.totals import Budget

    sweep = run_sweep(tiny_gpt, a100_8, [8, 16], Space({"tp": (1, 2), "micro_batch": (1, 2)}), 32,
                      budget=Budget(tokens=1e9, gpu_hour_usd=2.0))
    inputs = {"model": tiny_gpt.name, "efficiency_threshold": 0.8, "space": {"tp": [1, 2]}}
    choice = choose(sweep, None, 1e6)
    files = sweep_files(inputs, sweep, curve(sweep, 0.8, 2.0), choice, "t", ["a note"])
    doc = json.loads(files["sweep.json"])
    assert [p["gpus"] for p in doc["points"]] == [8, 16] and doc["choice"]["gpus"] in (8, 16)
    assert doc["points"][0]["run_totals"]["cost_usd"] > 0 and doc["points"][0]["leaderboard"][0]["feasible"]
    assert "| GPUs |" in files["sweep.md"] and files["sweep.csv"].startswith("gpus,plan,")
    assert 'id="fig-scaling"' in files["report.html"]
