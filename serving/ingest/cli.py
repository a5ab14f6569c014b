"""``rewardstream serve ingest`` and ``rewardstream serve ingest-key``."""

from __future__ import annotations

import json

import typer

__all__ = ["register"]


def ingest(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0 for all)."),
    port: int = typer.Option(8400, help="TCP port."),
) -> None:
    """Run the ingest HTTP API: POST /v1/events appends validated events to events.raw.

    Reads REWARDSTREAM_INGEST_KEYS_FILE (JSON API keys, see `serve ingest-key`),
    REWARDSTREAM_INGEST_PSEUDONYM_SECRET (HMAC key for user ids), optional caps
    REWARDSTREAM_INGEST_MAX_EVENT_BYTES (1 MiB), _MAX_BATCH_BYTES (10 MiB), _MAX_BATCH_EVENTS
    (5000), _DEDUPE_WINDOW_S (86400), _DEDUPE_MAX_ENTRIES (1000000), _ACK_TIMEOUT_S (5), and the
    broker settings (REWARDSTREAM_BOOTSTRAP_SERVERS, REWARDSTREAM_TOPIC_PREFIX).

    Example: rewardstream serve ingest --port 8400; then GET /docs for the OpenAPI document.
    """
    import uvicorn

    from infra.settings import load_settings
    from serving.ingest.app import create_app
    from serving.ingest.config import load_ingest_config

    app = create_app(load_ingest_config(), load_settings())
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def ingest_key(
    org: str = typer.Option(..., help="The org every event sent with this key belongs to."),
    types: str = typer.Option("*", help="Comma-separated event types the key may send, or '*'."),
    name: str = typer.Option("", help="A label shown in metrics and dead-letter headers."),
    rate_per_s: float = typer.Option(2000.0, help="Sustained events per second for this key."),
    burst: float = typer.Option(10000.0, help="Events the key may send at once above the rate."),
) -> None:
    """Make a new API key: prints the key (give it to the client, it is not stored) and the JSON
    entry to add to the key file (it holds only the key's SHA-256).

    Example: rewardstream serve ingest-key --org acme --types tool.called,edit.decided
    """
    from serving.ingest.keys import ApiKey, hash_key, new_key

    key = new_key()
    entry = {"name": name or f"{org}-key", "key_sha256": hash_key(key), "org_id": org,
             "event_types": [t.strip() for t in types.split(",") if t.strip()],
             "rate_per_s": rate_per_s, "burst": burst}
    ApiKey.from_entry(entry, 0)  # refuses unknown event types before anything is printed
    typer.echo(f"key:   {key}")
    typer.echo(f"entry: {json.dumps(entry)}")


def register(serve_app: typer.Typer) -> None:
    serve_app.command("ingest")(ingest)
    serve_app.command("ingest-key")(ingest_key)
