"""`autoplan space` and `autoplan search`: the size of a search space, and the search itself (with --resume)."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import click

from autoplan.cli.app import (_console, _FinitePercent, _UsablePath, friendly,
                              main, throughput_unit)
from autoplan.errors import SpecError
from autoplan.cli.options import RUN_FLAGS, _fixable, load_budget, load_search_inputs, run_options, space_options
from autoplan.specs.files import shown
from autoplan.search.checks import MAX_BUDGET


@main.command()
@space_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def space(model_name: str, gpus: int, cluster: str, global_batch: int, space: str, as_json: bool,
          **fixed: Any) -> None:
    """How big a search space is: combinations, valid plans, plans that fit, and why the rest are rejected."""
    from autoplan.search.census import census

    model, spec, sp, global_batch = load_search_inputs(model_name, gpus, cluster, global_batch, space, fixed)
    c = census(model, spec, sp, global_batch)
    if not c["valid"]:
        from collections import Counter
        from autoplan.search.space import explain_no_plan
        raise SpecError(explain_no_plan(model, gpus, sp, global_batch, Counter(c["reasons"]), spec.gpus_per_node))
    if as_json:
        click.echo(json.dumps(c, indent=2))
    else:
        from autoplan.report.terminal import space_view
        _console().print(space_view(c, f"{_heading(model, spec, gpus, sp, global_batch)}, space {space!r}"))
    sys.exit(0 if c["fit"] else 1)


@main.command()
@space_options
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="Plans in the leaderboard.")
@click.option("--out", type=_UsablePath(file_okay=False), default="results", show_default=True,
              help="Folder for run folders.")
@click.option("--sampler", type=click.Choice(["auto", "exhaustive", "tpe", "nsga2", "random"]), default="auto",
              show_default=True, help="auto, exhaustive: every plan that fits, in bound order, until none left can "
                                      "enter the top k (or --budget runs out); tpe, nsga2, random: Optuna.")
@click.option("--budget", type=click.IntRange(1, MAX_BUDGET), default=20000, show_default=True,
              help="Most distinct plans to evaluate (a budget that covers every distinct plan searches them "
                   "exhaustively; an exhaustive search the budget cuts short says so).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sampler.")
@click.option("--workers", type=click.IntRange(0), default=None,
              help="0: in this process; N: N workers on an embedded Ray. [default: the CPU count, on Ray only "
                   "once the search has run serially for as long as Ray takes to start]")
@click.option("--ray-address", default=None, help="Use an existing Ray cluster (also RAY_ADDRESS).")
@click.option("--storage", default=None, help="Optuna storage URL (default: a journal file in the run folder).")
@click.option("--resume", type=_UsablePath(file_okay=False), default=None,
              help="Continue a run folder with its recorded settings (give it alone; flags that differ are "
                   "refused): finished plans are not evaluated again, the original budget is kept.")
@click.option("--cost", type=click.Choice(["sim", "symbolic"]), default="sim", show_default=True,
              help="sim: rank by the event simulator; symbolic: rank by the hardware-free symbolic cost and "
                   "simulate only the top plans for their figures.")
@click.option("--prefilter", type=_FinitePercent(), default=None,
              help="Simulate only the symbolic best K %% of the plans that fit (at least --top).")
@click.option("--symbolic-weights", type=click.Choice(["balance", "shape", "launch"]), default="balance",
              show_default=True,
              help="How the symbolic cost weighs a byte over a network tier against a FLOP: balance = peak "
                   "FLOP/s over the tier's bandwidth (datasheet), shape = 1 (topology shape only), launch = "
                   "balance plus each kernel launch at the spec's kernel overhead × peak FLOP/s (calibrated).")
@run_options
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON.")
@friendly
def search(model_name: str, gpus: int, cluster: str, global_batch: int, space: str, top: int, out: str,
           sampler: str, budget: int, seed: int, workers: int, ray_address: str | None, storage: str | None,
           resume: str | None, cost: str, prefilter: float | None, symbolic_weights: str, as_json: bool,
           tokens: str | None, epochs: float | None, steps: int | None, gpu_hour_price: float | None,
           goodput: float | None, batch_ramp: str | None, **fixed: Any) -> None:
    """Rank every valid plan for a model on a cluster (exact top-k; plans that cannot win are skipped)."""
    from autoplan.search.exhaustive import distinct_plans
    from autoplan.search.folder import RunFolder
    from autoplan.search.run import choose_sampler
    from autoplan.search.space import enumerate_plans

    if resume is not None:
        folder = RunFolder.existing(resume)
        model, spec, sp, settings = _resume_inputs(folder, click.get_current_context())
        gpus, global_batch, top, sampler, budget, seed = (settings[k] for k in (
            "gpus", "global_batch", "top", "sampler", "budget", "seed"))
        cost, prefilter, symbolic_weights = (folder.read_inputs().get(k, v) for k, v in _SYMBOLIC_DEFAULTS.items())
        study = folder.read_inputs().get("study") or (_study_name(folder.name) if storage else None)
    else:
        model, spec, sp, global_batch = load_search_inputs(model_name, gpus, cluster, global_batch, space, fixed)
    run_budget = load_budget(model, tokens, epochs, steps, gpu_hour_price, goodput, batch_ramp)
    plans, rejected = enumerate_plans(model, gpus, sp, global_batch)
    if not plans:
        from autoplan.search.space import explain_no_plan
        raise SpecError(explain_no_plan(model, gpus, sp, global_batch, rejected, spec.gpus_per_node))
    sampler = _usable_sampler(sp, sampler, cost, prefilter)
    distinct = len(distinct_plans(spec, plans))
    chosen = "symbolic" if cost == "symbolic" else choose_sampler(sampler, distinct, budget)
    if chosen == "exhaustive" and sampler in ("tpe", "nsga2", "random") and resume is None:
        click.echo(f"autoplan: --budget {budget:,} covers all {distinct:,} distinct valid plans: searching them "
                   f"exhaustively (an exact top {top}) instead of sampling with {sampler}", err=True)
    inputs = {"model": model.name, "cluster": spec.name, "gpu": spec.gpu.name, "gpus": gpus,
              "global_batch": global_batch, "space": {k: list(v) for k, v in sp.axes.items()}, "top": top,
              "sampler": chosen, "budget": budget, "seed": seed}
    symbolic = {"cost": cost, "prefilter": prefilter, "symbolic_weights": symbolic_weights}
    inputs |= {k: v for k, v in symbolic.items() if v != _SYMBOLIC_DEFAULTS[k]}   # recorded only when used
    if run_budget is not None:
        inputs["run_budget"] = run_budget.to_dict()
    elif resume is not None and "run_budget" in folder.read_inputs():
        inputs["run_budget"] = folder.read_inputs()["run_budget"]          # the resumed run's own budget
    fresh = resume is None
    if fresh:
        folder = _new_folder(out, model.name, gpus)
        study = _study_name(folder.name) if storage else None
    if study:                           # runs sharing a --storage never share a study: its name is the run's own
        inputs["study"] = study
    try:
        with folder.lock():
            if fresh:
                folder.write_inputs(inputs)
                folder.save_specs(model, spec)
            elif study and folder.read_inputs().get("study") != study:
                folder.write_inputs(folder.read_inputs() | {"study": study})
            _search_in(folder, model, spec, sp, plans, rejected, inputs, sampler, workers, ray_address, storage,
                       as_json)
    except (SpecError, OSError) as err:
        started = _drop_if_unstarted(folder, fresh)
        if isinstance(err, OSError):    # a full disk, a folder made read-only: what was recorded stays
            raise _write_error(folder, err, started) from None
        raise


def _usable_sampler(sp: Any, sampler: str, cost: str, prefilter: float | None) -> str:
    """The sampler the search can use with these flags; a SpecError for flags that contradict each other."""
    if prefilter is not None and cost == "symbolic":
        raise SpecError(f"--prefilter {prefilter:g} filters plans for the simulator; with --cost symbolic "
                        "nothing is searched by simulation (give one of them)")
    if "global_batch" in sp.axes and sampler != "exhaustive":
        # several batches are ranked by throughput (exhaustive.rank_key); the samplers minimise the step time
        if sampler != "auto":
            raise SpecError(f"--sampler {sampler} minimises the step time, which favours the smallest batch of a "
                            "--global-batch range: use --sampler exhaustive (or auto)")
        return "exhaustive"
    return sampler


def _new_folder(out: str, model_name: str, gpus: int) -> Any:
    """A new run folder under ``out``, named by the time, the model and the GPU count."""
    import time
    from pathlib import Path

    from autoplan.search.folder import RunFolder, folder_name

    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{folder_name(model_name)}-{gpus}gpu"
    try:
        return RunFolder.create(Path(out).resolve(), run_id)
    except (OSError, RuntimeError) as err:            # RuntimeError: a link loop (Python ≤ 3.12)
        why = getattr(err, "strerror", None) or err
        raise SpecError(f"--out {shown(out)}: cannot create a run folder there ({why})") from None


def _drop_if_unstarted(folder: Any, fresh: bool) -> bool:
    """Whether the search in ``folder`` recorded any evaluation; a new folder whose search never started is
    removed (a search that could not start leaves no run folder)."""
    from autoplan.search.folder import RECORD

    record = folder.file(RECORD)
    started = record.exists() and record.stat().st_size > 0
    if fresh and not started:
        folder.remove()
    return started


def _write_error(folder: Any, err: OSError, started: bool) -> SpecError:
    """What to say when the run folder could not be written, and how to go on if the search had started."""
    from autoplan.search.folder import RECORD

    keep = (f"; the {RECORD} so far is kept: make room (or make it writable) and continue with "
            f"`autoplan search --resume {folder.path}`" if started else "")
    return SpecError(f"cannot write the run folder {shown(folder.path)}: {err.strerror or err}{keep}")


def _counts(result: Any, sp: Any, inputs: dict) -> str:
    """What the search did with the space: combinations, valid, not fitting, simulated, and what it skipped."""
    from autoplan.report.leaderboard import unproven_note

    top = inputs["top"]
    same = f" ({result.equivalent} same as another plan here)" if result.equivalent else ""
    unproven = unproven_note(result.unproven, inputs["budget"])
    skipped = (f"{result.pruned - result.unproven} skipped by bound (cannot enter the top {top})"
               + (f", {unproven}" if unproven else "") if result.sampler == "exhaustive"
               else f"{result.pruned} ranked by symbolic cost only" if result.sampler == "symbolic"
               else f"{result.pruned} not sampled ({result.sampler})")
    if result.prefiltered or result.widened:
        widened = (f" and widened to {result.widened} more whose bound could still beat its top {top}"
                   if result.widened else "")
        skipped += (f", {result.prefiltered} dropped by the symbolic pre-filter (it kept the best "
                    f"{inputs['prefilter']:g} %{widened})")
    reused = f", {result.reused} reused from the resumed run" if result.reused else ""
    return (f"{sp.raw_size()} combinations, {result.valid} valid{same}, {result.out_of_memory} do not fit, "
            f"{sum(e.metrics is not None for e in result.evaluations)} simulated{reused}, {skipped}")


def _search_in(folder: Any, model: Any, spec: Any, sp: Any, plans: list, rejected: Any, inputs: dict,
               sampler: str, workers: int | None, ray_address: str | None, storage: str | None,
               as_json: bool) -> None:
    """Run the search in ``folder`` (locked), write its results and print its leaderboard."""
    from autoplan.report.leaderboard import rows
    from autoplan.report.live import Progress, progress_console
    from autoplan.report.write import write_run
    from autoplan.search.run import SearchInterrupted, run_search
    from autoplan.search.totals import costing_of

    top, chosen = inputs["top"], inputs["sampler"]
    progress = Progress(progress_console(), len(plans), "plans" if chosen == "exhaustive" else "of budget")
    interrupted = False
    # Ray prints a dead worker's error to stdout from a thread of its own: during the search stdout is stderr, so
    # that stdout holds only the leaderboard (the JSON of --json)
    with progress, contextlib.redirect_stdout(sys.stderr):
        try:
            result = run_search(model, spec, plans, folder, sampler=sampler, budget=inputs["budget"],
                                seed=inputs["seed"], top_k=top, workers=workers, ray_address=ray_address,
                                storage=storage, progress=progress, study_name=inputs.get("study"),
                                **{k.replace("symbolic_", ""): inputs.get(k, v) for k, v in _SYMBOLIC_DEFAULTS.items()})
        except SearchInterrupted as stop:
            result, interrupted = stop.partial, True
    result.rejected, result.raw = rejected, sp.raw_size()
    # the leaderboard files, then the leaderboard on screen, and only then the report (it never holds them up)
    write_run(folder, {**inputs, "interrupted": True} if interrupted else inputs, result, model=model, cluster=spec,
              report=False)

    def report() -> None:
        from autoplan.report.write import write_report_safely
        fresh = not result.reused
        write_report_safely(folder, model, spec, evaluations=result.evaluations if fresh else None, plans=plans)

    if interrupted:
        click.echo(f"autoplan: interrupted after {len(result.evaluations) + result.reused} plans; partial "
                   f"leaderboard in {folder.path} (`autoplan report {folder.path}` draws it); continue with "
                   f"--resume {folder.path}", err=True)
        sys.exit(130)
    costing = costing_of(inputs, model, spec)
    table = rows(result.leaderboard, costing, model, "global_batch" in inputs["space"], rounded=as_json)
    if as_json:
        from autoplan.report.fidelity import row
        extra = {"run_budget": costing.describe()} if costing is not None else {}
        extra["measured_accuracy"] = row(spec.gpu.name, model.family)
        click.echo(json.dumps({"run": str(folder.path), **extra, "leaderboard": table}, indent=2))
        report()
        sys.exit(0 if table else 1)
    _print_leaderboard(table, result, costing, folder, model, spec, sp, inputs)
    report()
    if not result.leaderboard:
        sys.exit(1)


def _print_leaderboard(table: list, result: Any, costing: Any, folder: Any, model: Any, spec: Any, sp: Any,
                       inputs: dict) -> None:
    """The leaderboard on the terminal, the whole run's cost, why nothing fits (if so), how close validate's runs on
    this GPU come out, and what the search did."""
    from rich.text import Text

    from autoplan.report.fidelity import line
    from autoplan.report.terminal import leaderboard_table
    gpus, global_batch = inputs["gpus"], inputs["global_batch"]
    con = _console()
    con.print(leaderboard_table(table, f"Best plans: {_heading(model, spec, gpus, sp, global_batch)}",
                                throughput_unit(model)))
    if costing is not None:
        from rich.markup import escape
        con.print(f"whole run: {escape(costing.describe())}")
    if not result.leaderboard:
        from autoplan.search.space import explain_no_fit
        hint = explain_no_fit(model, gpus, spec, sp, global_batch)
        con.print(Text(hint, style="bold red"))
    if result.sampler == "symbolic":
        con.print(f"ranked by symbolic cost ({inputs.get('symbolic_weights', 'balance')} weights); step times and "
                  f"other figures simulated for these {len(result.leaderboard)} plans only")
    con.print(Text(f"measured accuracy: {line(spec.gpu.name, model.family)}", style="dim"))
    con.print(f"{_counts(result, sp, inputs)}; {result.seconds:.1f} s.\nrun folder: {folder.path}")


def _heading(model: Any, spec: Any, gpus: int, sp: Any, global_batch: int) -> str:
    """Model, GPUs, sequence length, global batch(es) and tokens per step (specs/batch.heading)."""
    from autoplan.search.space import BATCH
    from autoplan.specs.batch import heading

    batches = sp.axes.get(BATCH, (global_batch,))
    return heading(model.name, gpus, spec.gpu.name, spec.name, model.seq_len, batches, model.structure is not None)


def _study_name(folder: str) -> str:
    """The run's Optuna study name in a ``--storage``: the folder's name and a random suffix, unique even among
    runs of one model on one GPU count started in the same second (recorded in inputs.json; a run folder's own
    journal holds one study, named as the folder)."""
    import secrets

    return f"{folder}-{secrets.token_hex(4)}"


_SYMBOLIC_DEFAULTS = {"cost": "sim", "prefilter": None, "symbolic_weights": "balance"}
"""The symbolic-cost flags of ``search`` (``search/symbolic.py``) and their defaults; inputs.json records them only
when they differ."""


_RESUMED = ("gpus", "global_batch", "top", "sampler", "budget", "seed")
"""Search settings a resume takes from the run's inputs.json (with the model, cluster and space)."""
_RESUME_MAY_CHANGE = ("resume", "out", "workers", "ray_address", "storage", "as_json") + RUN_FLAGS
"""Flags that say how to run or how to price the whole run, not what to search: a resume may give them."""


def _resume_inputs(folder: Any, ctx: click.Context) -> tuple[Any, Any, Any, dict]:
    """Model, cluster, space and settings of the run in ``folder``; SpecError naming every flag given that
    differs from the run's."""
    from click.core import ParameterSource

    from autoplan.search.space import load_space, space_from_axes
    from autoplan.families.catalog import get_model
    from autoplan.specs import load_cluster

    recorded = folder.read_inputs()
    where = f"--resume {str(folder.path)!r}"
    missing = [k for k in ("model", "cluster", *_RESUMED, "space") if k not in recorded]
    if missing:
        raise SpecError(f"{where}: inputs.json lacks {', '.join(missing)}; this folder cannot be resumed")
    specs = folder.load_specs()
    model, spec = specs or (get_model(recorded["model"]), load_cluster(recorded["cluster"], recorded["gpus"]))
    sp = space_from_axes(recorded["space"], f"{where}: inputs.json space")
    given = {k: v for k, v in ctx.params.items() if k not in _RESUME_MAY_CHANGE
             and ctx.get_parameter_source(k) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)}
    fixable = _fixable()
    differ = []
    for k, v in given.items():
        if k == "model_name":
            ok, theirs = get_model(v).name == model.name, model.name
        elif k == "cluster":
            ok, theirs = load_cluster(v).name == spec.name, spec.name
        elif k == "space":
            axes = load_space(v, {a: given.get(a) for a in fixable}, given.get("framework")).axes
            ok, theirs = {a: list(x) for a, x in axes.items()} == recorded["space"], "its recorded axes"
        elif k == "sampler":
            ok, theirs = v in ("auto", recorded["sampler"]), recorded["sampler"]
        elif k in fixable:
            ok, theirs = recorded["space"].get(k) == [v], recorded["space"].get(k)
        elif k == "seq_len":
            ok, theirs = model.seq_len == v, model.seq_len
        elif k == "global_batch":
            theirs = recorded["global_batch"]
            v = int(v) if str(v).strip().isdigit() else v
            ok = v == theirs or (recorded["space"].get("global_batch") is not None and "-" in str(v))
        elif k == "framework":
            theirs = recorded["space"].get(k, ["any"])[0]
            ok = theirs == v
        else:
            theirs = recorded.get(k, _SYMBOLIC_DEFAULTS.get(k))
            ok = theirs == v
        if not ok:
            differ.append(f"--{('model' if k == 'model_name' else k).replace('_', '-')} {v!r} (the run's: {theirs!r})")
    if differ:
        raise SpecError(f"{where}: flags differ from the run's inputs.json: {'; '.join(differ)}; give --resume "
                        "alone to continue the run as it was")
    return model, spec, sp, {k: recorded[k] for k in _RESUMED}
