"""``rewardstream serve ...``: each service module exposes ``register(serve_app)``."""

from __future__ import annotations

import importlib

import typer

__all__ = ["register"]

# One module per service; each adds its own command to the group.
_SERVICES: tuple[str, ...] = (
    "serving.ingest.cli",
    "serving.console.cli",
    "serving.gateway.cli",
    "serving.engine.cli",
)

serve_app = typer.Typer(help="Run one of the platform's HTTP services.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    for module in _SERVICES:
        importlib.import_module(module).register(serve_app)
    app.add_typer(serve_app, name="serve")
