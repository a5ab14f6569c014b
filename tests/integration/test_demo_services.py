"""The demo's services under supervision: one that exits is started again with the same
arguments, its log says so, and one that keeps exiting is given up on and fails the demo."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from harness.demo.services import ServiceError, Services
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

_SLEEPER = ("import time", "time.sleep(120)")
_FAILING = ("raise SystemExit(70)",)


def _python(tmp_path: Path, restarts: list[tuple[str, int, int]],
            max_restarts: int = 5) -> Services:
    return Services(dict(os.environ), tmp_path / "logs", max_restarts=max_restarts,
                    on_restart=lambda *heard: restarts.append(heard),
                    command=(sys.executable, "-c"))


def test_a_killed_service_is_started_again_and_its_log_says_so(tmp_path: Path) -> None:
    restarts: list[tuple[str, int, int]] = []
    services = _python(tmp_path, restarts)
    try:
        first = services.start("worker", "; ".join(_SLEEPER))
        services.start("console", "; ".join(_SLEEPER))
        services.supervise(interval_s=0.1)
        first.process.send_signal(signal.SIGKILL)
        wait_for(lambda: restarts, 30, "a restart")
        services.check_alive()  # the restarted service runs: nothing to raise
        now = {s.name: s.process for s in services.running}
        assert now["worker"].pid != first.process.pid and now["worker"].poll() is None
        assert restarts == [("worker", -signal.SIGKILL, 1)]
        assert services.restarts == {"worker": 1, "console": 0}
    finally:
        services.stop_all(grace_s=2)
    assert f"exited with {-signal.SIGKILL}; restarted (1 of 5)" in (
        tmp_path / "logs" / "worker.log").read_text()
    assert services.running == []


def test_a_service_that_keeps_exiting_is_given_up_on_and_fails_the_check(
        tmp_path: Path) -> None:
    restarts: list[tuple[str, int, int]] = []
    services = _python(tmp_path, restarts, max_restarts=2)
    try:
        services.start("worker", *_FAILING)
        services.supervise(interval_s=0.1)
        wait_for(lambda: len(restarts) == 2 and services.running[0].process.poll() is not None,
                 30, "the second restart, and the service gone")
        with pytest.raises(ServiceError, match="worker exited with 70 after 2 restarts"):
            services.check_alive()
    finally:
        services.stop_all(grace_s=2)
    assert [n for _, _, n in restarts] == [1, 2]


def test_without_supervision_an_exited_service_fails_the_check_at_once(tmp_path: Path) -> None:
    services = _python(tmp_path, [])
    try:
        service = services.start("worker", *_FAILING)
        service.process.wait(timeout=30)
        with pytest.raises(ServiceError, match="worker exited with 70; last lines"):
            services.check_alive()
    finally:
        services.stop_all(grace_s=2)
