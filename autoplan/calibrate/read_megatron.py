"""Megatron-LM and NeMo training logs: the printed arguments (Megatron-LM's ``---- arguments ----`` block, NeMo's
YAML config) give the model and the plan, the iteration lines give the step time."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from autoplan.calibrate.measurements import Step
from autoplan.calibrate.model import ModelSpec, SpecError, Strategy

ARGS_START = re.compile(r"^-+ arguments -+\s*$")
ARGS_END = re.compile(r"^-+ end of arguments -+\s*$")
_ARG = re.compile(r"^\s*(\w+) \.{2,}\s?(.*?)(?:\.{3,}\w+)?\s*$")          # Megatron-DeepSpeed appends '....default'
_ITER = re.compile(r"iteration\s+(\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*([0-9.]+)")
_PADDED = re.compile(r"padded vocab \(size: (\d+)\) with \d+ dummy tokens \(new size: (\d+)\)")
_NEMO_TIMING = re.compile(r"train_step_timing in s[=:]\s*([0-9.]+)")
_NEMO_KEY = re.compile(r"^\s*(\w+):\s*([^#\s][^#]*?)\s*$")
_PREFIX = re.compile(r"^(?:\[[^\]]*\]\s*)+")                                   # '[rank0]:' or '[2024-...]' prefixes


def looks_like(text: str) -> bool:
    """A Megatron-LM or NeMo training log."""
    return bool(re.search(r"elapsed time per iteration \(ms\)|train_step_timing in s", text))


def _value(text: str) -> object:
    t = text.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    if t in ("None", "null", ""):
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def arguments(lines: list[str], path: Path) -> tuple[dict[str, object], int]:
    """Megatron-LM's printed arguments and the line the block starts on; NeMo's ``key: value`` config lines
    (first occurrence of each key) when there is no such block."""
    out: dict[str, object] = {}
    for i, line in enumerate(lines):
        if ARGS_START.match(_PREFIX.sub("", line).strip()):
            for j in range(i + 1, len(lines)):
                body = _PREFIX.sub("", lines[j])
                if ARGS_END.match(body.strip()):
                    return out, i + 1
                m = _ARG.match(body)
                if m:
                    out.setdefault(m.group(1), _value(m.group(2)))
            raise SpecError(f"{path}:{i + 1}: the arguments block never ends (no 'end of arguments' line)")
    for line in lines:
        m = _NEMO_KEY.match(line)
        if m:
            out.setdefault(m.group(1), _value(m.group(2)))
    return out, 0


def _int(args: dict, key: str, where: str, default: int | None = None) -> int:
    v = args.get(key, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise SpecError(f"{where}: argument {key} must be a positive integer, got {v!r}")
    return v


def model_of(args: dict, lines: list[str], where: str) -> ModelSpec:
    """The transformer the arguments describe (Megatron-LM's argument names; NeMo uses the same)."""
    layers, hidden = _int(args, "num_layers", where), _int(args, "hidden_size", where)
    heads = _int(args, "num_attention_heads", where)
    seq = _int(args, "seq_length", where, args.get("encoder_seq_length") or args.get("max_position_embeddings"))
    vocab = args.get("padded_vocab_size") or args.get("vocab_size")
    for line in lines:
        m = _PADDED.search(line)
        if m:
            vocab = int(m.group(2))
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab <= 0:
        raise SpecError(f"{where}: no vocabulary size (padded_vocab_size, vocab_size or a 'padded vocab' line)")
    gqa = args.get("group_query_attention") or args.get("num_query_groups") not in (None, heads)
    kv = _int(args, "num_query_groups", where, heads) if gqa else heads
    gated = bool(args.get("swiglu")) or str(args.get("activation", "")).lower() in ("swiglu", "fast-swiglu")
    ffn = _int(args, "ffn_hidden_size", where, 4 * hidden)
    head_dim = args.get("kv_channels") if isinstance(args.get("kv_channels"), int) else 0
    norm = "rmsnorm" if "rms" in str(args.get("normalization", "")).lower() else "layernorm"
    rope = str(args.get("position_embedding_type", "")).lower() in ("rope", "yarn") or bool(args.get("use_rotary_position_embeddings"))
    dropout = float(args.get("hidden_dropout") if isinstance(args.get("hidden_dropout"), (int, float)) else 0.1) > 0
    return ModelSpec(name=f"megatron-{layers}x{hidden}", layers=layers, hidden=hidden, heads=heads, kv_heads=kv,
                     head_dim=head_dim or 0, ffn_hidden=ffn, vocab=vocab, seq_len=seq,
                     activation="swiglu" if gated else "gelu", position="rope" if rope else "learned", norm=norm,
                     bias=args.get("add_bias_linear", True) is not False,
                     tied_embeddings=not args.get("untie_embeddings_and_output_weights", False), dropout=dropout,
                     qk_norm=args.get("qk_layernorm") is True, source=where)


def plan_of(args: dict, model: ModelSpec, where: str) -> tuple[Strategy, int]:
    """The plan the arguments ran and its GPU count."""
    tp = _int(args, "tensor_model_parallel_size", where, 1)
    pp = _int(args, "pipeline_model_parallel_size", where, 1)
    cp = _int(args, "context_parallel_size", where, 1)
    dp = args.get("data_parallel_size")
    gpus = _int(args, "world_size", where, dp * tp * pp * cp if isinstance(dp, int) and dp > 0 else None)
    if gpus % (tp * pp * cp):
        raise SpecError(f"{where}: world_size {gpus} is not divisible by tp·pp·cp = {tp}·{pp}·{cp}")
    v = args.get("virtual_pipeline_model_parallel_size")
    per_chunk = args.get("num_layers_per_virtual_pipeline_stage")
    if not isinstance(v, int) and isinstance(per_chunk, int) and per_chunk > 0:
        v = model.layers // (pp * per_chunk)
    v = v if isinstance(v, int) and v > 1 else 1
    granularity = str(args.get("recompute_granularity") or "").lower()
    recompute = ("full" if granularity == "full" or args.get("checkpoint_activations") is True else
                 "selective" if granularity == "selective" else "none")
    kw: dict[str, object] = {}
    if args.get("DDP_impl") == "local":
        kw["overlap_grad_reduce"] = False            # Megatron's local DDP reduced after the backward (2021)
    for key in ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "gradient_accumulation_fusion"):
        if isinstance(args.get(key), bool):
            kw[key] = args[key]
    if isinstance(args.get("accumulate_allreduce_grads_in_fp32"), bool):
        kw["grad_reduce_in_fp32"] = args["accumulate_allreduce_grads_in_fp32"]
    fp8 = args.get("fp8") or args.get("fp8_format")
    plan = Strategy(dp=gpus // (tp * pp * cp), tp=tp, pp=pp, cp=cp,
                    micro_batch=_int(args, "micro_batch_size", where, 1),
                    global_batch=_int(args, "global_batch_size", where),
                    schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v,
                    sequence_parallel=bool(args.get("sequence_parallel")) and tp > 1, recompute=recompute,
                    zero=1 if args.get("use_distributed_optimizer") else 0,
                    precision="fp8" if fp8 not in (None, False, "None") else "bf16", **kw)
    return plan, gpus


def step_seconds(lines: list[str], path: Path) -> tuple[float, int, int]:
    """Median seconds per iteration after warm-up, the line of the first one used and how many were used."""
    found = []
    for no, line in enumerate(lines, 1):
        m = _ITER.search(line)
        if m:
            found.append((int(m.group(1)), float(m.group(2)) / 1e3, no))
            continue
        m = _NEMO_TIMING.search(line)
        if m:
            found.append((len(found) + 1, float(m.group(1)), no))
    if not found:
        raise SpecError(f"training log {str(path)!r}: no 'elapsed time per iteration (ms)' or 'train_step_timing' "
                        "line")
    # the first iterations build the CUDA graphs, caches and NCCL communicators: leave out the first three of six
    # or more (the first of two or more)
    skip = 3 if len(found) >= 6 else 1 if len(found) >= 2 else 0
    used = found[skip:]
    bad = [f for f in used if not f[1] > 0]
    if bad:
        raise SpecError(f"{path}:{bad[0][2]}: iteration time must be positive")
    return statistics.median(f[1] for f in used), used[0][2], len(used)


def parse(text: str, path: Path, model: ModelSpec | None = None) -> Step:
    """One measured step from a Megatron-LM or NeMo log; ``model`` replaces the log's model when given."""
    lines = text.splitlines()
    args, start = arguments(lines, path)
    where = f"{path}:{start}" if start else str(path)
    if not args:
        raise SpecError(f"training log {str(path)!r}: no '---- arguments ----' block or NeMo config lines: "
                        "the model and plan are unknown")
    if "tensor_model_parallel_size" not in args:
        raise SpecError(f"{where}: the arguments have no tensor_model_parallel_size (is this a Megatron-LM log?)")
    spec = model or model_of(args, lines, where)
    plan, gpus = plan_of(args, spec, where)
    seconds, line, n = step_seconds(lines, path)
    return Step(name=path.stem, model=spec, plans=(plan,), gpus=gpus, seconds=seconds,
                where=f"{path}:{line} (median of {n} iterations)")
