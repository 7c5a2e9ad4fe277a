"""The leaderboard: rows for the terminal and the texts of a run folder's leaderboard files (json, csv, md)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from autoplan.report.serialize import evaluation_dict
from autoplan.search.folder import LEADERBOARD

GIB = 1024**3
COLUMNS = ("rank", "plan", "step_s", "tokens_per_s", "mfu_pct", "bubble_pct", "exposed_comm_pct", "peak_gib",
           "capacity_gib")
TOTAL_COLUMNS = ("days", "gpu_hours", "energy_mwh", "cost_usd")
"""Whole-run columns, present when the run has a budget (``--tokens``/``--steps``; ``search/totals.py``)."""


def columns(costing: Any = None) -> tuple[str, ...]:
    """The leaderboard's columns: the step's, then the whole run's when there is a budget."""
    return COLUMNS + (TOTAL_COLUMNS if costing is not None else ())


def total_cells(t: Any) -> dict:
    """The whole-run cells of one plan's RunTotals (all None if it has none)."""
    if t is None:
        return dict.fromkeys(TOTAL_COLUMNS)
    d = t.to_dict()
    return {"days": d["days"], "gpu_hours": d["gpu_hours"], "energy_mwh": d["energy_mwh"], "cost_usd": d["cost_usd"]}


def rows(board: list[Any], costing: Any = None) -> list[dict]:
    """One flat row per ranked plan (with the whole run's days, GPU-hours, energy and cost if ``costing``, a
    ``search.totals.Costing``, is given)."""
    out = []
    for rank, e in enumerate(board, 1):
        m = e.metrics
        out.append({"rank": rank, "plan": e.strategy.short(), "step_s": round(m.step_time, 4),
                    "tokens_per_s": round(m.tokens_per_s), "mfu_pct": round(100 * m.mfu, 2),
                    "bubble_pct": round(100 * m.fraction("bubble"), 2),
                    "exposed_comm_pct": round(100 * m.exposed_comm_fraction, 2),
                    "peak_gib": round(m.peak_memory / GIB, 1), "capacity_gib": round(m.memory_capacity / GIB, 1)})
        if costing is not None:
            out[-1].update(total_cells(costing(e)))
    return out


def _totals_entry(costing: Any, e: Any) -> dict:
    """A leaderboard.json entry's whole run, or why the plan has none."""
    t = costing(e)
    return {"run_totals": t.to_dict()} if t is not None else {"run_totals": None, "why": costing.why[e.strategy]}


def leaderboard_files(inputs: dict, result: Any, costing: Any = None) -> dict[str, str]:
    """leaderboard.json, .csv and .md of a search ``result`` (file name to text), with the whole run's totals when
    ``costing`` is given."""
    table = rows(result.leaderboard, costing)
    cols = columns(costing)
    summary = {"raw": result.raw, "valid": result.valid, "equivalent": result.equivalent,
               "out_of_memory": result.out_of_memory,
               "simulated": len(result.evaluations), "pruned_by_bound": result.pruned,
               "seconds": round(result.seconds, 3), "rejected": dict(result.rejected)}
    entries = [evaluation_dict(e) | (_totals_entry(costing, e) if costing is not None else {})
               for e in result.leaderboard]
    extra = {"run_budget": costing.describe()} if costing is not None else {}
    as_json = json.dumps({"inputs": inputs, "summary": summary, **extra, "leaderboard": entries}, indent=2)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols)
    writer.writeheader()
    writer.writerows(table)
    md = [f"# {inputs['model']} on {inputs['gpus']} × {inputs['gpu']} ({inputs['cluster']}), "
          f"global batch {inputs['global_batch']}", "",
          f"{result.valid} valid plans, {result.out_of_memory} do not fit, {len(result.evaluations)} simulated, "
          f"{result.pruned} pruned by bound, in {result.seconds:.1f} s.", ""]
    if costing is not None:
        md += [f"Whole run: {costing.describe()}.", ""]
    md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join("" if r[c] is None else str(r[c]) for c in cols) + " |" for r in table]
    return {LEADERBOARD[0]: as_json, LEADERBOARD[1]: buf.getvalue(), LEADERBOARD[2]: "\n".join(md) + "\n"}
