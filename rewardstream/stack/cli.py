"""``rewardstream up``, ``status`` and ``down``: the platform on one machine from one settings
file (docs/operations.md)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rewardstream.stack.settings import StackSettings

__all__ = ["register"]

_CONFIG = typer.Option(None, "--config", envvar="REWARDSTREAM_CONFIG", help="The settings file "
                       "(TOML; the shipped example: infra/rewardstream.example.toml). Default: "
                       "rewardstream.toml here if there is one, else every default. Each "
                       "setting's REWARDSTREAM_* variable overrides the file.")


def _settings(config: Path | None) -> StackSettings:
    from rewardstream.stack.settings import load_stack_settings

    if config is None and Path("rewardstream.toml").exists():
        config = Path("rewardstream.toml")
    return load_stack_settings(config)


def up(
    config: Path | None = _CONFIG,
    detach: bool = typer.Option(False, "--detach", "-d", help="Run in the background (its log "
                                "in `<run dir>/up.log`) and return once every service is ready."),
    ready_timeout_s: float = typer.Option(300.0, min=1.0, help="Give up (and stop everything) "
                                          "when a service is not ready this long after start."),
) -> None:
    """Bring the platform up on this machine and keep it up: the broker (or the given cluster),
    the topics, the first keys (in files whose paths it prints), ingest, the reward worker, the
    archiver, both monitors workers, alert delivery and the console, and, when the settings ask,
    the gateway and the trainer. Every port is checked first. Each service logs to
    `<run dir>/logs/<service>.log`, and one that exits is started again, after a pause that
    grows while it keeps exiting.

    In the foreground it runs until Ctrl-C; `rewardstream down` stops it from another shell.
    Example: `rewardstream up --config rewardstream.toml --detach`, then
    `rewardstream status`.
    """
    from rewardstream.stack.up import detach as run_detached
    from rewardstream.stack.up import serve

    settings = _settings(config)
    if detach:
        raise typer.Exit(run_detached(settings, ready_timeout_s))
    code = serve(settings, ready_timeout_s, lambda line: print(line, flush=True))
    raise typer.Exit(code)


def status(
    config: Path | None = _CONFIG,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Each service's state, restarts and readiness (its /readyz, asked now), and where it
    answers. Exit 0 when every service runs and is ready, 3 otherwise."""
    from infra.supervisor import readiness
    from rewardstream.stack.services import RunDir
    from rewardstream.stack.state import alive, read_state

    run = RunDir(_settings(config).run_dir)
    state = read_state(run.state_file)
    if state is None or not alive(state.pid) or state.phase == "stopped":
        typer.echo(f"rewardstream is not up (run directory {run.path})")
        raise typer.Exit(3)
    ready = {row.name: readiness(row.ready_url) for row in state.services}
    if as_json:
        typer.echo(json.dumps({**asdict(state), "ready": ready}, indent=1))
    else:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state.started_at))
        broker = "started by up" if state.owns_broker else "not started by up"
        typer.echo(f"rewardstream up since {started} (pid {state.pid}, {state.phase}); broker "
                   f"{state.bootstrap_servers} ({broker}); run directory {run.path}")
        typer.echo(f"{'service':<17} {'state':<11} {'ready':<6} {'restarts':>8}  {'pid':>7}  "
                   "answers at")
        for row in state.services:
            problem = ready[row.name]
            typer.echo(f"{row.name:<17} {row.state:<11} {'yes' if problem is None else 'no':<6} "
                       f"{row.restarts:>8}  {row.pid or '-':>7}  {row.url or row.metrics_url}"
                       + (f"  ({problem})" if problem else ""))
    if any(row.state != "running" or ready[row.name] for row in state.services):
        raise typer.Exit(3)


def down(
    config: Path | None = _CONFIG,
    timeout_s: float = typer.Option(60.0, min=1.0, help="How long the services get to stop "
                                    "before they are killed."),
) -> None:
    """Stop what `rewardstream up` started: every service, newest first, then the broker if up
    had started it."""
    from rewardstream.stack.services import RunDir
    from rewardstream.stack.state import read_state, stop_run

    run = RunDir(_settings(config).run_dir)
    state = read_state(run.state_file)
    if state is None or state.phase == "stopped":
        typer.echo(f"rewardstream is not up (run directory {run.path})")
        return
    killed = stop_run(state, timeout_s)
    after = read_state(run.state_file)
    names = ", ".join(row.name for row in reversed(state.services))
    typer.echo(f"stopped {names}" + (f"; killed {', '.join(killed)}, which did not stop"
                                      if killed else ""))
    if after is not None and after.owns_broker and after.phase == "stopped":
        typer.echo(f"broker stopped ({after.bootstrap_servers}: up had started it)")
    if killed:
        sys.exit(1)


def register(app: typer.Typer) -> None:
    app.command("up")(up)
    app.command("status")(status)
    app.command("down")(down)
