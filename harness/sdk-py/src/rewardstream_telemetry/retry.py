"""What to do with each ingest answer, and how long to wait before retrying: pure functions."""

from __future__ import annotations

import enum
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

__all__ = ["Action", "backoff_delay_s", "classify", "parse_retry_after_s"]


class Action(enum.Enum):
    DONE = "done"  # the server took responsibility for every event (accepted, duplicate, rejected)
    RETRY = "retry"  # nothing was accepted; send the same events again later (within a budget)
    SPLIT = "split"  # over a size cap: send each half on its own
    DROP = "drop"  # the server can never accept this body; counted, never silent


def classify(status: int) -> Action:
    """5xx, 408 and 429 are retried; every other 4xx (401 included: a key is fixed by a person,
    not by retrying) is final. 403 is the ingest answer whose events were all dead-lettered."""
    if 200 <= status < 300 or status == 403:
        return Action.DONE
    if status == 413:
        return Action.SPLIT
    if status in (408, 429) or status >= 500:
        return Action.RETRY
    return Action.DROP


def parse_retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: either delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def backoff_delay_s(attempt: int, base_s: float, cap_s: float, retry_after_s: float | None,
                    rand: float) -> float:
    """Exponential backoff with equal jitter (half fixed, half random, ``rand`` in [0, 1)).

    A server's Retry-After is a floor; a little jitter on top keeps clients told the same
    Retry-After from all coming back in the same instant.
    """
    ceiling_s = min(cap_s, base_s * 2 ** min(attempt, 30))
    delay_s = ceiling_s / 2 + rand * ceiling_s / 2
    if retry_after_s is not None:
        delay_s = max(delay_s, retry_after_s + rand * base_s)
    return delay_s
