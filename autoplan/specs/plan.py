"""The plan: the knobs every model family shares and the machinery that composes a family's own knobs with them.

The core plan holds what any trainer decides: the parallel degrees (dp, tp, pp, cp), the batch, the pipeline
schedule, recomputation, ZeRO sharding, overlap settings and precision. Each model family declares its own knobs
in its package (``autoplan/families/<family>/knobs.py``) as a ``PlanPart``; ``compose`` makes one frozen
dataclass of the core and every part (``autoplan.families.strategy.Strategy``). Every field carries a ``Knob``:
its command-line flag, its place in search spaces, its part of the plan's label and its Megatron-LM arguments
come from that one definition.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields, make_dataclass
from typing import Any, Callable, Self, Sequence

from autoplan.errors import SpecError
from autoplan.specs.hashing import cache_hash
from autoplan.specs.layout import BIDIRECTIONAL, V_SHAPE
from autoplan.specs.model import MAX_SIZE

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "dualpipev", "dualpipe")
SPLIT_BACKWARD = ("zb-h1", "zbv", "dualpipev", "dualpipe")
"""Zero-bubble schedules: each backward runs as B (input gradients) then W (weight gradients), Qi et al. 2024
(arXiv 2401.10241); Megatron-Core has none of them (reference implementations: sail-sg/zero-bubble-pipeline-
parallelism, PyTorch ``torch.distributed.pipelining`` ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble and
ScheduleDualPipeV; DualPipe and DualPipeV from deepseek-ai/DualPipe)."""
FUSED_PAIRS = ("dualpipev", "dualpipe")
"""Schedules that run a forward of one chunk fused with the backward of the other (DeepSeek-V3 §3.2.1)."""
RECOMPUTE = ("none", "selective", "full", "modules", "op")
COLLECTIVE_POLICIES = ("nccl", "baseline", "themis")
PRECISIONS = ("bf16", "fp8", "fp8-current", "fp8-blockwise", "mxfp8")
OPTIMIZER_MOMENTS = ("fp32", "bf16")
RANK_ORDER = ("tp", "cp", "dp", "pp")
"""Megatron's rank order, fastest-varying first: ranks of a TP group are consecutive, PP groups are farthest apart."""


@dataclass(frozen=True, kw_only=True)
class Knob:
    """What the rest of autoplan derives from one plan field: its command-line flag, its place in search
    spaces, its part of the plan's label and its Megatron-LM arguments. Attach with ``knob(default, ...)``."""

    help: str = ""
    """Help text of the field's flag in ``check`` and ``simulate`` (empty: none)."""
    choices: tuple = ()
    """Allowed values of a categorical field (bool fields: false and true; counts: any positive integer)."""
    flag: str = ""
    """The click declaration when not ``--name`` (``--name/--no-name`` for bools), e.g. ``--x-fp32/--x-16bit``."""
    axis: bool = False
    """A search-space axis (``search_spaces/*.toml`` may list values for it)."""
    fix_help: str | None = None
    """``search`` and ``space`` have a flag that pins this axis to one value, with this help (None: no flag)."""
    label: Callable[[Any], str] | None = None
    """The field's part of ``Strategy.short()`` for a value ("" to show nothing)."""
    megatron: dict = field(default_factory=dict)
    """Megatron-LM arguments per value of the field (values not listed: none)."""
    megatron_when: Callable[[Any], bool] | None = None
    """Only then do the Megatron-LM arguments apply (e.g. only with the distributed optimizer)."""
    after: str = ""
    """The knob this one follows in the composed field order (flags, axes, labels, records); "" : right after the
    knob declared before it in its part (a part's first knob without ``after`` goes last)."""
    degree: bool = False
    """A parallel degree: the plan's GPUs are the product of every degree."""
    quiet: bool = False
    """Left out of ``to_dict`` at its default, so that plans of other families read as before it existed."""
    unset_zero: bool = False
    """A count where 0 means "not set" (left out of ``to_dict`` at 0)."""


def knob(default: Any, **meta: Any) -> Any:
    """A plan field with its Knob metadata."""
    return field(default=default, metadata={"knob": Knob(**meta)})


_BOOL = (False, True)
_CACHED = ("_hash", "_short")
"""What a plan keeps in its ``__dict__`` besides its fields: its hash (``specs.hashing``) and its label."""


class PlanPart:
    """A set of plan knobs: class attributes declared with ``knob`` (annotated), and properties reading them.

    ``compose`` turns the core plan and every family's parts into one frozen dataclass that inherits the parts'
    properties; a part never holds state of its own."""


def part_knobs(part: type) -> list[tuple[str, Any, Field]]:
    """(name, annotation, field) of every knob ``part`` itself declares, in declaration order."""
    own = part.__dict__.get("__annotations__", {})
    return [(name, own[name], part.__dict__[name]) for name in own if isinstance(part.__dict__.get(name), Field)]


class Plan(PlanPart):
    """A parallel plan in Megatron-LM's vocabulary: the knobs every family shares (``compose`` adds each family's
    own; ``autoplan.families.strategy.Strategy`` is the composed class)."""

    dp: int = knob(1, degree=True, help="Data-parallel degree [default: gpus / (tp·pp·cp)].")
    """Data-parallel replicas."""
    tp: int = knob(1, degree=True, help="Tensor-parallel degree.", axis=True, fix_help="Fix tensor parallelism.")
    """Tensor-parallel degree (Megatron column/row-parallel linear layers)."""
    pp: int = knob(1, degree=True, help="Pipeline stages.", axis=True, fix_help="Fix pipeline stages.")
    """Pipeline stages."""
    cp: int = knob(1, degree=True, help="Context-parallel degree.", axis=True, fix_help="Fix context parallelism.")
    """Context-parallel degree (sequence split across GPUs, ring attention)."""
    micro_batch: int = knob(1, help="Sequences per micro-batch.", axis=True, fix_help="Fix the micro-batch size.",
                            label=lambda v: f"mb{v}")
    """Sequences per micro-batch on one pipeline."""
    global_batch: int = knob(1, help="Sequences per optimizer step.")
    """Sequences per optimizer step over all replicas."""
    schedule: str = knob("1f1b", choices=SCHEDULES, axis=True, fix_help="",
                         help="Pipeline schedule [default: interleaved if --virtual-stages > 1, else 1f1b]; zb-h1, "
                              "zbv, dualpipev and dualpipe are zero-bubble schedules (not in Megatron-Core).")
    """Pipeline schedule: gpipe, 1f1b (PipeDream-flush), interleaved (Megatron virtual stages), zb-h1 (1F1B with
    split backward, Qi et al. 2024 §2.1), zbv (two chunks per rank in a V, Qi et al. 2024 §6) or dualpipev
    (DeepSeek's V-shape DualPipe, fused forward-backward chunk pairs) or dualpipe (DeepSeek-V3's bidirectional
    DualPipe, §3.2.1: two model copies pipelined in opposite directions, the same fused pairs)."""
    virtual_stages: int = knob(1, help="Model chunks per pipeline rank (interleaved schedule).", axis=True,
                               fix_help="")
    """Model chunks per pipeline rank for the interleaved schedule (1 otherwise)."""
    recompute: str = knob("none", choices=RECOMPUTE, help="Activation recomputation.", axis=True, fix_help="",
                          label=lambda v: {"none": "", "selective": "sel", "full": "full", "modules": "rmod",
                                           "op": "opsac"}[v],
                          megatron={"selective": ("--recompute-granularity selective",),
                                    "modules": ("--recompute-granularity selective",
                                                "--recompute-modules layernorm mla_up_proj moe_act"),
                                    "full": ("--recompute-granularity full", "--recompute-method uniform",
                                             "--recompute-num-layers 1")})
    """Activation recomputation: none, selective (Megatron's: the attention core), full (whole layer), modules (MoE
    models: the norms, MLA up-projections and expert activations, DeepSeek-V3 §3.3; Megatron-Core
    --recompute-modules) or op (torchtitan's per-op selective checkpointing, ``selective_ac_option = "op"``: every
    other matmul's output and the attention output are kept, everything else recomputed; dense models)."""
    zero: int = knob(0, choices=(0, 1, 2, 3), axis=True, fix_help="", label=lambda v: f"z{v}" if v else "",
                     help="Optimizer sharding: 1 = Megatron distributed optimizer, 2 = +grads, 3 = +weights.",
                     megatron={1: ("--use-distributed-optimizer",)})
    """Optimizer-state sharding over dp: 0 none, 1 Megatron's distributed optimizer, 2 also gradients, 3 also weights."""
    overlap_grad_reduce: bool = knob(True, choices=_BOOL, axis=True, megatron={True: ("--overlap-grad-reduce",)})
    """Reduce gradient buckets during the backward pass instead of after it."""
    overlap_param_gather: bool = knob(True, choices=_BOOL, axis=True, megatron={True: ("--overlap-param-gather",)},
                                      megatron_when=lambda s: s.zero >= 1)
    """Gather sharded parameters while the next step's forward runs (ZeRO ≥ 1)."""
    overlap_p2p_comm: bool = knob(True, choices=_BOOL,
                                  help="Overlap PP sends with compute (interleaved schedule only; 1F1B's are "
                                       "synchronous).",
                                  megatron={False: ("--no-overlap-p2p-communication",)},
                                  megatron_when=lambda s: s.schedule == "interleaved")
    """Run pipeline sends and receives beside compute (Megatron-Core ``overlap_p2p_comm``, interleaved schedule
    only); otherwise the sending stage's compute waits for each transfer (synchronous p2p)."""
    grad_reduce_in_fp32: bool = knob(True, choices=_BOOL, flag="--grad-reduce-in-fp32/--grad-reduce-in-16bit",
                                     help="Dtype of the DP gradient reduction.",
                                     megatron={True: ("--accumulate-allreduce-grads-in-fp32",)})
    """Reduce gradients across DP in fp32 (Megatron ``--accumulate-allreduce-grads-in-fp32``, forced for bf16);
    false: in the 16-bit training type (fp16 runs without that flag)."""
    gradient_accumulation_fusion: bool = knob(True, choices=_BOOL,
                                              help="Weight-gradient GEMMs accumulate in place (else a separate add "
                                                   "per micro-batch).",
                                              megatron={False: ("--no-gradient-accumulation-fusion",)})
    """The weight-gradient GEMMs accumulate straight into the gradient buffer (Megatron-LM's default;
    ``--no-gradient-accumulation-fusion``); false: each backward adds its weight gradients to it in a separate pass."""
    first_stage_layers: int = knob(0, unset_zero=True, help="Transformer layers on the first pipeline stage (0: an even split).",
                                   label=lambda v: "")
    """Layers on the first pipeline rank (Megatron-LM ``--decoder-first-pipeline-num-layers``; 0: even). When
    interleaved, its first model chunk takes the shortfall and its other chunks hold a middle chunk's layers."""
    last_stage_layers: int = knob(0, unset_zero=True, help="Transformer layers on the last pipeline stage (0: an even split).")
    """Layers on the last pipeline rank (Megatron-LM ``--decoder-last-pipeline-num-layers``; 0: even). When
    interleaved, its last model chunk takes the shortfall."""
    collective_policy: str = knob("nccl", choices=COLLECTIVE_POLICIES, axis=True,
                                  fix_help="Price the multi-dimension DP/CP/TP collectives with this policy.",
                                  help="Model of the DP/CP/TP collectives spanning network dimensions: nccl (bottleneck-tier ring/tree), "
                                       "baseline or themis (chunked per-dimension schedules, Rashidi et al. 2022).",
                                  label=lambda v: "" if v == "nccl" else v)
    """How the simulator prices the DP·CP gradient reduction and parameter gathers, and the TP collectives, of groups
    spanning network dimensions (NVLink domains, or a cluster's explicit ``[[dimensions]]``):
    ``nccl`` (autoplan/hardware/network.py), or a chunked schedule over the group's dimensions in ascending order
    (``baseline``) or Themis's load-balancing order (``themis``); not a Megatron-LM argument."""
    precision: str = knob("bf16", choices=PRECISIONS, axis=True,
                          fix_help="Train the layers' GEMMs in this precision (the default space: bf16 only).",
                          help="GEMM precision: bf16, fp8 (tensor-wise delayed scaling), fp8-current (tensor-wise current "
                               "scaling), fp8-blockwise (1x128/128x128, DeepSeek-V3) or mxfp8 (Blackwell).",
                          label=lambda v: "" if v == "bf16" else v,
                          megatron={"fp8": ("--fp8-format hybrid", "--fp8-recipe delayed"),
                                    "fp8-current": ("--fp8-format hybrid", "--fp8-recipe tensorwise"),
                                    "fp8-blockwise": ("--fp8-format e4m3", "--fp8-recipe blockwise"),
                                    "mxfp8": ("--fp8-format e4m3", "--fp8-recipe mxfp8")})
    """The transformer layers' GEMMs in BF16, or in FP8 through Transformer Engine (Megatron-LM ``--fp8-format``,
    ``--fp8-recipe``): tensor-wise delayed scaling (E4M3 forward, E5M2 gradients; the scales from past amaxes,
    all-reduced once per chunk pass: ``families/transformer/fp8_scaling.py``), tensor-wise current scaling (each
    tensor's scale from its own amax: TE ``Float8CurrentScaling``, Megatron ``tensorwise``), 1x128 activation and
    128x128 weight blocks (DeepSeek-V3 §3.3, E4M3 throughout) or MXFP8 (32-element blocks, Blackwell tensor cores)."""
    optimizer_moments: str = knob("fp32", quiet=True, choices=OPTIMIZER_MOMENTS, axis=True,
                                  fix_help="Keep Adam's moments in this type (the spaces: fp32).",
                                  help="Dtype of Adam's first and second moments: fp32, or bf16 (DeepSeek-V3 §3.3.4; "
                                       "Megatron-LM's precision-aware optimizer).",
                                  label=lambda v: "" if v == "fp32" else "adam-bf16",
                                  megatron={"bf16": ("--use-precision-aware-optimizer", "--exp-avg-dtype bf16",
                                                     "--exp-avg-sq-dtype bf16")})
    """The type of AdamW's first and second moments: fp32, or bf16 (DeepSeek-V3 report §3.3.4, "Low-Precision
    Optimizer States"; Megatron-LM ``--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype
    bf16``). The master weights and gradients stay fp32; only the optimizer state's bytes change."""

    def __post_init__(self) -> None:
        cls = type(self)
        for name in cls.COUNTS:
            value = getattr(self, name)
            low = 0 if name in cls.UNSET_ZERO else 1
            if type(value) is not int or not low <= value <= MAX_SIZE:      # type(True) is bool, not int
                if type(value) is int and value > MAX_SIZE:
                    raise SpecError(f"{name.replace('_', '-')} {value} is larger than {MAX_SIZE:,} (a typo?)")
                kind = "a non-negative" if low == 0 else "a positive"
                raise SpecError(f"{name.replace('_', '-')} must be {kind} integer, got {value!r}")
        for name in cls.BOOLS:
            if type(getattr(self, name)) is not bool:
                raise SpecError(_choice_error(name, getattr(self, name), _BOOL))
        for name, allowed in cls.CHOICES:
            value = getattr(self, name)
            try:
                ok = (type(value), value) in allowed          # by type too: TOML's 1 is not true
            except TypeError:                                 # unhashable (a list from a file)
                ok = False
            if not ok:
                raise SpecError(_choice_error(name, value, cls.knob_of(name).choices))

    @property
    def gpus(self) -> int:
        """GPUs the plan occupies: the product of its parallel degrees (dp·tp·pp·cp, times a family's own, e.g.
        a CNN's spatial·channel·filter)."""
        fields, gpus = self.__dict__, 1
        for name in type(self).DEGREES:          # a loop, not math.prod of getattr: a space checks 40,000 plans
            gpus *= fields[name]
        return gpus

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step (gradient-accumulation steps)."""
        return max(1, self.global_batch // (self.dp * self.micro_batch))

    @property
    def synchronous_p2p(self) -> bool:
        """Pipeline transfers block the sender's compute: Megatron-Core overlaps them only when interleaved."""
        # zbv, dualpipev: PyTorch's pipelining runtime posts its sends and receives asynchronously
        # (torch.distributed.pipelining _PipelineScheduleRuntime); zb-h1 keeps the 1F1B transfers it derives from
        # (sail-sg's Megatron fork)
        return self.pp > 1 and not (self.overlap_p2p_comm and self.schedule in ("interleaved", "zbv", *FUSED_PAIRS))

    @property
    def chunks(self) -> int:
        """Model chunks per pipeline rank (virtual stages when interleaved, 2 for a V-shape schedule and for
        DualPipe's two directions, else 1)."""
        if self.schedule in V_SHAPE or self.schedule == BIDIRECTIONAL:
            return 2
        return self.virtual_stages if self.schedule == "interleaved" else 1

    @property
    def uneven(self) -> bool:
        """The first or last pipeline stage holds its own layer count (Megatron-LM's uneven pipeline split)."""
        return bool(self.first_stage_layers or self.last_stage_layers)

    def to_dict(self) -> dict:
        """Plain fields, for JSON and trial parameters (counts where 0 means unset only when set, and quiet knobs
        only away from their defaults, so that plans read as before those knobs existed)."""
        cls = type(self)
        out = {}
        for f in cls.KNOBS:
            value = getattr(self, f.name)
            if (f.name in cls.UNSET_ZERO and not value) or (f.name in cls.QUIET and value == f.default):
                continue
            out[f.name] = value
        return out

    def short(self) -> str:
        """A compact one-line label, e.g. ``tp8 pp8 dp16 mb1 1f1b sp sel z1``: the degrees, then each field's
        Knob label in field order (the schedule shows its virtual stages when interleaved)."""
        cached = self.__dict__.get("_short")        # leaderboards sort by it after every batch
        if cached is None:
            cached = self._short()
            object.__setattr__(self, "_short", cached)
        return cached

    def _short(self) -> str:
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"] + ([f"cp{self.cp}"] if self.cp > 1 else [])
        for name, label in type(self).LABELS:
            if name == "schedule":
                parts.append(f"int{self.virtual_stages}" if self.schedule == "interleaved" else self.schedule)
            elif name == "first_stage_layers":
                ends = f"L{self.first_stage_layers or '-'}/{self.last_stage_layers or '-'}"
                parts.append(ends if self.uneven else "")
            else:
                parts.append(label(getattr(self, name)))
        return " ".join(p for p in parts if p)

    @classmethod
    def legend(cls) -> list[tuple[str, str]]:
        """(label part, meaning) of every part ``short()`` can show, from the knobs' labels and help texts."""
        out = [("tpN ppN dpN", "tensor-, pipeline- and data-parallel degrees"), ("cpN", "context-parallel degree")]
        for name, label in cls.LABELS:
            knob = cls.KNOB_OF[name]
            what = knob.help.split(" [default")[0].rstrip(".") or name.replace("_", " ")
            if name == "schedule":
                out.append(("intV", "interleaved 1F1B schedule, V model chunks per pipeline rank"))
                out += [(v, f"pipeline schedule {v}") for v in knob.choices if v != "interleaved"]
            elif name == "first_stage_layers":
                out.append(("LF/L", "uneven pipeline: F layers on the first stage, L on the last (-: an even share)"))
            elif not knob.choices:
                shown = label(2)                    # a count: its label for 2, the number as N
                if shown:
                    out.append((shown[:-1] + "N", what))
            else:
                for value in knob.choices:
                    shown = label(value)
                    if shown:
                        out.append((shown, what if isinstance(value, bool) else
                                    f"{name.replace('_', ' ')} {value} ({what.split(':')[0]})"))
        return out

    @classmethod
    def knob_of(cls, name: str) -> Knob:
        """The Knob of field ``name``."""
        return cls.KNOB_OF[name]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every field's default value."""
        return {f.name: f.default for f in cls.KNOBS}

    def values(self) -> dict[str, Any]:
        """Every field's value, in field order (without what a plan keeps of its hash and label)."""
        out = self.__dict__.copy()      # the fields first, then what was cached (a copy, then two pops: 3x faster)
        for k in _CACHED:
            out.pop(k, None)
        return out

    @classmethod
    def checked(cls, values: dict[str, Any]) -> Self:
        """The plan of ``values`` (every field, in field order), each already checked by this class's constructor
        (a search space's values, checked once each): a space's enumeration builds tens of thousands of plans,
        and the checks took two thirds of its time."""
        plan = object.__new__(cls)
        plan.__dict__.update(values)
        return plan


def compose(parts: Sequence[type], name: str = "Strategy", module: str = __name__) -> type:
    """One frozen, keyword-only dataclass of ``parts`` (``Plan`` first), inheriting their properties.

    Fields keep each part's declaration order; a knob with ``Knob.after`` is placed after that knob, and the
    knobs after it follow it. Class attributes give the machinery its tables: ``KNOBS`` (the fields in order),
    ``AXES`` (search axes), ``DEGREES``, ``LABELS`` and the validation sets."""
    order: list[tuple[str, Any, Field]] = []
    for part in parts:
        cursor: int | None = None
        for knob_name, annotation, f in part_knobs(part):
            anchor = f.metadata["knob"].after
            names = [n for n, _, _ in order]
            if knob_name in names:
                raise ValueError(f"plan knob {knob_name!r} of {part.__name__} is declared twice")
            if anchor:
                if anchor not in names:
                    raise ValueError(f"plan knob {knob_name!r} of {part.__name__} follows {anchor!r}, which no "
                                     "earlier part declares")
                cursor = names.index(anchor) + 1
            else:
                cursor = len(order) if cursor is None else cursor + 1
            order.insert(cursor, (knob_name, annotation, field(default=f.default, metadata=f.metadata)))
    cls = make_dataclass(name, order, bases=tuple(parts), frozen=True, kw_only=True,
                         namespace={"__module__": module, "__doc__": parts[0].__doc__})
    cls.__module__ = module
    cache_hash(cls)
    knobs = fields(cls)
    meta = {f.name: f.metadata["knob"] for f in knobs}
    cls.KNOBS = knobs
    cls.KNOB_OF = meta
    cls.AXES = tuple(n for n, k in meta.items() if k.axis)
    cls.DEGREES = tuple(n for n, k in meta.items() if k.degree)
    cls.UNSET_ZERO = tuple(n for n, k in meta.items() if k.unset_zero)
    cls.QUIET = tuple(n for n, k in meta.items() if k.quiet)
    cls.COUNTS = tuple(n for n, k in meta.items() if not k.choices)
    cls.BOOLS = tuple(n for n, k in meta.items() if k.choices == _BOOL)
    cls.CHOICES = tuple((n, frozenset((type(c), c) for c in k.choices)) for n, k in meta.items()
                        if k.choices and n not in cls.BOOLS)
    cls.LABELS = tuple((n, k.label) for n, k in meta.items() if k.label is not None or n == "schedule")
    return cls


def _choice_error(name: str, value: object, choices: tuple) -> str:
    if name == "zero":
        return f"zero stage must be 0, 1, 2 or 3, got {value!r}"
    if all(type(c) is bool for c in choices):
        return f"{name.replace('_', '-')} must be true or false, got {value!r}"
    return f"{name} {value!r} is not one of {', '.join(map(str, choices))}"


def data_parallel(gpus: int, tp: int, pp: int, cp: int = 1) -> int:
    """Data-parallel replicas of a plan with these model-parallel degrees on ``gpus`` GPUs (dp·tp·pp·cp = gpus)."""
    return gpus // (tp * pp * cp)
