"""Strategy: one parallel plan, and the rules that make a plan valid for a model on a cluster."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from autoplan.errors import SpecError
from autoplan.specs.model import MAX_SIZE, ModelSpec

SCHEDULES = ("gpipe", "1f1b", "interleaved")
RECOMPUTE = ("none", "selective", "full")
RANK_ORDER = ("tp", "cp", "dp", "pp")
"""Megatron's rank order, fastest-varying first: ranks of a TP group are consecutive, PP groups are farthest apart."""


_COUNTS = ("dp", "tp", "pp", "cp", "micro_batch", "global_batch", "virtual_stages")
_FLAGS = ("sequence_parallel", "overlap_grad_reduce", "overlap_param_gather", "overlap_p2p_comm",
          "grad_reduce_in_fp32", "gradient_accumulation_fusion")


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """A parallel plan in Megatron-LM's vocabulary."""

    dp: int = 1
    """Data-parallel replicas."""
    tp: int = 1
    """Tensor-parallel degree (Megatron column/row-parallel linear layers)."""
    pp: int = 1
    """Pipeline stages."""
    cp: int = 1
    """Context-parallel degree (sequence split across GPUs, ring attention)."""
    micro_batch: int = 1
    """Sequences per micro-batch on one pipeline."""
    global_batch: int = 1
    """Sequences per optimizer step over all replicas."""
    schedule: str = "1f1b"
    """Pipeline schedule: gpipe, 1f1b (PipeDream-flush) or interleaved (Megatron virtual stages)."""
    virtual_stages: int = 1
    """Model chunks per pipeline rank for the interleaved schedule (1 otherwise)."""
    sequence_parallel: bool = False
    """Shard norms and dropout along the sequence across the TP group (Korthikanti et al. 2022)."""
    recompute: str = "none"
    """Activation recomputation: none, selective (attention core) or full (whole layer)."""
    zero: int = 0
    """Optimizer-state sharding over dp: 0 none, 1 Megatron's distributed optimizer, 2 also gradients, 3 also weights."""
    overlap_grad_reduce: bool = True
    """Reduce gradient buckets during the backward pass instead of after it."""
    overlap_param_gather: bool = True
    """Gather sharded parameters while the next step's forward runs (ZeRO ≥ 1)."""
    overlap_p2p_comm: bool = True
    """Run pipeline sends and receives beside compute (Megatron-Core ``overlap_p2p_comm``, interleaved schedule
    only); otherwise the sending stage's compute waits for each transfer (synchronous p2p)."""
    grad_reduce_in_fp32: bool = True
    """Reduce gradients across DP in fp32 (Megatron ``--accumulate-allreduce-grads-in-fp32``, forced for bf16);
    false: in the 16-bit training type (fp16 runs without that flag)."""
    gradient_accumulation_fusion: bool = True
    """The weight-gradient GEMMs accumulate straight into the gradient buffer (Megatron-LM's default;
    ``--no-gradient-accumulation-fusion``); false: each backward adds its weight gradients to it in a separate pass."""

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if type(value) is not int or not 0 < value <= MAX_SIZE:      # type(True) is bool, not int
                if type(value) is int and value > MAX_SIZE:
                    raise SpecError(f"{name.replace('_', '-')} {value} is larger than {MAX_SIZE:,} (a typo?)")
                raise SpecError(f"{name.replace('_', '-')} must be a positive integer, got {value!r}")
        for name in _FLAGS:
            if type(getattr(self, name)) is not bool:
                raise SpecError(f"{name.replace('_', '-')} must be true or false, got {getattr(self, name)!r}")
        if self.schedule not in SCHEDULES:
            raise SpecError(f"schedule {self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        if self.recompute not in RECOMPUTE:
            raise SpecError(f"recompute {self.recompute!r} is not one of {', '.join(RECOMPUTE)}")
        if type(self.zero) is not int or self.zero not in (0, 1, 2, 3):
            raise SpecError(f"zero stage must be 0, 1, 2 or 3, got {self.zero!r}")

    @property
    def gpus(self) -> int:
        """GPUs the plan occupies (dp·tp·pp·cp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step (gradient-accumulation steps)."""
        return max(1, self.global_batch // (self.dp * self.micro_batch))

    @property
    def synchronous_p2p(self) -> bool:
        """Pipeline transfers block the sender's compute: Megatron-Core overlaps them only when interleaved."""
        return self.pp > 1 and not (self.overlap_p2p_comm and self.schedule == "interleaved")

    @property
    def chunks(self) -> int:
        """Model chunks per pipeline rank (virtual stages when interleaved, else 1)."""
        return self.virtual_stages if self.schedule == "interleaved" else 1

    def to_dict(self) -> dict:
        """Plain fields, for JSON and trial parameters."""
        return asdict(self)

    def short(self) -> str:
        """A compact one-line label, e.g. ``tp8 pp8 dp16 mb1 1f1b sp sel z1``."""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        parts.append(f"mb{self.micro_batch}")
        parts.append(f"int{self.virtual_stages}" if self.schedule == "interleaved" else self.schedule)
        if self.sequence_parallel:
            parts.append("sp")
        if self.recompute != "none":
            parts.append({"selective": "sel", "full": "full"}[self.recompute])
        if self.zero:
            parts.append(f"z{self.zero}")
        return " ".join(parts)


def data_parallel(gpus: int, tp: int, pp: int, cp: int = 1) -> int:
    """Data-parallel replicas of a plan with these model-parallel degrees on ``gpus`` GPUs (dp·tp·pp·cp = gpus)."""
    return gpus // (tp * pp * cp)


def violations(model: ModelSpec, gpus: int, s: Strategy) -> list[str]:
    """Every reason ``s`` cannot run ``model`` on ``gpus`` GPUs, in words a person can act on; [] if valid."""
    out: list[str] = []
    if s.gpus != gpus:
        out.append(f"dp·tp·pp·cp = {s.dp}·{s.tp}·{s.pp}·{s.cp} = {s.gpus}, not the {gpus} GPUs of the cluster")
    if model.heads % s.tp:
        out.append(f"attention heads {model.heads} are not divisible by tp {s.tp}")
    if model.kv_heads % s.tp and model.kv_heads != model.heads:
        out.append(f"kv heads {model.kv_heads} are not divisible by tp {s.tp}")
    if model.ffn_hidden % s.tp:
        out.append(f"ffn_hidden {model.ffn_hidden} is not divisible by tp {s.tp}")
    if model.layers % (s.pp * s.chunks):
        out.append(f"layers {model.layers} are not divisible by pp·virtual_stages = {s.pp}·{s.chunks}")
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
    elif s.virtual_stages != 1:
        out.append(f"virtual_stages {s.virtual_stages} needs the interleaved schedule, not {s.schedule}")
    if s.zero >= 2 and s.pp > 1:
        out.append(f"ZeRO stage {s.zero} shards gradients across micro-batches and cannot run with pp > 1 (DeepSpeed)")
    return out
