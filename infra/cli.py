"""The ``rewardstream`` command: one entry point whose groups each package contributes.

Each package's ``cli`` module exposes ``register(app)`` and keeps heavy imports (torch, faust,
FastAPI) inside its command bodies, so ``rewardstream --help`` answers at once.
"""

from __future__ import annotations

import importlib
import sys

import typer

from infra.redact import install_log_redaction, redact_text
from rewardstream_telemetry.errors import TelemetryError
from schemas.errors import RewardstreamError

__all__ = ["app", "main"]

# The packages that contribute commands, in the order their groups appear in --help.
_COMMAND_MODULES = (
    "infra.ops_cli",
    "streams.monitors.cli",
    "schemas.cli",
    "harness.cli",
    "harness.policy.cli",
    "serving.cli",
    "serving.keys_cli",
    "streams.cli",
    "streams.quarantine_cli",
    "trainer.cli",
    "trainer.model_cli",
    "bench.cli",
    "rewardstream.stack.cli",
)

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

for _module in _COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main() -> None:
    """Run the CLI; expected failures print one line and exit 1 instead of a stack trace.
    Every command's log lines and error messages go out with secrets redacted."""
    install_log_redaction()
    try:
        app()
    except (RewardstreamError, TelemetryError) as exc:  # the SDK's own: a queue dir in use
        typer.secho(f"error: {redact_text(str(exc))}", err=True, fg=typer.colors.RED)
        sys.exit(1)


if __name__ == "__main__":
    main()
