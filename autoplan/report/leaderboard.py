"""The leaderboard: rows for the terminal and the files of a run folder (json, csv, md)."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from autoplan.files import write_atomic
from autoplan.report.serialize import evaluation_dict

GIB = 1024**3
COLUMNS = ("rank", "plan", "step_s", "tokens_per_s", "mfu_pct", "bubble_pct", "exposed_comm_pct", "peak_gib",
           "capacity_gib")


def rows(board: list[Any]) -> list[dict]:
    """One flat row per ranked plan."""
    out = []
    for rank, e in enumerate(board, 1):
        m = e.metrics
        out.append({"rank": rank, "plan": e.strategy.short(), "step_s": round(m.step_time, 4),
                    "tokens_per_s": round(m.tokens_per_s), "mfu_pct": round(100 * m.mfu, 2),
                    "bubble_pct": round(100 * m.fraction("bubble"), 2),
                    "exposed_comm_pct": round(100 * m.exposed_comm_fraction, 2),
                    "peak_gib": round(m.peak_memory / GIB, 1), "capacity_gib": round(m.memory_capacity / GIB, 1)})
    return out


def new_run_folder(root: Path, name: str) -> Path:
    """A fresh folder ``root/name`` (``name-2``, ``-3``… if taken): two searches never share a folder."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        folder = root / (name if n == 1 else f"{name}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise RuntimeError(f"no free run folder name under {root}")


def write_run(folder: Path, inputs: dict, result: Any, model: Any = None, cluster: Any = None,
              report: bool = True) -> None:
    """leaderboard.json/.csv/.md and inputs.json in ``folder``, then the report (report.html, best_plan.json,
    traces of the best plans). ``model`` and ``cluster``, if given, are kept so the report can be rebuilt for
    models and clusters given as files; a failing report never costs the leaderboard files."""
    table = rows(result.leaderboard)
    write_atomic(folder / "inputs.json", json.dumps(inputs, indent=2))
    summary = {"raw": result.raw, "valid": result.valid, "equivalent": result.equivalent,
               "out_of_memory": result.out_of_memory,
               "simulated": len(result.evaluations), "pruned_by_bound": result.pruned,
               "seconds": round(result.seconds, 3), "rejected": dict(result.rejected)}
    write_atomic(folder / "leaderboard.json", json.dumps(
        {"inputs": inputs, "summary": summary, "leaderboard": [evaluation_dict(e) for e in result.leaderboard]},
        indent=2))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(table)
    write_atomic(folder / "leaderboard.csv", buf.getvalue())
    md = [f"# {inputs['model']} on {inputs['gpus']} × {inputs['gpu']} ({inputs['cluster']}), "
          f"global batch {inputs['global_batch']}", "",
          f"{result.valid} valid plans, {result.out_of_memory} do not fit, {len(result.evaluations)} simulated, "
          f"{result.pruned} pruned by bound, in {result.seconds:.1f} s.", "",
          "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    md += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in table]
    write_atomic(folder / "leaderboard.md", "\n".join(md) + "\n")
    if report:
        write_report_safely(folder, model, cluster)


def write_report_safely(folder: Path, model: Any = None, cluster: Any = None) -> None:
    """The run's report files (and its model and cluster, if given); a failure is a warning on stderr."""
    try:
        from autoplan.report.html import write_report
        from autoplan.report.runs import load_run, save_specs
        if model is not None and cluster is not None:
            save_specs(folder, model, cluster)
        write_report(load_run(folder))
    except Exception as err:  # noqa: BLE001 — the leaderboard files are already written and must stay the result
        print(f"autoplan: warning: report not written: {type(err).__name__}: {err}", file=sys.stderr)
