"""The GPU specs' GEMM constants reproduce the published microbenchmarks they cite (hardware/microbenchmarks.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.hardware.microbenchmarks import SOURCES, derive, rate
from autoplan.specs.cluster import load_cluster

SPECS = {"H100": ("dgx-h100-80g", "dgx-h800-80g"), "A100": ("dgx-a100-80g",),
         "B200": ("dgx-b200",)}


@pytest.mark.parametrize("gpu, spec", [(g, s) for g, specs in SPECS.items() for s in specs])
def test_spec_reproduces_its_burst_and_sustained_gemm_rates(gpu, spec):
    g, src = load_cluster(spec).gpu, SOURCES[gpu]
    burst = rate(replace(g, clock_ratio=src.burst.clock_over_peak_clock), src.burst.shape)
    assert burst == pytest.approx(src.burst.tflops, rel=0.01)
    assert rate(g, src.sustained.shape) == pytest.approx(src.sustained.tflops, rel=0.01)
    efficiency, clock = derive(g, src)
    assert (g.gemm_efficiency, g.clock_ratio) == pytest.approx((efficiency, clock), abs=0.002)


def test_no_spec_keeps_a_constant_fitted_to_a_validation_row():
    from pathlib import Path

    specs = Path(__file__).resolve().parents[2] / "cluster_specs"
    for path in specs.glob("*.toml"):
        text = path.read_text()
        assert "FITTED" not in text, path.name
        # a constant calibrated on measured runs names its calibration run, which validate then leaves out
        for line in text.splitlines():
            if "calibrated on" in line.lower():
                assert "calibration run" in line.lower() or "calibration set" in line.lower(), line


@pytest.mark.parametrize("spec", ["gb200-nvl72", "gb300-nvl72"])
def test_grace_blackwell_takes_the_b200_per_clock_efficiency_and_says_its_clock_is_unmeasured(spec):
    from pathlib import Path

    assert load_cluster(spec).gpu.gemm_efficiency == load_cluster("dgx-b200").gpu.gemm_efficiency
    text = (Path(__file__).resolve().parents[2] / "cluster_specs" / f"{spec}.toml").read_text()
    clock = text[text.index("clock_ratio"):].split("\n[")[0]
    assert "UNCALIBRATED" in clock
