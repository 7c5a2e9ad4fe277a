"""The `autoplan` command group, its error handling and shared console; each command lives in its own module of
this package (``catalog``, ``plan``, ``validate``, ``search``, ``runs``, ``collective``)."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import click

from autoplan.errors import SpecError

DEFAULT_CLUSTER = "dgx-h100-80g"
DEFAULT_GLOBAL_BATCH = 1536
"""GPT-3's batch of 1536 sequences (Brown et al. 2020, Table 2.1) when --global-batch is not given."""


MESSAGE_MAX = 600
"""Longest error message printed: one that quotes more of what it refuses is cut in the middle."""


def one_line(message: str, limit: int = MESSAGE_MAX) -> str:
    """``message`` on one line (line breaks from quoted user text become spaces), at most about ``limit``
    characters: the head and the tail of a longer one."""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[:limit - 150] + " … " + text[-140:]


def _fail(message: str) -> None:
    click.echo(f"autoplan: error: {one_line(message)}", err=True)
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


COMMANDS = {
    "calibrate": ("calibrate", "Fit a cluster spec's physical constants to measurements and write the calibrated "
                               "spec."),
    "check": ("plan", "Is a plan valid? Its memory per stage, one layer's compute time and each collective it "
                      "needs."),
    "clusters": ("catalog", "List the built-in cluster specs (cluster_specs/*.toml)."),
    "collective": ("collective", "Time one collective on a multi-dimensional network, baseline or Themis schedule "
                                 "(arXiv 2110.04478)."),
    "export": ("runs", "Print the launch settings of a plan of a run folder."),
    "models": ("catalog", "List the built-in models, one table per family with the columns that mean something for "
                          "it."),
    "profile": ("calibrate", "Time, on this machine's devices, what the cost model needs: GEMMs (BF16, and FP8 "
                             "where the GPU has it), attention forward and backward, element-wise and norm "
                             "kernels, kernel launch overhead, and, under torchrun with 2 or more processes, the "
                             "collectives (NCCL on GPUs, gloo on CPUs). Needs PyTorch (pip install "
                             "'autoplan[profile]')."),
    "report": ("runs", "Rebuild a run folder's report.html, best_plan.json and traces of its best plans."),
    "search": ("search", "Rank every valid plan for a model on a cluster (exact top-k; plans that cannot win are "
                         "skipped)."),
    "show": ("runs", "Print the leaderboard of a run folder."),
    "simulate": ("plan", "Simulate one training step of a plan: throughput, MFU, where the time goes, memory; with "
                         "--tokens or --steps, the whole run's days, GPU-hours, energy and cost."),
    "space": ("search", "How big a search space is: combinations, valid plans, plans that fit, and why the rest "
                        "are rejected."),
    "sweep": ("sweep", "Search every GPU count of a range: per count the best plan, its throughput, MFU and (with "
                       "--tokens) days, GPU-hours, energy and cost; the scaling curve; the cheapest count meeting "
                       "--deadline and --budget."),
    "validate": ("validate", "Compare predictions with published, measured training runs (default: the runs "
                             "shipped with autoplan)."),
    "whatif": ("whatif", "What would change the plan: the best plan's step time and the best plan of the same "
                         "space under each hardware change, for a run folder (RUN) or a search space given by "
                         "flags (fix every axis for one plan)."),
}
"""Each command's module under autoplan.cli and the first paragraph of its help: a command's module (and what it
imports: the families, numpy) loads only when that command runs, and ``autoplan --help`` imports none of them
(tests/cli/test_cli.py checks this table against the commands)."""


LEGEND_COMMANDS = ("search", "show", "space")
"""Commands whose --help ends with the plan labels' legend (``autoplan.cli.legend``), as ``autoplan --help`` does."""


class _Commands(click.Group):
    """The group, loading each command's module on first use (``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            import importlib

            importlib.import_module(f"autoplan.cli.{COMMANDS[name][0]}")
        cmd = self.commands.get(name)
        if cmd is not None and name in LEGEND_COMMANDS and cmd.epilog is None:
            from autoplan.cli.legend import LEGEND

            cmd.epilog = LEGEND
        return cmd

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from autoplan.cli.legend import LEGEND

        self.epilog = LEGEND
        super().format_epilog(ctx, formatter)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own listing, from the help above instead of each command's module
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            text = COMMANDS[name][1] if name in COMMANDS and name not in self.commands else None
            if text is None:
                cmd = self.get_command(ctx, name)
                if cmd is None or cmd.hidden:
                    continue
                rows.append((name, cmd.get_short_help_str(limit)))
            else:
                rows.append((name, click.Command(name, help=text).get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    autoplan sweep    --model llama3-405b --gpus 1024..16384 --tokens 15T   best plan, days and cost per GPU count
    autoplan show     results/RUN                  a run's leaderboard; `report` rebuilds report.html
    autoplan export   results/RUN --rank 1 --format megatron
    autoplan validate                              predictions against published training runs
    autoplan whatif   results/RUN --vary nic_bw=2x,oversubscription=4   best plan under hardware changes
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
        from autoplan.specs.files import check_path

        try:
            check_path(value, "the path" if isinstance(value, str) and value.strip() else "it")
        except SpecError as err:
            self.fail(str(err), param, ctx)
        return super().convert(value, param, ctx)


def _console() -> Any:
    """The console of the tables on stdout. Markup and emoji codes are off: model, cluster and folder names are the
    user's, and ``[/]`` or ``:x:`` in one is text, never a style (rich.errors.MarkupError)."""
    from rich.console import Console
    return Console(markup=False, emoji=False, **({} if sys.stdout.isatty() else {"width": 132}))



def throughput_unit(model: Any) -> str:
    """samples/s for models whose sample is one "token" (CNNs), else tokens/s."""
    return "samples/s" if model is not None and model.structure is not None else "tokens/s"


