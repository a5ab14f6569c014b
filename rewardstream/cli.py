"""The ``rewardstream`` command: one entry point whose groups each package contributes.

This is the composition root, the top layer (``pyproject.toml``, ``[tool.importlinter]``): it
imports each package's command module by name and calls its ``register(app)``. Those modules
keep heavy imports (torch, faust, FastAPI) inside their command bodies, so ``rewardstream
--help`` answers at once.
"""

from __future__ import annotations

import sys

import typer

from bench import cli as bench_cli
from harness import cli as harness_cli
from harness.policy import cli as policy_cli
from infra import ops_cli
from infra.redact import install_log_redaction, redact_text
from rewardstream.stack import cli as stack_cli
from rewardstream_telemetry.errors import TelemetryError
from schemas import cli as schemas_cli
from schemas.errors import RewardstreamError
from serving import cli as serving_cli
from serving import keys_cli
from streams import cli as streams_cli
from streams import quarantine_cli
from streams.monitors import cli as monitors_cli
from streams.release import cli as release_cli
from trainer import cli as trainer_cli
from trainer import model_cli

__all__ = ["app", "main"]

app = typer.Typer(
    name="rewardstream",
    help=(
        "Event-sourced reward signals, monitors and a gated trainer for real-time RL of a coding "
        "agent.\n\nStart here: `rewardstream up` (the platform for your own agent, "
        "docs/quickstart.md) or `rewardstream demo`. Every command reads REWARDSTREAM_* "
        "environment variables (REWARDSTREAM_KAFKA_PORT, REWARDSTREAM_TOPIC_PREFIX, "
        "REWARDSTREAM_BOOTSTRAP_SERVERS, ...)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="markdown",  # reflows docstrings' hard line breaks into paragraphs
)

# In the order their groups appear in --help.
for register in (ops_cli.register, monitors_cli.register, release_cli.register,
                 schemas_cli.register,
                 harness_cli.register, policy_cli.register, serving_cli.register,
                 keys_cli.register, streams_cli.register, quarantine_cli.register,
                 trainer_cli.register, model_cli.register, bench_cli.register,
                 stack_cli.register):
    register(app)


def main() -> None:
    """Run the CLI; expected failures print one line and exit 1 instead of a stack trace.
    Every command's log lines and error messages go out with secrets redacted."""
    install_log_redaction()
    try:
        app()
    except (RewardstreamError, TelemetryError) as exc:  # the SDK's own: a queue dir in use
        typer.secho(f"error: {redact_text(str(exc))}", err=True, fg=typer.colors.RED)
        sys.exit(1)
