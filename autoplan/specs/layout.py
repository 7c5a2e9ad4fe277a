"""Uneven pipeline layouts: the layers of every stage and model chunk when the first and last stages hold their own
counts (Megatron-LM ``--decoder-first/last-pipeline-num-layers``), their validity, and the balanced layout."""

from __future__ import annotations

from typing import Protocol


V_SHAPE = ("zbv", "dualpipev")
"""Schedules with two chunks per rank placed in a V: rank i holds virtual stages i and 2p − 1 − i."""


def virtual_stage(schedule: str, stage: int, chunk: int, stages: int) -> int:
    """The model piece (0 = first layers) that ``chunk`` of ``stage`` holds: interleaved placement (chunk·p + i,
    Megatron-LM) or, for a V-shape schedule, i for chunk 0 and 2p − 1 − i for chunk 1 (Qi et al. 2024 §6)."""
    if schedule in V_SHAPE and chunk:
        return 2 * stages - 1 - stage
    return chunk * stages + stage


def holds_output(schedule: str, stage: int, stages: int) -> bool:
    """Whether pipeline rank ``stage`` holds the last layers and the output layer: the last rank, or the first
    under a V-shape schedule (its second chunk is the last virtual stage)."""
    return stage == (0 if schedule in V_SHAPE else stages - 1)


class Plan(Protocol):
    """What a layout reads of a Strategy (``specs.strategy`` imports this module, not the other way round)."""

    pp: int
    chunks: int
    uneven: bool
    first_stage_layers: int
    last_stage_layers: int


def uneven_violations(layers: int, s: Plan) -> list[str]:
    """Megatron-Core's rules for uneven first/last stages (transformer_block.get_num_layers_to_build): the
    remaining layers split evenly over the remaining stages, and over the virtual stages when interleaved."""
    first, last, p, v = s.first_stage_layers, s.last_stage_layers, s.pp, s.chunks
    if p == 1:
        return [f"first/last stage layers {first}/{last} need pp > 1"]
    rest = layers - first - last
    left = p - (first > 0) - (last > 0)
    if left == 0 and v > 1:
        return [f"first/last stage layers {first}/{last} with the interleaved schedule need pp > 2 (a middle stage)"]
    if rest < 0 or (left == 0 and rest):
        return [f"first/last stage layers {first}/{last} do not add up to the {layers} layers over pp {p}"]
    if left and (rest <= 0 or rest % (left * v)):
        return [f"layers {layers} − first/last stage layers {first}/{last} = {rest} are not divisible by the "
                f"{left} middle stages · virtual_stages {v} = {left * v}"]
    out = []
    mid = rest // left if left else 0
    for name, n in (("first", first), ("last", last)):
        # Llama 3 (arXiv 2407.21783 §3.3.2): the end stage's outer chunk gives up the layers, the others hold mid/v
        if n and v > 1 and left and n <= (v - 1) * (mid // v):
            out.append(f"{name} stage layers {n} leave no layer for its outer chunk: the other {v - 1} chunks "
                       f"hold {mid // v} each")
    return out


def stage_layers(layers: int, s: Plan, stage: int) -> int:
    """Transformer layers on pipeline rank ``stage`` of a valid plan ``s``."""
    first, last, p = s.first_stage_layers, s.last_stage_layers, s.pp
    if stage == 0 and first:
        return first
    if stage == p - 1 and last:
        return last
    left = p - (first > 0) - (last > 0)
    return (layers - first - last) // left if left else 0


def chunk_layers(layers: int, s: Plan) -> tuple[int, int, int]:
    """Layers of the first virtual stage, of every middle one, and of the last virtual stage of a valid plan."""
    if not s.uneven:
        n = layers // (s.pp * s.chunks)
        return n, n, n
    left = s.pp - (s.first_stage_layers > 0) - (s.last_stage_layers > 0)
    mid = (layers - s.first_stage_layers - s.last_stage_layers) // left // s.chunks if left else 0
    outer = [n - (s.chunks - 1) * mid if n else mid for n in (s.first_stage_layers, s.last_stage_layers)]
    return outer[0], mid, outer[1]


def balanced_layout(layers: int, pp: int, most: int = 2) -> tuple[int, int]:
    """The (first, last) stage layers that make ``layers`` split over ``pp`` stages when they do not evenly: the
    end stages give up at most ``most`` layers in all, the last first and more (it holds the output layer and the
    loss); (0, 0) when the split is even or needs more. Llama 3 405B: 126 layers over 16 stages = 7 + 14·8 + 7
    (arXiv 2407.21783 §3.3.2); DeepSeek-V3's 61 layers over 16 stages (``most`` 3) = 3 + 14·4 + 2."""
    short = -layers % pp
    if pp < 2 or not 1 <= short <= most:
        return 0, 0
    k = -(-layers // pp)
    first_short = short // 2
    last = k - (short - first_short)
    if last < 1:
        return 0, 0
    return (k - first_short if first_short else 0), last
