"""Services under supervision: one that exits is started again with the same arguments after a
pause that grows while it keeps exiting, its log says so; with a bound, one that keeps exiting
is given up on and fails the check."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest

from infra.errors import ServiceError
from infra.supervisor import Supervisor
from tests.support.waits import wait_for

_SLEEPER = "import time; time.sleep(120)"
_FAILING = "raise SystemExit(70)"


def _python(tmp_path: Path, restarts: list[tuple[str, int, int]],
            max_restarts: int | None = 5, pause_s: tuple[float, float] = (0.1, 0.1)
            ) -> Supervisor:
    return Supervisor(dict(os.environ), tmp_path / "logs", max_restarts=max_restarts,
                      on_restart=lambda *heard: restarts.append(heard),
                      command=(sys.executable, "-c"), pause_s=pause_s)


def test_a_killed_service_is_started_again_and_its_log_says_so(tmp_path: Path) -> None:
    restarts: list[tuple[str, int, int]] = []
    services = _python(tmp_path, restarts)
    try:
        first = services.start("worker", _SLEEPER)
        services.start("console", _SLEEPER)
        services.supervise(interval_s=0.05)
        first.process.send_signal(signal.SIGKILL)
        wait_for(lambda: restarts, 30, "the restart", 0.05)
        services.check_alive()  # the restarted service runs: nothing to raise
        now = {s.name: s.process for s in services.running}
        assert now["worker"].pid != first.process.pid and now["worker"].poll() is None
        assert restarts == [("worker", -signal.SIGKILL, 1)]
        assert services.restarts == {"worker": 1, "console": 0}
        states = {s.name: s for s in services.states()}
        assert states["worker"].state == "running" and states["worker"].last_exit == -9
        assert states["worker"].pid == now["worker"].pid
    finally:
        services.stop_all(grace_s=2)
    # How long it ran before the kill depends on the machine's load: any whole number of seconds.
    assert re.search(rf"exited with {-signal.SIGKILL} after \d+ s; restart 1 of 5 in 0\.1 s",
                     (tmp_path / "logs" / "worker.log").read_text())
    assert services.running == []


def test_a_service_that_keeps_exiting_waits_longer_each_time(tmp_path: Path) -> None:
    restarts: list[tuple[str, int, int]] = []
    services = _python(tmp_path, restarts, max_restarts=None, pause_s=(0.4, 1.6))
    try:
        services.start("worker", _FAILING)
        services.supervise(interval_s=0.02)
        log_file = tmp_path / "logs" / "worker.log"
        # The fourth restart's line: the pause is logged as the service waits for it.
        wait_for(lambda: log_file.exists() and "restart 4 in" in log_file.read_text(), 30,
                 "the fourth restart in the log", 0.05)
    finally:
        services.stop_all(grace_s=2)
    log = log_file.read_text()
    # 0.4, 0.8, 1.6 s (the ceiling), then the ceiling again: no bound on the restarts
    for pause in ("restart 1 in 0.4 s", "restart 2 in 0.8 s", "restart 3 in 1.6 s",
                  "restart 4 in 1.6 s"):
        assert pause in log, log
    assert [code for _, code, _ in restarts[:3]] == [70, 70, 70]


def test_with_a_bound_a_service_that_keeps_exiting_is_given_up_on(tmp_path: Path) -> None:
    restarts: list[tuple[str, int, int]] = []
    services = _python(tmp_path, restarts, max_restarts=2)
    try:
        services.start("worker", _FAILING)
        services.supervise(interval_s=0.05)
        wait_for(lambda: services.states()[0].state == "given up", 30, "giving up", 0.05)
        with pytest.raises(ServiceError, match="worker exited with 70 after 2 restarts"):
            services.check_alive()
    finally:
        services.stop_all(grace_s=2)
    assert [n for _, _, n in restarts] == [1, 2]
    assert "given up after 2 restarts" in (tmp_path / "logs" / "worker.log").read_text()


def test_without_supervision_an_exited_service_fails_the_check_at_once(tmp_path: Path) -> None:
    services = _python(tmp_path, [])
    try:
        service = services.start("worker", _FAILING)
        service.process.wait(timeout=30)
        assert services.states()[0].state == "stopped"
        with pytest.raises(ServiceError, match="worker exited with 70; last lines"):
            services.check_alive()
    finally:
        services.stop_all(grace_s=2)
