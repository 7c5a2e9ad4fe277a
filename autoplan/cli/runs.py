"""`autoplan show`, `autoplan report` and `autoplan export`: what a run folder holds."""

from __future__ import annotations

import json

import click

from autoplan.cli.app import (_console, friendly,
                              main, throughput_unit)


@main.command("report")
@click.argument("run")
@click.option("--traces", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Chrome/Perfetto traces of this many of the best plans (trace_rank1.json.gz, ...; after the "
                   "best plan's, while they stay small).")
@friendly
def report_cmd(run: str, traces: int) -> None:
    """Rebuild a run folder's report.html, best_plan.json and traces of its best plans."""
    from autoplan.report.write import write_report
    from autoplan.search.analysis import load_run

    for path in write_report(load_run(run), traces):
        click.echo(str(path))


@main.command("show")
@click.argument("run")
@click.option("--top", type=click.IntRange(1), default=None, help="Plans to list [default: the run's top k].")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def show_cmd(run: str, top: int | None, as_json: bool) -> None:
    """Print the leaderboard of a run folder."""
    from autoplan.report.leaderboard import rows, unproven_note
    from autoplan.search.analysis import load_run
    from autoplan.search.totals import costing_of

    r = load_run(run)
    costing = costing_of(r.inputs, r.model, r.cluster)
    table = rows(r.ranked[:top or r.top_k], costing, r.model, "global_batch" in r.inputs.get("space", {}),
                 rounded=as_json)
    if as_json:
        extra = {"run_budget": costing.describe()} if costing is not None else {}
        click.echo(json.dumps({"run": str(r.folder), **extra, "leaderboard": table}, indent=2))
        return
    from autoplan.report.terminal import leaderboard_table
    _console().print(leaderboard_table(table, f"Best plans: {r.title}", throughput_unit(r.model)))
    if costing is not None:
        click.echo(f"whole run: {costing.describe()}")
    if not table:
        click.echo("no plan of this run fits in memory")
    elif r.summary.get("unproven"):
        click.echo(f"the search stopped early: {unproven_note(r.summary['unproven'], r.inputs.get('budget'))}")
    elif (top or 0) > r.top_k and r.inputs.get("sampler") == "exhaustive":
        click.echo(f"ranks after {r.top_k} are the best of the plans simulated, not an exact ranking "
                   f"(the search stopped once no other plan could enter its top {r.top_k})")


@main.command("export")
@click.argument("run")
@click.option("--rank", type=int, default=1, show_default=True, help="Which plan of the leaderboard (1 = best).")
@click.option("--format", "fmt", type=click.Choice(["megatron", "torchtitan", "deepspeed", "pytorch", "torchrec"]),
              default=None,
              help="Megatron-LM's pretrain_gpt.py launch, a torchtitan Python config, DeepSpeed's ds_config.json and "
                   "launcher, a PyTorch DDP launch hint or a TorchRec sharding plan [default: torchrec for a DLRM, "
                   "pytorch for a CNN, else megatron]; a framework that cannot launch the plan as planned says why.")
@friendly
def export_cmd(run: str, rank: int, fmt: str | None) -> None:
    """Print the launch settings of a plan of a run folder."""
    from autoplan.report.export import export_text
    from autoplan.search.analysis import load_run

    r = load_run(run)
    e = r.plan(rank)
    m = e.metrics
    unit = "samples/s" if r.model is not None and r.model.structure is not None else "tokens/s"
    digits = 3 if unit == "tokens/s" else 6
    header = (f"rank {rank} of {r.folder.name}: {e.strategy.short()} ({m.step_time:.{digits}f} s/step, "
              f"{m.tokens_per_s:,.0f} {unit}, {e.peak_memory / 2**30:.1f} GiB peak)\n{r.title}")
    click.echo(export_text(fmt, e.strategy, r.model, r.cluster, header), nl=False)
