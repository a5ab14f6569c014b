"""Event time from three clocks: the client's occurrence and send times, the server's receipt.

The client clock may be wrong by any amount, but the interval between occurrence and sending is
measured on that one clock, so it survives the skew. Event time is therefore the server's receipt
time minus that interval. A negative interval (sent "before" it occurred) would put the event in
the future; beyond a small bound it is clamped, so a broken client cannot push watermarks ahead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["DEFAULT_MAX_FUTURE", "DerivedTime", "derive_event_time"]

DEFAULT_MAX_FUTURE = timedelta(seconds=1)


@dataclass(frozen=True)
class DerivedTime:
    event_time: datetime
    clock_skew_ms: int  # server receipt minus client send; positive when the client clock lags
    clamped: bool


def derive_event_time(
    occurred_at: datetime,
    sent_at: datetime,
    received_at: datetime,
    max_future: timedelta = DEFAULT_MAX_FUTURE,
) -> DerivedTime:
    """``received_at − (sent_at − occurred_at)``, never later than ``received_at + max_future``."""
    event_time = received_at - (sent_at - occurred_at)
    limit = received_at + max_future
    clamped = event_time > limit
    if clamped:
        event_time = limit
    skew_ms = round((received_at - sent_at).total_seconds() * 1000)
    return DerivedTime(event_time=event_time, clock_skew_ms=skew_ms, clamped=clamped)
