"""The platform's services as supervised subprocesses: started with one environment, each
logging to a file of its own, started again when they exit, stopped together.

Each service runs in its own process group (``start_new_session``), so stopping it also stops
whatever it spawned. Once :meth:`Supervisor.supervise` runs, a service that exits is started
again with the same arguments after a pause that doubles while it keeps exiting soon after its
start (from ``pause_s[0]`` up to ``pause_s[1]``; one that ran ``stable_s`` starts from the
first), as systemd's ``Restart=always`` does: the services are crash-only (a reward worker
whose checkpoint cannot be completed exits with 70 and repeats the checkpoint on its next
start), so a restart is their recovery. With ``max_restarts``, a service that exited that many
times is given up on and :meth:`Supervisor.check_alive` fails. ``rewardstream up`` and the demo
both run their services through it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from infra.backoff import retry_pause_s
from infra.errors import ServiceError

__all__ = ["CLI", "Service", "ServiceState", "Supervisor", "http_ready", "pid_alive", "readiness",
           "wait_http"]

CLI = (sys.executable, "-m", "rewardstream")  # the rewardstream command, as this Python runs it


@dataclass
class Service:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]
    started_s: float  # monotonic

    def tail(self, lines: int = 15) -> str:
        self.log_file.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


@dataclass(frozen=True)
class ServiceState:
    """One service as ``rewardstream status`` shows it."""

    name: str
    pid: int | None
    state: str  # running, restarting (waiting out its pause), given up, stopped
    restarts: int
    last_exit: int | None
    log: str


@dataclass
class _Slot:
    service: Service
    args: tuple[str, ...]
    restarts: int = 0
    quick_exits: int = 0  # in a row, each soon after its start
    last_exit: int | None = None
    restart_at: float | None = None  # monotonic, while waiting out the pause
    given_up: bool = False


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, which only awaits its parent, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # A zombie is dead for our purposes; it only awaits its parent's wait().
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def readiness(url: str, timeout_s: float = 2.0) -> str | None:
    """None when ``url`` (a ``/readyz``) answers 200 now, else why not: its answer's detail,
    or that nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 (http only)
            return None if answer.status == 200 else f"HTTP {answer.status}"
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        detail = body.get("detail") if isinstance(body, dict) else None
        return str(detail or body.get("status") or f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError):
        return "not answering"


def http_ready(url: str, timeout_s: float = 2.0) -> bool:
    """Whether ``url`` answers 200 now."""
    return readiness(url, timeout_s) is None


def wait_http(url: str, timeout_s: float, service: Service | None = None) -> None:
    """Poll ``url`` until it answers 200; fail early when ``service`` exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if service is not None and service.process.poll() is not None:
            raise ServiceError(f"{service.name} exited with {service.process.returncode}; "
                               f"last lines of {service.log_path}:\n{service.tail()}")
        if http_ready(url):
            return
        time.sleep(0.5)
    where = f"; see {service.log_path}" if service else ""
    raise ServiceError(f"{url} did not answer within {timeout_s:.0f} s{where}")


class Supervisor:
    """Starts ``command`` + arguments (``rewardstream`` subcommands) with ``env``, logs under
    ``log_dir``; ``on_restart(name, exit code, restarts so far)`` hears of each restart."""

    def __init__(self, env: Mapping[str, str], log_dir: Path, *,
                 max_restarts: int | None = None,
                 on_restart: Callable[[str, int, int], None] | None = None,
                 command: Sequence[str] = CLI,
                 pause_s: tuple[float, float] = (1.0, 30.0), stable_s: float = 60.0) -> None:
        self.env = dict(env)
        self.log_dir = log_dir
        self.max_restarts, self.on_restart, self.command = max_restarts, on_restart, command
        self.pause_s, self.stable_s = pause_s, stable_s
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        log_dir.mkdir(parents=True, exist_ok=True)

    @property
    def running(self) -> list[Service]:
        with self._lock:
            return [slot.service for slot in self._slots.values()]

    @property
    def restarts(self) -> dict[str, int]:
        with self._lock:
            return {name: slot.restarts for name, slot in self._slots.items()}

    def start(self, name: str, *args: str) -> Service:
        service = self._spawn(name, args)
        with self._lock:
            self._slots[name] = _Slot(service, args)
        return service

    def _spawn(self, name: str, args: tuple[str, ...]) -> Service:
        log_path = self.log_dir / f"{name}.log"
        log_file = open(log_path, "ab")
        process = subprocess.Popen([*self.command, *args], env=self.env, stdout=log_file,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        return Service(name, process, log_path, log_file, time.monotonic())

    def supervise(self, interval_s: float = 0.5) -> None:
        """From now on, restart (from a thread) every service that exits."""
        self._thread = threading.Thread(target=self._supervise, args=(interval_s,),
                                        name="supervisor", daemon=True)
        self._thread.start()

    def _supervise(self, interval_s: float) -> None:
        while not self._stopping.wait(interval_s):
            heard = []
            with self._lock:
                for name, slot in self._slots.items():
                    if self._step(name, slot):
                        heard.append((name, slot.last_exit or 0, slot.restarts))
            if self.on_restart is not None:
                for each in heard:
                    self.on_restart(*each)

    def _step(self, name: str, slot: _Slot) -> bool:
        """Note an exit, or restart once its pause is over; True when it was restarted."""
        service, now = slot.service, time.monotonic()
        if slot.given_up or (slot.restart_at is None and service.process.poll() is None):
            return False
        if slot.restart_at is None:  # it has just exited
            slot.last_exit = service.process.returncode
            if self.max_restarts is not None and slot.restarts >= self.max_restarts:
                slot.given_up = True
                service.log_file.write(f"\n== exited with {slot.last_exit}; given up after "
                                       f"{slot.restarts} restarts ==\n".encode())
                service.log_file.flush()
                return False
            ran_s = now - service.started_s
            slot.quick_exits = 1 if ran_s >= self.stable_s else slot.quick_exits + 1
            pause = retry_pause_s(slot.quick_exits, *self.pause_s)
            slot.restart_at = now + pause
            of = f" of {self.max_restarts}" if self.max_restarts is not None else ""
            service.log_file.write(f"\n== exited with {slot.last_exit} after {ran_s:.0f} s; "
                                   f"restart {slot.restarts + 1}{of} in {pause:.1f} s ==\n"
                                   .encode())
            service.log_file.flush()
            return False
        if now < slot.restart_at:
            return False
        service.log_file.close()
        slot.service = self._spawn(name, slot.args)
        slot.restarts += 1
        slot.restart_at = None
        return True

    def states(self) -> list[ServiceState]:
        with self._lock:
            return [ServiceState(
                name, None if slot.given_up or slot.restart_at is not None
                else slot.service.process.pid, self._state(slot), slot.restarts, slot.last_exit,
                str(slot.service.log_path)) for name, slot in self._slots.items()]

    def _state(self, slot: _Slot) -> str:
        if slot.given_up:
            return "given up"
        if slot.restart_at is not None:
            return "restarting"
        if slot.service.process.poll() is not None:
            return "restarting" if self._thread is not None else "stopped"
        return "running"

    def check_alive(self) -> None:
        """Raise :class:`ServiceError` for a service that exited and will not be restarted."""
        supervised = self._thread is not None
        with self._lock:
            for name, slot in self._slots.items():
                service = slot.service
                if service.process.poll() is None or (supervised and not slot.given_up):
                    continue
                given_up = f" after {slot.restarts} restarts" if supervised else ""
                raise ServiceError(f"{name} exited with {service.process.returncode}"
                                   f"{given_up}; last lines of {service.log_path}:\n"
                                   f"{service.tail()}")

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every process group, newest first, then SIGKILL what is left after
        ``grace_s``."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            services = [slot.service for slot in reversed(self._slots.values())]
            self._slots.clear()
        for service in services:
            _signal_group(service.process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for service in services:
            try:
                service.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(service.process, signal.SIGKILL)
                service.process.wait()
            service.log_file.close()


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
