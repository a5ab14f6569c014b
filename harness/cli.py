"""``rewardstream demo``: the README's main command."""

from __future__ import annotations

import typer

__all__ = ["register"]


def demo(
    trajectories: int = typer.Option(3, min=1, help="How many sample trajectories to send."),
) -> None:
    """Start the local broker, create the topics, send sample trajectories to events.raw and show
    them arriving from the log."""
    from harness.quickstart import run_quickstart

    run_quickstart(trajectories)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
