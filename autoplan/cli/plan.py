"""`autoplan check` and `autoplan simulate`: one plan, its validity and memory, or its simulated step."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from autoplan.cli.app import (_console, _UsablePath, friendly,
                              main)
from autoplan.errors import SpecError
from autoplan.cli.options import build_plan, load_budget, model_options, plan_options, run_options


@main.command()
@model_options
@plan_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def check(model_name: str, cluster: str, gpus: int, as_json: bool, **kw: Any) -> None:
    """Is a plan valid? Its memory per stage, one layer's compute time and each collective it needs."""
    from autoplan.inspect import plan_report

    model, spec, s = build_plan(model_name, cluster, gpus, **kw)
    report = plan_report(model, spec, s)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        from autoplan.report.terminal import check_view
        _console().print(check_view(report, model, spec, s))
    sys.exit(0 if report["valid"] else 1)


@main.command()
@model_options
@plan_options
@click.option("--trace", type=_UsablePath(dir_okay=False, writable=True), default=None,
              help="Write a Chrome/Perfetto trace of the step to this file.")
@run_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def simulate(model_name: str, cluster: str, gpus: int, trace: str | None, as_json: bool, tokens: str | None,
             epochs: float | None, steps: int | None, gpu_hour_price: float | None, goodput: float | None,
             batch_ramp: str | None, **kw: Any) -> None:
    """Simulate one training step of a plan: throughput, MFU, where the time goes, memory; with --tokens or
    --steps, the whole run's days, GPU-hours, energy and cost."""
    from autoplan.report.serialize import evaluation_dict
    from dataclasses import replace

    from autoplan.sim.critical import path_dict
    from autoplan.sim.simulate import critical_path, evaluate, score, simulate_step
    from autoplan.families.registry import violations
    from autoplan.hardware.support import hardware_violations

    model, spec, s = build_plan(model_name, cluster, gpus, **kw)
    run_budget = load_budget(model, tokens, epochs, steps, gpu_hour_price, goodput, batch_ramp)
    reasons = violations(model, spec.gpus, s) + hardware_violations(model, spec, s)
    if reasons:
        raise SpecError("invalid plan: " + "; ".join(reasons))
    e = evaluate(model, spec, s)
    if e.metrics is None:
        # out of memory: simulate anyway, so the memory table shows by how much (the verdict says it does not fit)
        e = replace(e, metrics=score(model, spec, s))
    sim = simulate_step(model, spec, s, why=True)
    path = path_dict(critical_path(sim))
    if trace:
        _write_trace(trace, sim, model, s)
    costing, totals = _whole_run(run_budget, e, model, spec)
    if as_json:
        extra = {"run_totals": totals.to_dict(), "run_budget": costing.describe()} if costing else {}
        from autoplan.report.fidelity import row
        pace = {"slowest_gpu_pace": spec.gpu.pace, "measured_accuracy": row(spec.gpu.name, model.family)}
        click.echo(json.dumps(evaluation_dict(e) | {"critical_path": path} | pace | extra, indent=2))
        return
    from autoplan.report.terminal import critical_path_view, simulation_view
    from autoplan.specs.batch import heading
    title = (f"{heading(model.name, gpus, spec.gpu.name, spec.name, model.seq_len, s.global_batch, model.structure is not None)}"
             f": {s.short()}")
    from autoplan.report.fidelity import line
    _console().print(simulation_view(title, e.metrics, gpus, spec.gpu, s.precision, line(spec.gpu.name, model.family)))
    _console().print(critical_path_view(path))
    if costing is not None:
        from autoplan.report.terminal import totals_view
        _console().print(totals_view(totals, costing.describe()))
    elif run_budget is not None:
        click.echo("whole run: the plan does not fit in memory, so it has no run totals")
    if trace:
        _console().print(f"trace written to {trace} (open in https://ui.perfetto.dev)")


def _write_trace(trace: str, sim: Any, model: Any, s: Any) -> None:
    """The step's timeline as a Perfetto trace at ``trace``; a SpecError if it cannot be written."""
    from pathlib import Path

    from autoplan.sim.trace import write_trace
    from autoplan.specs.layout import layout_chunks
    try:
        write_trace(Path(trace), sim.lowered, sim.timeline, 0 if s.uneven else model.layers // (s.pp * layout_chunks(s)))
    except OSError as err:
        raise SpecError(f"cannot write the trace to {trace!r}: {err.strerror or err}") from None


def _whole_run(run_budget: Any, e: Any, model: Any, spec: Any) -> tuple[Any, Any]:
    """The whole run's costing and the plan's totals under it ((None, None) without a budget or for a plan that
    does not fit); a SpecError where the run cannot be costed."""
    if run_budget is None or not e.feasible:
        return None, None
    from autoplan.search.totals import Costing
    costing = Costing(model, spec, run_budget)
    totals = costing(e)
    if totals is None:
        raise SpecError(costing.why[e.strategy])
    return costing, totals
