"""A bounded memory of recently seen keys: the one way the platform recognises a repeat.

Ingest remembers event ids for a time window (24 h), bounded in memory; the trainer remembers the
reward-record keys it trained on, bounded by count. Both are this class: at most ``max_entries``
keys (the oldest forgotten first) and, when ``window_s`` is set, none older than the window.
Insertion order is close to time order everywhere it is used, so expiring stops at the first
young entry. Times are passed in (seconds on any one clock); nothing here reads a clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["DedupeWindow"]

K = TypeVar("K", bound=Hashable)


class DedupeWindow(Generic[K]):
    """Keys seen within ``window_s`` (or ever, when None), at most ``max_entries`` of them.

    When the cap evicts a key younger than the window the window is effectively shorter;
    ``evicted_early`` counts those so an operator can see it and raise the cap. Memory is about
    120 bytes a key (1,000,000 keys ≈ 120 MB)."""

    def __init__(self, max_entries: int, window_s: float | None = None,
                 keys: Iterable[K] = ()) -> None:
        if max_entries <= 0 or (window_s is not None and window_s <= 0):
            raise ValueError("max_entries and window_s must be positive")
        self.max_entries = max_entries
        self.window_s = window_s
        self.evicted_early = 0
        self._seen_s: OrderedDict[K, float] = OrderedDict()
        for key in keys:
            self.add(key)

    def __len__(self) -> int:
        return len(self._seen_s)

    def contains(self, key: K, now_s: float = 0.0) -> bool:
        self._expire(now_s)
        return key in self._seen_s

    def add(self, key: K, seen_s: float = 0.0, now_s: float = 0.0) -> None:
        """Remember ``key`` as first seen at ``seen_s`` (ignored if already known or too old)."""
        if key in self._seen_s or self._too_old(seen_s, now_s):
            return
        self._seen_s[key] = seen_s
        while len(self._seen_s) > self.max_entries:
            _, oldest_s = self._seen_s.popitem(last=False)
            if not self._too_old(oldest_s, now_s):
                self.evicted_early += 1

    def first_time(self, key: K, now_s: float = 0.0) -> bool:
        """True the first time ``key`` is seen (and remembers it); False for a repeat."""
        if self.contains(key, now_s):
            return False
        self.add(key, now_s, now_s)
        return True

    def keys(self) -> list[K]:
        """The remembered keys, oldest first."""
        return list(self._seen_s)

    def oldest_age_s(self, now_s: float) -> float:
        """How far back the window reaches now (0 when empty)."""
        self._expire(now_s)
        for seen_s in self._seen_s.values():
            return now_s - seen_s
        return 0.0

    def _too_old(self, seen_s: float, now_s: float) -> bool:
        return self.window_s is not None and seen_s < now_s - self.window_s

    def _expire(self, now_s: float) -> None:
        if self.window_s is None:
            return
        seen = self._seen_s
        while seen:
            first = next(iter(seen))
            if not self._too_old(seen[first], now_s):
                break
            del seen[first]
