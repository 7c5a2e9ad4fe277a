"""The default global batch and the round batches hints and ranges use (specs/batch.py): closed-form cases from
the published runs the rule cites, and properties of round batches."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from autoplan.errors import SpecError
from autoplan.specs.batch import (batch_label, default_batch, default_tokens, is_round, model_batch_tokens,
                                  nearest_round, parse_count, round_batches)


@pytest.mark.parametrize("params, seq, gpus, batch", [
    (175e9, 2048, 1024, 1536),      # GPT-3: 3.2M tokens (Brown et al. 2020 Table 2.1) → its own 1536
    (175e9, 2048, 16384, 8192),     # 1,024 tokens per GPU on 16,384 GPUs: 16.8M tokens
    (405e9, 8192, 16384, 2048),     # Llama 3 405B on 16,384 GPUs: its published 2048 × 8192 = 16M tokens
    (405e9, 8192, 1152, 576),       # GB200 NVL72: 4M tokens as a batch that 1152 GPUs divide (9·64)
])
def test_default_batch_matches_the_published_runs_it_cites(params, seq, gpus, batch):
    assert default_batch(params, seq, gpus) == batch


def test_model_batch_grows_with_size_and_stays_beyond_the_published_points():
    sizes = [1e8, 1e9, 1e10, 1e11, 1e12, 1e13]
    tokens = [model_batch_tokens(n) for n in sizes]
    assert tokens == sorted(tokens) and tokens[0] == 0.5e6 and tokens[-1] == 4e6
    assert default_tokens(1e9, 16384) == 1024 * 16384


@given(st.integers(1, 2**20), st.integers(0, 12))
def test_round_batches_divide_as_the_gpus_do(batch, k):
    gpus = 9 * 2**k                                   # NVL72-like counts: the odd part 9 divides every round batch
    if is_round(batch, gpus):
        assert batch % 9 == 0
    found = round_batches(1, 10**6, gpus)
    assert all(is_round(b, gpus) for b in found) and found == sorted(set(found))


def test_no_hint_batch_like_1539():
    assert not is_round(1539, 1152) and is_round(1152, 1152) and is_round(1536, 1024)
    assert nearest_round(1539, 1152) == 1152 and nearest_round(1562.5, 1024) == 1536


def test_counts_and_ranges_parse():
    assert parse_count("16M", "x") == (16e6, 16e6) and parse_count("1024-4096", "x") == (1024, 4096)
    assert parse_count("4M-16M", "x") == (4e6, 16e6) and parse_count("2k", "x") == (2000, 2000)
    for bad in ("", "abc", "16M-4M", "0", "1-2-3"):
        with pytest.raises(SpecError):
            parse_count(bad, "--tokens-per-step")


def test_labels_name_tokens_per_step():
    assert batch_label(2048, 1536) == "sequences of 2,048 tokens, global batch 1,536 (3.15M tokens per step)"
    assert "1,024–4,096" in batch_label(2048, (1024, 2048, 4096))
    assert batch_label(1, 256, samples=True) == "global batch 256 samples"
