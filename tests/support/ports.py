"""Free TCP ports for the servers, brokers and browsers tests start.

Ports come from below the kernel's ephemeral range, where every outgoing connection takes its
local port: a port found free there may be taken by a client before the server binds it. Under
pytest-xdist each worker draws from a block of its own, so parallel workers never pick the same
port. Whether a port is free is asked as a server would (``SO_REUSEADDR``: connections that
just closed may linger in TIME_WAIT).
"""

from __future__ import annotations

import os
import random
import socket

__all__ = ["free_port", "free_ports", "ports_free"]

_LOW, _HIGH = 20000, 32000  # the kernel hands out 32768-60999 by default


def ports_free(ports: list[int]) -> bool:
    """Nothing listens on these ports and a server could bind each now."""
    for port in ports:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _worker_block() -> tuple[int, int]:
    """This process's share of the range: all of it, or one block per xdist worker."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    size = (_HIGH - _LOW) // max(workers, 1)
    return _LOW + index * size, _LOW + (index + 1) * size


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports (a broker node and its controller)."""
    low, high = _worker_block()
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(low, high - count)
        if ports_free(list(range(base, base + count))):
            return base
    raise RuntimeError(f"no {count} consecutive free ports in {low}-{high}")


def free_port() -> int:
    return free_ports(1)
