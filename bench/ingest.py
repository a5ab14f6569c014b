"""``rewardstream bench ingest``: the HTTP ingest path against bare aiokafka and kafka-python
producers.

All three send the same events to the same broker in the same run. The HTTP path is a real
uvicorn server in its own process on loopback, fed gzip'd NDJSON batches (what the SDK sends)
by a few client threads; each baseline is one producer (acks=all, idempotent) sending the
events' bytes keyed by trajectory. Prints events/s, p50/p99 latency (per request for HTTP, send
to ack per record for the producers), CPU µs per event (HTTP: clients plus server) and the
throughput and CPU ratios, min–max over interleaved runs.
"""

from __future__ import annotations

import json

import typer

__all__ = ["register"]


def _range(span: dict[str, float], spec: str) -> str:
    return f"{span['min']:{spec}}–{span['max']:{spec}}"


def ingest(
    events: int = typer.Option(50_000, min=1000, help="Events sent by each path in each run."),
    batch: int = typer.Option(500, min=1, help="Events per HTTP request (SDK default: 500)."),
    clients: int = typer.Option(4, min=1, help="Concurrent HTTP client threads."),
    runs: int = typer.Option(3, min=1, help="Runs; the paths take turns going first."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Measure ingest throughput and latency next to bare producers; prints the ratios.

    Uses the broker of REWARDSTREAM_* settings (`rewardstream kafka start`) and throwaway topics
    it deletes afterwards. Example: rewardstream bench ingest --runs 3 --json
    """
    from bench.ingest_run import PATHS, run_ingest_bench

    result = run_ingest_bench(events, batch, clients, runs)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(f"{'path':<14}{'events/s':>18}{'p50 ms':>14}{'p99 ms':>14}{'CPU µs/event':>16}")
    for name in PATHS:
        row = result[name]
        typer.echo(f"{name:<14}{_range(row['events_per_s'], ',.0f'):>18}"
                   f"{_range(row['p50_ms'], '.1f'):>14}{_range(row['p99_ms'], '.1f'):>14}"
                   f"{_range(row['cpu_us_per_event'], '.1f'):>16}")
    typer.echo(f"http / aiokafka: {_range(result['ratio_to_aiokafka'], '.2f')} (goal >= 0.5); "
               f"http / kafka-python: {_range(result['ratio_to_kafka_python'], '.2f')}")
    typer.echo(f"CPU per event, aiokafka / http: {_range(result['cpu_ratio_to_aiokafka'], '.2f')}; "
               f"kafka-python / http: {_range(result['cpu_ratio_to_kafka_python'], '.2f')}")
    typer.echo(f"{result['events']} events a run, {len(result['runs'])} runs, batches of "
               f"{result['batch']}, {result['clients']} clients, load average "
               f"{_range(result['load_avg_1m'], '.1f')}")


def register(bench_app: typer.Typer) -> None:
    bench_app.command("ingest")(ingest)
