"""The demo's services as subprocesses: started with one environment, logged to files,
restarted when they exit on their own, stopped together.

Each service runs in its own process group (``start_new_session``), so stopping it also stops
whatever it spawned; :meth:`Services.stop_all` runs from a ``finally`` and on SIGTERM, so a
Ctrl-C or a failure never leaves a service behind. Once :meth:`Services.supervise` runs, a
service that exits is started again with the same arguments, as a deployment's ``restart:
unless-stopped`` does: the services are crash-only (a reward worker whose checkpoint cannot be
completed, say after the whole cluster was away, exits and repeats it on its next start), so a
restart is their recovery. A service that keeps exiting is given up on after
``max_restarts``; :meth:`Services.check_alive` then fails the demo.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
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
    """Starts ``command`` + arguments (``rewardstream`` subcommands) with ``env``, logs under
    ``log_dir``; ``on_restart(name, exit code, restarts so far)`` hears of each restart."""

    def __init__(self, env: dict[str, str], log_dir: Path, *, max_restarts: int = 5,
                 on_restart: Callable[[str, int, int], None] | None = None,
                 command: Sequence[str] = (sys.executable, "-m", "rewardstream")) -> None:
        self.env = env
        self.log_dir = log_dir
        self.running: list[Service] = []
        self.restarts: dict[str, int] = {}
        self.max_restarts, self.on_restart, self.command = max_restarts, on_restart, command
        self._args: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, *args: str) -> Service:
        service = self._spawn(name, args)
        with self._lock:
            self._args[name] = args
            self.restarts[name] = 0
            self.running.append(service)
        return service

    def _spawn(self, name: str, args: tuple[str, ...]) -> Service:
        log_path = self.log_dir / f"{name}.log"
        log_file = open(log_path, "ab")
        process = subprocess.Popen([*self.command, *args], env=self.env, stdout=log_file,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        return Service(name, process, log_path, log_file)

    def supervise(self, interval_s: float = 0.5) -> None:
        """From now on, restart (from a thread) every service that exits, up to
        ``max_restarts`` times each."""
        self._supervisor = threading.Thread(target=self._supervise, args=(interval_s,),
                                            name="demo-services", daemon=True)
        self._supervisor.start()

    def _supervise(self, interval_s: float) -> None:
        while not self._stopping.wait(interval_s):
            with self._lock:
                for place, service in enumerate(self.running):
                    code = service.process.poll()
                    if code is None or self.restarts[service.name] >= self.max_restarts:
                        continue
                    self.restarts[service.name] += 1
                    service.log_file.write(f"\n== exited with {code}; restarted "
                                           f"({self.restarts[service.name]} of "
                                           f"{self.max_restarts}) ==\n".encode())
                    service.log_file.close()
                    self.running[place] = self._spawn(service.name, self._args[service.name])
                    if self.on_restart is not None:
                        self.on_restart(service.name, code, self.restarts[service.name])

    def check_alive(self) -> None:
        """Raise :class:`ServiceError` for a service that exited and will not be restarted."""
        supervised = self._supervisor is not None
        with self._lock:
            for service in self.running:
                if service.process.poll() is None or (
                        supervised and self.restarts[service.name] < self.max_restarts):
                    continue
                given_up = f" after {self.restarts[service.name]} restarts" if supervised else ""
                raise ServiceError(f"{service.name} exited with {service.process.returncode}"
                                   f"{given_up}; last lines of {service.log_path}:\n"
                                   f"{service.tail()}")

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every process group, then SIGKILL what is left after ``grace_s``."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join()
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
