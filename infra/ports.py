"""Ports checked before anything starts: a clash is one line naming the port and the setting
that moves it, not a service that dies minutes later (after a policy build, say)."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass

from infra.errors import ConfigError

__all__ = ["DEFAULT_PORTS", "PortUse", "check_ports", "port_free"]

# Where each service listens unless told otherwise: the HTTP services' APIs, and the /metrics
# and /readyz of the workers that have no API. One table, so that `rewardstream up`, the
# services' own options, docker-compose.yml and the Prometheus configuration agree.
DEFAULT_PORTS = {
    "gateway": 8000,
    "engine": 8001,
    "console": 8090,
    "ingest": 8400,
    "worker": 8410,
    "archiver": 8411,
    "monitors-metrics": 8412,
    "monitors-detect": 8413,
    "alert-delivery": 8414,
    "trainer": 8415,
}


@dataclass(frozen=True)
class PortUse:
    port: int
    what: str  # who will listen there, e.g. "ingest"
    setting: str  # what moves it, e.g. "ingest.port in rewardstream.toml"


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``port`` now (as servers bind: with SO_REUSEADDR, so a
    connection that just closed and lingers does not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def check_ports(uses: Sequence[PortUse], host: str = "127.0.0.1") -> None:
    """Raise :class:`ConfigError` for the first port that two uses share or that something
    else listens on."""
    claimed: dict[int, PortUse] = {}
    for use in uses:
        if not 0 < use.port < 65536:
            raise ConfigError(f"port {use.port} of {use.what} is not a TCP port: set "
                              f"{use.setting}")
        first = claimed.setdefault(use.port, use)
        if first is not use:
            raise ConfigError(f"port {use.port} is given to both {first.what} and {use.what}: "
                              f"move one with {use.setting}")
        if not port_free(use.port, host):
            raise ConfigError(f"port {use.port} ({use.what}) is in use by another process: "
                              f"stop it, or move {use.what} with {use.setting}")
