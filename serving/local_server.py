"""Serve an ASGI app with uvicorn in a background thread on a loopback port.

Used to run the torch engine in the gateway's process, and by tests and benchmarks that need a
real HTTP server. The socket is bound before the thread starts, so the URL is valid at once.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from schemas.errors import RewardstreamError

__all__ = ["LocalServer", "serve_in_thread"]


@dataclass
class LocalServer:
    url: str
    server: Any
    thread: threading.Thread

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0,
                    startup_timeout_s: float = 30.0) -> LocalServer:
    """Start serving ``app``; ``port=0`` picks a free port. Returns once it accepts requests
    (after the app's lifespan startup has run)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RewardstreamError(f"server on {host}:{sock.getsockname()[1]} did not start")
        time.sleep(0.01)
    return LocalServer(f"http://{host}:{sock.getsockname()[1]}", server, thread)
