"""`autoplan validate`: predictions against published, measured training runs."""

from __future__ import annotations

import json

import click

from autoplan.cli.app import _console, _UsablePath, friendly, main


@main.command()
@click.argument("file", required=False, type=_UsablePath(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every run, the known gaps' explanations).")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the figures as markdown tables.")
@click.option("--no-calibration", "no_calibration", is_flag=True,
              help="Skip the leave-one-group-out and in-sample clock fits (faster).")
@click.option("--write-fidelity", "fidelity_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the per-GPU accuracy table that simulate and search print (autoplan/data/"
                   "fidelity.json ships it for the bundled runs).")
@friendly
def validate(file: str | None, as_json: bool, as_markdown: bool, no_calibration: bool,
             fidelity_out: str | None) -> None:
    """Compare predictions with published, measured training runs (default: the runs shipped with autoplan).

    Every run counts, known gaps included; runs that calibrate a shipped constant are named and left out. Beside
    each group's error: the same group predicted with a compute clock fitted on the other groups of its calibration
    pool, the GPU and its spec's compute constants (leave one group out)."""
    from pathlib import Path

    from autoplan.validate import validate as run_validation

    report = run_validation(Path(file) if file else None, calibrate=not no_calibration)
    if fidelity_out:
        from autoplan.report.validation import fidelity_lines
        Path(fidelity_out).write_text(json.dumps({"source": "autoplan validate" + (f" {file}" if file else ""),
                                                  "rows": fidelity_lines(report)}, indent=1) + "\n")
    if as_json:
        from autoplan.report.validation import report_dict
        click.echo(json.dumps(report_dict(report), indent=2))
        return
    if as_markdown:
        from autoplan.report.validation import report_markdown
        click.echo(report_markdown(report), nl=False)
        return
    from autoplan.report.validation import validation_view
    _console().print(validation_view(report))
