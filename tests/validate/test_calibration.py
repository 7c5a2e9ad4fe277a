"""The leave-one-group-out calibration of ``autoplan validate``: closed-form runs whose time is 1/clock."""

from __future__ import annotations

import pytest

from autoplan.validate import calibration
from autoplan.validate.results import CaseResult, summary


class _Cluster:
    def __init__(self, clock: float) -> None:
        self.gpu = type("G", (), {"clock_ratio": clock})()


def _run(rid: str, group: str, measured: float, gpu: str = "X", calibrates: str = "",
         constants: str = "") -> CaseResult:
    # a compute-bound step: 1 s at the shipped clock, 1/f s at f times it
    def rerun(change):
        return 1.0 / change(_Cluster(1.0)).gpu.clock_ratio
    return CaseResult(id=rid, group=group, metric="iteration_time_s", measured=measured, predicted=1.0, plan=None,
                      gpu=gpu, constants=constants, calibration=calibrates, rerun=rerun)


@pytest.fixture(autouse=True)
def _plain_replace(monkeypatch):
    def replace(obj, **kw):
        if "gpu" in kw:
            return type("C", (), {"gpu": kw["gpu"]})()
        return type("G", (), {"clock_ratio": kw["clock_ratio"]})()
    monkeypatch.setattr(calibration, "replace", replace)


def test_a_planted_clock_is_recovered():
    # measured 1/0.9 s: the hardware runs at 0.9 of the spec's clock
    curves = calibration.curves([_run(f"r{i}", "g", 1 / 0.9) for i in range(3)])
    assert calibration.fit(curves) == pytest.approx(0.9, rel=0.01)


def test_each_group_is_predicted_with_the_other_groups_clock():
    runs = [_run("a1", "A", 1 / 0.9), _run("a2", "A", 1 / 0.9), _run("b1", "B", 1 / 1.1), _run("b2", "B", 1 / 1.1)]
    logo = calibration.leave_one_group_out(calibration.curves(runs))
    assert logo.factors["A @ X"] == pytest.approx(1.1, rel=0.01)
    assert logo.predicted["a1"] == pytest.approx(1 / 1.1, rel=0.01)
    inside = calibration.in_sample(calibration.curves(runs))
    assert inside.factors["X"] == pytest.approx(1.0, abs=0.11)


def test_a_group_alone_on_its_gpu_keeps_the_shipped_spec():
    runs = [_run("a1", "A", 1 / 0.9), _run("c1", "C", 2.0, gpu="Y")]
    logo = calibration.leave_one_group_out(calibration.curves(runs))
    assert logo.factors["C @ Y"] == 1.0 and logo.predicted["c1"] == pytest.approx(1.0)


def test_a_calibration_run_is_neither_counted_nor_fitted_again():
    runs = [_run("a1", "A", 1 / 0.9, calibrates="X clock_ratio"), _run("b1", "B", 1.0)]
    assert summary(runs)["n"] == 1
    logo = calibration.leave_one_group_out(calibration.curves(runs))
    assert logo.factors["B @ X"] == pytest.approx(1.0)     # trained on counted runs only


def test_a_spec_with_its_own_measured_constants_is_a_pool_of_its_own():
    # two specs of one GPU: B's constants were measured on its own machine, so A's correction never reaches it
    runs = [_run("a1", "A", 1 / 0.9, constants="GEMM 0.78"), _run("b1", "B", 1.0, constants="GEMM 0.59"),
            _run("c1", "C", 1 / 0.9, constants="GEMM 0.78")]
    logo = calibration.leave_one_group_out(calibration.curves(runs))
    assert logo.predicted["b1"] == pytest.approx(1.0)
    assert logo.factors["A @ X [GEMM 0.78]"] == pytest.approx(0.9, rel=0.01)
    inside = calibration.in_sample(calibration.curves(runs))
    assert set(inside.factors) == {"X [GEMM 0.78]", "X [GEMM 0.59]"}


def test_specs_that_differ_only_off_the_gpu_share_a_pool():
    from autoplan.specs.cluster import load_cluster
    from autoplan.validate.results import gpu_constants
    assert gpu_constants(load_cluster("dgx-h100-80g").gpu) == gpu_constants(load_cluster("megatron-ci-h100").gpu)
    assert gpu_constants(load_cluster("dgx-b200").gpu) != gpu_constants(load_cluster("simumax-b200").gpu)
