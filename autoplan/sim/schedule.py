"""Pipeline schedules: the order in which each stage runs (forward | backward, micro-batch, model chunk).

Zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv 2401.10241) split a
backward into B (gradient of the input, on the critical path) and W (gradient of the weights, free to move
later on its stage): their steps carry ``part`` "B" or "W"; every other backward is whole (``part`` "")."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from autoplan.specs.layout import ends, virtual_stage  # noqa: F401  (re-exported: the placement of a schedule's chunks)


class Step(NamedTuple):
    """One pass of one micro-batch through one model chunk on a stage."""

    forward: bool
    micro_batch: int
    chunk: int
    part: str = ""
    """A backward's part: "" the whole backward, "B" its input gradient, "W" its weight gradient; "&" on a
    forward: it runs fused with the next step of the order (a whole backward of the other chunk, DualPipeV)."""


def gpipe(stage: int, stages: int, micro_batches: int) -> list[Step]:
    """GPipe (Huang et al. 2019): all forwards, then all backwards."""
    return [Step(True, j, 0) for j in range(micro_batches)] + [Step(False, j, 0) for j in range(micro_batches)]


def one_f_one_b(stage: int, stages: int, micro_batches: int) -> list[Step]:
    """1F1B / PipeDream-flush (Narayanan et al. 2021, Fig. 4 top): p−i−1 warm-up forwards, then alternate."""
    warmup = min(stages - stage - 1, micro_batches)
    order = [Step(True, j, 0) for j in range(warmup)]
    for j in range(micro_batches - warmup):
        order += [Step(True, warmup + j, 0), Step(False, j, 0)]
    order += [Step(False, j, 0) for j in range(micro_batches - warmup, micro_batches)]
    return order


def interleaved(stage: int, stages: int, micro_batches: int, chunks: int) -> list[Step]:
    """Interleaved 1F1B with ``chunks`` virtual stages per rank (Megatron-LM schedules.py, SC'21 §2.2.2).

    The k-th forward runs chunk (k // p) mod v of micro-batch (k // pv)·p + k mod p; backwards run chunks
    in reverse; warm-up is (p − i − 1)·2 + (v − 1)·p passes.
    """
    p, v, m = stages, chunks, micro_batches
    total = m * v

    def step(k: int, forward: bool) -> Step:
        chunk = (k // p) % v
        return Step(forward, (k // (p * v)) * p + k % p, chunk if forward else v - 1 - chunk)

    warmup = min((p - stage - 1) * 2 + (v - 1) * p, total)
    order = [step(k, True) for k in range(warmup)]
    for k in range(total - warmup):
        order += [step(warmup + k, True), step(k, False)]
    order += [step(k, False) for k in range(total - warmup, total)]
    return order


def zb_h1(stage: int, stages: int, micro_batches: int) -> list[Step]:
    """ZB-H1 (Qi et al. 2024 §2.1, Fig. 3 top): 1F1B's forwards and input-gradient backwards B, with stage i's
    weight-gradient passes W running i micro-batches late, after each steady-state B, so that the last stages'
    W fill the tail bubble; every stage keeps 1F1B's p − i in-flight forwards. Left-over B each take the
    oldest pending W with them, then the remaining W run."""
    i, p, m = stage, stages, micro_batches
    warmup = min(p - i - 1, m)
    order = [Step(True, j, 0) for j in range(warmup)]
    done_w = 0
    for k in range(m - warmup):
        order += [Step(True, warmup + k, 0), Step(False, k, 0, "B")]
        if k >= i:
            order.append(Step(False, done_w, 0, "W"))
            done_w += 1
    for j in range(m - warmup, m):
        order += [Step(False, j, 0, "B"), Step(False, done_w, 0, "W")]
        done_w += 1
    order += [Step(False, j, 0, "W") for j in range(done_w, m)]
    return order


def zbv(stage: int, stages: int, micro_batches: int) -> list[Step]:
    """ZB-V (Qi et al. 2024 §6, Fig. 8): two chunks per rank in a V (rank i holds virtual stages i and 2p − 1 − i).

    Phases as PyTorch's ``ScheduleZBVZeroBubble`` (torch/distributed/pipelining/schedules.py): 2(p − i) − 1
    chunk-0 forwards, i (chunk-1 F, chunk-0 F) pairs, p − i chunk-1 F-B-W groups, then F-B-W groups
    alternating chunk 0 and chunk 1 until the forwards run out; the cool-down runs i (chunk-0 B, chunk-1 B)
    pairs and p − i (chunk-0 B, chunk-0 W) pairs, then the pending W. Built for max(m, 2p − 1) micro-batches
    and cut to the real ones, as PyTorch does (fewer than 2p − 1 leave the warm-up short)."""
    i, p = stage, stages
    n = max(micro_batches, 2 * p - 1)
    order: list[Step] = []
    f = [0, 0]
    b = [0, 0]

    def fwd(c: int) -> None:
        order.append(Step(True, f[c], c))
        f[c] += 1

    def group(c: int, forward: bool = True, weight: bool = True) -> None:
        if forward:
            fwd(c)
        order.append(Step(False, b[c], c, "B"))
        if weight:
            order.append(Step(False, b[c], c, "W"))
        b[c] += 1

    for _ in range(2 * (p - i) - 1):
        fwd(0)
    for _ in range(i):
        fwd(1)
        fwd(0)
    for _ in range(p - i):
        group(1)
    while f[1] < f[0] or f[0] < n:
        group(0, forward=f[0] < n)
        group(1)
    w = list(b)
    for _ in range(i):
        group(0, forward=False, weight=False)
        group(1, forward=False, weight=False)
    for _ in range(p - i):
        order.append(Step(False, b[0], 0, "B"))
        b[0] += 1
        order.append(Step(False, w[0], 0, "W"))
        w[0] += 1
    order += [Step(False, j, 1, "W") for j in range(w[1], b[1])]
    order += [Step(False, j, 0, "W") for j in range(w[0], b[0])]
    return [st for st in order if st.micro_batch < micro_batches]


def dualpipev(stage: int, stages: int, micro_batches: int) -> list[Step]:
    """DualPipeV (DeepSeek's DualPipe repository, "cut-in-half" V-shape DualPipe; DeepSeek-V3 report §3.2.1,
    arXiv 2412.19437): two chunks per rank in a V; in the steady state a forward of one chunk runs fused with the
    whole backward of a different micro-batch of the other (``part`` "&" on the forward: fused with the next step),
    so that each one's communication hides under the other's compute. Phases as PyTorch's ``ScheduleDualPipeV``
    (torch/distributed/pipelining/schedules.py), which needs m ≥ 2p: warm-up forwards, B-W-F zero-bubble steps,
    the fused main phase, then backwards, their second half split into B and W, and the pending W."""
    i, p, m = stage, stages, micro_batches
    order: list[Step] = []
    count = {(c, kind): 0 for c in (0, 1) for kind in "FBW"}
    pending_w: list[tuple[int, int]] = []

    def add(c: int, kind: str, part: str = "") -> None:
        mb = count[(c, "F" if kind == "F" else "B")]
        order.append(Step(kind == "F", mb, c, part))
        count[(c, "F" if kind == "F" else "B")] += 1
        if part == "B":
            pending_w.append((mb, c))

    def weight() -> None:
        if pending_w:
            mb, c = pending_w.pop(0)
            order.append(Step(False, mb, c, "W"))

    def fused(f_chunk: int) -> None:
        add(f_chunk, "F", "&")
        add(1 - f_chunk, "B")

    for _ in range(2 * (p - i - 1)):
        add(0, "F")
    for _ in range(i + 1):
        add(0, "F")
        add(1, "F")
    for _ in range(p - i - 1):
        add(1, "B", "B")
        weight()
        add(1, "F")
    for k in range(m - 2 * p + i + 1):
        if k == 0 and i == p - 1:
            add(0, "F")                                 # PyTorch: not fused, to shorten the bubble
            add(1, "B")
        else:
            fused(0)
        fused(1)
    for _ in range(p - i - 1):
        add(1, "B")
        fused(1)
    split = False
    for k in range(i + 1):
        # the second half of the cool-down splits its backwards, the W filling the tail
        if k == (i + 1) // 2 and i % 2 == 1:
            split = True
        add(1, "B", "B" if split else "")
        if k == (i + 1) // 2 and i % 2 == 0:
            split = True
        add(0, "B", "B" if split else "")
    for _ in range(p - i - 1):
        weight()
        add(0, "B", "B" if split else "")
    for _ in range(i + 1):
        weight()
    return order


def dualpipe(stage: int, stages: int, micro_batches: int) -> list[Step]:
    """DualPipe (DeepSeek-V3 report §3.2.1, Fig. 5; deepseek-ai/DualPipe ``DualPipe.step``): two copies of the model
    pipelined in opposite directions, m/2 micro-batches each. Rank i runs DualPipeV's eight phases as rank
    h = min(i, p − 1 − i) of p/2 on m/2 micro-batches (the repository's steps 1-8 are the same counts), its chunk 0
    being its stage in the direction where it sits in the first half (``layout.virtual_stage``); the middle ranks'
    turn crosses to the other middle rank instead of staying on one GPU."""
    return dualpipev(min(stage, stages - 1 - stage), stages // 2, micro_batches // 2)


@lru_cache(maxsize=1024)
def stage_order(schedule: str, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> tuple[Step, ...]:
    """The pass order of ``stage`` under ``schedule`` (gpipe, 1f1b, interleaved, zb-h1, zbv, dualpipev or
    dualpipe)."""
    if schedule == "gpipe":
        return tuple(gpipe(stage, stages, micro_batches))
    if schedule == "1f1b":
        return tuple(one_f_one_b(stage, stages, micro_batches))
    if schedule == "interleaved":
        return tuple(interleaved(stage, stages, micro_batches, chunks))
    if schedule == "zb-h1":
        return tuple(zb_h1(stage, stages, micro_batches))
    if schedule == "zbv":
        return tuple(zbv(stage, stages, micro_batches))
    if schedule == "dualpipev":
        return tuple(dualpipev(stage, stages, micro_batches))
    if schedule == "dualpipe":
        return tuple(dualpipe(stage, stages, micro_batches))
    raise ValueError(f"unknown schedule {schedule!r}")


def max_in_flight(order: "list[Step] | tuple[Step, ...]") -> int:
    """Most forward passes whose backward (whole, or its B part) has not yet run, at any point of ``order``."""
    live = peak = 0
    for st in order:
        if st.part == "W":
            continue
        live += 1 if st.forward else -1
        peak = max(peak, live)
    return peak


def peak_held(order: "list[Step] | tuple[Step, ...]", forward_held: float, weight_held: float) -> float:
    """Most activation units ``order`` holds at once: ``forward_held`` per forward whose B has not run, and
    ``weight_held`` per B whose W has not run (what W still reads: Qi et al. 2024 Table 1, M_W)."""
    live_f = live_w = 0
    peak = 0.0
    for st in order:
        if st.forward:
            live_f += 1
        elif st.part == "B":
            live_f -= 1
            live_w += 1
        elif st.part == "W":
            live_w -= 1
        else:
            live_f -= 1
        peak = max(peak, live_f * forward_held + live_w * weight_held)
    return peak
