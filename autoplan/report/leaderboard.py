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


def columns(costing: Any = None, model: Any = None) -> tuple[str, ...]:
    """The leaderboard's columns: the step's, the frameworks that launch each plan (with ``model``), then the whole
    run's (when there is a budget)."""
    return COLUMNS + (("launch_with",) if model is not None else ()) + (TOTAL_COLUMNS if costing is not None else ())


def total_cells(t: Any) -> dict:
    """The whole-run cells of one plan's RunTotals (all None if it has none)."""
    if t is None:
        return dict.fromkeys(TOTAL_COLUMNS)
    d = t.to_dict()
    return {"days": d["days"], "gpu_hours": d["gpu_hours"], "energy_mwh": d["energy_mwh"], "cost_usd": d["cost_usd"]}


def launch_cell(model: Any, s: Any) -> str:
    """The frameworks that launch plan ``s`` of ``model`` as planned (families/registry.launch_with), or "—"."""
    from autoplan.families.registry import launch_with
    return ", ".join(launch_with(model, s)) or "—"


def rows(board: list[Any], costing: Any = None, model: Any = None, batches: bool = False,
         rounded: bool = True) -> list[dict]:
    """One flat row per ranked plan: with ``model``, also the frameworks that launch it (``launch_with``); with
    ``costing`` (a ``search.totals.Costing``), the whole run's days, GPU-hours, energy and cost; with ``batches``,
    a search over several global batches, each label ends with its batch (``gb2048``). ``rounded``: step times to
    4 decimals and percentages to 2, as the files keep them; unrounded for a table that rounds them itself (a
    second rounding would show 6.2315047 s as 6.231)."""
    def r(x: float, digits: int) -> float:
        return round(x, digits) if rounded else x

    out = []
    for rank, e in enumerate(board, 1):
        m = e.metrics
        label = e.strategy.short() + (f" gb{e.strategy.global_batch}" if batches else "")
        out.append({"rank": rank, "plan": label, "step_s": r(m.step_time, 4),
                    "tokens_per_s": round(m.tokens_per_s), "mfu_pct": r(100 * m.mfu, 2),
                    "bubble_pct": r(100 * m.fraction("bubble"), 2),
                    "exposed_comm_pct": r(100 * m.exposed_comm_fraction, 2),
                    "peak_gib": r(m.peak_memory / GIB, 1), "capacity_gib": r(m.memory_capacity / GIB, 1)})
        if model is not None:
            out[-1]["launch_with"] = launch_cell(model, e.strategy)
        if costing is not None:
            out[-1].update(total_cells(costing(e)))
    return out


def _totals_entry(costing: Any, e: Any) -> dict:
    """A leaderboard.json entry's whole run, or why the plan has none."""
    t = costing(e)
    return {"run_totals": t.to_dict()} if t is not None else {"run_totals": None, "why": costing.why[e.strategy]}


def unproven_note(unproven: int, budget: int | None = None) -> str:
    """Why a top k is not proven exact: the plans an exhaustive search its budget cut short left unsimulated
    (``SearchResult.unproven``); "" when it finished."""
    if not unproven:
        return ""
    at = f"the --budget of {budget:,}" if budget is not None else "its --budget"
    return (f"{unproven} plans whose bound could still enter the top k left unsimulated at {at} (the best found in "
            "bound order, not proven exact)")


def leaderboard_files(inputs: dict, result: Any, costing: Any = None, model: Any = None) -> dict[str, str]:
    """leaderboard.json, .csv and .md of a search ``result`` (file name to text), with the whole run's totals when
    ``costing`` is given and the frameworks that launch each plan with ``model``."""
    table = rows(result.leaderboard, costing, model, "global_batch" in inputs.get("space", {}))
    cols = columns(costing, model)
    summary = {"raw": result.raw, "valid": result.valid, "equivalent": result.equivalent,
               "out_of_memory": result.out_of_memory,
               "simulated": len(result.evaluations), "pruned_by_bound": result.pruned - result.unproven,
               "seconds": round(result.seconds, 3), "rejected": dict(result.rejected)}
    if result.unproven:
        summary["unproven"] = result.unproven
    entries = [evaluation_dict(e) | (_totals_entry(costing, e) if costing is not None else {})
               for e in result.leaderboard]
    extra = {"run_budget": costing.describe()} if costing is not None else {}
    as_json = json.dumps({"inputs": inputs, "summary": summary, **extra, "leaderboard": entries}, indent=2)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols)
    writer.writeheader()
    writer.writerows(table)
    from autoplan.specs.batch import heading

    batches = tuple(inputs.get("space", {}).get("global_batch", ())) or (inputs["global_batch"],)
    seq = model.seq_len if model is not None else None
    samples = model is not None and model.structure is not None
    unproven = unproven_note(result.unproven, inputs.get("budget"))
    md = [f"# {heading(inputs['model'], inputs['gpus'], inputs['gpu'], inputs['cluster'], seq, batches, samples)}", "",
          f"{result.valid} valid plans, {result.out_of_memory} do not fit, {len(result.evaluations)} simulated, "
          f"{result.pruned - result.unproven} pruned by bound{f', {unproven}' if unproven else ''}, "
          f"in {result.seconds:.1f} s.", ""]
    if costing is not None:
        md += [f"Whole run: {costing.describe()}.", ""]
    md += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join("" if r[c] is None else str(r[c]) for c in cols) + " |" for r in table]
    return {LEADERBOARD[0]: as_json, LEADERBOARD[1]: buf.getvalue(), LEADERBOARD[2]: "\n".join(md) + "\n"}
