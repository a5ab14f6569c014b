"""``rewardstream serve ingest``, and ``serve ingest-key``, the deprecated name of ``rewardstream
keys create --for ingest``."""

from __future__ import annotations

import json

import typer

from infra.ports import DEFAULT_PORTS

__all__ = ["register"]


def ingest(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0 for all)."),
    port: int = typer.Option(DEFAULT_PORTS["ingest"], help="TCP port."),
) -> None:
    """Run the ingest HTTP API: POST /v1/events appends validated events to events.raw.

    Reads REWARDSTREAM_INGEST_KEYS_FILE (JSON API keys, see `rewardstream keys create`; reread
    when it changes),
    REWARDSTREAM_INGEST_PSEUDONYM_SECRET (HMAC key for user ids), optional caps
    REWARDSTREAM_INGEST_MAX_EVENT_BYTES (1 MiB), _MAX_BATCH_BYTES (10 MiB), _MAX_BATCH_EVENTS
    (5000), _MAX_JSON_DEPTH (32), _MAX_COMPRESSION_RATIO (100), _TIMESTAMP_MAX_AGE_S (2592000,
    30 days), _TIMESTAMP_MAX_AHEAD_S (86400), _DEDUPE_WINDOW_S (86400), _DEDUPE_MAX_ENTRIES
    (1000000), _ACK_TIMEOUT_S (5), and the broker settings (REWARDSTREAM_BOOTSTRAP_SERVERS,
    REWARDSTREAM_TOPIC_PREFIX).

    Example: rewardstream serve ingest --port 8400; then GET /docs for the OpenAPI document.
    """
    import logging

    import uvicorn

    from infra.log_filters import limit_repeats
    from infra.settings import load_settings
    from serving.ingest.app import create_app
    from serving.ingest.config import load_ingest_config

    app = create_app(load_ingest_config(), load_settings())
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    limit_repeats()  # aiokafka logs each refused connection while Kafka is away
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def ingest_key(
    org: str = typer.Option(..., help="The org every event sent with this key belongs to."),
    types: str = typer.Option("*", help="Comma-separated event types the key may send, or '*' "
                              "(every client type; completion.served only when named)."),
    name: str = typer.Option("", help="A label shown in metrics and dead-letter headers."),
    rate_per_s: float = typer.Option(2000.0, help="Sustained events per second for this key."),
    burst: float = typer.Option(10000.0, help="Events the key may send at once above the rate."),
) -> None:
    """Deprecated: use `rewardstream keys create --for ingest` (same output).

    Example: rewardstream keys create --for ingest --org acme --types tool.called
    """
    from serving.ingest.keys import KeyScope
    from serving.keys_cli import make_key

    typer.echo("`serve ingest-key` is deprecated and will be removed: use `rewardstream keys "
               "create --for ingest` (and `keys list`, `keys revoke`)", err=True)
    key, entry = make_key(KeyScope.INGEST, [org], name or f"{org}-key",
                          [t.strip() for t in types.split(",") if t.strip()], rate_per_s, burst)
    typer.echo(f"key:   {key}")
    typer.echo(f"entry: {json.dumps(entry.to_entry())}")


def register(serve_app: typer.Typer) -> None:
    serve_app.command("ingest")(ingest)
    serve_app.command("ingest-key", deprecated=True)(ingest_key)
