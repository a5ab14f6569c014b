"""The run directory's ``up.json``: what ``rewardstream up`` runs, kept current while it runs,
and what ``rewardstream status`` and ``rewardstream down`` read.

It holds the supervising process's pid, its phase (starting, ready, stopping, stopped), whether
it started the broker, and per service its pid, state, restarts, last exit code, log and URLs.
It is replaced whole (a temporary file renamed), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infra.supervisor import pid_alive

__all__ = ["RunState", "ServiceRow", "alive", "read_state", "stop_run", "write_state"]


@dataclass
class ServiceRow:
    name: str
    pid: int | None
    state: str  # running, restarting, given up, stopped (infra.supervisor.ServiceState)
    restarts: int
    last_exit: int | None
    log: str
    ready_url: str
    metrics_url: str
    url: str | None  # an API's address


@dataclass
class RunState:
    pid: int
    phase: str
    started_at: float  # Unix seconds
    settings_file: str | None
    bootstrap_servers: str
    owns_broker: bool
    services: list[ServiceRow] = field(default_factory=list)


def write_state(path: Path, state: RunState) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(asdict(state), indent=1) + "\n")
    os.replace(tmp, path)


def read_state(path: Path) -> RunState | None:
    try:
        raw: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    rows = [ServiceRow(**row) for row in raw.pop("services", [])]
    return RunState(**raw, services=rows)


def alive(pid: int | None) -> bool:
    return pid is not None and pid > 0 and pid_alive(pid)


def _is_service_group(pid: int) -> bool:
    """Whether ``pid`` still leads the process group of one of our services (a pid can be
    reused long after the service ended)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        ours = b"rewardstream" in command
        return os.getpgid(pid) == pid and ours
    except OSError:
        return False


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def stop_run(state: RunState, timeout_s: float) -> list[str]:
    """Stop the supervising process (which stops its services, then a broker it started) and
    wait for it; when it is gone or will not go, kill the services' process groups left. The
    names of the services that had to be killed."""
    if alive(state.pid):
        os.kill(state.pid, signal.SIGTERM)
        if not _wait_gone(state.pid, timeout_s):
            os.kill(state.pid, signal.SIGKILL)
            _wait_gone(state.pid, 5.0)
    killed = []
    for row in state.services:
        if row.pid and alive(row.pid) and _is_service_group(row.pid):
            os.killpg(row.pid, signal.SIGKILL)
            killed.append(row.name)
    return killed
