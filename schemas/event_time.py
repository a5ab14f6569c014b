"""Event time from three clocks: the client's occurrence and send times, the server's receipt.

The client clock may be wrong by any amount, but the interval between occurrence and sending is
measured on that one clock, so it survives the skew. Event time is therefore the server's receipt
time minus that interval. A negative interval (sent "before" it occurred) would put the event in
the future; beyond a small bound it is clamped, so a broken client cannot push watermarks ahead.
An interval longer than ``max_wait`` is clamped too, and no input can make the arithmetic leave
the range of ``datetime`` (ingest rejects such timestamps before; this is the last line).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schemas.bounds import MAX_CLOCK_SKEW_MS

__all__ = ["DEFAULT_MAX_FUTURE", "DEFAULT_MAX_WAIT", "DerivedTime", "ReceiptClock",
           "derive_event_time"]

DEFAULT_MAX_FUTURE = timedelta(seconds=1)
DEFAULT_MAX_WAIT = timedelta(days=366)
_MIN = datetime.min.replace(tzinfo=UTC)
_MAX = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class DerivedTime:
    event_time: datetime
    clock_skew_ms: int  # server receipt minus client send; positive when the client clock lags
    clamped: bool


class ReceiptClock:
    """Event times of the events received at one instant: the clamping bounds, which depend only
    on the receipt, are worked out once for a whole batch rather than once per event."""

    __slots__ = ("_longest", "_shortest", "received_at")

    def __init__(self, received_at: datetime, max_future: timedelta = DEFAULT_MAX_FUTURE,
                 max_wait: timedelta = DEFAULT_MAX_WAIT) -> None:
        # Subtracting aware datetimes is timedelta arithmetic and cannot overflow; adding a
        # timedelta to a datetime can, so both ends are also kept inside datetime's range.
        self.received_at = received_at
        self._longest = min(max_wait, received_at - _MIN)
        self._shortest = -min(max_future, _MAX - received_at)

    def derive(self, occurred_at: datetime, sent_at: datetime) -> DerivedTime:
        """``received_at − (sent_at − occurred_at)``, clamped into
        ``[received_at − max_wait, received_at + max_future]``."""
        waited = sent_at - occurred_at
        clamped = not self._shortest <= waited <= self._longest
        if clamped:
            waited = min(max(waited, self._shortest), self._longest)
        skew_ms = round((self.received_at - sent_at).total_seconds() * 1000)
        skew_ms = max(-MAX_CLOCK_SKEW_MS, min(skew_ms, MAX_CLOCK_SKEW_MS))
        return DerivedTime(self.received_at - waited, skew_ms, clamped)


def derive_event_time(
    occurred_at: datetime,
    sent_at: datetime,
    received_at: datetime,
    max_future: timedelta = DEFAULT_MAX_FUTURE,
    max_wait: timedelta = DEFAULT_MAX_WAIT,
) -> DerivedTime:
    """``received_at − (sent_at − occurred_at)``, clamped into
    ``[received_at − max_wait, received_at + max_future]``."""
    return ReceiptClock(received_at, max_future, max_wait).derive(occurred_at, sent_at)
