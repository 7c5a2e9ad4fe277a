"""What `autoplan validate` prints: one table of every run, one summary line per group, the overall figures, and
the memory and consistency lines; ``--json`` and ``--markdown`` hold the same and the known-gap explanations."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

_METRICS = {"iteration_time_s": "s/step", "tflops_per_gpu": "TFLOP/s/GPU", "seconds_per_sample": "s/sample",
            "samples_per_s": "samples/s"}


def _err(pct: float | None) -> Text:
    if pct is None:
        return Text("n/a", style="dim")
    style = "green" if abs(pct) <= 5 else "yellow" if abs(pct) <= 10 else "red"
    return Text(f"{pct:+.1f} %", style=style)


def _pct(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{x:.2f} %"


def plan_label(plan: Any) -> str:
    """The plan's short label, plus the software behaviour modelled where it differs from today's defaults."""
    extra = []
    if plan.dp * plan.cp > 1 and not plan.overlap_grad_reduce:
        extra.append("grad-reduce-after-bwd")
    if plan.synchronous_p2p:
        extra.append("sync-p2p")
    if plan.dp * plan.cp > 1 and not plan.grad_reduce_in_fp32:
        extra.append("16bit-grads")
    if not plan.gradient_accumulation_fusion:
        extra.append("unfused-grad-acc")
    if plan.zero == 3 and plan.zero3_per_tensor:
        extra.append("z3-per-tensor")
    return " ".join([plan.short(), *extra])


def _value(metric: str, x: float) -> str:
    return f"{x:,.0f}" if metric == "samples_per_s" else f"{x:.4g}" if metric == "seconds_per_sample" else f"{x:.2f}"


def group_lines(report: Any) -> list[dict]:
    """Per group: runs, the shipped model's mean, max and signed error, leave-one-group-out and in-sample means."""
    out = []
    for group, rows in report.groups().items():
        s = report.summary(rows)
        out.append({"group": group, "runs": s["n"], "known_gaps": sum(1 for r in rows if r.known_gap),
                    "mean_abs_pct": s["mean_abs_pct"], "max_abs_pct": s["max_abs_pct"],
                    "mean_signed_pct": s["mean_signed_pct"],
                    "logo_mean_abs_pct": report.calibrated_summary(rows, report.logo)["mean_abs_pct"],
                    "in_sample_mean_abs_pct": report.calibrated_summary(rows, report.in_sample)["mean_abs_pct"]})
    return out


def run_kind(row: Any) -> str:
    """What a run trains, as the measured-accuracy table keys it, a model family's name: ``moe`` (a
    mixture-of-experts group), ``dense`` (the other transformers), ``cnn``, ``dlrm``."""
    if row.kind == "transformer":
        return "moe" if row.group.startswith("MoE") else "dense"
    return row.kind


def fidelity_lines(report: Any) -> list[dict]:
    """Per GPU and kind of model: the counted runs' mean, max and signed error and the leave-one-group-out mean, in
    ``autoplan/data/fidelity.json``'s form (``report/fidelity.py`` prints the line of a plan's GPU and model)."""
    cells: dict[tuple[str, str], list] = {}
    for r in report.runs:
        if r.counted:
            cells.setdefault((r.gpu, run_kind(r)), []).append(r)
    out = []
    for (gpu, kind), rows in sorted(cells.items()):
        s = report.summary(rows)
        logo = report.calibrated_summary(rows, report.logo)["mean_abs_pct"]
        out.append({"gpu": gpu, "kind": kind, "runs": s["n"], "mean_abs_pct": round(s["mean_abs_pct"], 2),
                    "max_abs_pct": round(s["max_abs_pct"], 2), "mean_signed_pct": round(s["mean_signed_pct"], 2),
                    "logo_mean_abs_pct": None if math.isnan(logo) else round(logo, 2)})
    return out


def memory_group_lines(report: Any) -> list[dict]:
    """Per group of measured memory runs: runs, mean, max and signed error."""
    groups: dict[str, list] = {}
    for m in report.memory_runs:
        groups.setdefault(m.group, []).append(m)
    return [{"group": g, "runs": (s := report.summary(rows))["n"], "mean_abs_pct": s["mean_abs_pct"],
             "max_abs_pct": s["max_abs_pct"], "mean_signed_pct": s["mean_signed_pct"]} for g, rows in groups.items()]


def overall(report: Any) -> dict:
    """The headline over every counted run, and the same without the known gaps."""
    s, no_gaps = report.summary(report.runs), report.summary(report.runs, gaps=False)
    return {"runs": s["n"], "mean_abs_pct": s["mean_abs_pct"], "max_abs_pct": s["max_abs_pct"],
            "mean_signed_pct": s["mean_signed_pct"], "known_gaps": s["n"] - no_gaps["n"],
            "without_known_gaps": no_gaps, "not_fit": sum(not r.fits for r in report.runs if r.counted),
            "logo": report.calibrated_summary(report.runs, report.logo),
            "in_sample": report.calibrated_summary(report.runs, report.in_sample),
            "calibration_runs": [{"id": r.id, "calibrates": r.calibration} for r in report.calibration_runs],
            "calibrated_specs": report.calibrated_specs}


def _run_table(report: Any) -> Table:
    t = Table(title="Published, measured runs against the shipped model (every run counts; g: a known gap; c: "
                    "calibrates a constant, v: another reading of the run above, neither counted)", title_justify="left")
    for col in ("group", "run", "metric", "measured", "predicted", "error", "plan simulated"):
        t.add_column(col, justify="right" if col in ("measured", "predicted", "error") else "left",
                     overflow="fold", max_width=30 if col in ("group", "run") else None)
    first = True
    for group, rows in report.groups().items():
        if not first:
            t.add_section()
        first = False
        for i, r in enumerate(rows):
            mark = " v" if r.variant_of else " g" if r.known_gap else " c" if r.calibration else ""
            plan = (plan_label(r.plan) + (" *" if r.searched else "") + (" ~" if r.needs else "")
                    + ("" if r.fits else f" ! {r.note}") if r.plan is not None else r.note)
            t.add_row(escape(group) if i == 0 else "", escape(r.id), _METRICS.get(r.metric, r.metric),
                      _value(r.metric, r.measured), _value(r.metric, r.predicted) if r.predicted is not None else "—",
                      _err(r.error_pct) + Text(mark, style="dim"), escape(plan))
    return t


def validation_view(report: Any) -> Group:
    """The run table, a line per group, the overall figures, memory, consistency checks and calibration runs."""
    parts: list = [_run_table(report), Text("* knobs the source did not publish were searched (fastest plan that "
                                            "fits); ! no plan fits the memory model: the closest is timed and "
                                            "counted; ~ the run also used a setting autoplan cannot describe "
                                            "(--json: needs); explanations of the known gaps: --json, "
                                            "docs/fidelity.md",
                                            style="dim")]
    for g in group_lines(report):
        gaps = f", {g['known_gaps']} known gap{'s' * (g['known_gaps'] > 1)}" if g["known_gaps"] else ""
        parts.append(Text(f"{g['group']}: {g['runs']} runs{gaps}: mean |error| {_pct(g['mean_abs_pct'])}, max "
                          f"{_pct(g['max_abs_pct'])}, signed {g['mean_signed_pct']:+.2f} %; leave-one-group-out "
                          f"{_pct(g['logo_mean_abs_pct'])}"))
    o = overall(report)
    parts.append(Text(f"All {o['runs']} runs: mean |error| {_pct(o['mean_abs_pct'])}, max {_pct(o['max_abs_pct'])}, "
                      f"signed {o['mean_signed_pct']:+.2f} %; leave-one-group-out {_pct(o['logo']['mean_abs_pct'])} "
                      f"(in-sample {_pct(o['in_sample']['mean_abs_pct'])})", style="bold"))
    w = o["without_known_gaps"]
    parts.append(Text(f"Without the {o['known_gaps']} known gaps: mean |error| {_pct(w['mean_abs_pct'])}, max "
                      f"{_pct(w['max_abs_pct'])} ({w['n']} runs); {o['not_fit']} run{'s' * (o['not_fit'] != 1)} "
                      "predicted not to fit"))
    for g in memory_group_lines(report):
        parts.append(Text(f"Measured memory, {g['group']}: {g['runs']} runs: mean |error| {_pct(g['mean_abs_pct'])}, "
                          f"max {_pct(g['max_abs_pct'])}, signed {g['mean_signed_pct']:+.2f} %"))
    if report.memory_runs:
        s = report.summary(report.memory_runs)
        unfit = sum("NOT to fit" in m.note for m in report.memory_runs)
        parts.append(Text(f"Measured peak memory ({s['n']} runs): mean |error| {_pct(s['mean_abs_pct'])}, max "
                          f"{_pct(s['max_abs_pct'])}, signed {s['mean_signed_pct']:+.2f} %; {unfit} predicted not "
                          "to fit"))
    for title, rows in (("consistency, memory formulas vs the paper's formulas", report.memory),
                        ("consistency, NCCL bus bandwidth vs its source rows", report.bandwidth)):
        if rows:
            s = report.summary(rows)
            parts.append(Text(f"Check ({title}, not accuracy): mean |error| {_pct(s['mean_abs_pct'])}, max "
                              f"{_pct(s['max_abs_pct'])} ({s['n']})", style="dim"))
    for c in o["calibration_runs"]:
        parts.append(Text(f"Calibration run (left out): {c['id']} sets {c['calibrates']}", style="dim"))
    for c in o["calibrated_specs"]:
        parts.append(Text(f"Calibrated spec {c['spec']}: {', '.join(c['fitted'])} fitted by autoplan calibrate on "
                          f"{', '.join(c['inputs'])} ({c['measurements']} measurements, none of them a run here)",
                          style="dim"))
    return Group(*parts)


def _row(c: Any) -> dict:
    return {"id": c.id, "group": c.group, "kind": c.kind, "gpu": c.gpu, "metric": c.metric, "measured": c.measured,
            "predicted": c.predicted, "error_pct": c.error_pct, "plan": c.plan.to_dict() if c.plan else None,
            "plan_label": plan_label(c.plan) if c.plan else None, "searched": list(c.searched), "note": c.note,
            "known_gap": c.known_gap, "calibration": c.calibration, "variant_of": c.variant_of, "fits": c.fits,
            "needs": list(c.needs)}


def _check(r: Any) -> dict:
    return {"id": r.id, "group": r.group, "quantity": r.quantity, "reference": r.reference,
            "predicted": r.predicted, "unit": r.unit, "error_pct": r.error_pct, "note": r.note}


def report_dict(report: Any) -> dict:
    """The report as JSON: every run and check, the summaries and the calibration factors."""
    def calibrated(c: Any) -> dict | None:
        return None if c is None else {"factors": c.factors, "predicted": c.predicted}

    return {"runs": [_row(c) for c in report.runs], "groups": group_lines(report), "overall": overall(report),
            "memory_runs": [_check(r) for r in report.memory_runs],
            "memory_runs_summary": report.summary(report.memory_runs), "memory_groups": memory_group_lines(report),
            "checks": [_check(r) for r in report.checks],
            "calibration": {"parameter": ("clock factor per pool: a GPU and its spec's compute constants "
                                          "(validate/calibration.py)"),
                            "in_sample": calibrated(report.in_sample),
                            "leave_one_group_out": calibrated(report.logo)}}


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")


def report_markdown(report: Any) -> str:
    """The same figures as markdown tables (the docs' fidelity page)."""
    lines = ["| group | runs | known gaps | mean \\|error\\| | max \\|error\\| | signed | leave-one-group-out |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for g in group_lines(report):
        lines.append(f"| {_md(g['group'])} | {g['runs']} | {g['known_gaps']} | {_pct(g['mean_abs_pct'])} | "
                     f"{_pct(g['max_abs_pct'])} | {g['mean_signed_pct']:+.2f} % | {_pct(g['logo_mean_abs_pct'])} |")
    o = overall(report)
    lines.append(f"| **all** | **{o['runs']}** | {o['known_gaps']} | **{_pct(o['mean_abs_pct'])}** | "
                 f"**{_pct(o['max_abs_pct'])}** | {o['mean_signed_pct']:+.2f} % | **{_pct(o['logo']['mean_abs_pct'])}** |")
    lines += ["", "| run | group | metric | measured | predicted | error | plan simulated |",
              "|---|---|---|---:|---:|---:|---|"]
    for r in report.runs:
        mark = (" (variant, not counted)" if r.variant_of else " (known gap)" if r.known_gap
                else " (calibration, not counted)" if r.calibration else "")
        pred = _value(r.metric, r.predicted) if r.predicted is not None else "—"
        err = f"{r.error_pct:+.1f} %" if r.error_pct is not None else "n/a"
        plan = plan_label(r.plan) if r.plan is not None else r.note
        if r.needs:
            mark += f" (also ran with {', '.join(r.needs)}: not modelled)"
        lines.append(f"| {_md(r.id)}{mark} | {_md(r.group)} | {_METRICS.get(r.metric, r.metric)} | {_value(r.metric, r.measured)}"
                     f" | {pred} | {err} | `{_md(plan)}` |")
    if report.memory_runs:
        lines += ["", "| measured memory, group | runs | mean \\|error\\| | max \\|error\\| | signed |",
                  "|---|---:|---:|---:|---:|"]
        for g in memory_group_lines(report):
            lines.append(f"| {_md(g['group'])} | {g['runs']} | {_pct(g['mean_abs_pct'])} | {_pct(g['max_abs_pct'])} | "
                         f"{g['mean_signed_pct']:+.2f} % |")
        s = report.summary(report.memory_runs)
        lines.append(f"| **all** | **{s['n']}** | **{_pct(s['mean_abs_pct'])}** | **{_pct(s['max_abs_pct'])}** | "
                     f"{s['mean_signed_pct']:+.2f} % |")
        lines += ["", "| measured memory run | metric | measured GiB | predicted GiB | error | plan |",
                  "|---|---|---:|---:|---:|---|"]
        for m in report.memory_runs:
            pred = f"{m.predicted:.2f}" if m.predicted is not None else "—"
            err = f"{m.error_pct:+.1f} %" if m.error_pct is not None else "n/a"
            lines.append(f"| {_md(m.id)} | {m.quantity} | {m.reference:.2f} | {pred} | {err} | `{_md(m.note)}` |")
    return "\n".join(lines) + "\n"
