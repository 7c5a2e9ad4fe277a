"""`autoplan validate`: predictions against published, measured training runs."""

from __future__ import annotations

import json

import click

from autoplan.cli.app import (_console, _UsablePath, friendly,
                              main)


@main.command()
@click.argument("file", required=False, type=_UsablePath(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def validate(file: str | None, as_json: bool) -> None:
    """Compare predictions with published, measured training runs (default: the runs shipped with autoplan)."""
    from pathlib import Path

    from autoplan.validate import validate as run_validation

    report = run_validation(Path(file) if file else None)
    if as_json:
        from autoplan.report.validation import report_dict
        click.echo(json.dumps(report_dict(report), indent=2))
        return
    from autoplan.report.validation import validation_view
    _console().print(validation_view(report))
