"""``rewardstream schemas ...``: export the JSON Schemas and check version compatibility."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["register"]

schemas_app = typer.Typer(
    help="Event schemas: JSON Schema export and the BACKWARD_TRANSITIVE compatibility check.",
    no_args_is_help=True,
)


@schemas_app.command("export")
def export(
    directory: Path = typer.Option(None, help="Where to write (default: schemas/jsonschema)."),
) -> None:
    """Write the current JSON Schema of every event type (the committed files are these bytes),
    and refresh the telemetry SDK's copies of the newest versions when the checkout has them."""
    from schemas.versions import DEFAULT_DIR, SDK_SCHEMA_DIR, export_schemas, sync_sdk_schemas

    where = directory or DEFAULT_DIR
    for path in export_schemas(where):
        typer.echo(f"wrote {path}")
    if SDK_SCHEMA_DIR.parent.is_dir():
        for path in sync_sdk_schemas(where):
            typer.echo(f"{'updated' if path.exists() else 'removed'} {path}")


@schemas_app.command("check")
def check(
    directory: Path = typer.Option(None, help="Published schemas (default: schemas/jsonschema)."),
) -> None:
    """Refuse (exit 1) if the current models cannot read every published version of their type,
    except for the breaks acknowledged in acknowledged_breaks.json (listed as TIGHTENED)."""
    from schemas.versions import (
        DEFAULT_DIR,
        acknowledged_breaks,
        check_compatibility,
        current_schemas,
        published_versions,
    )

    where = directory or DEFAULT_DIR
    reports = check_compatibility(current_schemas(), published_versions(where),
                                  acknowledged_breaks(where))
    failed = [r for r in reports if r.problems]
    for report in reports:
        verdict = "INCOMPATIBLE" if report.problems else \
            "TIGHTENED" if report.acknowledged else "ok"
        typer.echo(f"{verdict:12} {report.event_type} v{report.version}")
        for problem in report.problems:
            typer.echo(f"             {problem}")
        for reason in report.reasons:
            typer.echo(f"             acknowledged: {reason}")
        for problem in report.acknowledged:
            typer.echo(f"             (acknowledged) {problem}")
    if failed:
        typer.secho(f"{len(failed)} published version(s) could not be read by the current schemas",
                    err=True, fg=typer.colors.RED)
        raise typer.Exit(1)
    tightened = sum(len(r.acknowledged) for r in reports)
    typer.echo(f"all {len(reports)} published versions are readable (BACKWARD_TRANSITIVE), except "
               f"for {tightened} acknowledged tightening(s) listed above")


@schemas_app.command("acknowledge")
def acknowledge(
    reason: str = typer.Option(..., help="Why these breaks are deliberate (kept in the file)."),
    directory: Path = typer.Option(None, help="Published schemas (default: schemas/jsonschema)."),
) -> None:
    """Record every problem `schemas check` finds now as a deliberate break of the current
    schema version, with its reason, in acknowledged_breaks.json (commit it with the change)."""
    from schemas.versions import ACKNOWLEDGED_FILE, DEFAULT_DIR, acknowledge_breaks

    added = acknowledge_breaks(reason, directory or DEFAULT_DIR)
    for label, problems in added.items():
        typer.echo(f"{label}: {len(problems)} problem(s) acknowledged")
    typer.echo(f"{ACKNOWLEDGED_FILE}: " + ("updated" if added else "nothing to acknowledge"))


def register(app: typer.Typer) -> None:
    app.add_typer(schemas_app, name="schemas")
