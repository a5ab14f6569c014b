"""The demo's services as subprocesses: started with one environment, logged to files, stopped
together.

Each service runs in its own process group (``start_new_session``), so stopping it also stops
whatever it spawned; :meth:`Services.stop_all` runs from a ``finally`` and on SIGTERM, so a
Ctrl-C or a failure never leaves a service behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.errors import HarnessError

__all__ = ["Service", "ServiceError", "Services", "wait_http"]


class ServiceError(HarnessError):
    """A demo service exited or did not become ready."""


@dataclass
class Service:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    def tail(self, lines: int = 15) -> str:
        self.log_file.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def wait_http(url: str, timeout_s: float, service: Service | None = None) -> None:
    """Poll ``url`` until it answers 200; fail early when ``service`` exits."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if service is not None and service.process.poll() is not None:
            raise ServiceError(f"{service.name} exited with {service.process.returncode}; "
                               f"last lines of {service.log_path}:\n{service.tail()}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    where = f"; see {service.log_path}" if service else ""
    raise ServiceError(f"{url} did not answer within {timeout_s:.0f} s{where}")


class Services:
    """Starts ``rewardstream`` subcommands with ``env``, logs under ``log_dir``."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.running: list[Service] = []
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, *args: str) -> Service:
        log_path = self.log_dir / f"{name}.log"
        log_file = open(log_path, "ab")
        command = [sys.executable, "-m", "infra.cli", *args]
        process = subprocess.Popen(command, env=self.env, stdout=log_file,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        service = Service(name, process, log_path, log_file)
        self.running.append(service)
        return service

    def check_alive(self) -> None:
        for service in self.running:
            if service.process.poll() is not None:
                raise ServiceError(f"{service.name} exited with {service.process.returncode}; "
                                   f"last lines of {service.log_path}:\n{service.tail()}")

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every process group, then SIGKILL what is left after ``grace_s``."""
        for service in reversed(self.running):
            _signal_group(service.process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for service in reversed(self.running):
            try:
                service.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(service.process, signal.SIGKILL)
                service.process.wait()
            service.log_file.close()
        self.running.clear()


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
