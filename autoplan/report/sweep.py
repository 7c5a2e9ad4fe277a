"""A sweep's outputs: one row per GPU count for the terminal and the sweep folder's files (sweep.json, .csv, .md
and report.html with the scaling curve)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from autoplan.report.serialize import evaluation_dict
from autoplan.report.terminal import si, total_texts
from autoplan.search.folder import RunFolder

COLUMNS = ("gpus", "plan", "step_s", "tokens_per_s", "mfu_pct", "efficiency_pct", "days", "gpu_hours", "energy_mwh",
           "cost_usd", "note")
"""One sweep row: the count, its best plan and step, the scaling efficiency, the whole run (with a budget)."""
FILES = ("sweep.json", "sweep.csv", "sweep.md", "report.html")


def sweep_rows(sweep: Any) -> list[dict]:
    """One flat row per GPU count (a count without a plan has its note and empty figures)."""
    eff = sweep.efficiency()
    out = []
    for p in sweep.points:
        row = dict.fromkeys(COLUMNS)
        row.update(gpus=p.gpus, note=p.note)
        if p.best is not None:
            m = p.best.metrics
            row.update(plan=p.best.strategy.short(), step_s=round(m.step_time, 4), tokens_per_s=round(m.tokens_per_s),
                       mfu_pct=round(100 * m.mfu, 2), efficiency_pct=round(100 * eff[p.gpus], 1))
        if p.totals is not None:
            d = p.totals.to_dict()
            row.update(days=d["days"], gpu_hours=d["gpu_hours"], energy_mwh=d["energy_mwh"], cost_usd=d["cost_usd"])
        out.append(row)
    return out


def _texts(row: dict, threshold: float) -> list[str]:
    """A row's cells for people."""
    if row["plan"] is None:
        return [f"{row['gpus']:,}", row["note"]] + [""] * 8
    low = row["efficiency_pct"] < 100 * threshold
    totals = list(total_texts(row)) if row["days"] is not None else [""] * 4
    step = f"{row['step_s']:.3f}" if row["step_s"] >= 0.1 else f"{row['step_s']:.4f}"
    return [f"{row['gpus']:,}", row["plan"], step, si(row["tokens_per_s"]), f"{row['mfu_pct']:.1f}",
            f"{row['efficiency_pct']:.1f}" + (" ↓" if low else "")] + totals


HEAD = ["GPUs", "best plan", "step s", "throughput", "MFU %", "efficiency %", "days", "GPU-h", "energy", "cost"]


def sweep_table(rows: list[dict], title: str, threshold: float, unit: str = "tokens/s") -> Table:
    """The sweep for the terminal: efficiency below ``threshold`` is marked ↓ in red."""
    t = Table(title=title, title_justify="left")
    for label in HEAD:
        t.add_column(label.replace("throughput", unit), justify="left" if label == "best plan" else "right")
    for row in rows:
        cells = _texts(row, threshold)
        style = "red" if row["efficiency_pct"] is not None and row["efficiency_pct"] < 100 * threshold else ""
        t.add_row(*cells, style=style)
    return t


def sweep_document(inputs: dict, sweep: Any, rows: list[dict], curve: Any, choice: Any) -> dict:
    """sweep.json's content: the inputs, each count's best plans and run, the curve and the choice."""
    points = []
    for p, row in zip(sweep.points, rows):
        points.append({"gpus": p.gpus, "valid": p.valid, "simulated": p.simulated, "cpu_s": round(p.cpu_s, 3),
                       "note": p.note, "efficiency": None if row["efficiency_pct"] is None
                       else row["efficiency_pct"] / 100, "run_totals": p.totals.to_dict() if p.totals else None,
                       "leaderboard": [evaluation_dict(e) for e in p.board]})
    return {"inputs": inputs, "points": points,
            "curve": None if curve is None else {k: getattr(curve, k) for k in (
                "gpus", "throughput", "ideal", "usd_per_mtok", "efficiency", "threshold", "first_below", "mfu")},
            "choice": None if choice is None else _choice(choice),
            "cpu_s": round(sweep.cpu_s, 3), "wall_s": round(sweep.wall_s, 3)}


def _choice(choice: Any) -> dict:
    """A sweep Choice as JSON."""
    picked = choice.point
    return {"gpus": picked.gpus if picked else None, "plan": picked.best.strategy.short() if picked else None,
            "message": choice.message, "days_over": choice.days_over, "usd_over": choice.usd_over}


def sweep_files(inputs: dict, sweep: Any, curve: Any, choice: Any, title: str, notes: list[str],
                unit: str = "tokens/s") -> dict[str, str]:
    """The sweep folder's files, name to text."""
    from autoplan.report.html import sweep_page

    rows = sweep_rows(sweep)
    threshold = inputs["efficiency_threshold"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    md = [f"# {title}", ""] + [f"{n}" for n in notes] + ["", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    md += ["| " + " | ".join(_texts(r, threshold)) + " |" for r in rows]
    choice_text = choice.message if choice is not None else "No --deadline or --budget given."
    md += ["", choice_text, ""]
    page = sweep_page(title, " ".join(notes), curve, [_texts(r, threshold) for r in rows], HEAD, choice_text,
                      {k: v for k, v in inputs.items() if k != "space"} | {
                          f"space: {k}": ", ".join(map(str, v)) for k, v in inputs.get("space", {}).items()}, unit)
    return {FILES[0]: json.dumps(sweep_document(inputs, sweep, rows, curve, choice), indent=2),
            FILES[1]: buf.getvalue(), FILES[2]: "\n".join(md) + "\n", FILES[3]: page}


def write_sweep(root: Path, name: str, files: dict[str, str]) -> Path:
    """A fresh sweep folder ``root/name`` (``-2``… if taken) holding ``files``; its path."""
    folder = RunFolder.create(root, name)
    for file_name, text in files.items():
        folder.write(file_name, text)
    return folder.path
