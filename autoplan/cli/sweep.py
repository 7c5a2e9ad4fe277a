"""`autoplan sweep`: the best plan at every GPU count of a range, the whole run each gives for a token budget, the
scaling curve, and the cheapest count that meets --deadline and --budget."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from autoplan.cli.app import (DEFAULT_CLUSTER, DEFAULT_GLOBAL_BATCH, _console, _UsablePath, friendly, main,
                              throughput_unit)
from autoplan.cli.options import _fixable, _knob_option, load_budget, load_search_inputs, run_options
from autoplan.errors import SpecError
from autoplan.families.strategy import knob_of


def _sweep_options(fn: Any) -> Any:
    opts = [
        click.option("--model", "model_name", default="gpt3", show_default=True,
                     help="Model name, .toml file or HuggingFace config.json."),
        click.option("--gpus", "gpu_range", required=True, metavar="LOW..HIGH|N,N,…",
                     help="GPU counts: a range (powers of two and the cluster's natural sizes in it: nodes, NVLink "
                          "domains or racks, leaf units), or a list."),
        click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True, help="Cluster spec name or .toml file."),
        click.option("--global-batch", type=int, default=None,
                     help=f"Sequences (samples) per step. [default: {DEFAULT_GLOBAL_BATCH}; a DLRM's own batch]"),
        click.option("--space", default="default", show_default=True,
                     help="Search space name or .toml file (default: the model family's own)."),
    ] + [_knob_option(name, knob_of(name), None, knob_of(name).fix_help, False) for name in _fixable()]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@main.command("sweep")
@_sweep_options
@run_options
@click.option("--deadline", type=click.FloatRange(0, min_open=True), default=None, metavar="DAYS",
              help="Pick the cheapest count that trains within this many days (needs --tokens or --steps).")
@click.option("--budget", "budget_usd", default=None, metavar="USD",
              help="Pick the cheapest count that costs at most this much: 50M, $2.5e7 (needs a price).")
@click.option("--efficiency-threshold", type=click.FloatRange(0, 1, min_open=True), default=0.8, show_default=True,
              help="Mark the counts whose scaling efficiency (throughput per GPU over the smallest count's) is below.")
@click.option("--top", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Plans kept per count (the exact best first).")
@click.option("--workers", type=click.IntRange(0), default=None,
              help="Processes searching counts side by side (0: all in this process). [default: the CPU count]")
@click.option("--out", type=_UsablePath(file_okay=False), default="results", show_default=True,
              help="Folder for the sweep folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON.")
@friendly
def sweep_cmd(model_name: str, gpu_range: str, cluster: str, global_batch: int | None, space: str,
              tokens: str | None, epochs: float | None, steps: int | None, gpu_hour_price: float | None,
              goodput: float | None, batch_ramp: str | None, deadline: float | None, budget_usd: str | None,
              efficiency_threshold: float, top: int, workers: int | None, out: str, as_json: bool,
              **fixed: Any) -> None:
    """Search every GPU count of a range: per count the best plan, its throughput, MFU and (with --tokens) days,
    GPU-hours, energy and cost; the scaling curve; the cheapest count meeting --deadline and --budget."""
    from autoplan.report.sweep import sweep_files, sweep_rows, sweep_table, write_sweep
    from autoplan.search.sweep import choose, curve, default_workers, parse_counts, run_sweep
    from autoplan.specs import load_cluster

    counts = parse_counts(gpu_range, load_cluster(cluster))
    model, spec, sp, global_batch = load_search_inputs(model_name, counts[0], cluster, global_batch, space, fixed)
    run_budget = load_budget(model, tokens, epochs, steps, gpu_hour_price, goodput, batch_ramp)
    usd, price = _money(run_budget, spec, deadline, budget_usd)
    unit = throughput_unit(model)

    def progress(done: int, point: Any) -> None:
        if not as_json and sys.stderr.isatty():
            best = point.best.strategy.short() if point.best else point.note
            click.echo(f"  {point.gpus:>7,} GPUs: {best} ({point.cpu_s:.1f} s CPU) [{done}/{len(counts)}]", err=True)

    result = run_sweep(model, spec, counts, sp, global_batch, budget=run_budget, top_k=top, progress=progress,
                       workers=default_workers() if workers is None else workers)
    scaling = curve(result, efficiency_threshold, price) if result.ran else None
    choice = choose(result, deadline, usd) if (deadline is not None or usd is not None) and result.ran else None
    inputs = {"model": model.name, "cluster": spec.name, "gpu": spec.gpu.name, "gpus": counts,
              "global_batch": global_batch, "space": {k: list(v) for k, v in sp.axes.items()}, "top": top,
              "efficiency_threshold": efficiency_threshold, "deadline_days": deadline, "budget_usd": usd}
    if run_budget is not None:
        from autoplan.search.totals import Costing
        inputs["run_budget"] = run_budget.to_dict()
        describe = Costing(model, spec, run_budget).describe()
    title = (f"Sweep: {model.name} on {counts[0]:,}–{counts[-1]:,} × {spec.gpu.name} ({spec.name}), "
             f"global batch {global_batch}")
    notes = [f"Whole run: {describe}." if run_budget is not None else "No --tokens: no days or cost."]
    if scaling is not None and scaling.first_below is not None:
        notes.append(f"Scaling efficiency falls below {100 * efficiency_threshold:.0f} % at {scaling.first_below:,} "
                     "GPUs.")
    name = time.strftime("%Y%m%d-%H%M%S") + f"-{model.name}-sweep"
    try:
        timing = [f"{len(counts)} counts searched in {result.cpu_s:.1f} s CPU ({result.wall_s:.1f} s wall)."]
        files = sweep_files(inputs, result, scaling, choice, title, notes + timing, unit)
        folder = write_sweep(Path(out).resolve(), name, files)
    except OSError as err:
        raise SpecError(f"--out {out!r}: cannot write the sweep folder there ({err.strerror or err})") from None
    rows = sweep_rows(result)
    ok = bool(result.ran) and (choice is None or choice.point is not None)
    if as_json:
        doc = json.loads((folder / "sweep.json").read_text())
        click.echo(json.dumps({"sweep": str(folder), "rows": rows, "choice": doc["choice"], "curve": doc["curve"]},
                              indent=2))
        sys.exit(0 if ok else 1)
    _console().print(sweep_table(rows, title, efficiency_threshold, unit))
    _print_notes(notes, choice, len(counts), result.cpu_s, folder)
    sys.exit(0 if ok else 1)


def _money(run_budget: Any, spec: Any, deadline: float | None, budget_usd: str | None) -> tuple[float | None, float]:
    """The --budget in dollars (None if not given) and the GPU-hour price; a SpecError for --deadline or --budget
    without a whole run to cost, or --budget without a price."""
    from autoplan.search.totals import parse_amount

    usd = parse_amount(budget_usd, "--budget") if budget_usd is not None else None
    if (deadline is not None or usd is not None) and run_budget is None:
        raise SpecError("--deadline and --budget choose among whole runs: give --tokens (or --epochs, --steps) too")
    price = (run_budget.gpu_hour_usd or spec.gpu_hour_usd) if run_budget is not None else 0.0
    if usd is not None and not price:
        raise SpecError(f"--budget needs a price: give --gpu-hour-price ({spec.name} has no gpu_hour_usd)")
    return usd, price


def _print_notes(notes: list[str], choice: Any, counts: int, cpu_s: float, folder: Path) -> None:
    """Below the sweep's table: its notes, the chosen count (or each constraint it fails) and where it is."""
    from rich.markup import escape

    con = _console()
    for note in notes:
        con.print(escape(note))
    if choice is not None:
        for part in choice.message.split("; and "):           # each constraint that fails on its own line
            con.print(("[bold green]" if choice.point else "[bold red]") + escape(part) + "[/]")
    con.print(f"{counts} GPU counts, the exact best plan at each, in CPU time; {cpu_s:.1f} s.")
    con.print(f"sweep folder: {folder} (report.html draws the scaling curve)")
