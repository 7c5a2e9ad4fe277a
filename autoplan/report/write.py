"""Writing a run's results into its folder: the leaderboard files, then the report (report.html, best_plan.json
and gzip'd Chrome traces of the best plans) drawn from the analysis the search layer hands over."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoplan.report.export import best_plan_json
from autoplan.report.leaderboard import leaderboard_files
from autoplan.search.analysis import TRACES, Run, analyse, load_run
from autoplan.search.folder import BEST_PLAN, REPORT, TRACES_GLOB, RunFolder, trace_name
from autoplan.search.totals import costing_of
from autoplan.sim.simulate import Simulation
from autoplan.sim.trace import trace_bytes
from autoplan.specs.layout import layout_chunks


def write_run(folder: RunFolder, inputs: dict, result: Any, model: Any = None, cluster: Any = None,
              report: bool = True) -> None:
    """inputs.json and the leaderboard files, then the report; ``model`` and ``cluster``, if given, are kept so
    the report can be rebuilt for models and clusters given as files. A failing report never costs the
    leaderboard files."""
    folder.write_inputs(inputs)
    for name, text in leaderboard_files(inputs, result, costing_of(inputs, model, cluster), model).items():
        folder.write(name, text)
    if report:
        write_report_safely(folder, model, cluster)


def write_report_safely(folder: RunFolder, model: Any = None, cluster: Any = None,
                        evaluations: list | None = None, plans: list | None = None) -> None:
    """The run's report files (and its model and cluster, if given); a failure is a warning on stderr.
    ``evaluations``: every evaluation of the run, in record order, with ``model`` and ``cluster`` (the search that
    just made them): the report is drawn from them instead of the folder's record read back. ``plans``: the
    space's valid plans as the search enumerated them (not enumerated again for the report)."""
    try:
        if model is not None and cluster is not None:
            folder.save_specs(model, cluster)
        if evaluations is not None and model is not None and cluster is not None:
            run = Run(folder=folder.path, inputs=folder.read_inputs(), evaluations=tuple(evaluations), model=model,
                      cluster=cluster, summary=folder.read_summary(), current=True)
        else:
            run = load_run(folder.path)
        if plans is not None:
            run = replace(run, plans=tuple(plans))
        write_report(run)
    except Exception as err:  # noqa: BLE001 — the leaderboard files are already written and must stay the result
        print(f"autoplan: warning: report not written: {type(err).__name__}: {err}", file=sys.stderr)


TRACE_BYTES = 10 * 2**20
"""Traces after the best plan's are written only while all of them stay within this many bytes (gzip'd), so a
run folder stays small when steps have thousands of micro-batches (GPT-3 on 64 GPUs: 8 MB per trace)."""


def write_traces(run: Run, sims: list[Simulation], budget: int = TRACE_BYTES) -> list[Path]:
    """``trace_rank1.json.gz``… (gzip'd Chrome Trace Event JSON, which Perfetto opens) for the simulated best
    plans: always the best plan's, the next ones while the traces fit in ``budget`` bytes. Traces of other ranks
    left by an earlier report are removed (they may come from another model or code)."""
    folder = RunFolder(run.folder)
    paths: list[Path] = []
    total = last = 0
    for old in run.folder.glob(TRACES_GLOB):
        old.unlink(missing_ok=True)
    for rank, (e, sim) in enumerate(zip(run.ranked, sims), 1):
        if rank > 1 and total + last > budget:
            continue
        s = e.strategy
        data = trace_bytes(sim.lowered, sim.timeline, 0 if s.uneven else run.model.layers // (s.pp * layout_chunks(s)))
        paths.append(folder.write(trace_name(rank), data))
        last = len(data)
        total += last
    return paths


def write_report(run: Run, traces: int = TRACES) -> list[Path]:
    """report.html, best_plan.json and the traces of the ``traces`` best plans in the run folder; the paths
    written."""
    from autoplan.report.html import page

    folder = RunFolder(run.folder)
    analysis = analyse(run, traces)
    paths = write_traces(run, analysis.sims)
    if run.leaderboard:
        paths.insert(0, folder.write(BEST_PLAN, best_plan_json(run.leaderboard[0], run.model, run.cluster)))
    return [folder.write(REPORT, page(run, analysis))] + paths


