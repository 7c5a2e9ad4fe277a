"""Guards the accuracy autoplan reaches on the published runs it ships with (deterministic thresholds)."""

import pytest

from autoplan.validate import Report, validate


@pytest.fixture(scope="module")
def report() -> Report:
    return validate()


def _group(report: Report, prefix: str) -> dict:
    rows = [c for c in report.cases if c.group.startswith(prefix)]
    assert rows, prefix
    return Report.summary(rows)


def test_every_case_has_a_prediction(report):
    assert len(report.cases) == 25
    assert all(c.predicted is not None for c in report.cases)


def test_korthikanti_cases_beat_calculon(report):
    # Calculon on the same 8 runs: mean 3.65 %, max 8.87 % (public.yaml)
    s = _group(report, "Korthikanti")
    assert s["n"] == 8
    assert s["mean_abs_pct"] < 3.65
    assert s["max_abs_pct"] < 8.87


def test_h100_recipes_within_five_percent(report):
    s = _group(report, "NVIDIA H100")
    assert s["mean_abs_pct"] <= 3.0
    assert s["max_abs_pct"] <= 5.0


def test_overall_mean_error(report):
    s = Report.summary(report.cases)
    assert s["mean_abs_pct"] <= 5.0


def test_sc21_regression_guard(report):
    # the 2021 runs are 8-13 % slower than the 2022 stack this A100 calibration follows (issue 4 target: 10 %)
    s = _group(report, "Megatron SC'21")
    assert s["mean_abs_pct"] <= 9.0
    assert s["max_abs_pct"] <= 14.0


def test_memory_and_bandwidth_within_ten_percent(report):
    for row in report.memory + [b for b in report.bandwidth if b.predicted is not None]:
        assert abs(row.error_pct) <= 10.0, row
    assert sum(b.predicted is not None for b in report.bandwidth) >= 8
