"""The host calibration sets of Megatron-Bridge's Blackwell runs (cluster_specs/calibration/bridge-*-host.yaml) and
the host times fitted to them (dgx-b200's and gb200-nvl72's host_launch_us): a host time that binds only past a
threshold is found from a base that has none, and the shipped value is what `autoplan calibrate` gives."""

from __future__ import annotations

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
SETS = {"dgx-b200": ROOT / "cluster_specs" / "calibration" / "bridge-b200-host.yaml",
        "gb200-nvl72": ROOT / "cluster_specs" / "calibration" / "bridge-gb200-host.yaml"}
HOST = [gpu_param("host_launch_us")]


def _hostless(spec: str):
    """The spec without a host time, and its calibration set's steps read against it."""
    base = load_cluster(spec)
    base = replace(base, gpu=replace(base.gpu, host_launch=0.0))
    return read([str(SETS[spec])], base), base


@pytest.mark.parametrize("us", [45.0, 80.0])
def test_a_planted_host_time_is_found_from_a_base_without_one(us):
    # below the threshold where the host binds the steps do not move: a solver started at the base's 0 alone would
    # stay there
    inputs, base = _hostless("dgx-b200")
    truth = replace(base, gpu=replace(base.gpu, host_launch=us * 1e-6))
    planted = Inputs()
    planted.steps = [replace(s, seconds=best_plan(truth, s)[1]) for s in inputs.steps]
    assert any(best_plan(base, s)[1] < 0.95 * p.seconds for s, p in zip(inputs.steps, planted.steps))
    fit = calibrate(planted, base, HOST, loo=False)
    assert fit.values == pytest.approx([us], rel=0.01)
    assert fit.rms_pct < 0.1


@pytest.mark.parametrize("spec", list(SETS))
def test_the_shipped_host_time_is_the_fit_of_the_shipped_set(spec):
    inputs, base = _hostless(spec)
    fit = calibrate(inputs, base, HOST)
    assert fit.values == pytest.approx([load_cluster(spec).gpu.host_launch * 1e6], rel=1e-3)
    # and the fit says how far to trust it: the leave-one-out error is reported beside it
    assert len(fit.loo) == 2


def test_the_hosts_without_a_calibration_carry_the_same_cpus_value():
    # GB300 trays hold the GB200's Grace CPU; the DGX B300's x86 host is not measured and carries the DGX B200's
    assert load_cluster("gb300-nvl72").gpu.host_launch == load_cluster("gb200-nvl72").gpu.host_launch
    assert load_cluster("dgx-b300").gpu.host_launch == load_cluster("dgx-b200").gpu.host_launch
