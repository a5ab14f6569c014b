"""Repeated log lines are held back and counted, so a failing disk cannot flood the host's log."""

from __future__ import annotations

import logging

import pytest

from rewardstream_telemetry.throttle import ThrottledLog


def test_one_line_per_interval_per_key_saying_how_many_were_held_back(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    throttled = ThrottledLog(logging.getLogger("rewardstream.test"), interval_s=0.2,
                             clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="rewardstream.test"):
        logged = [throttled.log(logging.WARNING, "disk", "disk full (%d)", i) for i in range(100)]
        assert throttled.log(logging.WARNING, "other", "another cause")  # its own key
        now[0] += 0.19
        assert not throttled.log(logging.WARNING, "disk", "disk full (%d)", 100)
        now[0] += 0.01  # the interval since the first line is over
        assert throttled.log(logging.WARNING, "disk", "disk full (%d)", 101)
    assert logged == [True] + [False] * 99
    assert [r.getMessage() for r in caplog.records] == [
        "disk full (0)", "another cause",
        "disk full (101) (100 more like this since the last report)"]
