"""Strategy: one parallel plan, and the rules that make a plan valid for a model on a cluster."""

from __future__ import annotations

from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any, Callable

from autoplan.errors import SpecError
from autoplan.specs.layout import (BIDIRECTIONAL, V_SHAPE, balanced_layout, balanced_v_layout, layout_chunks,
                                   uneven_violations)
from autoplan.specs.model import MAX_SIZE, ModelSpec

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "dualpipev", "dualpipe")
SPLIT_BACKWARD = ("zb-h1", "zbv", "dualpipev", "dualpipe")
FUSED_PAIRS = ("dualpipev", "dualpipe")
"""Schedules that run a forward of one chunk fused with the backward of the other (DeepSeek-V3 §3.2.1)."""
"""Zero-bubble schedules: each backward runs as B (input gradients) then W (weight gradients), Qi et al. 2024
(arXiv 2401.10241); Megatron-Core has none of them (reference implementations: sail-sg/zero-bubble-pipeline-
parallelism, PyTorch ``torch.distributed.pipelining`` ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble and
ScheduleDualPipeV; DualPipe and DualPipeV from deepseek-ai/DualPipe)."""
RECOMPUTE = ("none", "selective", "full", "modules")
COLLECTIVE_POLICIES = ("nccl", "baseline", "themis")
EMBEDDING_SHARDINGS = ("auto", "table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel")
"""How a DLRM's embedding tables are sharded: the planner's per-table choice, or one kind for every table."""
_SHARDING_LABELS = {"auto": "", "table_wise": "TW", "row_wise": "RW", "column_wise": "CW", "table_row_wise": "TWRW",
                    "data_parallel": "DPemb"}
PRECISIONS = ("bf16", "fp8", "fp8-blockwise", "mxfp8")
CP_COMMS = ("p2p", "a2a", "a2a+p2p")
OPTIMIZER_MOMENTS = ("fp32", "bf16")
RANK_ORDER = ("tp", "cp", "dp", "pp")
"""Megatron's rank order, fastest-varying first: ranks of a TP group are consecutive, PP groups are farthest apart."""


@dataclass(frozen=True, kw_only=True)
class Knob:
    """What the rest of autoplan derives from one Strategy field: its command-line flag, its place in search
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
    megatron_when: Callable[["Strategy"], bool] | None = None
    """Only then do the Megatron-LM arguments apply (e.g. only with the distributed optimizer)."""


def knob(default: Any, **meta: Any) -> Any:
    """A Strategy field with its Knob metadata."""
    return field(default=default, metadata={"knob": Knob(**meta)})


_BOOL = (False, True)


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """A parallel plan in Megatron-LM's vocabulary. Every field carries a Knob: adding a field here gives it a
    command-line flag, a search axis (if ``axis``), a label and Megatron arguments without touching the CLI."""

    dp: int = knob(1, help="Data-parallel degree [default: gpus / (tp·pp·cp)].")
    """Data-parallel replicas."""
    tp: int = knob(1, help="Tensor-parallel degree.", axis=True, fix_help="Fix tensor parallelism.")
    """Tensor-parallel degree (Megatron column/row-parallel linear layers)."""
    pp: int = knob(1, help="Pipeline stages.", axis=True, fix_help="Fix pipeline stages.")
    """Pipeline stages."""
    cp: int = knob(1, help="Context-parallel degree.", axis=True, fix_help="Fix context parallelism.")
    """Context-parallel degree (sequence split across GPUs, ring attention)."""
    spatial: int = knob(1, help="Spatial (domain) parallel degree: each GPU holds a slab of every sample (CNNs).",
                        axis=True, fix_help="Fix spatial parallelism (CNNs).", label=lambda v: f"sd{v}" if v > 1 else "")
    """Spatial parallelism (CNNs): every sample's height (depth in 3D) split across GPUs, halos exchanged."""
    channel: int = knob(1, help="Channel parallel degree: input channels of each layer split across GPUs (CNNs).",
                        axis=True, fix_help="Fix channel parallelism (CNNs).", label=lambda v: f"ch{v}" if v > 1 else "")
    """Channel parallelism (CNNs): each layer's input channels (and weights) split across GPUs."""
    filter: int = knob(1, help="Filter parallel degree: output channels of each layer split across GPUs (CNNs).",
                       axis=True, fix_help="Fix filter parallelism (CNNs).", label=lambda v: f"fl{v}" if v > 1 else "")
    """Filter parallelism (CNNs): each layer's filters (output channels) split across GPUs."""
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
    sequence_parallel: bool = knob(False, choices=_BOOL, axis=True, fix_help="", label=lambda v: "sp" if v else "",
                                   megatron={True: ("--sequence-parallel",)})
    """Shard norms and dropout along the sequence across the TP group (Korthikanti et al. 2022)."""
    recompute: str = knob("none", choices=RECOMPUTE, help="Activation recomputation.", axis=True, fix_help="",
                          label=lambda v: {"none": "", "selective": "sel", "full": "full", "modules": "rmod"}[v],
                          megatron={"selective": ("--recompute-granularity selective",),
                                    "modules": ("--recompute-granularity selective",
                                                "--recompute-modules layernorm mla_up_proj moe_act"),
                                    "full": ("--recompute-granularity full", "--recompute-method uniform",
                                             "--recompute-num-layers 1")})
    """Activation recomputation: none, selective (attention core), full (whole layer) or modules (MoE models: the
    norms, MLA up-projections and expert activations, DeepSeek-V3 §3.3; Megatron-Core --recompute-modules)."""
    zero: int = knob(0, choices=(0, 1, 2, 3), axis=True, fix_help="", label=lambda v: f"z{v}" if v else "",
                     help="Optimizer sharding: 1 = Megatron distributed optimizer, 2 = +grads, 3 = +weights.",
                     megatron={1: ("--use-distributed-optimizer",)})
    """Optimizer-state sharding over dp: 0 none, 1 Megatron's distributed optimizer, 2 also gradients, 3 also weights."""
    overlap_grad_reduce: bool = knob(True, choices=_BOOL, axis=True, megatron={True: ("--overlap-grad-reduce",)})
    """Reduce gradient buckets during the backward pass instead of after it."""
    overlap_param_gather: bool = knob(True, choices=_BOOL, axis=True, megatron={True: ("--overlap-param-gather",)},
                                      megatron_when=lambda s: s.zero == 1)
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
    zero3_per_tensor: bool = knob(False, choices=_BOOL,
                                  help="ZeRO-3 as DeepSpeed of 2021: one blocking list all-gather / reduce-scatter per "
                                       "weight tensor (else one per layer, prefetched).")
    """ZeRO-3 communicates each weight tensor on its own through PyTorch's list collectives, gathers block the
    compute, and recomputed tensors are gathered again before their backward (DeepSpeed 0.3-0.4 stage 3,
    ``autoplan/cost/zero3_tensors.py``); false: one gather per layer prefetched a layer ahead (FSDP)."""
    first_stage_layers: int = knob(0, help="Transformer layers on the first pipeline stage (0: an even split).",
                                   label=lambda v: "")
    """Layers on the first pipeline rank (Megatron-LM ``--decoder-first-pipeline-num-layers``; 0: even). When
    interleaved, its first model chunk takes the shortfall and its other chunks hold a middle chunk's layers."""
    last_stage_layers: int = knob(0, help="Transformer layers on the last pipeline stage (0: an even split).")
    """Layers on the last pipeline rank (Megatron-LM ``--decoder-last-pipeline-num-layers``; 0: even). When
    interleaved, its last model chunk takes the shortfall."""
    collective_policy: str = knob("nccl", choices=COLLECTIVE_POLICIES, axis=True,
                                  fix_help="Price the multi-dimension DP/CP/TP collectives with this policy.",
                                  help="Model of the DP/CP/TP collectives spanning network dimensions: nccl (bottleneck-tier ring/tree), "
                                       "baseline or themis (chunked per-dimension schedules, Rashidi et al. 2022).",
                                  label=lambda v: "" if v == "nccl" else v)
    """How the simulator prices the DP·CP gradient reduction and parameter gathers, and the TP collectives, of groups
    spanning network dimensions (NVLink domains, or a cluster's explicit ``[[dimensions]]``):
    ``nccl`` (autoplan/cost/network.py), or a chunked schedule over the group's dimensions in ascending order
    (``baseline``) or Themis's load-balancing order (``themis``); not a Megatron-LM argument."""
    precision: str = knob("bf16", choices=PRECISIONS, axis=True,
                          fix_help="Train the layers' GEMMs in this precision (the default space: bf16 only).",
                          help="GEMM precision: bf16, fp8 (tensor-wise delayed scaling), fp8-blockwise (1x128/128x128, "
                               "DeepSeek-V3) or mxfp8 (Blackwell).",
                          label=lambda v: "" if v == "bf16" else v,
                          megatron={"fp8": ("--fp8-format hybrid", "--fp8-recipe delayed"),
                                    "fp8-blockwise": ("--fp8-format e4m3", "--fp8-recipe blockwise"),
                                    "mxfp8": ("--fp8-format e4m3", "--fp8-recipe mxfp8")})
    """The transformer layers' GEMMs in BF16, or in FP8 through Transformer Engine (Megatron-LM ``--fp8-format``,
    ``--fp8-recipe``): tensor-wise delayed scaling (E4M3 forward, E5M2 gradients), 1x128 activation and 128x128
    weight blocks (DeepSeek-V3 §3.3, E4M3 throughout) or MXFP8 (32-element blocks, Blackwell tensor cores)."""
    fp8_param_gather: bool = knob(False, choices=_BOOL, axis=True, label=lambda v: "fp8pg" if v else "",
                                  help="Keep the weights in FP8 and all-gather them in FP8 (needs an FP8 precision).",
                                  megatron={True: ("--fp8-param-gather",)})
    """The model's weights are FP8 tensors (no BF16 copy) and the distributed optimizer all-gathers them in FP8
    (Megatron-LM ``--fp8-param-gather``)."""
    optimizer_moments: str = knob("fp32", choices=OPTIMIZER_MOMENTS, axis=True,
                                  fix_help="Keep Adam's moments in this type (the spaces: fp32).",
                                  help="Dtype of Adam's first and second moments: fp32, or bf16 (DeepSeek-V3 §3.3.4; "
                                       "Megatron-LM's precision-aware optimizer).",
                                  label=lambda v: "" if v == "fp32" else "adam-bf16",
                                  megatron={"bf16": ("--use-precision-aware-optimizer", "--exp-avg-dtype bf16",
                                                     "--exp-avg-sq-dtype bf16")})
    """The type of AdamW's first and second moments: fp32, or bf16 (DeepSeek-V3 report §3.3.4, "Low-Precision
    Optimizer States"; Megatron-LM ``--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype
    bf16``). The master weights and gradients stay fp32; only the optimizer state's bytes change."""
    fp8_activation_store: bool = knob(False, choices=_BOOL, axis=True,
                                      fix_help="Keep the MLP activation's input in FP8 (the spaces: BF16).",
                                      label=lambda v: "a8" if v else "",
                                      help="Keep the MLP activation's (SwiGLU's) input for the backward in FP8.",
                                      megatron={True: ("--activation-func-fp8-input-store",)})
    """The MLP activation's input, kept for its backward, is stored in FP8 (1 byte a value) and cast back to BF16
    before the backward (DeepSeek-V3 §3.3.3, "Inputs of the SwiGLU operator in MoE"; Megatron-LM
    ``--activation-func-fp8-input-store``, fused_bias_swiglu.py): the dense MLP's, the experts' and the shared
    experts' activation inputs; each cast is one more pass over them."""
    tp_comm_overlap: bool = knob(False, choices=_BOOL, axis=True, label=lambda v: "tpo" if v else "",
                                 help="Overlap the TP all-gathers and reduce-scatters with the GEMMs they feed "
                                      "(Transformer Engine userbuffers; needs sequence parallelism).",
                                 megatron={True: ("--tp-comm-overlap",)})
    """Split each sequence-parallel all-gather / reduce-scatter and the GEMM it feeds into chunks that pipeline
    (Wang et al. ASPLOS'23; Transformer Engine userbuffers, Megatron-LM ``--tp-comm-overlap``)."""
    cp_comm: str = knob("p2p", choices=CP_COMMS, axis=True, label=lambda v: "" if v == "p2p" else v,
                        help="Context-parallel exchange: p2p (ring), a2a (DeepSpeed-Ulysses) or a2a+p2p "
                             "(a2a inside the node, ring across).",
                        megatron={"a2a": ("--cp-comm-type a2a",), "a2a+p2p": ("--cp-comm-type a2a+p2p",)},
                        megatron_when=lambda s: s.cp > 1)
    """How CP ranks share keys and values: a ring of K/V blocks (``p2p``, Liu et al. 2023), all-to-alls that
    turn the sequence split into a head split (``a2a``, DeepSpeed-Ulysses, Jacobs et al. 2023), or both, a2a
    inside each node and a ring across (``a2a+p2p``, Megatron-Core ``--cp-comm-type``)."""

    ep: int = knob(1, help="Expert-parallel degree (MoE): each rank holds experts / ep experts; "
                           "ep·etp divides tp·cp·dp (Megatron-Core).", axis=True,
                   fix_help="Fix expert parallelism (MoE).", label=lambda v: f"ep{v}" if v > 1 else "")
    """Expert-parallel degree: the routed experts split over ``ep`` ranks (Megatron-Core
    ``--expert-model-parallel-size``; its expert ranks are laid out etp, ep, edp fastest first within a stage)."""
    etp: int = knob(1, help="Expert tensor-parallel degree (MoE): each expert's FFN split over etp ranks.", axis=True,
                    fix_help="Fix expert tensor parallelism (MoE).", label=lambda v: f"etp{v}" if v > 1 else "")
    """Expert tensor-parallel degree (Megatron-Core ``--expert-tensor-parallel-size``); the expert-data-parallel
    degree is edp = tp·cp·dp / (etp·ep)."""
    ep_overlap: bool = knob(False, choices=_BOOL, axis=True, label=lambda v: "epo" if v else "",
                            help="Hide the EP all-to-alls behind another micro-batch's compute (MoE, ep > 1).",
                            megatron={True: ("--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute")})
    """Overlap the expert-parallel all-to-alls with compute (Megatron-Core ``--overlap-moe-expert-parallel-comm``,
    batch-level overlap of one micro-batch's forward with another's backward; DeepSeek-V3's DualPipe)."""
    sharding: str = knob("auto", choices=EMBEDDING_SHARDINGS, axis=True,
                         fix_help="Fix the embedding sharding (DLRM models).",
                         help="DLRM embedding sharding: auto (per-table search) or one kind for every table.",
                         label=lambda v: _SHARDING_LABELS[v])
    """Embedding-table sharding of a recommendation model (family ``dlrm``): ``auto`` lets the planner choose each
    table's sharding (greedy plus local search); a kind pins every table not pinned in the model. Dense
    transformers have no embedding tables to shard and take only ``auto``."""

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            low = 0 if name in _ZERO_OK else 1
            if type(value) is not int or not low <= value <= MAX_SIZE:      # type(True) is bool, not int
                if type(value) is int and value > MAX_SIZE:
                    raise SpecError(f"{name.replace('_', '-')} {value} is larger than {MAX_SIZE:,} (a typo?)")
                kind = "a non-negative" if low == 0 else "a positive"
                raise SpecError(f"{name.replace('_', '-')} must be {kind} integer, got {value!r}")
        for name in _BOOLS:
            if type(getattr(self, name)) is not bool:
                raise SpecError(_choice_error(name, getattr(self, name), _BOOL))
        for name, allowed in _CHOICES:
            value = getattr(self, name)
            try:
                ok = (type(value), value) in allowed          # by type too: TOML's 1 is not true
            except TypeError:                                 # unhashable (a list from a file)
                ok = False
            if not ok:
                raise SpecError(_choice_error(name, value, knob_of(name).choices))

    @property
    def gpus(self) -> int:
        """GPUs the plan occupies (dp·tp·pp·cp, times the CNN degrees spatial·channel·filter)."""
        return self.dp * self.tp * self.pp * self.cp * self.spatial * self.channel * self.filter

    @property
    def edp(self) -> int:
        """Expert-data-parallel degree: replicas of each expert shard, tp·cp·dp / (etp·ep) (Megatron-Core)."""
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.etp))

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
        """Plain fields, for JSON and trial parameters (the uneven-stage layers only when set and the expert and CNN
        degrees only above 1, so that even dense plans read as before they existed)."""
        return {k: v for k, v in asdict(self).items()
                if (v or k not in _ZERO_OK) and not (k in _HIDDEN and v == _HIDDEN[k])}

    def short(self) -> str:
        """A compact one-line label, e.g. ``tp8 pp8 dp16 mb1 1f1b sp sel z1``: the degrees, then each field's
        Knob label in field order (the schedule shows its virtual stages when interleaved)."""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"] + ([f"cp{self.cp}"] if self.cp > 1 else [])
        for name, label in _LABELS:
            if name == "schedule":
                parts.append(f"int{self.virtual_stages}" if self.schedule == "interleaved" else self.schedule)
            elif name == "first_stage_layers":
                ends = f"L{self.first_stage_layers or '-'}/{self.last_stage_layers or '-'}"
                parts.append(ends if self.uneven else "")
            else:
                parts.append(label(getattr(self, name)))
        return " ".join(p for p in parts if p)


KNOBS: tuple[Field, ...] = fields(Strategy)
"""Strategy's fields in order, each with ``metadata["knob"]``, the one definition of the plan's knobs."""
_COUNTS = tuple(f.name for f in KNOBS if not f.metadata["knob"].choices)
_ZERO_OK = ("first_stage_layers", "last_stage_layers")
"""Counts where 0 means "not set"."""
_CNN_AXES = ("spatial", "channel", "filter")
"""CNN degrees (1 for transformers)."""
_HIDDEN = {"ep": 1, "etp": 1, "ep_overlap": False, "optimizer_moments": "fp32", "fp8_activation_store": False,
           **{k: 1 for k in _CNN_AXES}}
"""Expert, CNN and numerics knobs left out of ``to_dict`` at their defaults, so that other plans read as before
they existed."""
_BOOLS = tuple(f.name for f in KNOBS if f.metadata["knob"].choices == _BOOL)
_CHOICES = tuple((f.name, frozenset((type(c), c) for c in f.metadata["knob"].choices))
                 for f in KNOBS if f.metadata["knob"].choices and f.name not in _BOOLS)
_LABELS = tuple((f.name, f.metadata["knob"].label) for f in KNOBS
                if f.metadata["knob"].label is not None or f.name == "schedule")
AXES: tuple[str, ...] = tuple(f.name for f in KNOBS if f.metadata["knob"].axis)
"""The search-space axes, in field order."""


def knob_of(name: str) -> Knob:
    """The Knob of Strategy field ``name``."""
    return next(f.metadata["knob"] for f in KNOBS if f.name == name)


def _choice_error(name: str, value: object, choices: tuple) -> str:
    if name == "zero":
        return f"zero stage must be 0, 1, 2 or 3, got {value!r}"
    if all(type(c) is bool for c in choices):
        return f"{name.replace('_', '-')} must be true or false, got {value!r}"
    return f"{name} {value!r} is not one of {', '.join(map(str, choices))}"


def data_parallel(gpus: int, tp: int, pp: int, cp: int = 1) -> int:
    """Data-parallel replicas of a plan with these model-parallel degrees on ``gpus`` GPUs (dp·tp·pp·cp = gpus)."""
    return gpus // (tp * pp * cp)


def violations(model: ModelSpec, gpus: int, s: Strategy) -> list[str]:
    """Every reason ``s`` cannot run ``model`` on ``gpus`` GPUs, in words a person can act on; [] if valid."""
    out: list[str] = []
    if s.gpus != gpus:
        out.append(f"dp·tp·pp·cp = {s.dp}·{s.tp}·{s.pp}·{s.cp} = {s.gpus}, not the {gpus} GPUs of the cluster")
    out += [f"{k} parallelism is for CNNs; a transformer needs {k} 1, got {getattr(s, k)}"
            for k in _CNN_AXES if getattr(s, k) != 1]
    if model.heads % s.tp:
        out.append(f"attention heads {model.heads} are not divisible by tp {s.tp}")
    if model.kv_heads % s.tp and model.kv_heads != model.heads:
        out.append(f"kv heads {model.kv_heads} are not divisible by tp {s.tp}")
    if model.ffn_hidden % s.tp:
        out.append(f"ffn_hidden {model.ffn_hidden} is not divisible by tp {s.tp}")
    if s.uneven:
        out += uneven_violations(model.layers, s)
    elif model.layers % (s.pp * layout_chunks(s)):
        first, last = (balanced_v_layout(model.layers, s.pp), 0) if s.schedule in V_SHAPE else balanced_layout(
            model.layers, s.pp, output_heavy=bool(model.mtp_layers))
        hint = (f" (uneven: --first-stage-layers {first} --last-stage-layers {last})"
                if first and last else f" (uneven: --last-stage-layers {last})" if last
                else f" (uneven: --first-stage-layers {first})" if first else "")
        out.append(f"layers {model.layers} are not divisible by pp·virtual_stages = {s.pp}·{layout_chunks(s)}{hint}")
    if s.global_batch % (s.dp * s.micro_batch):
        out.append(f"global batch {s.global_batch} is not divisible by dp·micro_batch = {s.dp}·{s.micro_batch}")
    if s.cp > 1 and model.seq_len % (2 * s.cp):
        out.append(f"sequence length {model.seq_len} is not divisible by 2·cp = {2 * s.cp} (load-balanced ring attention)")
    if s.sequence_parallel and s.tp == 1:
        out.append("sequence parallelism needs tp > 1")
    if s.schedule == "interleaved":
        if s.pp == 1:
            out.append("the interleaved schedule needs pp > 1")
        if s.virtual_stages < 2:
            out.append("the interleaved schedule needs virtual_stages ≥ 2")
        if s.micro_batches % s.pp:
            out.append(f"the interleaved schedule needs micro-batches ({s.micro_batches}) divisible by pp ({s.pp})")
    elif s.schedule in V_SHAPE or s.schedule == BIDIRECTIONAL:
        out += _v_shape_violations(s)
    elif s.virtual_stages != 1:
        out.append(f"virtual_stages {s.virtual_stages} needs the interleaved schedule, not {s.schedule}")
    if s.sharding != "auto":
        out.append(f"embedding sharding {s.sharding} applies to DLRM models only")
    if s.ep_overlap and s.ep == 1:
        out.append("ep_overlap needs expert parallelism (ep > 1)")
    if (s.ep > 1 or s.etp > 1) and not model.moe:
        out.append(f"ep {s.ep} / etp {s.etp} need a mixture-of-experts model; {model.name} has no experts")
    if s.schedule in SPLIT_BACKWARD and s.pp == 1:
        out.append("a zero-bubble schedule (split backward) needs pp > 1")
    if s.zero >= 3 and s.pp > 1:
        # ZeRO-2 with pp > 1 is Llama 3's FSDP (arXiv 2407.21783 §3.3.1: optimizer states and gradients sharded,
        # weights kept after the forward), its gradients reduce-scattered after every micro-batch's backward;
        # ZeRO-3 would gather the weights again for every micro-batch (not modelled with pp > 1)
        out.append(f"ZeRO stage {s.zero} shards weights across micro-batches and cannot run with pp > 1 (DeepSpeed)")
    if model.mtp_layers and not model.moe:
        out.append(f"multi-token prediction (mtp_layers {model.mtp_layers}) is modelled for MoE models only")
    if s.recompute == "modules" and not model.moe:
        out.append("recompute modules (norms, MLA up-projections, expert activations) is modelled for MoE models "
                   "only; use selective or full")
    return out + feature_violations(model, s)


def feature_violations(model: ModelSpec, s: Strategy) -> list[str]:
    """Reasons the plan's precision, TP overlap and CP exchange cannot run (the GPU's share: ``hardware_violations``)."""
    out = []
    if s.fp8_param_gather and s.precision == "bf16":
        out.append("fp8_param_gather needs an FP8 precision, not bf16")
    if s.tp_comm_overlap and not (s.sequence_parallel and s.tp > 1):
        # Megatron-LM arguments.py: --tp-comm-overlap requires --sequence-parallel (and TP > 1)
        out.append(f"tp_comm_overlap needs sequence parallelism and tp > 1 (tp {s.tp}, sequence_parallel "
                   f"{str(s.sequence_parallel).lower()})")
    if s.cp_comm == "a2a" and s.cp > 1 and model.heads % (s.cp * s.tp):
        # DeepSpeed-Ulysses (Jacobs et al. 2023 §3): the all-to-all hands each of cp ranks heads/(cp·tp) heads
        out.append(f"cp_comm a2a: attention heads {model.heads} are not divisible by cp·tp = {s.cp}·{s.tp}")
    return out



def _v_shape_violations(s: Strategy) -> list[str]:
    """A V-shape schedule places exactly two chunks per rank (Qi et al. 2024 §6); its uneven layouts are checked
    with the others (``layout.uneven_violations``)."""
    out = []
    if s.virtual_stages not in (1, 2):
        shape = "one stage of each direction" if s.schedule == BIDIRECTIONAL else "V shape"
        out.append(f"the {s.schedule} schedule places 2 model chunks per rank ({shape}), not virtual_stages "
                   f"{s.virtual_stages}")
    if s.schedule == "dualpipev" and s.micro_batches < 2 * s.pp:
        # PyTorch ScheduleDualPipeV: at least as many micro-batches as stages (2 per rank)
        out.append(f"the dualpipev schedule needs micro-batches ({s.micro_batches}) ≥ 2·pp ({2 * s.pp})")
    if s.schedule == BIDIRECTIONAL:
        # deepseek-ai/DualPipe dualpipe.py step(): num_ranks % 2 == 0, num_chunks % 2 == 0, num_chunks ≥ 2·num_ranks
        if s.pp % 2:
            out.append(f"the dualpipe schedule needs an even pp (half the ranks start each direction), got {s.pp}")
        if s.micro_batches % 2 or s.micro_batches < 2 * s.pp:
            out.append(f"the dualpipe schedule needs an even number of micro-batches ≥ 2·pp ({2 * s.pp}), got "
                       f"{s.micro_batches}")
    return out
