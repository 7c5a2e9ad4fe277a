"""The `autoplan` command. Parses flags, loads specs, prints; the modelling lives elsewhere.

Heavy modules (ray, optuna, numpy, networkx) are imported inside the commands that need them.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import click

from autoplan.errors import SpecError
from autoplan.specs.strategy import KNOBS, Knob, knob_of

DEFAULT_CLUSTER = "dgx-h100-80g"
DEFAULT_GLOBAL_BATCH = 1536
"""GPT-3's batch of 1536 sequences (Brown et al. 2020, Table 2.1) when --global-batch is not given."""


def _fail(message: str) -> None:
    click.echo(f"autoplan: error: {message}", err=True)
    sys.exit(2)


def friendly(fn: Callable) -> Callable:
    """Turn user errors into one line on stderr and exit code 2, never a traceback."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SpecError as err:
            _fail(str(err))
        except OSError as err:            # a file system refusal not foreseen where the file is opened
            _fail(f"{err.strerror or err}: {err.filename!r}" if err.filename else str(err))
        except KeyboardInterrupt:
            click.echo("autoplan: interrupted", err=True)
            sys.exit(130)
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="autoplan")
def main() -> None:
    """Find the best parallel plan for training a large model on a GPU cluster, offline.

    \b
    autoplan models                      built-in models
    autoplan clusters                    built-in cluster specs
    autoplan check    --model gpt3 --gpus 1024 --tp 8 --pp 8
    autoplan simulate --model gpt3 --gpus 1024 --tp 8 --pp 8 --trace step.json
    autoplan space    --model gpt3 --gpus 1024     size of the search space, why plans are rejected
    autoplan search   --model gpt3 --gpus 1024     the best plans (exact top 10), a run folder in results/
    autoplan show     results/RUN                  a run's leaderboard; `report` rebuilds report.html
    autoplan export   results/RUN --rank 1 --format megatron
    autoplan validate                              predictions against published training runs
    """


class _FinitePercent(click.FloatRange):
    """A percentage in (0, 100]: click's FloatRange lets NaN through (every comparison with NaN is false)."""

    def __init__(self) -> None:
        super().__init__(0, 100, min_open=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        import math
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a number in the range 0<x<=100.", param, ctx)
        return number


class _UsablePath(click.Path):
    """click.Path that first refuses an empty name, a NUL byte or a name over 255 bytes (in one line, no traceback)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from autoplan.specs.catalog import check_path

        try:
            check_path(value, "the path" if isinstance(value, str) and value.strip() else "it")
        except SpecError as err:
            self.fail(str(err), param, ctx)
        return super().convert(value, param, ctx)


def model_options(fn: Callable) -> Callable:
    """--model, --cluster, --gpus."""
    fn = click.option("--gpus", type=int, required=True, help="Number of GPUs (whole nodes).")(fn)
    fn = click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True,
                      help="Cluster spec name (see `autoplan clusters`) or a .toml file.")(fn)
    fn = click.option("--model", "model_name", default="gpt3", show_default=True,
                      help="Model name (see `autoplan models`), a .toml file or a HuggingFace config.json.")(fn)
    return fn


def _knob_option(name: str, knob: Knob, default: Any, help_text: str, show_default: bool) -> Callable:
    """The click option of Strategy field ``name``: a count, a choice, or a --x/--no-x pair for a bool."""
    flag = "--" + name.replace("_", "-")
    extra: dict = {"help": help_text} if help_text else {}
    if knob.choices and all(type(c) is bool for c in knob.choices):
        return click.option(knob.flag or f"{flag}/--no-{flag[2:]}", default=default, show_default=show_default, **extra)
    if knob.choices and all(type(c) is int for c in knob.choices):
        kind: Any = click.IntRange(min(knob.choices), max(knob.choices))
    else:
        kind = click.Choice(list(knob.choices)) if knob.choices else int
    return click.option(knob.flag or flag, type=kind, default=default, show_default=show_default, **extra)


_PLAN_DEFAULTS = {"dp": None, "schedule": None, "global_batch": None}
"""check/simulate defaults that differ from Strategy's: dp and the schedule follow from other flags."""


def _plan_order() -> list[str]:
    """Strategy's fields in flag order: dp after the degrees it follows from."""
    names = [f.name for f in KNOBS if f.name != "dp"]
    names.insert(names.index("cp") + 1, "dp")
    return names


def plan_options(fn: Callable) -> Callable:
    """The flags of one parallel plan: one per Strategy field, from its Knob."""
    defaults = {f.name: f.default for f in KNOBS} | _PLAN_DEFAULTS
    for name in reversed(_plan_order()):
        shown = name not in ("dp", "schedule")            # their help says what they default to
        fn = _knob_option(name, knob_of(name), defaults[name], knob_of(name).help, shown)(fn)
    return fn


def build_plan(model_name: str, cluster: str, gpus: int, **kw: Any) -> tuple[Any, Any, Any]:
    """Model, sized cluster and Strategy from the command-line flags."""
    from autoplan.specs import Strategy, get_model, load_cluster
    from autoplan.specs.strategy import data_parallel

    model = get_model(model_name)
    spec = load_cluster(cluster, gpus)
    tp, pp, cp = kw["tp"], kw["pp"], kw["cp"]
    for name in (f.name for f in KNOBS if not f.metadata["knob"].choices and f.default != 0):
        if kw[name] is not None and kw[name] < 1:
            raise SpecError(f"--{name.replace('_', '-')} must be a positive integer, got {kw[name]}")
    dp = kw["dp"]
    if dp is None:
        if gpus % (tp * pp * cp):
            raise SpecError(f"--gpus {gpus} is not divisible by tp·pp·cp = {tp}·{pp}·{cp} = {tp * pp * cp}")
        split = kw["spatial"] * kw["channel"] * kw["filter"]        # CNN degrees (1 for transformers)
        if gpus % (tp * pp * cp * split):
            raise SpecError(f"--gpus {gpus} is not divisible by pp·spatial·channel·filter = {pp}·{kw['spatial']}·"
                            f"{kw['channel']}·{kw['filter']} = {pp * split}" + (f" (times tp·cp = {tp * cp})"
                                                                               if tp * cp > 1 else ""))
        dp = data_parallel(gpus, tp, pp, cp) // split
    schedule = kw["schedule"] or ("interleaved" if kw["virtual_stages"] > 1 else "1f1b")
    batch = default_batch(model, kw["global_batch"])
    s = Strategy(**{f.name: kw[f.name] for f in KNOBS} | {"dp": dp, "schedule": schedule, "global_batch": batch})
    return model, spec, s


def default_batch(model: Any, given: int | None) -> int:
    """``given``, else the model's own batch (a DLRM's samples per step), else GPT-3's 1536 sequences."""
    from autoplan.specs.dlrm import dlrm_of

    if given is not None:
        return given
    return dlrm_of(model).global_batch if dlrm_of(model) is not None else DEFAULT_GLOBAL_BATCH


def _console() -> Any:
    from rich.console import Console
    return Console() if sys.stdout.isatty() else Console(width=132)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def models(as_json: bool) -> None:
    """List the built-in models."""
    from autoplan.specs.catalog import aliases, list_models

    ms = list_models()
    if as_json:
        click.echo(json.dumps([{"name": m.name, "params": m.params(), **({"mtp_params": m.mtp_params()}
                                                                         if m.mtp_layers else {}),
                                "layers": m.layers, "hidden": m.hidden,
                                "heads": m.heads, "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden,
                                "vocab": m.vocab, "seq_len": m.seq_len, "source": m.source} for m in ms], indent=2))
        return
    from rich.table import Table
    t = Table(title="Built-in models (also: --model FILE.toml)", title_justify="left")
    for col in ("name", "params", "layers", "hidden", "heads (kv)", "ffn", "vocab", "seq", "mlp", "source"):
        t.add_column(col, justify="right" if col not in ("name", "source", "mlp") else "left")
    for m in ms:
        n = m.params()
        size = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
        size += f" + {m.mtp_params() / 1e9:.1f}B MTP" if m.mtp_layers else ""      # the MTP modules beside
        t.add_row(m.name, size, str(m.layers), str(m.hidden), f"{m.heads} ({m.kv_heads})",
                  str(m.ffn_hidden), str(m.vocab), str(m.seq_len), m.activation, m.source)
    _console().print(t)
    _console().print("aliases: " + ", ".join(f"{a} → {n}" for a, n in sorted(aliases().items())))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def clusters(as_json: bool) -> None:
    """List the built-in cluster specs (cluster_specs/*.toml)."""
    from autoplan.specs.cluster import list_clusters, load_cluster

    specs = [load_cluster(name) for name in list_clusters()]
    if as_json:
        click.echo(json.dumps([{"name": c.name, "description": c.description, "gpu": c.gpu.name,
                                "gpus_per_node": c.gpus_per_node, "nvlink_domain_gpus": c.domain_gpus,
                                "peak_tflops": c.gpu.peak_flops / 1e12,
                                "hbm_gib": c.gpu.hbm_bytes / 2**30,
                                "tiers": [{"name": t.name, "gpus": t.gpus, "bandwidth_gb_per_s": t.bandwidth / 1e9,
                                           "efficiency": t.efficiency} for t in c.tiers]} for c in specs], indent=2))
        return
    from rich.table import Table
    t = Table(title="Cluster specs (--cluster NAME or FILE.toml; --gpus sets the node count)", title_justify="left")
    for col in ("name", "GPU", "per node", "peak TFLOP/s", "HBM GiB", "network tiers (GB/s per GPU × efficiency)"):
        t.add_column(col)
    for c in specs:
        tiers = ", ".join(f"{x.name} {x.bandwidth / 1e9:g}×{x.efficiency:g}" for x in c.tiers)
        per_node = str(c.gpus_per_node) + (f" (NVLink {c.domain_gpus})" if c.domain_gpus != c.gpus_per_node else "")
        t.add_row(c.name, c.gpu.name, per_node, f"{c.gpu.peak_flops / 1e12:g}",
                  f"{c.gpu.hbm_bytes / 2**30:g}", tiers)
    _console().print(t)


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

    from autoplan.sim.simulate import evaluate, score, simulate_step
    from autoplan.cost.families import violations
    from autoplan.specs.hardware import hardware_violations

    model, spec, s = build_plan(model_name, cluster, gpus, **kw)
    reasons = violations(model, spec.gpus, s) + hardware_violations(model, spec, s)
    if reasons:
        raise SpecError("invalid plan: " + "; ".join(reasons))
    e = evaluate(model, spec, s)
    if e.metrics is None:
        # out of memory: simulate anyway, so the memory table shows by how much (the verdict says it does not fit)
        e = replace(e, metrics=score(model, spec, s))
    if trace:
        from pathlib import Path
        from autoplan.sim.trace import write_trace
        from autoplan.specs.layout import layout_chunks
        sim = simulate_step(model, spec, s)
        try:
            write_trace(Path(trace), sim.lowered, sim.timeline, 0 if s.uneven else model.layers // (s.pp * layout_chunks(s)))
        except OSError as err:
            raise SpecError(f"cannot write the trace to {trace!r}: {err.strerror or err}") from None
    if as_json:
        click.echo(json.dumps(evaluation_dict(e), indent=2))
        return
    from autoplan.report.terminal import simulation_view
    title = f"{model.name} on {gpus} × {spec.gpu.name} ({spec.name}): {s.short()}, global batch {s.global_batch}"
    _console().print(simulation_view(title, e.metrics, gpus))
    if trace:
        _console().print(f"trace written to {trace} (open in https://ui.perfetto.dev)")


@main.command()
@click.argument("file", required=False, type=_UsablePath(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the tables as markdown (the docs' fidelity page).")
@friendly
def validate(file: str | None, as_json: bool, as_markdown: bool) -> None:
    """Compare predictions with published, measured training runs (default: the runs shipped with autoplan)."""
    from pathlib import Path

    from autoplan.validate import validate as run_validation

    report = run_validation(Path(file) if file else None)
    if as_json:
        from autoplan.report.validation import report_dict
        click.echo(json.dumps(report_dict(report), indent=2))
        return
    if as_markdown:
        from autoplan.report.validation import validation_markdown
        click.echo(validation_markdown(report), nl=False)
        return
    from autoplan.report.validation import validation_view
    _console().print(validation_view(report))


def _fixable() -> list[str]:
    """The search axes that have a flag pinning them (Knob.fix_help)."""
    return [f.name for f in KNOBS if f.metadata["knob"].fix_help is not None]


def space_options(fn: Callable) -> Callable:
    """--model, --gpus, --cluster, --global-batch, --space and a flag to fix each axis of the space."""
    opts = [
        click.option("--model", "model_name", default="gpt3", show_default=True,
                     help="Model name, .toml file or HuggingFace config.json."),
        click.option("--gpus", type=int, default=None, help="Number of GPUs (whole nodes). [required]"),
        click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True, help="Cluster spec name or .toml file."),
        click.option("--global-batch", type=int, default=None,
                     help=f"Sequences (samples) per step. [default: {DEFAULT_GLOBAL_BATCH}; a DLRM's own batch]"),
        click.option("--space", default="default", show_default=True,
                     help="Search space name or .toml file (default: the model family's own, e.g. moe, cnn, dlrm)."),
    ] + [_knob_option(name, knob_of(name), None, knob_of(name).fix_help, False) for name in _fixable()]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def load_search_inputs(model_name: str, gpus: int, cluster: str, global_batch: int | None, space: str,
                       fixed: dict[str, Any]) -> tuple[Any, Any, Any, int]:
    """Model, sized cluster, space and global batch from the search flags (fixed axes pinned)."""
    from autoplan.search.space import load_space
    from autoplan.specs import get_model, load_cluster

    if gpus is None:
        raise SpecError("Missing option '--gpus'")
    for name in _fixable():
        if not knob_of(name).choices and fixed[name] is not None and fixed[name] < 1:
            raise SpecError(f"--{name.replace('_', '-')} must be a positive integer, got {fixed[name]}")
    if global_batch is not None and global_batch < 1:
        raise SpecError(f"--global-batch must be a positive integer, got {global_batch}")
    if fixed["virtual_stages"] not in (None, 1) and fixed["schedule"] not in (None, "interleaved"):
        raise SpecError(f"invalid plan: virtual_stages {fixed['virtual_stages']} needs the interleaved schedule, "
                        f"not {fixed['schedule']}")
    model = get_model(model_name)
    spec = load_cluster(cluster, gpus)
    if space == "default":                      # a family may bring its own axes (CNNs: spatial, channel, filter)
        from autoplan.cost.families import family_of
        space = getattr(family_of(model), "default_space", None) or space
    loaded = load_space(space, {k: v for k, v in fixed.items() if k in _fixable()})
    from autoplan.specs.hardware import unsupported_precisions

    refused = unsupported_precisions(spec, loaded.axes["precision"])
    if refused:
        raise SpecError(refused)
    return model, spec, loaded, default_batch(model, global_batch)


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
        _console().print(space_view(c, f"{model.name} on {gpus} × {spec.gpu.name} ({spec.name}), "
                                       f"global batch {global_batch}, space {space!r}"))
    sys.exit(0 if c["fit"] else 1)


@main.command()
@space_options
@click.option("--top", type=click.IntRange(1, 1000), default=10, show_default=True, help="Plans in the leaderboard.")
@click.option("--out", type=_UsablePath(file_okay=False), default="results", show_default=True,
              help="Folder for run folders.")
@click.option("--sampler", type=click.Choice(["auto", "exhaustive", "tpe", "nsga2", "random"]), default="auto",
              show_default=True, help="auto: exhaustive when the plans fit in --budget, else TPE.")
@click.option("--budget", type=click.IntRange(1), default=20000, show_default=True,
              help="Most distinct plans to evaluate.")
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
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON.")
@friendly
def search(model_name: str, gpus: int, cluster: str, global_batch: int, space: str, top: int, out: str,
           sampler: str, budget: int, seed: int, workers: int, ray_address: str | None, storage: str | None,
           resume: str | None, cost: str, prefilter: float | None, symbolic_weights: str, as_json: bool,
           **fixed: Any) -> None:
    """Rank every valid plan for a model on a cluster (exact top-k; plans that cannot win are skipped)."""
    import time
    from pathlib import Path

    from autoplan.search.folder import RECORD, RunFolder
    from autoplan.search.run import choose_sampler
    from autoplan.search.space import enumerate_plans

    if resume is not None:
        folder = RunFolder.existing(resume)
        model, spec, sp, settings = _resume_inputs(folder, click.get_current_context())
        gpus, global_batch, top, sampler, budget, seed = (settings[k] for k in (
            "gpus", "global_batch", "top", "sampler", "budget", "seed"))
        cost, prefilter, symbolic_weights = (folder.read_inputs().get(k, v) for k, v in _SYMBOLIC_DEFAULTS.items())
    else:
        model, spec, sp, global_batch = load_search_inputs(model_name, gpus, cluster, global_batch, space, fixed)
    plans, rejected = enumerate_plans(model, gpus, sp, global_batch)
    if not plans:
        from autoplan.search.space import explain_no_plan
        raise SpecError(explain_no_plan(model, gpus, sp, global_batch, rejected, spec.gpus_per_node))
    if prefilter is not None and cost == "symbolic":
        raise SpecError(f"--prefilter {prefilter:g} filters plans for the simulator; with --cost symbolic "
                        "nothing is searched by simulation (give one of them)")
    chosen = "symbolic" if cost == "symbolic" else choose_sampler(sampler, len(plans), budget)
    inputs = {"model": model.name, "cluster": spec.name, "gpu": spec.gpu.name, "gpus": gpus,
              "global_batch": global_batch, "space": {k: list(v) for k, v in sp.axes.items()}, "top": top,
              "sampler": chosen, "budget": budget, "seed": seed}
    symbolic = {"cost": cost, "prefilter": prefilter, "symbolic_weights": symbolic_weights}
    inputs |= {k: v for k, v in symbolic.items() if v != _SYMBOLIC_DEFAULTS[k]}   # recorded only when used
    fresh = resume is None
    if fresh:
        run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{model.name}-{gpus}gpu"
        try:
            folder = RunFolder.create(Path(out).resolve(), run_id)
        except OSError as err:
            raise SpecError(f"--out {out!r}: cannot create a run folder there ({err.strerror or err})") from None
    try:
        with folder.lock():
            if fresh:
                folder.write_inputs(inputs)
                folder.save_specs(model, spec)
            _search_in(folder, model, spec, sp, plans, rejected, inputs, sampler, workers, ray_address, storage,
                       as_json)
    except SpecError:
        record = folder.file(RECORD)
        if fresh and not (record.exists() and record.stat().st_size):
            folder.remove()             # a search that could not start leaves no run folder
        raise


def _search_in(folder: Any, model: Any, spec: Any, sp: Any, plans: list, rejected: Any, inputs: dict,
               sampler: str, workers: int | None, ray_address: str | None, storage: str | None,
               as_json: bool) -> None:
    """Run the search in ``folder`` (locked), write its results and print its leaderboard."""
    from autoplan.report.leaderboard import rows
    from autoplan.report.live import Progress, progress_console
    from autoplan.report.write import write_run
    from autoplan.search.run import SearchInterrupted, run_search

    top, chosen, gpus = inputs["top"], inputs["sampler"], inputs["gpus"]
    progress = Progress(progress_console(), len(plans), "plans" if chosen == "exhaustive" else "of budget")
    interrupted = False
    with progress:
        try:
            result = run_search(model, spec, plans, folder, sampler=sampler, budget=inputs["budget"],
                                seed=inputs["seed"], top_k=top, workers=workers, ray_address=ray_address,
                                storage=storage, progress=progress,
                                **{k.replace("symbolic_", ""): inputs.get(k, v) for k, v in _SYMBOLIC_DEFAULTS.items()})
        except SearchInterrupted as stop:
            result, interrupted = stop.partial, True
    result.rejected, result.raw = rejected, sp.raw_size()
    write_run(folder, {**inputs, "interrupted": True} if interrupted else inputs, result, model=model, cluster=spec,
              report=not interrupted)
    if interrupted:
        click.echo(f"autoplan: interrupted after {len(result.evaluations) + result.reused} plans; partial "
                   f"leaderboard in {folder.path} (`autoplan report {folder.path}` draws it); continue with "
                   f"--resume {folder.path}", err=True)
        sys.exit(130)
    table = rows(result.leaderboard)
    if as_json:
        click.echo(json.dumps({"run": str(folder.path), "leaderboard": table}, indent=2))
        sys.exit(0 if table else 1)
    from autoplan.report.terminal import leaderboard_table
    con = _console()
    con.print(leaderboard_table(table, f"Best plans: {model.name} on {gpus} × {spec.gpu.name} ({spec.name}), "
                                       f"global batch {inputs['global_batch']}", _throughput_unit(model)))
    if not result.leaderboard:
        from rich.markup import escape

        from autoplan.search.space import explain_no_fit
        hint = explain_no_fit(model, gpus, spec, sp, inputs["global_batch"])
        con.print(f"[bold red]{escape(hint)}[/]")
    same = f" ({result.equivalent} same as another plan here)" if result.equivalent else ""
    skipped = (f"{result.pruned} skipped by bound (cannot enter the top {top})" if result.sampler == "exhaustive"
               else f"{result.pruned} ranked by symbolic cost only" if result.sampler == "symbolic"
               else f"{result.pruned} not sampled ({result.sampler})")
    if result.sampler == "symbolic":
        con.print(f"ranked by symbolic cost ({inputs.get('symbolic_weights', 'balance')} weights); step times and "
                  f"other figures simulated for these {len(result.leaderboard)} plans only")
    if result.prefiltered:
        skipped += (f", {result.prefiltered} dropped by the symbolic pre-filter (it kept the best "
                    f"{inputs['prefilter']:g} %)")
    reused = f", {result.reused} reused from the resumed run" if result.reused else ""
    con.print(f"{sp.raw_size()} combinations, {result.valid} valid{same}, {result.out_of_memory} do not fit, "
              f"{len(result.evaluations)} simulated{reused}, {skipped}; {result.seconds:.1f} s.\n"
              f"run folder: {folder.path}")
    if not result.leaderboard:
        sys.exit(1)


_SYMBOLIC_DEFAULTS = {"cost": "sim", "prefilter": None, "symbolic_weights": "balance"}
"""The symbolic-cost flags of ``search`` (``search/symbolic.py``) and their defaults; inputs.json records them only
when they differ."""


def _throughput_unit(model: Any) -> str:
    """samples/s for models whose sample is one "token" (CNNs), else tokens/s."""
    return "samples/s" if model is not None and model.structure is not None else "tokens/s"


_RESUMED = ("gpus", "global_batch", "top", "sampler", "budget", "seed")
"""Search settings a resume takes from the run's inputs.json (with the model, cluster and space)."""
_RESUME_MAY_CHANGE = ("resume", "out", "workers", "ray_address", "storage", "as_json")
"""Flags that say how to run, not what to search: a resume may give them."""


def _resume_inputs(folder: Any, ctx: click.Context) -> tuple[Any, Any, Any, dict]:
    """Model, cluster, space and settings of the run in ``folder``; SpecError naming every flag given that
    differs from the run's."""
    from click.core import ParameterSource

    from autoplan.search.space import load_space, space_from_axes
    from autoplan.specs import get_model, load_cluster

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
            axes = load_space(v, {a: given.get(a) for a in fixable}).axes
            ok, theirs = {a: list(x) for a, x in axes.items()} == recorded["space"], "its recorded axes"
        elif k == "sampler":
            ok, theirs = v in ("auto", recorded["sampler"]), recorded["sampler"]
        elif k in fixable:
            ok, theirs = recorded["space"].get(k) == [v], recorded["space"].get(k)
        else:
            theirs = recorded.get(k, _SYMBOLIC_DEFAULTS.get(k))
            ok = theirs == v
        if not ok:
            differ.append(f"--{('model' if k == 'model_name' else k).replace('_', '-')} {v!r} (the run's: {theirs!r})")
    if differ:
        raise SpecError(f"{where}: flags differ from the run's inputs.json: {'; '.join(differ)}; give --resume "
                        "alone to continue the run as it was")
    return model, spec, sp, {k: recorded[k] for k in _RESUMED}


@main.command("report")
@click.argument("run")
@friendly
def report_cmd(run: str) -> None:
    """Rebuild a run folder's report.html, best_plan.json and traces of its best plans."""
    from autoplan.report.write import write_report
    from autoplan.search.analysis import load_run

    for path in write_report(load_run(run)):
        click.echo(str(path))


@main.command("show")
@click.argument("run")
@click.option("--top", type=click.IntRange(1), default=None, help="Plans to list [default: the run's top k].")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def show_cmd(run: str, top: int | None, as_json: bool) -> None:
    """Print the leaderboard of a run folder."""
    from autoplan.report.leaderboard import rows
    from autoplan.search.analysis import load_run

    r = load_run(run)
    table = rows(r.ranked[:top or r.top_k])
    if as_json:
        click.echo(json.dumps({"run": str(r.folder), "leaderboard": table}, indent=2))
        return
    from autoplan.report.terminal import leaderboard_table
    _console().print(leaderboard_table(table, f"Best plans: {r.title}", _throughput_unit(r.model)))
    if not table:
        click.echo("no plan of this run fits in memory")
    elif (top or 0) > r.top_k and r.inputs.get("sampler") == "exhaustive":
        click.echo(f"ranks after {r.top_k} are the best of the plans simulated, not an exact ranking "
                   f"(the search stopped once no other plan could enter its top {r.top_k})")


@main.command("export")
@click.argument("run")
@click.option("--rank", type=int, default=1, show_default=True, help="Which plan of the leaderboard (1 = best).")
@click.option("--format", "fmt", type=click.Choice(["megatron", "torchtitan", "pytorch", "torchrec"]), default=None,
              help="Megatron-LM arguments, a torchtitan job-config fragment, a PyTorch DDP launch hint or a TorchRec "
                   "sharding plan [default: torchrec for a DLRM, pytorch for a CNN, else megatron].")
@friendly
def export_cmd(run: str, rank: int, fmt: str | None) -> None:
    """Print the launch settings of a plan of a run folder."""
    from autoplan.report.export import export_text
    from autoplan.search.analysis import load_run
    from autoplan.specs.dlrm import dlrm_of

    r = load_run(run)
    e = r.plan(rank)
    m = e.metrics
    unit = "samples/s" if r.model is not None and r.model.structure is not None else "tokens/s"
    digits = 3 if unit == "tokens/s" else 6
    header = (f"rank {rank} of {r.folder.name}: {e.strategy.short()} ({m.step_time:.{digits}f} s/step, "
              f"{m.tokens_per_s:,.0f} {unit}, {e.peak_memory / 2**30:.1f} GiB peak)\n{r.title}")
    if dlrm_of(r.model) is not None:
        from autoplan.report.export_torchrec import torchrec_text
        if fmt not in (None, "torchrec") or r.cluster is None:
            raise SpecError(f"{r.model.name} is a DLRM: it exports only as --format torchrec (with its run's cluster)")
        click.echo(torchrec_text(r.model, r.cluster, e.strategy, header), nl=False)
        return
    if fmt == "torchrec":
        raise SpecError("--format torchrec exports DLRM embedding sharding plans; this run's model is not a DLRM")
    flash = r.cluster.flash_attention if r.cluster is not None else True
    cnn = r.model is not None and r.model.structure is not None
    if fmt is None:
        fmt = "pytorch" if cnn else "megatron"
    if cnn and fmt != "pytorch":
        raise SpecError(f"{r.model.name} is a CNN: Megatron-LM and torchtitan train transformers; it exports only as "
                        "--format pytorch")
    if fmt == "pytorch" and r.model is not None and not cnn:
        raise SpecError(f"--format pytorch exports CNN plans (a torchrun DDP hint); {r.model.name} is a transformer: "
                        "use --format megatron or torchtitan")
    click.echo(export_text(fmt, e.strategy, r.model, flash, header), nl=False)


_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str) -> float:
    """A size such as ``1GiB``, ``64MiB``, ``500MB`` or ``1e9`` in bytes."""
    import re
    m = re.fullmatch(r"\s*([0-9.]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _UNITS:
        raise SpecError(f"--bytes {text!r} is not a size; use e.g. 1GiB, 64MiB, 500MB or 1e9")
    try:
        value = float(m.group(1)) * _UNITS[m.group(2)]
    except ValueError:
        raise SpecError(f"--bytes {text!r} is not a size; use e.g. 1GiB, 64MiB, 500MB or 1e9") from None
    return value


def parse_network(text: str) -> tuple:
    """Dimensions from ``TOPOLOGY:SIZE:GB_PER_S[:LATENCY_US],...``, innermost first: ``ring:4:200,switch:8:50``."""
    from autoplan.cost.dims import make_dims

    sizes, tops, bws, lats = [], [], [], []
    for part in text.split(","):
        fields = part.strip().split(":")
        try:
            if len(fields) not in (3, 4):
                raise ValueError
            sizes.append(int(fields[1]))
            bws.append(float(fields[2]))
            lats.append(float(fields[3]) if len(fields) == 4 else 0.5)
        except ValueError:
            raise SpecError(f"--network part {part.strip()!r} must be TOPOLOGY:SIZE:GB_PER_S[:LATENCY_US], "
                            f"e.g. ring:4:200:0.5") from None
        tops.append(fields[0])
    return make_dims(sizes, tops, bws, lats)


@main.command("collective")
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True,
              help="Cluster spec name or a .toml file; its [[dimensions]], else its tiers, give the dimensions.")
@click.option("--gpus", type=int, default=None, help="GPUs in the group (required unless --network).")
@click.option("--network", default=None,
              help="Dimensions instead of a cluster: TOPOLOGY:SIZE:GB_PER_S[:LATENCY_US],... innermost first "
                   "(topology ring, switch or fully_connected; latency 0.5 µs if left out).")
@click.option("--op", type=click.Choice(["all_reduce", "reduce_scatter", "all_gather"]), default="all_reduce",
              show_default=True)
@click.option("--bytes", "size", default="1GiB", show_default=True, help="Buffer size: 1GiB, 64MiB, 500MB, 1e9.")
@click.option("--policy", type=click.Choice(["baseline", "themis"]), default="themis", show_default=True,
              help="Dimension order per chunk: fixed ascending, or Themis's load-balancing greedy.")
@click.option("--chunks", type=int, default=64, show_default=True, help="Chunks the buffer is split into.")
@click.option("--intra", type=click.Choice(["fifo", "scf"]), default="scf", show_default=True,
              help="Order of waiting chunks within a dimension: arrival, or smallest chunk first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--trace", "trace_path", type=_UsablePath(dir_okay=False, writable=True), default=None,
              help="Write the chunk phases, run as events on per-dimension link streams, as a Perfetto trace.")
@friendly
def collective_cmd(cluster: str, gpus: int | None, network: str | None, op: str, size: str, policy: str,
                   chunks: int, intra: str, as_json: bool, trace_path: str | None = None) -> None:
    """Time one collective on a multi-dimensional network, baseline or Themis schedule (arXiv 2110.04478)."""
    import math

    from autoplan.cost.dims import dims_of
    from autoplan.cost.themis import collective
    from autoplan.specs.cluster import load_cluster

    nbytes = parse_bytes(size)
    if network is not None:
        dims, where = parse_network(network), "--network " + network
        group = math.prod(d.size for d in dims)
        if gpus is not None and gpus != group:
            raise SpecError(f"--gpus {gpus} differs from the {group} GPUs of --network {network} (give one of them)")
    else:
        if gpus is None or gpus < 2:
            raise SpecError(f"--gpus must be an integer ≥ 2 (the group size: a collective needs two GPUs), got {gpus}")
        spec = load_cluster(cluster)
        spec = spec.with_gpus(-(-gpus // spec.gpus_per_node) * spec.gpus_per_node)
        dims, where = dims_of(spec, gpus), f"{gpus} GPUs of {spec.name}"
    r = collective(dims, op, nbytes, policy=policy, chunks=chunks, intra=intra)
    base = collective(dims, op, nbytes, policy="baseline", chunks=chunks, intra=intra)
    if trace_path is not None:
        from pathlib import Path

        from autoplan.sim.chunked import simulate, trace_events
        Path(trace_path).write_text(json.dumps({"traceEvents": trace_events(simulate(r))}))
    rows = [{"dimension": d.name or f"dim {i + 1}", "size": d.size, "topology": d.topology,
             "bandwidth_gb_per_s": d.bandwidth / 1e9, "latency_us": d.latency * 1e6, "sent_bytes": s,
             "busy_ms": b * 1e3, "utilisation": u}
            for i, (d, s, b, u) in enumerate(zip(r.dims, r.sent, r.busy, r.utilisation))]
    summary = {"network": where, "op": op, "bytes": nbytes, "policy": policy, "chunks": chunks, "intra": intra,
               "time_ms": r.time * 1e3, "baseline_time_ms": base.time * 1e3,
               "speedup_over_baseline": base.time / r.time if r.time else 1.0,
               "bandwidth_utilisation": r.bandwidth_utilisation, "fell_back_to_baseline": r.fell_back,
               "dimensions": rows}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    from rich.table import Table
    t = Table(title=f"{op} of {nbytes / 2**20:,.1f} MiB on {where}, {policy} ({chunks} chunks, {intra})",
              title_justify="left")
    for col in ("dimension", "size", "topology", "GB/s", "latency µs", "sent MiB", "busy ms", "utilisation"):
        t.add_column(col, justify="left" if col in ("dimension", "topology") else "right")
    for row in rows:
        t.add_row(row["dimension"], str(row["size"]), row["topology"], f"{row['bandwidth_gb_per_s']:g}",
                  f"{row['latency_us']:g}", f"{row['sent_bytes'] / 2**20:,.1f}", f"{row['busy_ms']:.3f}",
                  f"{row['utilisation']:.1%}")
    _console().print(t)
    click.echo(f"time {r.time * 1e3:.3f} ms, bandwidth utilisation {r.bandwidth_utilisation:.1%} "
               "(bytes sent per GPU / time / sum of the dimensions' bandwidths)")
    if policy == "themis":
        note = " (the greedy order was slower here, so the baseline order is kept)" if r.fell_back else ""
        click.echo(f"baseline: {base.time * 1e3:.3f} ms, bandwidth utilisation {base.bandwidth_utilisation:.1%}; "
                   f"Themis is {base.time / r.time if r.time else 1.0:.2f}x faster{note}")
