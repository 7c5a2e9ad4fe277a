"""The global batch as a plan choice: the default a model and GPU count get, the batches a person would run, and
the batch and token counts as the headers of every output name them.

The default is a number of tokens per step: the larger of the batch published runs used for a model of this size
and one that gives every GPU a share of the step, rounded to a batch of sequences that divides the way the GPUs do.
"""

from __future__ import annotations

import math
import re

from autoplan.errors import SpecError

MODEL_BATCH_TOKENS = ((125e6, 0.5e6), (350e6, 0.5e6), (760e6, 0.5e6), (1.3e9, 1e6), (2.7e9, 1e6), (6.7e9, 2e6),
                      (13e9, 2e6), (175e9, 3.2e6), (405e9, 4e6))
"""(parameters, tokens per step) of published runs: GPT-3's batch by model size (Brown et al. 2020, Table 2.1) and
Llama 3 405B's first batch of 4M tokens (Dubey et al. 2024, §3.4.1); between points the batch grows as a power of the
size (log-log interpolation), beyond them it stays at the nearest one."""
TOKENS_PER_GPU = 1024
"""Tokens per GPU per step at scale: Llama 3 405B ran 16M tokens per step on 16,384 GPUs (Dubey et al. 2024,
Table 4), so a batch below this leaves the pipelines starved of micro-batches (bubbles) on that many GPUs."""
ODD_FACTORS = (1, 3)
"""Odd parts of the batches people run on a power-of-two GPU count: powers of two and 1.5× them (GPT-3's 1536).
On other counts a batch is the count's odd part times a power of two, so that the data-parallel degree divides it
(1152 GPUs: 576, 1152, 2304, …)."""
_SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9}


def model_batch_tokens(params: float) -> float:
    """Tokens per step published runs used for a model of ``params`` parameters (``MODEL_BATCH_TOKENS``)."""
    points = MODEL_BATCH_TOKENS
    if params <= points[0][0]:
        return points[0][1]
    for (n0, t0), (n1, t1) in zip(points, points[1:]):
        if params <= n1:
            # log-log interpolation between neighbouring published sizes
            return t0 * (t1 / t0) ** (math.log(params / n0) / math.log(n1 / n0))
    return points[-1][1]


def default_tokens(params: float, gpus: int) -> float:
    """Tokens per step by default: the model's published batch, or ``TOKENS_PER_GPU`` per GPU if more."""
    return max(model_batch_tokens(params), TOKENS_PER_GPU * gpus)


def _odd(n: int) -> int:
    while n and n % 2 == 0:
        n //= 2
    return max(n, 1)


def _factors(gpus: int) -> tuple[int, ...]:
    odd = _odd(gpus)
    return ODD_FACTORS if odd == 1 else (odd,)


def is_round(batch: int, gpus: int) -> bool:
    """Whether ``batch`` is one a person would run on ``gpus`` GPUs: c·2^k with c one of ``ODD_FACTORS`` on a
    power-of-two count, else the count's odd part (1536 on 1024 GPUs; 1152 or 2304 on 1152 GPUs; never 1539)."""
    return batch > 0 and _odd(batch) in _factors(gpus)


def round_batches(low: int, high: int, gpus: int) -> list[int]:
    """Every round batch (``is_round``) from ``low`` to ``high``, ascending."""
    out = set()
    for f in _factors(gpus):
        b = f
        while b <= high:
            if b >= low:
                out.add(b)
            b *= 2
    return sorted(out)


def nearest_round(sequences: float, gpus: int) -> int:
    """The round batch nearest ``sequences`` (log distance; the larger on a tie)."""
    low, high = max(1, int(sequences / 4)), max(2, int(sequences * 4) + 1)
    found = round_batches(low, high, gpus)
    return min(found, key=lambda b: (abs(math.log(b / sequences)), -b))


def default_batch(params: float, seq_len: int, gpus: int) -> int:
    """Sequences per step for a model of ``params`` parameters and ``seq_len`` tokens on ``gpus`` GPUs."""
    return nearest_round(default_tokens(params, gpus) / seq_len, gpus)


def parse_count(text: str, what: str) -> tuple[float, float]:
    """``1536`` → (1536, 1536), ``1024-4096`` → (1024, 4096), ``16M`` → (16e6, 16e6), ``4M-16M`` → a range."""
    parts = [p.strip() for p in re.split(r"(?<=\w)\s*[-:]\s*(?=\d)", str(text).strip())]
    values = []
    for p in parts:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGB]?)", p, re.I)
        if not m or len(parts) > 2:
            raise SpecError(f"{what} {text!r} is not a count or a range (e.g. 1536, 1024-4096, 16M, 4M-16M)")
        values.append(float(m.group(1)) * _SUFFIX[m.group(2).upper()])
    low, high = values[0], values[-1]
    if low <= 0 or high < low:
        raise SpecError(f"{what} {text!r}: give a positive count, or a range from low to high")
    return low, high


def batch_label(seq_len: int, global_batch: int | tuple[int, ...], samples: bool = False) -> str:
    """``sequences of 2,048 tokens, global batch 1,536 (3.1M tokens per step)``; ``global batch 256 samples`` for
    models whose sample is not a token sequence; a range of batches as ``1,024–4,096``."""
    batches = (global_batch,) if isinstance(global_batch, int) else tuple(global_batch)
    shown = f"{batches[0]:,}" if len(batches) == 1 else f"{batches[0]:,}–{batches[-1]:,}"
    if samples:
        return f"global batch {shown} samples"
    tokens = [b * seq_len for b in batches]
    per_step = _tokens(tokens[0]) if len(tokens) == 1 else f"{_tokens(tokens[0])}–{_tokens(tokens[-1])}"
    return f"sequences of {seq_len:,} tokens, global batch {shown} ({per_step} tokens per step)"


def _tokens(n: float) -> str:
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}K" if n >= 1e3 else f"{n:g}"


def heading(model: str, gpus: object, gpu: str, cluster: str, seq_len: int | None,
            global_batch: object, samples: bool = False) -> str:
    """The header every output starts with: ``gpt3-175b on 1024 × H100-SXM5-80GB (dgx-h100-80g), sequences of
    2,048 tokens, global batch 1,536 (3.15M tokens per step)`` (the batch alone when the model is not known)."""
    where = f"{model} on {gpus} × {gpu} ({cluster})"
    batches = tuple(global_batch) if isinstance(global_batch, (tuple, list)) else (global_batch,)
    if seq_len is None or not all(isinstance(b, int) for b in batches):
        return f"{where}, global batch {batches[0]}" + (f"–{batches[-1]}" if len(batches) > 1 else "")
    return f"{where}, {batch_label(seq_len, batches, samples)}"
