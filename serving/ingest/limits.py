"""Caps on request sizes and a token bucket per API key: pure, time is passed in."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Caps", "RateLimiter", "TokenBucket"]


@dataclass(frozen=True)
class Caps:
    """Size caps, all measured after decompression."""

    max_event_bytes: int = 1 << 20
    max_batch_bytes: int = 10 << 20
    max_batch_events: int = 5_000


class TokenBucket:
    """``rate_per_s`` tokens a second, at most ``burst`` saved up; one token per event."""

    __slots__ = ("_rate_per_s", "_burst", "_tokens", "_updated_s")

    def __init__(self, rate_per_s: float, burst: float, now_s: float) -> None:
        if rate_per_s <= 0 or burst <= 0:
            raise ValueError("rate_per_s and burst must be positive")
        self._rate_per_s = rate_per_s
        self._burst = burst
        self._tokens = burst
        self._updated_s = now_s

    def take(self, cost: float, now_s: float) -> float:
        """Spend ``cost`` tokens: 0.0 when admitted, else the seconds until it would be.

        A cost above the burst is charged as a full bucket, so any batch within the caps can
        get through a bucket that has had time to fill.
        """
        elapsed_s = max(0.0, now_s - self._updated_s)
        self._tokens = min(self._burst, self._tokens + elapsed_s * self._rate_per_s)
        self._updated_s = now_s
        cost = min(cost, self._burst)
        if cost <= self._tokens:
            self._tokens -= cost
            return 0.0
        return (cost - self._tokens) / self._rate_per_s


class RateLimiter:
    """One token bucket per API key, created on first use."""

    def __init__(self) -> None:
        self._buckets: dict[str, TokenBucket] = {}

    def take(
        self, key_id: str, rate_per_s: float, burst: float, cost: float, now_s: float,
    ) -> float:
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = TokenBucket(rate_per_s, burst, now_s)
        return bucket.take(cost, now_s)
