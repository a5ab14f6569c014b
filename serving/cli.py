"""``rewardstream serve ...``: each service module exposes ``register(serve_app)``."""

from __future__ import annotations

import typer

from serving.console import cli as console_cli
from serving.engine import cli as engine_cli
from serving.gateway import cli as gateway_cli
from serving.ingest import cli as ingest_cli

__all__ = ["register"]

serve_app = typer.Typer(help="Run one of the platform's HTTP services.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    # In the order their commands appear in --help.
    for service in (ingest_cli, console_cli, gateway_cli, engine_cli):
        service.register(serve_app)
    app.add_typer(serve_app, name="serve")
