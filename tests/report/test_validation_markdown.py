"""`autoplan validate --markdown`: the figures as markdown tables (the docs' fidelity page)."""

from autoplan.report.validation import report_markdown
from autoplan.validate import CaseResult, CheckResult, Report


def _report() -> Report:
    runs = [CaseResult(id="a-8gpu", group="Group A", metric="iteration_time_s", measured=2.0, predicted=2.1, plan=None,
                       note="plan as published"),
            CaseResult(id="b|16gpu", group="Group A", metric="tflops_per_gpu", measured=100.0, predicted=80.0,
                       plan=None, searched=("recompute",), note="n/a", known_gap="Not modelled | yet."),
            CaseResult(id="c", group="Group B", metric="iteration_time_s", measured=1.0, predicted=1.5, plan=None,
                       calibration="X clock_ratio")]
    return Report(runs=runs, memory_runs=[CheckResult(id="m1", quantity="max_allocated_gib", reference=40.0,
                                                      predicted=39.0, unit="GiB", note="tp8")])


def test_every_run_counts_and_calibration_runs_are_marked():
    md = report_markdown(_report())
    # 2 counted runs (the calibration run left out): |+5 %| and |-20 %| -> 12.50 % mean, 20.00 % max
    assert "| **all** | **2** | 1 | **12.50 %** | **20.00 %** |" in md
    assert "| c (calibration, not counted) | Group B |" in md
    assert "b\\|16gpu (known gap)" in md
    assert "| m1 | max_allocated_gib | 40.00 | 39.00 | -2.5 % | `tp8` |" in md


def test_every_table_row_has_as_many_cells_as_its_header():
    md = report_markdown(_report())
    for block in md.split("\n\n"):
        rows = [r for r in block.splitlines() if r.startswith("|")]
        assert len({r.replace("\\|", "").count("|") for r in rows}) <= 1, block


def test_measured_memory_is_summarised_per_group():
    from autoplan.report.validation import memory_group_lines

    memory = [CheckResult(id=i, quantity="max_allocated_gib", reference=40.0, predicted=p, unit="GiB", group=g)
              for i, p, g in (("m1", 39.0, "X"), ("m2", 44.0, "X"), ("m3", 30.0, "Y"))]
    lines = {g["group"]: g for g in memory_group_lines(Report(runs=[], memory_runs=memory))}
    # X: -2.5 % and +10 %; Y: -25 %
    assert lines["X"]["runs"] == 2 and lines["X"]["mean_abs_pct"] == 6.25 and lines["X"]["max_abs_pct"] == 10.0
    assert lines["X"]["mean_signed_pct"] == 3.75 and lines["Y"]["mean_signed_pct"] == -25.0
