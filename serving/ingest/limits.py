"""Caps on request sizes, and token buckets (per API key at ingest and the gateway, per client
address for the console's sign-in): pure, time is passed in."""

from __future__ import annotations

from dataclasses import dataclass

from serving.jsonscan import DEFAULT_MAX_DEPTH

__all__ = ["Caps", "RateLimiter", "TokenBucket"]


@dataclass(frozen=True)
class Caps:
    """Size caps: bytes are measured after decompression, and also before it (the body as
    sent may not exceed ``max_batch_bytes`` either)."""

    max_event_bytes: int = 1 << 20
    max_batch_bytes: int = 10 << 20
    max_batch_events: int = 5_000
    max_json_depth: int = DEFAULT_MAX_DEPTH  # events nest 3 deep
    # A body may decompress to this many times its size, or to one event's size if that is more
    # (a single very repetitive event always gets in); typical batches compress 5-25 times.
    max_compression_ratio: int = 100


class TokenBucket:
    """``rate_per_s`` tokens a second, at most ``burst`` saved up; one token per event (or per
    request, or per failed sign-in: whatever its owner counts)."""

    __slots__ = ("_rate_per_s", "_burst", "_tokens", "_updated_s")

    def __init__(self, rate_per_s: float, burst: float, now_s: float) -> None:
        if rate_per_s <= 0 or burst <= 0:
            raise ValueError("rate_per_s and burst must be positive")
        self._rate_per_s = rate_per_s
        self._burst = burst
        self._tokens = burst
        self._updated_s = now_s

    def _refill(self, now_s: float) -> None:
        elapsed_s = max(0.0, now_s - self._updated_s)
        self._tokens = min(self._burst, self._tokens + elapsed_s * self._rate_per_s)
        self._updated_s = now_s

    def wait_s(self, cost: float, now_s: float) -> float:
        """The seconds until ``cost`` would be admitted (0.0: now), spending nothing.

        A cost above the burst is charged as a full bucket, so any batch within the caps can
        get through a bucket that has had time to fill.
        """
        self._refill(now_s)
        cost = min(cost, self._burst)
        return 0.0 if cost <= self._tokens else (cost - self._tokens) / self._rate_per_s

    def take(self, cost: float, now_s: float) -> float:
        """Spend ``cost`` tokens: 0.0 when admitted, else the seconds until it would be."""
        wait_s = self.wait_s(cost, now_s)
        if wait_s == 0.0:
            self._tokens -= min(cost, self._burst)
        return wait_s

    def full(self, now_s: float) -> bool:
        self._refill(now_s)
        return self._tokens >= self._burst


class RateLimiter:
    """One token bucket per key (an API key, a client address), created on first use.

    Past ``max_buckets`` the full ones are forgotten: a full bucket is what a new one starts as,
    so many senders that each sent a little cost no memory once they stop.
    """

    def __init__(self, max_buckets: int = 100_000) -> None:
        self._buckets: dict[str, TokenBucket] = {}
        self._max_buckets = max_buckets

    def take(
        self, key_id: str, rate_per_s: float, burst: float, cost: float, now_s: float,
    ) -> float:
        bucket = self._buckets.get(key_id)
        if bucket is None:
            if len(self._buckets) >= self._max_buckets:
                self._forget_full(now_s)
            bucket = self._buckets[key_id] = TokenBucket(rate_per_s, burst, now_s)
        return bucket.take(cost, now_s)

    def wait_s(self, key_id: str, cost: float, now_s: float) -> float:
        """The seconds until ``key_id`` could spend ``cost``, spending nothing."""
        bucket = self._buckets.get(key_id)
        return 0.0 if bucket is None else bucket.wait_s(cost, now_s)

    def __len__(self) -> int:
        return len(self._buckets)

    def _forget_full(self, now_s: float) -> None:
        for key_id in [k for k, bucket in self._buckets.items() if bucket.full(now_s)]:
            del self._buckets[key_id]
