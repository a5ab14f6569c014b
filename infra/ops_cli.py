"""``rewardstream kafka ...`` and ``rewardstream topics ...``: the local broker and the topics."""

from __future__ import annotations

import typer

from infra import broker
from infra.settings import load_settings

__all__ = ["register"]

kafka_app = typer.Typer(
    help=(
        "Run a single-node Kafka broker (KRaft) on loopback, assembled from Maven Central jars. "
        "Data lives in REWARDSTREAM_KAFKA_DATA_DIR (default ~/.cache/rewardstream/kafka-data) and "
        "survives stop/start."
    ),
    no_args_is_help=True,
)
topics_app = typer.Typer(help="Create and inspect the platform's topics.", no_args_is_help=True)


@kafka_app.command("start")
def kafka_start() -> None:
    """Start the broker (fetching jars and formatting storage the first time); no-op if running."""
    state, started = broker.start(load_settings())
    if started:
        typer.echo(f"Kafka broker started: {state.describe()}; log at {state.log_file}")
    else:
        typer.echo(f"Kafka broker already running: {state.describe()}")


@kafka_app.command("stop")
def kafka_stop() -> None:
    """Stop the broker cleanly and wait until its ports are free."""
    if broker.stop(load_settings()):
        typer.echo("Kafka broker stopped; ports are free")
    else:
        typer.echo("Kafka broker was not running")


@kafka_app.command("status")
def kafka_status() -> None:
    """Say whether the broker runs, where, and where its data and log are. Exit 3 if it does not."""
    state = broker.status(load_settings())
    typer.echo(f"Kafka broker {state.describe()}; log at {state.log_file}")
    if not state.running:
        raise typer.Exit(3)


@topics_app.command("create")
def topics_create(
    partitions: int = typer.Option(
        None, help="Partitions per topic (default REWARDSTREAM_TOPIC_PARTITIONS, else 1)."
    ),
) -> None:
    """Create every topic of the platform that is missing (idempotent)."""
    from dataclasses import replace

    from infra.topics import create_topics

    settings = load_settings()
    if partitions is not None:
        settings = replace(settings, topic_partitions=partitions)
    for name, created in create_topics(settings):
        typer.echo(f"{'created' if created else 'exists '}  {name}")


@topics_app.command("describe")
def topics_describe() -> None:
    """Show each topic: partitions, cleanup policy, retention and what it carries."""
    from rich.console import Console
    from rich.table import Table

    from infra.topics import describe_topics

    table = Table("topic", "exists", "partitions", "cleanup", "retention.ms", "carries")
    for state in describe_topics(load_settings()):
        table.add_row(state.name, "yes" if state.exists else "NO", str(state.partitions),
                      state.cleanup_policy, state.retention_ms, state.description)
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(kafka_app, name="kafka")
    app.add_typer(topics_app, name="topics")
