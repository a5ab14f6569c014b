"""Event time survives client clock skew and never runs into the future."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schemas.event_time import derive_event_time

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


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
