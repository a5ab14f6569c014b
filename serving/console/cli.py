"""``rewardstream serve console``."""

from __future__ import annotations

from pathlib import Path

import typer

from infra.ports import DEFAULT_PORTS

__all__ = ["register"]


def register(serve_app: typer.Typer) -> None:
    @serve_app.command("console")
    def console(
        host: str = typer.Option("127.0.0.1", help="interface to listen on"),
        port: int = typer.Option(DEFAULT_PORTS["console"], help="TCP port"),
        session_ttl_s: float = typer.Option(8 * 3600.0, help="how long a sign-in lasts"),
        ssl_certfile: Path = typer.Option(None, exists=True, dir_okay=False,
                                          help="serve over TLS with this certificate"),
        ssl_keyfile: Path = typer.Option(None, exists=True, dir_okay=False,
                                         help="the certificate's private key"),
        forwarded_allow_ips: str = typer.Option(
            "127.0.0.1", help="proxies whose X-Forwarded-For and X-Forwarded-Proto are "
            "trusted (comma-separated, '*' for any): they give the client's address, which "
            "wrong keys are limited by, and whether it used https (Secure cookies)"),
    ) -> None:
        """The monitoring console: firing alerts with evidence and actions (acknowledge,
        silence, resolve, roll back), metric charts per checkpoint and arm, checkpoint history,
        each shown for the orgs the signed-in staff member is granted.

        Staff sign in with a console key from REWARDSTREAM_CONSOLE_KEYS_FILE (hashed; reread
        when it changes) and get a session cookie. Example: `rewardstream keys create --for
        console --name ana --org '*' --file staff-keys.json`, then
        `REWARDSTREAM_CONSOLE_KEYS_FILE=staff-keys.json rewardstream serve console`
        """
        import uvicorn

        from infra.settings import load_settings
        from serving.console.app import create_app
        from serving.console.auth import StaffAuth, load_console_keys
        from serving.console.state import ConsoleState

        auth = StaffAuth(load_console_keys(), session_ttl_s=session_ttl_s)
        app = create_app(ConsoleState(load_settings()), auth)
        uvicorn.run(app, host=host, port=port, log_level="warning",
                    ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile,
                    proxy_headers=True, forwarded_allow_ips=forwarded_allow_ips)

