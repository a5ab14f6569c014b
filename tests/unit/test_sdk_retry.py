"""The SDK's pure retry policy: what each status means and how long to wait."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rewardstream_telemetry.retry import Action, backoff_delay_s, classify, parse_retry_after_s


@pytest.mark.parametrize("status, action", [
    (200, Action.DONE), (207, Action.DONE), (403, Action.DONE), (413, Action.SPLIT),
    (400, Action.DROP), (401, Action.DROP), (404, Action.DROP), (409, Action.DROP),
    (415, Action.DROP), (422, Action.DROP), (301, Action.DROP), (429, Action.RETRY),
    (408, Action.RETRY),
    (503, Action.RETRY), (500, Action.RETRY), (502, Action.RETRY),
])
def test_classify(status: int, action: Action) -> None:
    assert classify(status) is action


def test_retry_after_in_seconds_or_as_a_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after_s("7") == 7.0
    assert parse_retry_after_s("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after_s("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0
    assert parse_retry_after_s("soon") is None and parse_retry_after_s(None) is None


def test_backoff_doubles_with_equal_jitter_up_to_the_cap() -> None:
    assert backoff_delay_s(0, 1.0, 30.0, None, rand=0.0) == 0.5
    assert backoff_delay_s(0, 1.0, 30.0, None, rand=0.999) == pytest.approx(1.0, abs=1e-3)
    assert backoff_delay_s(3, 1.0, 30.0, None, rand=0.0) == 4.0
    assert backoff_delay_s(10, 1.0, 30.0, None, rand=0.0) == 15.0
    assert backoff_delay_s(100, 1.0, 30.0, None, rand=1.0) == 30.0


def test_retry_after_is_a_floor_with_jitter_on_top() -> None:
    assert backoff_delay_s(0, 0.5, 30.0, 5.0, rand=0.0) == 5.0
    assert backoff_delay_s(0, 0.5, 30.0, 5.0, rand=0.5) == 5.25
    assert backoff_delay_s(10, 0.5, 30.0, 1.0, rand=0.0) == 15.0  # backoff already longer
