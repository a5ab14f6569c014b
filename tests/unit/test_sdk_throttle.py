"""Repeated log lines are held back and counted, so a failing disk cannot flood the host's log."""

from __future__ import annotations

import logging
import time

import pytest

from rewardstream_telemetry.throttle import ThrottledLog


def test_one_line_per_interval_per_key_saying_how_many_were_held_back(
        caplog: pytest.LogCaptureFixture) -> None:
    throttled = ThrottledLog(logging.getLogger("rewardstream.test"), interval_s=0.2)
    with caplog.at_level(logging.INFO, logger="rewardstream.test"):
        logged = [throttled.log(logging.WARNING, "disk", "disk full (%d)", i) for i in range(100)]
        assert throttled.log(logging.WARNING, "other", "another cause")  # its own key
        time.sleep(0.25)
        assert throttled.log(logging.WARNING, "disk", "disk full (%d)", 100)
    assert logged == [True] + [False] * 99
    assert [r.getMessage() for r in caplog.records] == [
        "disk full (0)", "another cause",
        "disk full (100) (99 more like this since the last report)"]
