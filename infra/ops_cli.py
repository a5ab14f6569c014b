"""``rewardstream kafka ...`` and ``rewardstream topics ...``: the local broker and the topics."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import typer

from infra import broker
from infra.errors import ConfigError
from infra.settings import MAX_LOCAL_BROKERS, Settings, load_settings

__all__ = ["register"]

kafka_app = typer.Typer(
    help=(
        "Run a Kafka broker (KRaft) on loopback, assembled from Maven Central jars: one node, or "
        "a cluster of nodes (REWARDSTREAM_KAFKA_BROKERS, --brokers). Data lives in "
        "REWARDSTREAM_KAFKA_DATA_DIR (default ~/.cache/rewardstream/kafka-data) and survives "
        "stop/start."
    ),
    no_args_is_help=True,
)
_BROKERS_HELP = ("Nodes of the local cluster (default REWARDSTREAM_KAFKA_BROKERS, else 1); node k "
                 "listens on REWARDSTREAM_KAFKA_PORT + 2(k-1). Give the same number to every "
                 "command and client, e.g. by exporting the variable.")


def _settings(brokers: int | None) -> Settings:
    settings = load_settings()
    if brokers is None:
        return settings
    if not 1 <= brokers <= MAX_LOCAL_BROKERS:
        raise ConfigError(f"--brokers {brokers}: must be between 1 and {MAX_LOCAL_BROKERS}")
    return replace(settings, kafka_brokers=brokers)


topics_app = typer.Typer(help="Create and inspect the platform's topics.", no_args_is_help=True)
principals_app = typer.Typer(
    help="One Kafka user per service with the ACLs of its row in the principals table "
         "(docs/security.md).",
    no_args_is_help=True,
)


def _admin_settings() -> Settings:
    """The environment's settings; for a secured local broker with no credentials in the
    environment, its admin (whose password the data directory holds)."""
    from infra.broker_security import ADMIN, is_secured
    from infra.credentials import principal_settings

    settings = load_settings()
    if settings.kafka_auth.sasl or settings.external_bootstrap or not is_secured(settings):
        return settings
    return principal_settings(settings, ADMIN)


def _described(state: broker.BrokerStatus) -> str:
    if len(state.nodes) == 1:
        return f"{state.describe()}; log at {state.log_file}"
    return f"{state.describe()}\n  logs at {state.data_dir}/node-<k>/{state.log_file.name}"


@kafka_app.command("start")
def kafka_start(
    brokers: int = typer.Option(None, help=_BROKERS_HELP),
    secure: bool = typer.Option(
        False, "--secure", help="SASL/SCRAM for clients, ACLs enforced, admin the one super user "
        "(its password in `<data dir>/credentials/admin.password`); needs a new data directory, "
        "which then always starts secured."),
) -> None:
    """Start the broker (fetching jars and formatting storage the first time); no-op if running."""
    from infra.broker_security import is_secured
    from infra.credentials import credentials_dir

    settings = _settings(brokers)
    state, started = broker.start(settings, secure=secure)
    if started:
        typer.echo(f"Kafka broker started: {_described(state)}")
    else:
        typer.echo(f"Kafka broker already running: {state.describe()}")
    if is_secured(settings):
        typer.echo(f"secured: SASL/SCRAM and ACLs; admin's password is in "
                   f"{credentials_dir(settings)}/admin.password. Next: `rewardstream topics "
                   "create`, `rewardstream kafka principals create`.")
    elif secure:
        raise typer.BadParameter("a plaintext broker already runs on this data directory",
                                 param_hint="--secure")


@kafka_app.command("stop")
def kafka_stop(brokers: int = typer.Option(None, help=_BROKERS_HELP)) -> None:
    """Stop the broker (every node) cleanly and wait until its ports are free."""
    if broker.stop(_settings(brokers)):
        typer.echo("Kafka broker stopped; ports are free")
    else:
        typer.echo("Kafka broker was not running")


@kafka_app.command("status")
def kafka_status(brokers: int = typer.Option(None, help=_BROKERS_HELP)) -> None:
    """Say whether the broker (each node) runs, where, and where its data and log are. Exit 3
    unless every node runs."""
    state = broker.status(_settings(brokers))
    typer.echo(f"Kafka broker {_described(state)}")
    if not state.running:
        raise typer.Exit(3)


@topics_app.command("create")
def topics_create(
    partitions: int = typer.Option(
        None, help="Partitions per topic (default REWARDSTREAM_TOPIC_PARTITIONS, else 1)."
    ),
) -> None:
    """Create every topic of the platform that is missing (idempotent)."""
    from infra.topics import create_topics

    settings = _admin_settings()
    if partitions is not None:
        settings = replace(settings, topic_partitions=partitions)
    for name, created in create_topics(settings):
        typer.echo(f"{'created' if created else 'exists '}  {name}")


@topics_app.command("describe")
def topics_describe() -> None:
    """Show each topic: partitions, replicas, min in-sync replicas, cleanup policy, retention and
    what it carries."""
    from rich.console import Console
    from rich.table import Table

    from infra.topics import describe_topics

    table = Table("topic", "exists", "partitions", "replicas", "min ISR", "cleanup",
                  "retention.ms", "carries")
    for state in describe_topics(_admin_settings()):
        table.add_row(state.name, "yes" if state.exists else "NO", str(state.partitions),
                      str(state.replicas), state.min_insync, state.cleanup_policy,
                      state.retention_ms, state.description)
    Console().print(table)


_CREDENTIALS_HELP = "Password files, one per principal (default: `<data dir>/credentials`)."


@principals_app.command("create")
def principals_create(
    credentials: Path = typer.Option(None, help=_CREDENTIALS_HELP + " Missing ones are made."),
) -> None:
    """Create every service's Kafka user (SCRAM-SHA-256/512) and its ACLs under the topic
    prefix, as admin; idempotent. Each password goes to USER.password in the credentials
    directory (mode 600); a service reads only its own (REWARDSTREAM_KAFKA_PASSWORD_FILE)."""
    from infra.credentials import credentials_dir
    from infra.principals_admin import create_principals

    settings = _admin_settings()
    for each in create_principals(settings, credentials or credentials_dir(settings)):
        typer.echo(f"{each.name:14} {each.acls:2} ACLs  password in {each.password_file}")


@principals_app.command("passwords")
def principals_passwords(
    credentials: Path = typer.Option(..., help="Directory of the password files, e.g. "
                                     "config/kafka for docker-compose.yml."),
) -> None:
    """Make the password file (mode 600) of admin and of every principal that has none, without
    a broker: what docker-compose.yml's secrets are read from."""
    from infra.broker_security import ADMIN
    from infra.credentials import ensure_password, password_file
    from infra.principals import PRINCIPALS

    for name in (ADMIN, *(p.name for p in PRINCIPALS)):
        path = password_file(credentials, name)
        existed = path.exists()
        ensure_password(path)
        typer.echo(f"{'kept   ' if existed else 'created'} {path}")


@principals_app.command("env")
def principals_env(
    name: str = typer.Argument(..., help="A principal of the table, e.g. ingest."),
    credentials: Path = typer.Option(None, help=_CREDENTIALS_HELP),
) -> None:
    """Print the environment that makes a service connect as this principal (the password
    as its file, never itself).

    Example: eval "$(rewardstream kafka principals env ingest)"
    """
    from infra.credentials import principal_settings
    from infra.kafka_auth import client_env
    from infra.principals import principal

    principal(name)  # an unknown name fails here, naming the known ones
    settings = principal_settings(load_settings(), name, credentials)
    for key, value in client_env(settings).items():
        typer.echo(f"export {key}={shlex.quote(value)}")


def register(app: typer.Typer) -> None:
    kafka_app.add_typer(principals_app, name="principals")
    app.add_typer(kafka_app, name="kafka")
    app.add_typer(topics_app, name="topics")
