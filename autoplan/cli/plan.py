"""`autoplan check` and `autoplan simulate`: one plan, its validity and memory, or its simulated step."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from autoplan.cli.app import (_console, _UsablePath, friendly,
                              main)
from autoplan.errors import SpecError
from autoplan.cli.options import build_plan, model_options, plan_options


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
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def simulate(model_name: str, cluster: str, gpus: int, trace: str | None, as_json: bool, **kw: Any) -> None:
    """Simulate one training step of a plan: throughput, MFU, where the time goes, memory."""
    from autoplan.report.serialize import evaluation_dict
    from dataclasses import replace

    from autoplan.sim.critical import path_dict
    from autoplan.sim.simulate import critical_path, evaluate, score, simulate_step
    from autoplan.families.registry import violations
    from autoplan.hardware.support import hardware_violations

    model, spec, s = build_plan(model_name, cluster, gpus, **kw)
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
        from pathlib import Path
        from autoplan.sim.trace import write_trace
        from autoplan.specs.layout import layout_chunks
        try:
            write_trace(Path(trace), sim.lowered, sim.timeline, 0 if s.uneven else model.layers // (s.pp * layout_chunks(s)))
        except OSError as err:
            raise SpecError(f"cannot write the trace to {trace!r}: {err.strerror or err}") from None
    if as_json:
        click.echo(json.dumps(evaluation_dict(e) | {"critical_path": path}, indent=2))
        return
    from autoplan.report.terminal import critical_path_view, simulation_view
    title = f"{model.name} on {gpus} × {spec.gpu.name} ({spec.name}): {s.short()}, global batch {s.global_batch}"
    _console().print(simulation_view(title, e.metrics, gpus))
    _console().print(critical_path_view(path))
    if trace:
        _console().print(f"trace written to {trace} (open in https://ui.perfetto.dev)")
