"""The leaderboard's rows: rounded as the files keep them, or unrounded for a table that rounds them itself."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.report.leaderboard import rows
from autoplan.report.terminal import leaderboard_table
from autoplan.sim.simulate import evaluate
from autoplan.specs import load_cluster


def test_the_terminal_table_rounds_once():
    e = evaluate(get_model("gpt3"), load_cluster("dgx-h100-80g", 1024),
                 Strategy(tp=4, pp=8, dp=32, micro_batch=2, global_batch=1536, schedule="interleaved",
                          virtual_stages=12, sequence_parallel=True, zero=1))
    # on the edges where rounding to the files' 4 (2) decimals first would round the table's 3 (1) the other way
    e = replace(e, metrics=replace(e.metrics, step_time=6.2315047, mfu=0.5244999))
    assert (rows([e])[0]["step_s"], rows([e])[0]["mfu_pct"]) == (6.2315, 52.45)
    out = io.StringIO()
    Console(file=out, width=200).print(leaderboard_table(rows([e], rounded=False), "best"))
    assert "6.232" in out.getvalue() and "52.4" in out.getvalue()
    assert "6.231" not in out.getvalue() and "52.5" not in out.getvalue()
