"""`autoplan validate --markdown`: the validation report as markdown tables (the docs' fidelity page)."""

from autoplan.report.validation import validation_markdown
from autoplan.validate import CaseResult, CheckResult, Report


def _report() -> Report:
    cases = [CaseResult(id="a-8gpu", group="Group A", metric="iteration_time_s", measured=2.0, predicted=2.1,
                        plan=None, note="plan as published"),
             CaseResult(id="b-16gpu", group="Group A", metric="tflops_per_gpu", measured=100.0, predicted=80.0,
                        plan=None, searched=("recompute",), note="n/a", known_gap="Not modelled | yet. More.")]
    memory = [CheckResult(id="m1", quantity="peak", reference=40.0, predicted=39.0, unit="GiB")]
    return Report(cases=cases, memory=memory)


def test_one_table_per_group_with_the_summary_in_its_title():
    md = validation_markdown(_report())
    assert "**Group A: mean \\|error\\| 5.00 %, max 5.00 % (1 runs; 1 known gap not counted: mean \\|error\\| 20.00 %" in md
    assert "| case | metric | measured | predicted | error | plan simulated | searched (unpublished) |" in md
    assert "|---|---|---:|---:|---:|---|---|" in md
    assert "| a-8gpu | s/iter | 2 | 2.10 | +5.0 % | plan as published | — |" in md
    assert "| b-16gpu | TFLOP/s/GPU (eq. 3) | 100 | 80.00 | -20.0 % (gap) | n/a | recompute |" in md


def test_checks_summary_and_gaps():
    md = validation_markdown(_report())
    assert "| m1 | peak | 40 GiB | 39.00 GiB | -2.5 % |  |" in md
    assert "**All 1 runs: mean \\|error\\| 5.00 %, max 5.00 % (with the 1 known gaps: mean \\|error\\| 12.50 %" in md
    assert "- Known gap (1 run, not counted): Not modelled \\| yet. More." in md
    # every table row has as many cells as its header
    for block in md.split("\n\n"):
        rows = [r for r in block.splitlines() if r.startswith("|")]
        assert len({r.replace("\\|", "").count("|") for r in rows}) <= 1, block
