"""``rewardstream schemas ...``: export the JSON Schemas and check version compatibility."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["register"]

schemas_app = typer.Typer(
    help="Event schemas v1: JSON Schema export and the BACKWARD_TRANSITIVE compatibility check.",
    no_args_is_help=True,
)


@schemas_app.command("export")
def export(
    directory: Path = typer.Option(None, help="Where to write (default: schemas/jsonschema)."),
) -> None:
    """Write the current JSON Schema of every event type (the committed files are these bytes)."""
    from schemas.registry import DEFAULT_DIR, export_schemas

    for path in export_schemas(directory or DEFAULT_DIR):
        typer.echo(f"wrote {path}")


@schemas_app.command("check")
def check(
    directory: Path = typer.Option(None, help="Published schemas (default: schemas/jsonschema)."),
) -> None:
    """Refuse (exit 1) if the current models cannot read every published version of their type."""
    from schemas.registry import DEFAULT_DIR, check_compatibility, current_schemas, published_versions

    reports = check_compatibility(current_schemas(), published_versions(directory or DEFAULT_DIR))
    failed = [r for r in reports if r.problems]
    for report in reports:
        verdict = "INCOMPATIBLE" if report.problems else "ok"
        typer.echo(f"{verdict:12} {report.event_type} v{report.version}")
        for problem in report.problems:
            typer.echo(f"             {problem}")
    if failed:
        typer.secho(f"{len(failed)} published version(s) could not be read by the current schemas",
                    err=True, fg=typer.colors.RED)
        raise typer.Exit(1)
    typer.echo(f"all {len(reports)} published versions are readable (BACKWARD_TRANSITIVE)")


def register(app: typer.Typer) -> None:
    app.add_typer(schemas_app, name="schemas")
