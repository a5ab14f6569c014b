"""``rewardstream up``: the broker (or a given cluster), the topics, the first keys and every
service of :data:`~rewardstream.stack.services.SERVICES`, supervised, from one settings file.

In the foreground it runs until Ctrl-C or SIGTERM (``rewardstream down`` sends it), then stops
the services, newest first, and the broker if it started it. ``--detach`` runs the same in a
background process logging to ``<run dir>/up.log``, and returns once every service is ready.
Before anything starts, every port is checked; a clash is one line naming the port and the
setting that moves it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from infra import broker
from infra.errors import ConfigError, ServiceError
from infra.kafka_auth import client_env
from infra.ports import PortUse, check_ports
from infra.settings import Settings, load_settings
from infra.supervisor import CLI, ServiceState, Supervisor, readiness
from infra.topics import create_topics
from rewardstream.stack.keys import prepare_keys
from rewardstream.stack.services import RunDir, ServiceEntry, enabled_services
from rewardstream.stack.settings import StackSettings
from rewardstream.stack.state import RunState, ServiceRow, alive, read_state, write_state

__all__ = ["check_not_up", "detach", "kafka_settings", "serve"]

Say = Callable[[str], None]
_DETACHED = "REWARDSTREAM_UP_DETACHED"  # set for the background process of --detach


def kafka_settings(settings: StackSettings) -> Settings:
    """The broker settings every process of this deployment gets (security, heap and node
    count still come from the environment)."""
    return replace(load_settings(), kafka_port=settings["kafka.port"],
                   kafka_controller_port=settings["kafka.controller_port"],
                   kafka_data_dir=settings["kafka.data_dir"],
                   topic_prefix=settings["kafka.topic_prefix"],
                   topic_partitions=settings["kafka.partitions"],
                   external_bootstrap=settings["kafka.bootstrap_servers"] or None)


def check_not_up(run: RunDir) -> None:
    state = read_state(run.state_file)
    if state is not None and alive(state.pid) and state.phase != "stopped":
        raise ConfigError(f"rewardstream is already up from {run.path} (pid {state.pid}): "
                          "`rewardstream status` shows it, `rewardstream down` stops it")


def _check_ports(settings: StackSettings, kafka: Settings, starts_broker: bool) -> None:
    uses = [PortUse(settings[entry.port], entry.name, settings.where(entry.port))
            for entry in enabled_services(settings)]
    if starts_broker:
        uses += [PortUse(kafka.kafka_port, "the Kafka broker", settings.where("kafka.port")),
                 PortUse(kafka.kafka_controller_port, "the Kafka controller",
                         settings.where("kafka.controller_port"))]
    check_ports(uses, settings["host"])


@dataclass
class _Prepared:
    env: dict[str, str]
    kafka: Settings
    owns_broker: bool


def _prepare(settings: StackSettings, run: RunDir, say: Say) -> _Prepared:
    kafka = kafka_settings(settings)
    local = kafka.external_bootstrap is None
    running = local and broker.status(kafka).running
    _check_ports(settings, kafka, local and not running)
    owns_broker = False
    if local:
        state, owns_broker = broker.start(kafka)
        say(f"broker: {'started' if owns_broker else 'already running'}, {state.describe()}")
    else:
        say(f"broker: the given cluster {kafka.bootstrap_servers}")
    try:
        created = [name for name, made in create_topics(kafka) if made]
        say(f"topics: {len(created)} created" + (f" ({', '.join(created)})" if created else
                                                 ", all there already"))
        gateway = any(entry.name == "gateway" for entry in enabled_services(settings))
        env = {**os.environ, **client_env(kafka),
               "REWARDSTREAM_TOPIC_PARTITIONS": str(kafka.topic_partitions),
               **prepare_keys(settings, run, gateway, say), "PYTHONUNBUFFERED": "1"}
    except BaseException:
        if owns_broker:
            broker.stop(kafka)
        raise
    env.pop(_DETACHED, None)
    return _Prepared(env, kafka, owns_broker)


def _rows(settings: StackSettings, entries: list[ServiceEntry],
          states: list[ServiceState]) -> list[ServiceRow]:
    by_name = {state.name: state for state in states}
    return [ServiceRow(entry.name, by_name[entry.name].pid, by_name[entry.name].state,
                       by_name[entry.name].restarts, by_name[entry.name].last_exit,
                       by_name[entry.name].log, entry.url(settings, "/readyz"),
                       entry.url(settings, "/metrics"), entry.url(settings) if entry.api else None)
            for entry in entries if entry.name in by_name]


def _wait_ready(settings: StackSettings, entries: list[ServiceEntry], stop: threading.Event,
                timeout_s: float, publish: Callable[[], None]) -> dict[str, str]:
    """Until every service answers ready (or ``stop``, or the timeout): what is not ready."""
    deadline = time.monotonic() + timeout_s
    waiting = {entry.name: "not asked yet" for entry in entries}
    while waiting and not stop.is_set() and time.monotonic() < deadline:
        for entry in entries:
            if entry.name in waiting:
                problem = readiness(entry.url(settings, "/readyz"))
                waiting.pop(entry.name) if problem is None else waiting.update(
                    {entry.name: problem})
        publish()
        stop.wait(1.0)
    return waiting


def serve(settings: StackSettings, ready_timeout_s: float, say: Say) -> int:
    """Bring everything up and keep it up until SIGTERM or SIGINT; the exit code."""
    run = RunDir(settings.run_dir)
    run.path.mkdir(parents=True, exist_ok=True)
    check_not_up(run)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if os.environ.get(_DETACHED):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the terminal it came from may close
    prepared = _prepare(settings, run, say)
    entries = enabled_services(settings)
    state = RunState(os.getpid(), "starting", time.time(),
                     str(settings.file) if settings.file else None,
                     prepared.kafka.bootstrap_servers, prepared.owns_broker)

    def on_restart(name: str, code: int, restarts: int) -> None:
        say(f"{name} had exited with {code}: started again (restart {restarts}); its log: "
            f"{run.logs / name}.log")

    supervisor = Supervisor(prepared.env, run.logs, on_restart=on_restart, command=CLI)

    def publish(phase: str | None = None) -> None:
        state.phase = phase or state.phase
        state.services = _rows(settings, entries, supervisor.states())
        write_state(run.state_file, state)

    try:
        for entry in entries:
            service = supervisor.start(entry.name, *entry.arguments(settings, run))
            say(f"started {entry.name} (pid {service.process.pid})"
                f"{f' at {entry.url(settings)}' if entry.api else ''}; log {service.log_path}")
        supervisor.supervise()
        waiting = _wait_ready(settings, entries, stop, ready_timeout_s, publish)
        if stop.is_set():
            return 130
        if waiting:
            raise ServiceError("not ready after {:.0f} s: {}".format(ready_timeout_s, "; ".join(
                f"{name} ({problem}; see {run.logs / name}.log)"
                for name, problem in waiting.items())))
        publish("ready")
        say(f"ready: {', '.join(e.name for e in entries)} ({time.time() - state.started_at:.0f}"
            " s). `rewardstream status` shows them, `rewardstream down` stops them"
            f"{'' if os.environ.get(_DETACHED) else ' (or Ctrl-C)'}")
        while not stop.wait(1.0):
            publish()
        return 0
    finally:
        publish("stopping")
        supervisor.stop_all()
        say(f"stopped {', '.join(e.name for e in reversed(entries))}")
        if prepared.owns_broker and broker.stop(prepared.kafka):
            say(f"broker stopped (up had started it on {prepared.kafka.bootstrap_servers})")
        publish("stopped")


def _follow(log: Path, offset: int) -> int:
    """Print what ``log`` gained since ``offset``; the new offset."""
    with log.open("rb") as handle:
        handle.seek(offset)
        text = handle.read()
    sys.stdout.write(text.decode(errors="replace"))
    sys.stdout.flush()
    return offset + len(text)


def detach(settings: StackSettings, ready_timeout_s: float) -> int:
    """Run ``serve`` in a background process; follow its log until it is ready (0) or has
    given up (1)."""
    run = RunDir(settings.run_dir)
    run.path.mkdir(parents=True, exist_ok=True)
    check_not_up(run)
    offset = run.up_log.stat().st_size if run.up_log.exists() else 0
    arguments = [*CLI, "up", "--ready-timeout-s", f"{ready_timeout_s:g}"]
    if settings.file is not None:
        arguments += ["--config", str(settings.file)]
    with run.up_log.open("ab") as log:
        child = subprocess.Popen(arguments, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**os.environ, _DETACHED: "1"})
    while True:
        offset = _follow(run.up_log, offset)
        state = read_state(run.state_file)
        if state is not None and state.pid == child.pid and state.phase == "ready":
            print(f"up in the background (pid {child.pid}); its log: {run.up_log}", flush=True)
            return 0
        if child.poll() is not None:
            _follow(run.up_log, offset)
            return 1
        time.sleep(0.5)
