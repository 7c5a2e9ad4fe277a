"""Validate-format runs read as calibration steps keep what their run states about its software and memory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.calibrate.model import SpecError, load_cluster
from autoplan.calibrate.predict import best_plan
from autoplan.calibrate.read_steps import parse

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_on_flashattention_2_is_timed_with_its_rate():
    path = ROOT / "autoplan" / "data" / "public.yaml"
    base = load_cluster("dgx-h100-80g")
    steps, _ = parse(path.read_text(), path, base)
    gpt3 = [s for s in steps if s.name.startswith("dgxc-h100-bf16-gpt3")]
    llama = [s for s in steps if s.name.startswith("dgxc-h100-bf16-llama31")]
    assert gpt3 and llama and all(s.flash2_attention for s in gpt3) and not any(s.flash2_attention for s in llama)
    step = gpt3[0]
    assert best_plan(base, step)[1] > best_plan(base, replace(step, flash2_attention=False))[1]


def test_an_unknown_attention_kernel_is_refused(tmp_path):
    path = ROOT / "autoplan" / "data" / "public.yaml"
    text = path.read_text().replace("attention_kernel: flash2", "attention_kernel: flash9", 1)
    bad = tmp_path / "runs.yaml"
    bad.write_text(text)
    with pytest.raises(SpecError, match="attention_kernel must be one of fused, fused-deterministic, flash2, "
                                        "flash2-deterministic, got 'flash9'"):
        parse(text, bad, load_cluster("dgx-h100-80g"))
