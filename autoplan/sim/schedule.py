"""Pipeline schedules: the order in which each stage runs (forward | backward, micro-batch, model chunk)."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple


class Step(NamedTuple):
    """One pass of one micro-batch through one model chunk on a stage."""

    forward: bool
    micro_batch: int
    chunk: int


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


@lru_cache(maxsize=1024)
def stage_order(schedule: str, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> tuple[Step, ...]:
    """The pass order of ``stage`` under ``schedule`` (gpipe, 1f1b or interleaved)."""
    if schedule == "gpipe":
        return tuple(gpipe(stage, stages, micro_batches))
    if schedule == "1f1b":
        return tuple(one_f_one_b(stage, stages, micro_batches))
    if schedule == "interleaved":
        return tuple(interleaved(stage, stages, micro_batches, chunks))
    raise ValueError(f"unknown schedule {schedule!r}")


def max_in_flight(order: "list[Step] | tuple[Step, ...]") -> int:
    """Most forward passes whose backward has not yet run, at any point of ``order``."""
    live = peak = 0
    for st in order:
        live += 1 if st.forward else -1
        peak = max(peak, live)
    return peak
