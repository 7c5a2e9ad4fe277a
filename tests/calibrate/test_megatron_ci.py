"""The Megatron-LM CI calibration sets (cluster_specs/calibration/megatron-ci-dgx-*.yaml) and the specs fitted to
them (cluster_specs/megatron-ci-*.toml): never a validated run, host times recovered where they were planted, the
shipped spec what `autoplan calibrate` gives on the shipped set."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.calibrate.fit import calibrate
from autoplan.calibrate.inputs import read
from autoplan.calibrate.measurements import Inputs
from autoplan.calibrate.model import load_cluster
from autoplan.calibrate.params import gpu_param
from autoplan.calibrate.predict import best_plan

ROOT = Path(__file__).resolve().parents[2]
SETS = {"a100": ROOT / "cluster_specs" / "calibration" / "megatron-ci-dgx-a100.yaml",
        "h100": ROOT / "cluster_specs" / "calibration" / "megatron-ci-dgx-h100.yaml"}
HOST = [gpu_param("host_launch_us"), gpu_param("host_step_ms")]
TEST_CASE = re.compile(r"test_cases/gpt/([\w.-]+)/")


def _test_cases(path: Path) -> set[str]:
    return set(TEST_CASE.findall(path.read_text()))


@pytest.mark.parametrize("gpu", list(SETS))
def test_no_calibration_run_is_a_test_case_validate_counts(gpu):
    counted = set().union(*(_test_cases(f) for f in (ROOT / "autoplan" / "data").glob("*.yaml")))
    assert {"gpt3_mcore_te_tp2_pp2_cp2", "gpt3_7b_tp4_pp1_memory_speed"} <= counted
    held = _test_cases(SETS[gpu])
    assert len(held) >= 14
    assert not held & counted


def _steps(gpu: str):
    base = load_cluster(f"dgx-{gpu}-80g")
    inputs = read([str(SETS[gpu])], base)
    return inputs, base


def test_planted_host_times_are_recovered_from_the_ci_steps():
    inputs, base = _steps("h100")
    truth = replace(base, gpu=replace(base.gpu, host_launch=150e-6, host_step=0.040))
    planted = Inputs()
    planted.steps = [replace(s, seconds=best_plan(truth, s)[1]) for s in inputs.steps]
    fit = calibrate(planted, base, HOST, loo=False)
    assert fit.values == pytest.approx([150.0, 40.0], rel=0.01)
    assert fit.rms_pct < 0.1


@pytest.mark.parametrize("gpu", list(SETS))
def test_the_shipped_spec_is_the_fit_of_the_shipped_set(gpu):
    inputs, base = _steps(gpu)
    fit = calibrate(inputs, base, HOST, loo=False)
    shipped = load_cluster(f"megatron-ci-{gpu}").gpu
    assert fit.values == pytest.approx([shipped.host_launch * 1e6, shipped.host_step * 1e3], rel=1e-4)


@pytest.mark.parametrize("gpu", list(SETS))
def test_only_the_host_times_differ_from_the_base_spec(gpu):
    base, shipped = load_cluster(f"dgx-{gpu}-80g"), load_cluster(f"megatron-ci-{gpu}")
    assert replace(shipped.gpu, host_launch=base.gpu.host_launch, host_step=base.gpu.host_step) == base.gpu
    assert shipped.tiers == base.tiers and shipped.gpus_per_node == base.gpus_per_node


@pytest.mark.parametrize("gpu", list(SETS))
def test_the_spec_records_the_set_it_was_fitted_on(gpu):
    import hashlib
    import tomllib

    table = tomllib.loads((ROOT / "cluster_specs" / f"megatron-ci-{gpu}.toml").read_text())["calibration"]
    (source,) = table["inputs"]
    assert ROOT / source["path"] == SETS[gpu]
    assert source["sha256"] == hashlib.sha256(SETS[gpu].read_bytes()).hexdigest()
    assert set(table["fitted"]) == {"gpu.host_launch_us", "gpu.host_step_ms"}


def test_host_bound_steps_fit_the_host_times_by_default():
    # fit.default_params: the CI's tiny steps move more with the host's time per op than with the clock
    from autoplan.calibrate.fit import default_params, observations

    inputs, base = _steps("h100")
    assert [p.name for p in default_params(inputs, base, observations(inputs, base))] == [
        "gpu.host_launch_us", "gpu.host_step_ms"]
    few = Inputs()
    few.steps = inputs.steps[:2]                # two steps: one parameter, the per-op time
    assert [p.name for p in default_params(few, base, observations(few, base))] == ["gpu.host_launch_us"]


def test_each_ci_step_keeps_the_attention_its_run_states():
    # 9 of the A100 set's runs state TE's fused attention on a spec without it (the others: unfused, as the spec)
    inputs, base = _steps("a100")
    flags = [s.flash_attention for s in inputs.steps]
    assert flags.count(True) == 9 and flags.count(False) == 24
