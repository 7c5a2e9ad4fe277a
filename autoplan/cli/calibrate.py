"""The `autoplan profile` and `autoplan calibrate` commands (registered by ``autoplan/cli/__init__.py``): flags, files and
printing; the measuring lives in ``autoplan/calibrate/profile.py``, the fitting in ``autoplan/calibrate/fit.py``."""

from __future__ import annotations

import functools
import json
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

import click

from autoplan.errors import SpecError


def _friendly(fn: Callable) -> Callable:
    """User errors as one line on stderr and exit code 2, never a traceback."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SpecError as err:
            click.echo(f"autoplan: error: {err}", err=True)
            sys.exit(2)
        except OSError as err:
            click.echo(f"autoplan: error: {err.strerror or err}: {err.filename!r}" if err.filename
                       else f"autoplan: error: {err}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("autoplan: interrupted", err=True)
            sys.exit(130)
    return wrapper


def _ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SpecError(f"{flag} takes comma-separated positive integers, got {text!r}") from None
    if not values or any(v <= 0 or v > 2**20 for v in values):
        raise SpecError(f"{flag} takes comma-separated positive integers, got {text!r}")
    return values


@click.command("profile")
@click.option("--out", "-o", default="measurements.json", show_default=True, type=click.Path(dir_okay=False),
              help="Measurements file to write (JSON, schema autoplan-measurements/1).")
@click.option("--model", "model_name", default=None,
              help="Time the GEMMs this model's plans run (catalog name or HF config.json); default: a size sweep.")
@click.option("--tp", default="1,2,4,8", show_default=True, help="Tensor-parallel degrees whose GEMM shapes to time.")
@click.option("--micro-batch", default="1,2", show_default=True, help="Micro-batch sizes whose GEMM shapes to time.")
@click.option("--quick", is_flag=True, help="Tiny shapes and few repeats (seconds, also on a CPU; what CI runs).")
@click.option("--repeats", default=0, type=click.IntRange(0, 1000), help="Timed repeats per shape [default: 20, "
              "quick: 3].")
@_friendly
def profile_cmd(out: str, model_name: str | None, tp: str, micro_batch: str, quick: bool, repeats: int) -> None:
    """Time, on this machine's devices, what the cost model needs: GEMMs (BF16, and FP8 where the GPU has it),
    attention forward and backward, element-wise and norm kernels, kernel launch overhead, and, under torchrun
    with 2 or more processes, the collectives (NCCL on GPUs, gloo on CPUs). Needs PyTorch
    (pip install 'autoplan[profile]').

    \b
    autoplan profile --model llama3-8b -o h100.json
    torchrun --nproc-per-node 8 -m autoplan profile --model llama3-8b -o h100.json
    autoplan profile --quick -o cpu.json          # seconds, on any machine
    """
    from autoplan.calibrate import profile

    path = profile.run(Path(out), model_name=model_name, tps=_ints(tp, "--tp"),
                       micro_batches=_ints(micro_batch, "--micro-batch"), quick=quick, repeats=repeats)
    if path is not None:
        click.echo(f"wrote {path}")


def _transfer_notes(steps: list) -> list[str]:
    """A warning where the measured steps cannot say how far the fit carries: all of one model."""
    models = {step.model.name for step in steps}
    if len(steps) < 2 or len(models) != 1:
        return []
    return [f"every measured step is of one model ({models.pop()}): the leave-one-out error shows how repeatable the "
            "fit is on it, not how it carries to other models or software; measure another model, or see validate's "
            "leave-one-group-out figure"]


def _print_fit(fit: Any, inputs: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Calibrated {fit.base.name}: {len(fit.residuals)} measurements, rms error {fit.rms_pct:.2f} %, "
                    f"max {fit.max_pct:.2f} %", title_justify="left")
    for col in ("parameter", "base", "fitted", "± 1 sd", "bounds", "meaning"):
        t.add_column(col, justify="left" if col in ("parameter", "meaning") else "right")
    for p, v, sd, b in zip(fit.params, fit.values, fit.sds, fit.base_values):
        mark = " (at bound)" if p.name in fit.at_bound else ""
        t.add_row(p.name, f"{b:.4g}", f"{v:.4g}{mark}", f"{sd:.2g}", f"[{p.low:g}, {p.high:g}]", p.doc)
    Console(width=140).print(t)
    by_kind: dict[str, list] = {}
    for r in fit.residuals:
        by_kind.setdefault(r.kind, []).append(abs(r.error_pct))
    for kind, errs in by_kind.items():
        click.echo(f"{kind}s: {len(errs)}, calibrated mean |error| {sum(errs) / len(errs):.2f} %, max {max(errs):.2f} %")
    steps = [r for r in fit.residuals if r.kind == "step"]
    if fit.loo:
        errs = [abs(r.error_pct) for r in fit.loo]
        click.echo(f"leave-one-out error on the measured steps: mean |error| {sum(errs) / len(errs):.2f} %, "
                   f"max {max(errs):.2f} % ({len(errs)} of {len(steps)} steps)")
        for r in fit.loo:
            click.echo(f"  {r.label}: measured {r.measured:.4g} s, predicted {r.predicted:.4g} s "
                       f"({r.error_pct:+.2f} %)  [{r.where}]")
    elif steps:
        click.echo("leave-one-out error on the measured steps: none (the other measurements alone do not determine "
                   "the parameters)")
    else:
        click.echo("leave-one-out error on the measured steps: no measured steps given")
    for note in inputs.notes + fit.notes + _transfer_notes(inputs.steps):
        click.echo(f"note: {note}")
    if fit.at_bound:
        click.echo(f"warning: {', '.join(fit.at_bound)} stopped at a physical bound: the measurements want a value "
                   "outside it (another cause is likely: check the base cluster and the inputs)")


@click.command("calibrate")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--base", default="dgx-h100-80g", show_default=True, help="Cluster spec to start from (name or .toml).")
@click.option("--out", "-o", default=None, type=click.Path(dir_okay=False),
              help="Calibrated cluster spec to write [default: NAME.toml].")
@click.option("--name", default=None, help="Name of the calibrated cluster [default: BASE-calibrated].")
@click.option("--fit", "fit_names", default=None,
              help="Parameters to fit, comma-separated (e.g. clock_ratio,tiers.ib-leaf.efficiency) [default: what "
                   "the inputs determine].")
@click.option("--max-residual", default=25.0, show_default=True, type=click.FloatRange(0.1, 1000),
              help="Refuse a fit whose rms error stays above this many percent (inconsistent measurements).")
@click.option("--prior", default=None, type=click.FloatRange(0.1, 100),
              help="Hold each fitted parameter near the base spec's value with this relative sd (%%); few measured "
                   "steps then move it only as far as they outweigh the base spec's sources [default: none].")
@click.option("--weigh", type=click.Choice(["equal", "time"]), default="equal", show_default=True,
              help="How measurements weigh in the fit: alike (each one's relative error), or by their measured "
                   "seconds (a step's sum of kernels then predicted without bias where no constant fits every size).")
@click.option("--model", "model_name", default=None,
              help="Model of the logged runs whose log does not say it (torchtitan flavors outside the catalog).")
@click.option("--gpus", default=None, type=click.IntRange(1, 2**24), help="GPU count of a torchtitan run whose log "
              "does not say it.")
@click.option("--known-gaps", is_flag=True, help="Also fit to validation-file runs marked known_gap.")
@click.option("--json", "as_json", is_flag=True, help="Print the fit as JSON.")
@_friendly
def calibrate_cmd(inputs: tuple[str, ...], base: str, out: str | None, name: str | None, fit_names: str | None,
                  max_residual: float, prior: float | None, weigh: str, model_name: str | None, gpus: int | None,
                  known_gaps: bool, as_json: bool) -> None:
    """Fit a cluster spec's physical constants to measurements and write the calibrated spec.

    INPUTS: any mix of `autoplan profile` JSON, nccl-tests output (all_reduce_perf ...), validation YAML of
    measured steps, Megatron-LM / NeMo / torchtitan logs (with torchtitan's job config .toml) and PyTorch profiler
    (Kineto) traces. Prints each fitted value with its uncertainty and the leave-one-out error on the measured steps.

    \b
    autoplan calibrate h100.json all_reduce_perf.txt run.log --base dgx-h100-80g -o my-h100.toml
    autoplan search --model llama3-70b --gpus 256 --cluster my-h100.toml
    """
    from importlib.metadata import version

    from autoplan.calibrate import fit as fitting, inputs as reading, params, writer
    from autoplan.calibrate.model import get_model, load_cluster, write_atomic

    cluster = load_cluster(base)
    name = name or f"{cluster.name}-calibrated"
    target = Path(out or f"{name}.toml")
    data = reading.read(list(inputs), cluster, get_model(model_name) if model_name else None, gpus, known_gaps)
    chosen = params.parse_names(fit_names, cluster) if fit_names else None
    fit = fitting.calibrate(data, cluster, chosen, max_residual=max_residual / 100,
                            prior=prior / 100 if prior else None, weigh=weigh)
    flags = [f"--base {base}"] + ([f"--fit {fit_names}"] if fit_names else []) + (
        [f"--prior {prior:g}"] if prior else []) + ([f"--weigh {weigh}"] if weigh != "equal" else []) + (
        [f"--model {model_name}"] if model_name else []) + ([f"--gpus {gpus}"] if gpus else [])
    command = " ".join(["autoplan calibrate", *map(shlex.quote, inputs), *flags])
    text = writer.render(fit, name, data.files, command, version("autoplan"))
    write_atomic(target, text)
    load_cluster(str(target))            # the written spec loads (same schema as cluster_specs/*.toml)
    if as_json:
        click.echo(json.dumps({
            "cluster": name, "out": str(target), "rms_pct": fit.rms_pct, "max_pct": fit.max_pct,
            "fitted": [{"name": p.name, "value": v, "sd": sd, "base": b, "low": p.low, "high": p.high}
                       for p, v, sd, b in zip(fit.params, fit.values, fit.sds, fit.base_values)],
            "at_bound": fit.at_bound, "leave_one_out": [{"step": r.label, "where": r.where, "measured_s": r.measured,
                                                         "predicted_s": r.predicted, "error_pct": r.error_pct}
                                                        for r in fit.loo],
            "inputs": data.files, "notes": data.notes}, indent=2))
        return
    _print_fit(fit, data)
    click.echo(f"wrote {target} (load it with --cluster {target})")


from autoplan.cli.app import main  # noqa: E402

main.add_command(profile_cmd)
main.add_command(calibrate_cmd)
