"""`autoplan whatif`: the step time and best plan under hardware changes, and the elasticity of the best plan's
step time to each hardware parameter (the logic: ``autoplan/search/whatif.py``)."""

from __future__ import annotations

import json
from typing import Any

import click

from autoplan.cli.app import _console, friendly, main
from autoplan.cli.options import load_search_inputs, space_options
from autoplan.errors import SpecError

VARY_HELP = ("Changes, comma-separated (each answered on its own; join changes with + to make one): factors "
             "compute=2x, hbm=1.5x (bandwidth), memory=1.25x (capacity), nvlink=2x, nic_bw=2x (NICs and switches), "
             "latency=0.5x; values nvlink_domain=72, oversubscription=4 (a 4:1 spine), gpus=2048.")


@main.command()
@click.argument("run", required=False)
@space_options
@click.option("--vary", "vary", multiple=True, required=True, help=VARY_HELP)
@click.option("--elasticity/--no-elasticity", default=True, show_default=True,
              help="Also the elasticity of the best plan's step time to each hardware parameter (±10 %).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def whatif(run: str | None, model_name: str, gpus: int | None, cluster: str, global_batch: int | None, space: str,
           vary: tuple[str, ...], elasticity: bool, as_json: bool, **fixed: Any) -> None:
    """What would change the plan: the best plan's step time and the best plan of the same space under each
    hardware change, for a run folder (RUN) or a search space given by flags (fix every axis for one plan)."""
    from autoplan.search import whatif as wi

    scenarios = [sc for text in vary for sc in wi.parse_changes(text)]
    if run is not None:
        from click.core import ParameterSource

        from autoplan.search.analysis import load_run
        ctx = click.get_current_context()
        given = [k for k in ctx.params if k not in ("run", "vary", "elasticity", "as_json")
                 and ctx.get_parameter_source(k) == ParameterSource.COMMANDLINE]
        if given:
            raise SpecError(f"give RUN alone or the space flags, not both (got {', '.join(given)} with {run!r})")
        loaded = load_run(run)
        base = wi.baseline_of_run(loaded)
    else:
        model, spec, sp, batch = load_search_inputs(model_name, gpus, cluster, global_batch, space, fixed)
        base = wi.baseline_of_space(model, spec, sp, batch)
    out = wi.answer(base, scenarios, elasticity)
    if run is not None:
        from autoplan.report.write import write_report_safely
        from autoplan.search.folder import RunFolder
        folder = RunFolder.existing(run)
        folder.write(wi.WHATIF, json.dumps(out, indent=2))
        write_report_safely(folder)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    from autoplan.report.terminal import whatif_view
    _console().print(whatif_view(out))
