"""``rewardstream quarantine list|export``: what the consumers could not use, and why."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]

quarantine_app = typer.Typer(
    help="Records a consumer found on a topic and could not use (the `quarantine` topic): each "
         "with the consumer, the reason, where it was and its bytes.",
    no_args_is_help=True,
)


def _as_json(record: Any) -> dict[str, Any]:
    try:
        value: dict[str, str] = {"value": record.value.decode()}
    except UnicodeDecodeError:
        value = {"value_base64": base64.b64encode(record.value).decode()}
    return {"consumer": record.consumer, "reason": record.reason,
            "source_topic": record.source_topic, "source_partition": record.source_partition,
            "source_offset": record.source_offset, "at": record.at.isoformat(),
            "original_bytes": record.original_bytes, **value}


def _selected(consumer: str | None) -> list[Any]:
    from infra.settings import load_settings
    from streams.sources import read_quarantine

    unique: dict[bytes, Any] = {}
    for record in read_quarantine(load_settings()):
        if consumer is None or record.consumer == consumer:
            unique.setdefault(record.key, record)  # a replaying consumer repeats its own
    return list(unique.values())


@quarantine_app.command("list")
def list_(
    consumer: str = typer.Option(None, help="Only this consumer's (e.g. reward-join, archiver, "
                                 "trainer, gateway, monitors-metrics, console)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object a line, with the bytes."),
) -> None:
    """Each quarantined record once: consumer, where it was, its size and the reason.

    Example: rewardstream quarantine list --consumer reward-join"""
    records = _selected(consumer)
    if as_json:
        for record in records:
            typer.echo(json.dumps(_as_json(record)))
        return
    for record in records:
        typer.echo(f"{record.at:%Y-%m-%d %H:%M:%S}  {record.consumer:<16} "
                   f"{record.source_topic}/{record.source_partition}/{record.source_offset}  "
                   f"{record.original_bytes} B  {record.reason}")
    typer.echo(f"{len(records)} quarantined record(s)")


@quarantine_app.command("export")
def export(
    out: Path = typer.Option(..., help="JSON lines file to write."),
    consumer: str = typer.Option(None, help="Only this consumer's."),
) -> None:
    """Write each quarantined record once as a JSON line: the reason, where it was, and its bytes
    (as text, or base64 when not UTF-8). Fix an event and POST it to ingest's /v1/events to
    send it again; it is then validated like any other.

    Example: rewardstream quarantine export --consumer reward-join --out bad.jsonl"""
    records = _selected(consumer)
    out.write_text("".join(json.dumps(_as_json(r)) + "\n" for r in records))
    typer.echo(f"wrote {len(records)} record(s) to {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(quarantine_app, name="quarantine")
