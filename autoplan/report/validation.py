"""Tables of `autoplan validate`: per-group errors, memory and bus-bandwidth checks."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text


def _err(pct: float | None) -> Text:
    if pct is None:
        return Text("n/a", style="dim")
    style = "green" if abs(pct) <= 5 else "yellow" if abs(pct) <= 10 else "red"
    return Text(f"{pct:+.1f} %", style=style)


def plan_label(plan: Any) -> str:
    """The plan's short label, plus the software behaviour modelled where it differs from today's defaults."""
    extra = []
    if plan.dp * plan.cp > 1 and not plan.overlap_grad_reduce:
        extra.append("grad-reduce-after-bwd")
    if plan.synchronous_p2p:
        extra.append("sync-p2p")
    if plan.dp * plan.cp > 1 and not plan.grad_reduce_in_fp32:
        extra.append("fp16-grads")
    if not plan.gradient_accumulation_fusion:
        extra.append("unfused-grad-acc")
    if plan.zero == 3 and plan.zero3_per_tensor:
        extra.append("z3-per-tensor")
    return " ".join([plan.short(), *extra])


def _group_summary(report: Any, rows: list) -> str:
    """Mean and max |error| of the counted runs, and of the known gaps beside them (shown, never hidden)."""
    s = report.summary(rows)
    gap_rows = [c for c in rows if c.known_gap and c.error_pct is not None]
    counted = f"mean |error| {s['mean_abs_pct']:.2f} %, max {s['max_abs_pct']:.2f} % ({s['n']} runs" if s["n"] else "("
    if not gap_rows:
        return counted + ")"
    errs = [abs(c.error_pct) for c in gap_rows]
    sep = "; " if s["n"] else ""
    plural = "s" if len(gap_rows) > 1 else ""
    return (f"{counted}{sep}{len(gap_rows)} known gap{plural} not counted: mean |error| {sum(errs) / len(errs):.2f} %, "
            f"max {max(errs):.2f} %)")


def validation_view(report: Any) -> Group:
    """Every table, then the overall summary."""
    parts: list = []
    for group, rows in report.groups().items():
        t = Table(title=Text(f"{group}: {_group_summary(report, rows)}"), title_justify="left")
        for col in ("case", "metric", "measured", "predicted", "error", "plan simulated", "searched (unpublished)"):
            t.add_column(col, justify="right" if col in ("measured", "predicted", "error") else "left")
        for c in rows:
            t.add_row(Text(str(c.id)), "s/iter" if c.metric == "iteration_time_s" else "TFLOP/s/GPU (eq. 3)",
                      f"{c.measured:g}",
                      f"{c.predicted:.2f}" if c.predicted is not None else "—",
                      _err(c.error_pct) + Text(" gap", style="dim") if c.known_gap else _err(c.error_pct),
                      Text(plan_label(c.plan) if c.plan else str(c.note)), Text(", ".join(c.searched) or "—"))
        parts.append(t)
    for title, rows in (("Memory per GPU (arXiv 2205.05198 Figs. 1/7)", report.memory),
                        ("NCCL bus bandwidth (nccl-tests)", report.bandwidth)):
        if not rows:
            continue
        s = report.summary(rows)
        t = Table(title=f"{title}: mean |error| {s['mean_abs_pct']:.2f} %, max {s['max_abs_pct']:.2f} %",
                  title_justify="left")
        for col in ("case", "quantity", "reference", "predicted", "error", "note"):
            t.add_column(col, justify="right" if col in ("reference", "predicted", "error") else "left")
        for r in rows:
            t.add_row(Text(str(r.id)), Text(str(r.quantity)), Text(f"{r.reference:g} {r.unit}"),
                      Text(f"{r.predicted:.2f} {r.unit}" if r.predicted is not None else "—"), _err(r.error_pct),
                      Text(str(r.note)))
        parts.append(t)
    if report.cnn:
        t = Table(title=f"CNN runs (Kahira et al. 2021 oracle, ABCI V100): {_group_summary(report, report.cnn)}",
                  title_justify="left")
        for col in ("case", "metric", "measured", "predicted", "error", "plan simulated", "note"):
            t.add_column(col, justify="right" if col in ("measured", "predicted", "error") else "left")
        for c in report.cnn:
            t.add_row(Text(str(c.id)), "s/iter" if c.metric == "iteration_time_s" else "s/sample", f"{c.measured:g}",
                      f"{c.predicted:.4g}" if c.predicted is not None else "—",
                      _err(c.error_pct) + Text(" gap", style="dim") if c.known_gap else _err(c.error_pct),
                      c.plan.short() if c.plan else "—",
                      Text("; ".join(x for x in (c.note, c.known_gap.split(". ")[0]) if x)))  # the gap's first sentence
        parts.append(t)
    if report.dlrm:
        s = report.summary(report.dlrm)
        title = (f"DLRM runs (NVIDIA DeepLearningExamples, DGX A100): mean |error| {s['mean_abs_pct']:.2f} %, "
                 f"max {s['max_abs_pct']:.2f} % ({s['n']} runs)")
        t = Table(title=title, title_justify="left")
        for col in ("case", "metric", "measured", "predicted", "error", "plan simulated", "note"):
            t.add_column(col, justify="right" if col in ("measured", "predicted", "error") else "left")
        for c in report.dlrm:
            predicted = f"{c.predicted:,.0f}" if c.predicted is not None else "—"
            t.add_row(Text(str(c.id)), "samples/s", f"{c.measured:,.0f}", predicted, _err(c.error_pct),
                      c.plan.short() if c.plan else "—", Text(str(c.note)))
        parts.append(t)
    s = report.summary(report.cases)
    gaps = [c for c in report.cases if c.known_gap]
    errs = [abs(c.error_pct) for c in report.cases if c.error_pct is not None]
    with_gaps = (f" (with the {len(gaps)} known gaps: mean |error| {sum(errs) / len(errs):.2f} %, max {max(errs):.2f} %)"
                 if gaps and errs else "")
    parts.append(Text(f"All {s['n']} runs: mean |error| {s['mean_abs_pct']:.2f} %, max {s['max_abs_pct']:.2f} %{with_gaps}. "
                      "Where a knob was not published, only that knob was searched and the fastest feasible plan "
                      "is shown.", style="bold"))
    for why in dict.fromkeys(c.known_gap for c in gaps):
        ids = [c.id for c in gaps if c.known_gap == why]
        parts.append(Text(f"Known gap ({len(ids)} run{'s' if len(ids) > 1 else ''}, not counted): {why}", style="dim"))
    return Group(*parts)


def report_dict(report: Any) -> dict:
    """The report as JSON."""
    def row(c: Any) -> dict:
        return {"id": c.id, "group": c.group, "metric": c.metric, "measured": c.measured, "predicted": c.predicted,
                "error_pct": c.error_pct, "plan": c.plan.to_dict() if c.plan else None, "searched": list(c.searched),
                "note": c.note, "known_gap": c.known_gap}

    def check(r: Any) -> dict:
        return {"id": r.id, "quantity": r.quantity, "reference": r.reference, "predicted": r.predicted,
                "unit": r.unit, "error_pct": r.error_pct, "note": r.note}

    return {"cases": [row(c) for c in report.cases],
            "summary": {g: report.summary(rows) for g, rows in report.groups().items()}
            | {"all": report.summary(report.cases)},
            "memory": [check(r) for r in report.memory], "bandwidth": [check(r) for r in report.bandwidth],
            "cnn": [row(c) for c in report.cnn], "cnn_summary": report.summary(report.cnn),
            "dlrm": [row(c) for c in report.dlrm], "dlrm_summary": report.summary(report.dlrm)}
