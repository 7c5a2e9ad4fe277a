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


