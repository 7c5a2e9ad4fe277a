"""Uneven pipeline layouts: the layers of every stage and model chunk when the first and last stages hold their own
counts (Megatron-LM ``--decoder-first/last-pipeline-num-layers``), their validity, and the balanced layout.

Under a V-shape schedule (zbv, dualpipev) rank 0 holds both ends of the model (virtual stages 0 and 2p − 1), so
only ``first_stage_layers`` applies: rank 0's layers, split over its two chunks (the first chunk takes the odd
one), the other ranks' layers split evenly over their two chunks. DeepSeek-V3's 61 layers over 16 ranks: rank 0
holds 1 + 0 (the last chunk: the output layer, loss and multi-token-prediction module only), the other 30 chunks 2
each, as Megatron-Core's published DeepSeek-V3 layout ``Et|(tt|)*30mL`` (32 virtual stages).

Under DualPipe (``dualpipe``, bidirectional) every rank holds one stage of each of two model copies pipelined in
opposite directions; each direction is laid out as 1F1B's stages (first/last stage layers as Megatron-LM)."""

from __future__ import annotations

from typing import Protocol


V_SHAPE = ("zbv", "dualpipev")
"""Schedules with two chunks per rank placed in a V: rank i holds virtual stages i and 2p − 1 − i."""


BIDIRECTIONAL = "dualpipe"
"""DualPipe (DeepSeek-V3, arXiv 2412.19437 §3.2.1): two copies of the model pipelined in opposite directions, half
the micro-batches each; rank i holds stage i of the first direction and stage p − 1 − i of the second."""


def virtual_stage(schedule: str, stage: int, chunk: int, stages: int) -> int:
    """The model piece that ``chunk`` of ``stage`` holds: interleaved placement (chunk·p + i, Megatron-LM), for a
    V-shape schedule i for chunk 0 and 2p − 1 − i for chunk 1 (Qi et al. 2024 §6), and under DualPipe stage k of
    direction d as d·p + k (``pipeline_stages`` pieces per direction, each its own pipeline)."""
    if schedule == BIDIRECTIONAL:
        # deepseek-ai/DualPipe dualpipe.py: a rank's phase 0 is its stage h = min(i, p − 1 − i) in the direction
        # where it sits in the first half (the first direction on the first p/2 ranks), phase 1 the other
        # direction's stage p − 1 − h
        h = min(stage, stages - 1 - stage)
        direction = int(stage >= stages // 2) ^ chunk
        return direction * stages + (stages - 1 - h if chunk else h)
    if schedule in V_SHAPE and chunk:
        return 2 * stages - 1 - stage
    return chunk * stages + stage


def rank_of(schedule: str, vs: int, stages: int) -> int:
    """The pipeline rank holding virtual stage ``vs`` (the inverse of ``virtual_stage``)."""
    if schedule == BIDIRECTIONAL:
        return vs if vs < stages else 2 * stages - 1 - vs
    if schedule in V_SHAPE and vs >= stages:
        return 2 * stages - 1 - vs
    return vs % stages


def pipeline_stages(schedule: str, stages: int, chunks: int) -> int:
    """Virtual stages of one pipeline: stages·chunks, or under DualPipe the stages of one direction."""
    return stages if schedule == BIDIRECTIONAL else stages * chunks


def ends(schedule: str, vs: int, stages: int, chunks: int) -> tuple[bool, bool]:
    """Whether virtual stage ``vs`` holds the embedding (first of its pipeline) and the output layer (last)."""
    n = pipeline_stages(schedule, stages, chunks)
    return vs % n == 0, vs % n == n - 1


def holds_output(schedule: str, stage: int, stages: int) -> bool:
    """Whether pipeline rank ``stage`` holds the last layers and the output layer: the last rank, or the first
    under a V-shape schedule (its second chunk is the last virtual stage), or both end ranks under DualPipe."""
    if schedule == BIDIRECTIONAL:
        return stage in (0, stages - 1)
    return stage == (0 if schedule in V_SHAPE else stages - 1)


def holds_embedding(schedule: str, stage: int, stages: int) -> bool:
    """Whether pipeline rank ``stage`` holds the input embedding: the first rank, or both end ranks (DualPipe)."""
    return stage in (0, stages - 1) if schedule == BIDIRECTIONAL else stage == 0


def model_copies(schedule: str) -> int:
    """Copies of the model's weights the pipeline holds: 2 under DualPipe (DeepSeek-V3 §3.2.1 Table 2, "Parameter
    2×"), whose copies of a stage are data-parallel replicas of each other (their optimizer state shards over both)."""
    return 2 if schedule == BIDIRECTIONAL else 1


def layout_chunks(s: "PipelinePlan") -> int:
    """Chunks of one pipeline per rank, over which the layers split: 1 under DualPipe (a rank's two chunks belong
    to different directions), else the plan's chunks."""
    return 1 if s.schedule == BIDIRECTIONAL else s.chunks


class PipelinePlan(Protocol):
    """What a layout reads of a plan (``specs.plan`` imports this module, not the other way round)."""

    pp: int
    schedule: str
    chunks: int
    uneven: bool
    first_stage_layers: int
    last_stage_layers: int


def uneven_violations(layers: int, s: PipelinePlan) -> list[str]:
    """Megatron-Core's rules for uneven first/last stages (transformer_block.get_num_layers_to_build): the
    remaining layers split evenly over the remaining stages, and over the virtual stages when interleaved; under a
    V-shape schedule (``_v_violations``) rank 0's layers, the rest split evenly over the other ranks' chunks."""
    first, last, p, v = s.first_stage_layers, s.last_stage_layers, s.pp, layout_chunks(s)
    if p == 1:
        return [f"first/last stage layers {first}/{last} need pp > 1"]
    if s.schedule in V_SHAPE:
        return _v_violations(layers, s)
    rest = layers - first - last
    left = p - (first > 0) - (last > 0)
    if left == 0 and v > 1:
        inner = end_chunk_layers(first, last, v)
        if min(first, last) < (v - 1) * inner:
            return [f"first/last stage layers {first}/{last} over {v} virtual stages each: the ranks' inner chunks "
                    f"hold {inner} layers each, more than the {min(first, last)} layers of one end"]
    if rest < 0 or (left == 0 and rest):
        return [f"first/last stage layers {first}/{last} do not add up to the {layers} layers over pp {p}"]
    if left and (rest <= 0 or rest % (left * v)):
        return [f"layers {layers} − first/last stage layers {first}/{last} = {rest} are not divisible by the "
                f"{left} middle stages · virtual_stages {v} = {left * v}"]
    out = []
    mid = rest // left if left else 0
    for name, n in (("first", first), ("last", last)):
        # Llama 3 (arXiv 2407.21783 §3.3.2): the end stage's outer chunk gives up the layers, the others hold
        # mid/v; it may give up all of them, keeping only the embedding or the output layer and loss (Megatron-Core
        # --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split at one layer a chunk)
        if n and v > 1 and left and n < (v - 1) * (mid // v):
            out.append(f"{name} stage layers {n} are fewer than its other {v - 1} chunks hold ({mid // v} each)")
    return out


def _v_violations(layers: int, s: PipelinePlan) -> list[str]:
    """A V shape's uneven layout: rank 0's layers (both ends of the model), the rest over 2(p − 1) chunks."""
    first, p = s.first_stage_layers, s.pp
    if s.last_stage_layers:
        return [f"the {s.schedule} schedule places the first and the last layers on rank 0 (a V): give its layers "
                f"with first stage layers, not last stage layers {s.last_stage_layers}"]
    rest = layers - first
    if rest <= 0 or rest % (2 * (p - 1)):
        return [f"layers {layers} − first stage layers {first} = {rest} are not divisible by the {2 * (p - 1)} "
                f"chunks of the other {p - 1} ranks (V shape: 2 per rank)"]
    return []


def stage_layers(layers: int, s: PipelinePlan, stage: int) -> int:
    """Transformer layers on pipeline rank ``stage`` of a valid plan ``s`` (under DualPipe, of both its stages)."""
    if s.schedule == BIDIRECTIONAL:
        return _one_stage(layers, s, stage) + _one_stage(layers, s, s.pp - 1 - stage)
    return _one_stage(layers, s, stage)


def _one_stage(layers: int, s: PipelinePlan, stage: int) -> int:
    first, last, p = s.first_stage_layers, s.last_stage_layers, s.pp
    if stage == 0 and first:
        return first
    if stage == p - 1 and last:
        return last
    left = p - (first > 0) - (last > 0)
    return (layers - first - last) // left if left else 0


def end_chunk_layers(first: int, last: int, v: int) -> int:
    """Layers of every chunk but the two outermost when two ranks hold the whole model over ``v`` chunks each
    (``first`` and ``last`` layers): the mean, rounded; the outermost chunks take the rest. Megatron-Core reaches
    such a split only through --pipeline-model-parallel-layout (DeepSeek-V3's "Et*4|(t*4|)*14tmL" at PP 2, VP 8:
    4 layers a chunk, the last one 1 beside the MTP block and the loss; Megatron-Bridge deepseek_v3.py)."""
    return (first + last + v) // (2 * v)


def chunk_layers(layers: int, s: PipelinePlan) -> tuple[int, int, int]:
    """Layers of the first virtual stage, of every middle one, and of the last virtual stage of a valid plan (under
    a V-shape schedule, rank 0's two chunks split its layers, the first taking the odd one)."""
    v = layout_chunks(s)
    if not s.uneven:
        n = layers // (s.pp * v)
        return n, n, n
    if s.schedule in V_SHAPE:
        first = s.first_stage_layers
        return first - first // 2, (layers - first) // (2 * (s.pp - 1)), first // 2
    left = s.pp - (s.first_stage_layers > 0) - (s.last_stage_layers > 0)
    if left:
        mid = (layers - s.first_stage_layers - s.last_stage_layers) // left // v
    else:
        mid = end_chunk_layers(s.first_stage_layers, s.last_stage_layers, v) if v > 1 else 0
    outer = [n - (v - 1) * mid if n else mid for n in (s.first_stage_layers, s.last_stage_layers)]
    return outer[0], mid, outer[1]


def balanced_layout(layers: int, pp: int, most: int = 2, output_heavy: bool = False) -> tuple[int, int]:
    """The (first, last) stage layers that make ``layers`` split over ``pp`` stages when they do not evenly: the
    end stages give up at most ``most`` layers in all, the last first and more (it holds the output layer and the
    loss); (0, 0) when the split is even or needs more. Llama 3 405B: 126 layers over 16 stages = 7 + 14·8 + 7
    (arXiv 2407.21783 §3.3.2); DeepSeek-V3's 61 layers over 16 stages (``most`` 3) = 3 + 14·4 + 2.

    ``output_heavy``: the last stage also runs multi-token-prediction modules (each one more transformer block and
    another pass through the output head, DeepSeek-V3 §2.2), more work than the ``most`` layers it could give up,
    so it gives up the whole shortfall while it keeps a layer: DeepSeek-V3 over 16 stages = 15·4 + 1."""
    short = -layers % pp
    if pp < 2 or not 1 <= short <= most:
        return 0, 0
    k = -(-layers // pp)
    if output_heavy and k - short >= 1:
        # Megatron-Core places the MTP modules with the loss on the last stage (--pipeline-model-parallel-layout
        # "…|tmL"): its layer count is what balances them
        return 0, k - short
    first_short = short // 2
    last = k - (short - first_short)
    if last < 1:
        return 0, 0
    return (k - first_short if first_short else 0), last


def balanced_v_layout(layers: int, pp: int, most: int = 3) -> int:
    """Rank 0's layers that make ``layers`` split over a V shape's 2·``pp`` chunks when they do not evenly: rank 0
    (both ends of the model, with the embedding, output layer and loss) gives up at most ``most`` layers and every
    other chunk holds ⌈layers / 2pp⌉; 0 when the split is even or needs more. DeepSeek-V3's 61 layers: 1 + 30·2 over
    16 ranks (Megatron-Core's ``Et|(tt|)*30mL``), 5 + 14·4 over 8."""
    k = -(-layers // (2 * pp))
    short = 2 * pp * k - layers
    if pp < 2 or not 1 <= short <= most or 2 * k - short < 1:
        return 0
    return 2 * k - short


def inflight_layer_chunks(s: PipelinePlan, stage: int) -> int:
    """Chunk-forwards whose activations ``stage`` holds at its peak; a chunk is layers / (pp·chunks) layers."""
    m, p, v = s.micro_batches, s.pp, s.chunks
    if s.schedule == "gpipe":
        # Huang et al. 2019 (GPipe) §2.3: every micro-batch's forward runs before the first backward
        return m
    if s.schedule == "interleaved":
        # Megatron-LM schedules.py, interleaved: warmup (p − i − 1)·2 + (v − 1)·p, plus one in steady state
        return min((p - stage - 1) * 2 + (v - 1) * p + 1, m * v)
    if s.schedule == "zbv":
        # Qi et al. 2024 §6: ZB-V peaks at p·M_B on every rank, 2p half-stage chunks (exact for m ≥ 2p − 1; an
        # upper bound below, where the warm-up is cut short)
        return min(2 * p, 2 * m)
    if s.schedule == "dualpipev":
        # DeepSeek DualPipe README: DualPipeV holds PP + 1 chunks' activations (PP = 2p stages); the fused
        # forward allocates before its partner backward frees (needs m ≥ 2p)
        return min(2 * p + 1, 2 * m)
    if s.schedule == "dualpipe":
        # DeepSeek-V3 §3.2.1 Table 2: DualPipe holds PP + 1 stages' activations (its order is DualPipeV's on p/2
        # ranks and m/2 micro-batches: 2·(p/2) + 1 chunks of one stage each)
        return min(p + 1, m)
    # Narayanan et al. SC'21 (arXiv 2104.04473) §2.2.1: 1F1B holds at most p − i micro-batches; so does ZB-H1
    # (Qi et al. 2024 §2.1)
    return min(p - stage, m)


def weight_grad_held_chunks(s: PipelinePlan, stage: int) -> int:
    """Chunks whose B has run but whose W waits, held beside ``inflight_layer_chunks``' at the stage's peak."""
    if s.schedule != "zb-h1":
        # ZB-V runs each steady-state W right after its B (Qi et al. 2024 §6), DualPipeV splits only its cool-down
        # backwards: none wait at the peak
        return 0
    # Qi et al. 2024 §2.3: ZB-H1's worker i (0-based) holds (p − i)·M_B + i·M_W; fewer W wait when m < p + i
    return max(0, min(s.micro_batches - (s.pp - stage), stage))
