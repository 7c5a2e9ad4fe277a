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


@pytest.mark.parametrize("spec, clock_source", [("gb200-nvl72", "calibration set"), ("gb300-nvl72", "UNCALIBRATED")])
def test_grace_blackwell_takes_the_b200_per_clock_efficiency_and_names_its_clocks_source(spec, clock_source):
    # the GB200's sustained clock is calibrated on four dgxc GB200 runs validate leaves out; the GB300's is unmeasured
    from pathlib import Path

    assert load_cluster(spec).gpu.gemm_efficiency == load_cluster("dgx-b200").gpu.gemm_efficiency
    text = (Path(__file__).resolve().parents[2] / "cluster_specs" / f"{spec}.toml").read_text()
    clock = text[text.index("clock_ratio"):].split("\n[")[0]
    assert clock_source in clock


def test_h100_fp8_efficiency_is_the_profiled_fp8_to_bf16_ratio_times_the_bf16_efficiency():
    # cluster_specs/dgx-h100-80g.toml: the FP8/BF16 efficiency ratio fitted to one H100's layer-GEMM timings
    # (autoplan calibrate --fit gpu.fp8_gemm_efficiency,gpu.gemm_efficiency --weigh time), times the sourced
    # BF16 efficiency; the H800 (same die) takes the same value
    from pathlib import Path

    from autoplan.calibrate import fit as fitting, inputs as reading, params

    base = load_cluster("dgx-h100-80g")
    profiles = Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration"
    data = reading.read([str(profiles / f"h100-profile-{m}.json") for m in ("gpt3", "llama3-70b")], base)
    chosen = params.parse_names("gpu.fp8_gemm_efficiency,gpu.gemm_efficiency", base)
    fit = fitting.calibrate(data, base, chosen, max_residual=10.0, loo=False, weigh="time")
    fp8, bf16 = fit.values
    assert [p.name for p in fit.params] == ["gpu.fp8_gemm_efficiency", "gpu.gemm_efficiency"]
    for spec in ("dgx-h100-80g", "dgx-h800-80g"):
        gpu = load_cluster(spec).gpu
        assert gpu.fp8_gemm_efficiency == pytest.approx(gpu.gemm_efficiency * fp8 / bf16, abs=0.001)
