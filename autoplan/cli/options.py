"""Flags shared by commands: the model and cluster, one plan (a flag per Strategy knob), and a search space."""

from __future__ import annotations

from typing import Any, Callable

import click

from autoplan.cli.app import DEFAULT_CLUSTER, DEFAULT_GLOBAL_BATCH
from autoplan.errors import SpecError
from autoplan.families.strategy import KNOBS, Knob, knob_of

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
    from autoplan.families.strategy import Strategy
    from autoplan.families.catalog import get_model
    from autoplan.specs import load_cluster
    from autoplan.specs.plan import data_parallel

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
    from autoplan.families.dlrm.spec import dlrm_of

    if given is not None:
        return given
    return dlrm_of(model).global_batch if dlrm_of(model) is not None else DEFAULT_GLOBAL_BATCH




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
    from autoplan.families.catalog import get_model
    from autoplan.specs import load_cluster

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
        from autoplan.families.registry import default_space
        space = default_space(model)
    loaded = load_space(space, {k: v for k, v in fixed.items() if k in _fixable()})
    from autoplan.hardware.support import unsupported_precisions

    refused = unsupported_precisions(spec, loaded.axes["precision"])
    if refused:
        raise SpecError(refused)
    return model, spec, loaded, default_batch(model, global_batch)


