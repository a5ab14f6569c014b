"""``rewardstream serve console``."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(serve_app: typer.Typer) -> None:
    @serve_app.command("console")
    def console(
        host: str = typer.Option("127.0.0.1", help="interface to listen on"),
        port: int = typer.Option(8090, help="TCP port"),
    ) -> None:
        """The monitoring console: firing alerts with evidence and actions (acknowledge,
        silence, resolve, roll back), metric charts per checkpoint and arm, checkpoint history.

        Staff sign in with a key from REWARDSTREAM_STAFF_KEYS ("name:key,..."). Example:
        `REWARDSTREAM_STAFF_KEYS=ana:s3cret-key rewardstream serve console --port 8090`
        """
        import uvicorn

        from infra.settings import load_settings
        from serving.console.app import create_app
        from serving.console.auth import StaffKeys
        from serving.console.state import ConsoleState

        keys = StaffKeys.from_env()
        app = create_app(ConsoleState(load_settings()), keys)
        uvicorn.run(app, host=host, port=port, log_level="warning")
