"""Flags shared by commands: the model and cluster, one plan (a flag per Strategy knob), and a search space."""

from __future__ import annotations

import math
from typing import Any, Callable

import click

from autoplan.cli.app import DEFAULT_CLUSTER, DEFAULT_GLOBAL_BATCH
from autoplan.errors import SpecError
from autoplan.families.strategy import KNOBS, Knob, knob_of

SEQ_LEN_HELP = "Tokens per sequence [default: the model's own; a HF config's pre-training length]."
TOKENS_HELP = ("Tokens per step instead of --global-batch (e.g. 16M, or a range 4M-16M in search and space), "
               "rounded to a round batch of sequences.")


def model_options(fn: Callable) -> Callable:
    """--model, --cluster, --gpus, --seq-len and --tokens-per-step."""
    fn = click.option("--tokens-per-step", default=None, help=TOKENS_HELP)(fn)
    fn = click.option("--seq-len", type=click.IntRange(1), default=None, help=SEQ_LEN_HELP)(fn)
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

    model = with_seq_len(get_model(model_name), kw.get("seq_len"))
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
    batches = choose_batches(model, gpus, kw["global_batch"], kw.get("tokens_per_step"))
    if len(batches) > 1:
        raise SpecError("a plan has one global batch: give --tokens-per-step one count (ranges are for search)")
    batch = batches[0]
    s = Strategy(**{f.name: kw[f.name] for f in KNOBS} | {"dp": dp, "schedule": schedule, "global_batch": batch})
    return model, spec, s


def with_seq_len(model: Any, seq_len: int | None) -> Any:
    """``model`` trained on sequences of ``seq_len`` tokens (None: its own)."""
    from dataclasses import replace

    if seq_len is None or seq_len == model.seq_len:
        return model
    if model.structure is not None:
        raise SpecError(f"--seq-len {seq_len}: {model.name} is not a token-sequence model (a CNN or DLRM sample is "
                        "one image or one row)")
    return replace(model, seq_len=seq_len)


def default_batch(model: Any, gpus: int) -> int:
    """The model's own batch (a DLRM's samples per step), GPT-3's 1536 samples for a CNN, else the batch of
    ``specs/batch.py``: the tokens per step published runs used for this size, or 1,024 per GPU if more, as a round
    batch of sequences."""
    from autoplan.families.dlrm.spec import dlrm_of
    from autoplan.specs.batch import default_batch as rule

    if dlrm_of(model) is not None:
        return dlrm_of(model).global_batch
    if model.structure is not None:
        return DEFAULT_GLOBAL_BATCH
    return rule(model.params(), model.seq_len, gpus)


def choose_batches(model: Any, gpus: int, global_batch: Any, tokens_per_step: str | None) -> tuple[int, ...]:
    """The global batches to plan for: ``--global-batch N`` or ``LOW-HIGH`` (every round batch between), or
    ``--tokens-per-step`` (one or a range, as round batches of sequences), else the default."""
    from autoplan.specs.batch import nearest_round, parse_count, round_batches

    if global_batch is not None and tokens_per_step is not None:
        raise SpecError("give --global-batch or --tokens-per-step, not both")
    if tokens_per_step is not None:
        if model.structure is not None:
            raise SpecError(f"--tokens-per-step: {model.name}'s samples are not token sequences; give --global-batch")
        low, high = parse_count(tokens_per_step, "--tokens-per-step")
        if low == high:
            return (nearest_round(low / model.seq_len, gpus),)
        found = round_batches(math.ceil(low / model.seq_len), int(high // model.seq_len), gpus)
        if not found:
            raise SpecError(f"--tokens-per-step {tokens_per_step}: no round batch of {model.seq_len}-token sequences "
                            "in that range")
        return tuple(found)
    if global_batch is None:
        return (default_batch(model, gpus),)
    if isinstance(global_batch, int):
        low = high = global_batch
    else:
        low, high = parse_count(global_batch, "--global-batch")
    if low != int(low) or high != int(high):
        raise SpecError(f"--global-batch {global_batch}: a batch is a whole number of sequences")
    if low == high:
        return (int(low),)
    found = round_batches(int(low), int(high), gpus)
    if not found:
        raise SpecError(f"--global-batch {global_batch}: no round batch (c·2^k) in that range on {gpus} GPUs")
    return tuple(found)


def legend_text() -> str:
    """The plan labels' legend for --help (click keeps a paragraph opened with \\b as it is)."""
    from autoplan.families.strategy import Strategy

    rows = [f"  {label:<14} {meaning}" for label, meaning in Strategy.legend()]
    return "\b\nPlan labels (e.g. tp4 pp8 dp32 mb2 int12 sp z1):\n" + "\n".join(rows)


FRAMEWORK_CHOICES = ("any", "megatron", "torchtitan", "deepspeed")
"""``--framework``'s values, kept here as text so that ``search --help`` imports no family (every family's launchers:
``registry.FRAMEWORKS``; tests/cli/test_cli.py checks that the two agree)."""


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
        click.option("--global-batch", default=None,
                     help="Sequences (samples) per step, or a range LOW-HIGH whose round batches the search "
                          "ranks by throughput [default: the published tokens per step for the model's size or "
                          "1,024 tokens per GPU if more (docs/export.md); a DLRM's own batch].",),
        click.option("--tokens-per-step", default=None, help=TOKENS_HELP),
        click.option("--seq-len", type=click.IntRange(1), default=None, help=SEQ_LEN_HELP),
        click.option("--space", default="default", show_default=True,
                     help="Search space name or .toml file (default: the model family's own, e.g. moe, cnn, dlrm)."),
        click.option("--framework", type=click.Choice(FRAMEWORK_CHOICES), default=None,
                     help="Keep only plans this framework launches as planned (docs/export.md) [default: the space's "
                          "`framework` key, else any: every valid plan]."),
    ] + [_knob_option(name, knob_of(name), None, knob_of(name).fix_help, False) for name in _fixable()]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def load_search_inputs(model_name: str, gpus: int, cluster: str, global_batch: Any, space: str,
                       fixed: dict[str, Any]) -> tuple[Any, Any, Any, int]:
    """Model, sized cluster, space and global batch from the search flags (fixed axes pinned); a range of batches
    is the space's ``global_batch`` entry, and the batch returned its largest."""
    from autoplan.search.space import load_space
    from autoplan.families.catalog import get_model
    from autoplan.specs import load_cluster

    if gpus is None:
        raise SpecError("Missing option '--gpus'")
    for name in _fixable():
        if not knob_of(name).choices and fixed[name] is not None and fixed[name] < 1:
            raise SpecError(f"--{name.replace('_', '-')} must be a positive integer, got {fixed[name]}")
    if isinstance(global_batch, str) and global_batch.strip().lstrip("-").isdigit():
        global_batch = int(global_batch)
        if global_batch < 1:
            raise SpecError(f"--global-batch must be a positive integer, got {global_batch}")
    if fixed["virtual_stages"] not in (None, 1) and fixed["schedule"] not in (None, "interleaved"):
        raise SpecError(f"invalid plan: virtual_stages {fixed['virtual_stages']} needs the interleaved schedule, "
                        f"not {fixed['schedule']}")
    model = with_seq_len(get_model(model_name), fixed.get("seq_len"))
    spec = load_cluster(cluster, gpus)
    batches = choose_batches(model, gpus, global_batch, fixed.get("tokens_per_step"))
    if space == "default":                      # a family may bring its own axes (CNNs: spatial, channel, filter)
        from autoplan.families.registry import default_space
        space = default_space(model)
    loaded = load_space(space, {k: v for k, v in fixed.items() if k in _fixable()}, fixed.get("framework"))
    if loaded.framework != "any":
        from autoplan.families.registry import launcher
        launcher(model, loaded.framework)               # a CNN or DLRM: one line naming the formats it has
    from autoplan.hardware.support import unsupported_precisions

    refused = unsupported_precisions(spec, loaded.axes["precision"])
    if refused:
        raise SpecError(refused)
    if len(batches) > 1:
        from autoplan.search.space import BATCH, Space
        loaded = Space(loaded.axes | {BATCH: batches})
    return model, spec, loaded, batches[-1]




RUN_FLAGS = ("tokens", "epochs", "steps", "gpu_hour_price", "goodput", "batch_ramp")
"""The whole-run flags (``run_options``): the keyword arguments they add to a command."""


def run_options(fn: Callable) -> Callable:
    """--tokens/--samples, --epochs, --steps, --gpu-hour-price, --goodput, --batch-ramp: the whole run's budget
    (days, GPU-hours, energy and cost beside each plan; ``search/totals.py``)."""
    opts = [
        click.option("--tokens", "--samples", "tokens", default=None, metavar="N",
                     help="Train on N tokens (samples for CNNs and DLRMs): 15T, 300B, 2.5e12; shows days, GPU-hours, "
                          "energy and cost of each plan."),
        click.option("--epochs", type=click.FloatRange(0, min_open=True), default=None,
                     help="Train for this many epochs of the model's training set (built-in CNNs)."),
        click.option("--steps", type=click.IntRange(1), default=None, help="Train for N optimizer steps."),
        click.option("--gpu-hour-price", type=click.FloatRange(0, min_open=True), default=None, metavar="USD",
                     help="Price of a GPU-hour [default: the cluster spec's gpu_hour_usd, if any]."),
        click.option("--goodput", type=click.FloatRange(0, 1, min_open=True), default=None,
                     help="Share of wall-clock time spent training (checkpoints, failures): 0.9 is Llama 3 405B's on "
                          "16K H100s (arXiv 2407.21783 §3.3.4). [default: 1, none lost]"),
        click.option("--batch-ramp", default=None, metavar="TOKENS:BATCH,…",
                     help="Smaller global batches before the plan's own, e.g. 2.87T:1024 (Llama 3 405B: 8M-token "
                          "batches until 2.87T tokens, then 16M)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def load_budget(model: Any, tokens: str | None, epochs: float | None, steps: int | None,
                gpu_hour_price: float | None, goodput: float | None, batch_ramp: str | None) -> Any:
    """The Budget the whole-run flags give, or None if they give no tokens, epochs or steps."""
    from autoplan.search.totals import Budget, epoch_budget, parse_amount

    given = [f for f, v in (("--tokens", tokens), ("--epochs", epochs), ("--steps", steps)) if v is not None]
    if len(given) > 1:
        raise SpecError(f"give one of --tokens, --epochs and --steps, not {' and '.join(given)}")
    if not given:
        extra = [f for f, v in (("--gpu-hour-price", gpu_hour_price), ("--goodput", goodput),
                                ("--batch-ramp", batch_ramp)) if v is not None]
        if extra:
            raise SpecError(f"{', '.join(extra)} prices a whole run: give --tokens, --epochs or --steps too")
        return None
    amount = parse_amount(tokens, "--tokens") if tokens is not None else (
        epoch_budget(model, epochs, None) if epochs is not None else 0.0)
    return Budget(tokens=amount, steps=steps or 0, gpu_hour_usd=gpu_hour_price or 0.0,
                  goodput=1.0 if goodput is None else goodput, ramp=parse_ramp(batch_ramp))


def parse_ramp(text: str | None) -> tuple[tuple[float, int], ...]:
    """``2.87T:1024,…`` → ((2.87e12, 1024), …)."""
    from autoplan.search.totals import parse_amount

    if not text:
        return ()
    stages = []
    for part in text.split(","):
        until, sep, batch = part.partition(":")
        if not sep or not batch.strip().isdigit():
            raise SpecError(f"--batch-ramp {text!r}: each stage is TOKENS:BATCH, e.g. 2.87T:1024")
        stages.append((parse_amount(until, "--batch-ramp tokens"), int(batch)))
    return tuple(stages)
