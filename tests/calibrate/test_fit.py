"""The fit: planted parameters recovered from synthetic measurements, and clear refusals when the measurements are
too few, do not determine a parameter, or contradict each other."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.calibrate.fit import calibrate
from autoplan.calibrate.measurements import Inputs
from autoplan.calibrate.model import SpecError
from autoplan.calibrate.params import parse_names


def test_planted_parameters_are_recovered_within_two_percent(synthetic, truth) -> None:
    inputs, base = synthetic(truth)
    fit = calibrate(inputs, base)
    assert {p.name for p in fit.params} == set(truth)
    for p, value, sd in zip(fit.params, fit.values, fit.sds):
        assert value == pytest.approx(truth[p.name], rel=0.02), p.name
        assert 0 < sd < 0.05 * truth[p.name], p.name          # small noise: a tight, non-zero uncertainty
    assert fit.rms_pct < 1.5
    assert len(fit.loo) == len(inputs.steps)
    assert all(abs(r.error_pct) < 2 for r in fit.loo)


def test_the_fitted_cluster_differs_from_the_base_only_in_fitted_parameters(synthetic) -> None:
    inputs, base = synthetic({"gpu.clock_ratio": 0.9})
    inputs.kernels, inputs.collectives = [], []
    fit = calibrate(inputs, base)
    assert [p.name for p in fit.params] == ["gpu.clock_ratio"]
    assert fit.values[0] == pytest.approx(0.9, rel=0.02)
    assert fit.cluster.gpu == replace(base.gpu, clock_ratio=fit.values[0])
    assert fit.cluster.tiers == base.tiers


def test_no_measurement_is_refused(synthetic) -> None:
    with pytest.raises(SpecError, match="too few measurements"):
        calibrate(Inputs(), synthetic({})[1])


def test_one_step_is_too_few_for_the_clock(synthetic) -> None:
    inputs, base = synthetic({"gpu.clock_ratio": 0.9})
    only = Inputs(steps=inputs.steps[:1])
    with pytest.raises(SpecError, match="too few measurements: gpu.clock_ratio rests on one measurement"):
        calibrate(only, base)


def test_a_parameter_no_measurement_depends_on_is_refused(synthetic) -> None:
    inputs, base = synthetic({})
    gemms = Inputs(kernels=[k for k in inputs.kernels if k.kind == "gemm"])
    with pytest.raises(SpecError, match="none depends on tiers.ib-leaf.efficiency"):
        calibrate(gemms, base, parse_names("gemm_efficiency,tiers.ib-leaf.efficiency", base))


def test_inconsistent_measurements_are_refused_not_fitted(synthetic) -> None:
    inputs, base = synthetic({})
    steps = inputs.steps
    # the same runs measured 3x slower in a second file: no clock fits both
    inputs = Inputs(steps=steps + [replace(s, seconds=3 * s.seconds, where="other.log:1") for s in steps])
    with pytest.raises(SpecError, match="inconsistent measurements"):
        calibrate(inputs, base)


def test_a_bad_fit_names_its_worst_measurement(synthetic) -> None:
    inputs, base = synthetic({})
    gemms = [k for k in inputs.kernels if k.kind == "gemm"]
    # half the GEMMs 4x slower: no efficiency explains both halves
    broken = gemms[::2] + [replace(k, seconds=4 * k.seconds, where="slow.json: measurement #9") for k in gemms[1::2]]
    with pytest.raises(SpecError, match=r"inconsistent measurements: .*\(rms; limit 25 %.*worst gemm"):
        calibrate(Inputs(kernels=broken), base)


def test_fit_names_are_checked(synthetic) -> None:
    base = synthetic({})[1]
    assert [p.name for p in parse_names("clock_ratio, tiers.nvlink.latency_us", base)] == [
        "gpu.clock_ratio", "tiers.nvlink.latency_us"]
    with pytest.raises(SpecError, match="unknown parameter 'clock'"):
        parse_names("clock", base)


def test_a_prior_keeps_a_two_run_fit_near_the_base(synthetic) -> None:
    inputs, base = synthetic({"gpu.clock_ratio": 0.70})
    two = Inputs(steps=inputs.steps[:2])
    plain = calibrate(two, base)
    held = calibrate(two, base, prior=0.05)
    assert plain.values[0] == pytest.approx(0.70, rel=0.02)
    # 0.70 is 18 % below the base 0.85: the 5 % prior pulls the estimate toward 0.85, and the fit says so
    assert 0.70 < held.values[0] < 0.85
    assert any("prior" in n for n in held.notes)


@pytest.mark.parametrize("weigh", ["equal", "time"])
def test_weighting_by_time_solves_the_weighted_mean_log_ratio(weigh) -> None:
    import math

    from autoplan.calibrate.fit import Obs, solve
    from autoplan.calibrate.model import load_cluster

    base = load_cluster("dgx-h100-80g")
    params = parse_names("clock_ratio", base)
    # a rate parameter: each kernel's predicted seconds is a_i / x; a small kernel the model prices 30 % slow and
    # two large ones 5 % fast (the shape of a GEMM fit across sizes)
    measured, work = [1e-5, 1e-3, 2e-3], [1.3e-5 * 0.8, 0.95e-3 * 0.8, 1.9e-3 * 0.8]
    obs = [Obs(label=f"k{i}", where="t", measured=m, kind="kernel",
               predict=lambda c, a=a: a / c.gpu.clock_ratio) for i, (m, a) in enumerate(zip(measured, work))]
    x = solve(obs, base, params, weigh=weigh)[0]
    # closed form: log x = Σ wᵢ log(aᵢ/mᵢ) / Σ wᵢ, wᵢ = 1 or mᵢ (weighted least squares in log x)
    w = [1.0] * 3 if weigh == "equal" else measured
    expected = math.exp(sum(wi * math.log(a / m) for wi, a, m in zip(w, work, measured)) / sum(w))
    assert x == pytest.approx(expected, rel=1e-6)
    if weigh == "time":
        # the time-weighted fit predicts the sum of the kernels within the small kernel's share
        total = sum(a / x for a in work)
        assert total == pytest.approx(sum(measured), rel=0.01)


def test_the_gpus_speed_spread_is_recovered_from_steps_at_several_scales() -> None:
    # the same per-GPU work on 8 to 1,024 GPUs (weak scaling): only the slowest GPU's pace grows with the count
    from autoplan.calibrate.measurements import Step
    from autoplan.calibrate.model import Strategy, get_model, load_cluster
    from autoplan.calibrate.params import all_params, apply
    from autoplan.calibrate.predict import best_plan
    base = load_cluster("dgx-h100-80g")
    p = all_params(base)["gpu.speed_variability"]
    true = apply(base, [p], [0.03])
    model, steps = get_model("llama3-8b"), []
    for gpus in (8, 32, 128, 1024):
        plan = Strategy(dp=gpus // 2, tp=2, micro_batch=1, global_batch=8 * gpus, sequence_parallel=True,
                        recompute="full", zero=1)
        step = Step(name=f"weak-{gpus}", model=model, plans=(plan,), gpus=gpus, seconds=1.0, where="synthetic")
        _, seconds = best_plan(true, step)
        steps.append(Step(name=step.name, model=model, plans=(plan,), gpus=gpus, seconds=seconds, where=step.where))
    fit = calibrate(Inputs(steps=steps), base, params=[p])
    assert fit.values[0] == pytest.approx(0.03, rel=0.02)
    assert fit.cluster.gpu.speed_variability == pytest.approx(0.03, rel=0.02)


def test_a_planted_epilogue_exposure_is_recovered_from_gemms_timed_plain_and_accumulating() -> None:
    from autoplan.calibrate.measurements import Kernel
    from autoplan.calibrate.model import load_cluster
    from autoplan.calibrate.params import all_params, apply
    from autoplan.calibrate.predict import kernel_seconds
    base = load_cluster("dgx-h100-80g")
    true = apply(base, [all_params(base)["gpu.epilogue_exposure"]], [0.4])
    inputs = Inputs()
    for m, n, k in ((4096, 4096, 2048), (8192, 6144, 4096), (2048, 16384, 4096), (6144, 6144, 16384)):
        for out_bytes in (2.0, 8.0):
            probe = Kernel(kind="gemm", shape=(m, n, k, 1), seconds=1.0, where="synthetic", out_bytes=out_bytes)
            inputs.kernels.append(replace(probe, seconds=kernel_seconds(true, probe)))
    fit = calibrate(inputs, base)
    assert [p.name for p in fit.params] == ["gpu.gemm_efficiency", "gpu.epilogue_exposure"]
    assert fit.values[1] == pytest.approx(0.4, abs=0.01)


def test_an_h100_profile_keeps_each_gemm_timed_plain_and_accumulating_apart() -> None:
    # autoplan profile on one H100 (2026-11-28): each BF16 GEMM plain and adding into an FP32 main_grad
    from pathlib import Path

    from autoplan.calibrate.fit import observations
    from autoplan.calibrate.inputs import read
    from autoplan.calibrate.model import load_cluster
    path = Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration" / "h100-profile-gpt3-accumulate.json"
    base = load_cluster("dgx-h100-80g")
    inputs = read([str(path)], base)
    gemms = [o for o in observations(inputs, base) if o.label.startswith("gemm ")]
    assert len([o for o in gemms if o.label.endswith("into 8 B")]) == 18
    assert len(gemms) == 36
    fit = calibrate(inputs, base)
    assert "gpu.epilogue_exposure" in {p.name for p in fit.params}
    assert fit.rms_pct < 25
