"""Event time survives client clock skew, never runs into the future, never overflows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from schemas.bounds import MAX_CLOCK_SKEW_MS
from schemas.event_time import derive_event_time

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_skewed_client_clock_is_corrected_by_the_queueing_interval() -> None:
    # The client clock is 1 h behind; the event waited 5 s in the client's queue.
    occurred = T0 - timedelta(hours=1)
    sent = occurred + timedelta(seconds=5)
    received = T0 + timedelta(seconds=5, milliseconds=200)
    derived = derive_event_time(occurred, sent, received)
    assert derived.event_time == T0 + timedelta(milliseconds=200)
    assert derived.clock_skew_ms == 3_600_200
    assert not derived.clamped


def test_event_sent_before_it_occurred_is_clamped_to_the_bound() -> None:
    received = T0
    derived = derive_event_time(T0 + timedelta(hours=2), T0, received,
                                max_future=timedelta(seconds=1))
    assert derived.event_time == received + timedelta(seconds=1)
    assert derived.clamped


def test_small_future_within_the_bound_is_kept() -> None:
    derived = derive_event_time(T0 + timedelta(milliseconds=300), T0, T0,
                                max_future=timedelta(seconds=1))
    assert derived.event_time == T0 + timedelta(milliseconds=300)
    assert not derived.clamped


def test_a_wait_longer_than_the_bound_is_clamped_to_it() -> None:
    derived = derive_event_time(T0 - timedelta(days=40), T0, T0, max_wait=timedelta(days=30))
    assert derived.event_time == T0 - timedelta(days=30)
    assert derived.clamped


_UTC_MIN = datetime.min.replace(tzinfo=UTC)
_UTC_MAX = datetime.max.replace(tzinfo=UTC)
_FAR_EAST = timezone(timedelta(hours=14))


@pytest.mark.parametrize("occurred, sent, received", [
    (_UTC_MIN, _UTC_MAX, T0),  # waited 10,000 years
    (_UTC_MAX, _UTC_MIN, T0),  # sent 10,000 years before it occurred
    (datetime.min.replace(tzinfo=_FAR_EAST), _UTC_MAX, T0),  # year 0 once in UTC
    (T0, T0 + timedelta(days=1), _UTC_MIN + timedelta(hours=1)),  # receipt at the range's edge
    (T0 + timedelta(days=1), T0, _UTC_MAX - timedelta(hours=1)),
])
def test_no_timestamps_make_it_overflow(occurred: datetime, sent: datetime,
                                        received: datetime) -> None:
    derived = derive_event_time(occurred, sent, received, max_wait=timedelta.max)
    assert derived.clamped
    assert _UTC_MIN <= derived.event_time <= _UTC_MAX
    assert abs(derived.clock_skew_ms) <= MAX_CLOCK_SKEW_MS
