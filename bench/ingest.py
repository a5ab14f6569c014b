"""``rewardstream bench ingest``: the HTTP ingest path against a bare kafka-python producer.

Both send the same events to the same broker in the same run. The HTTP path is a real uvicorn
server in its own process on loopback, fed gzip'd NDJSON batches (what the SDK sends) by a few
client threads; the baseline is one KafkaProducer (acks=all, idempotent) sending the events'
bytes keyed by trajectory. Prints events/s, p50/p99 latency (per request for HTTP, send to ack
per record for the producer) and the throughput ratio.
"""

from __future__ import annotations

import json

import typer

__all__ = ["register"]


def ingest(
    events: int = typer.Option(20_000, min=1000, help="Events sent by each path."),
    batch: int = typer.Option(500, min=1, help="Events per HTTP request (SDK default: 500)."),
    clients: int = typer.Option(4, min=1, help="Concurrent HTTP client threads."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Measure ingest throughput and latency next to a bare producer; prints the ratio.

    Uses the broker of REWARDSTREAM_* settings (`rewardstream kafka start`) and throwaway topics
    it deletes afterwards. Example: rewardstream bench ingest --events 20000 --json
    """
    from bench.ingest_run import run_ingest_bench

    result = run_ingest_bench(events, batch, clients)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(f"{'path':<16}{'events/s':>12}{'p50 ms':>10}{'p99 ms':>10}")
    for name in ("http", "bare_producer"):
        row = result[name]
        typer.echo(f"{name:<16}{row['events_per_s']:>12,.0f}{row['p50_ms']:>10.1f}"
                   f"{row['p99_ms']:>10.1f}")
    typer.echo(f"ratio http / bare producer throughput: {result['ratio']:.2f} "
               f"({result['events']} events, batches of {result['batch']}, "
               f"{result['clients']} clients, load average {result['load_avg_1m']:.1f})")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("ingest")(ingest)
