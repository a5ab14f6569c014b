"""The idempotency window: event ids appended recently, bounded in time and in memory."""

from __future__ import annotations

from collections import OrderedDict
from uuid import UUID

__all__ = ["DedupeWindow"]


class DedupeWindow:
    """Ids seen within ``window_s``, at most ``max_entries`` of them (oldest evicted first).

    Memory is about 120 bytes an entry (1,000,000 entries ≈ 120 MB). When the cap evicts an id
    younger than the window the window is effectively shorter; ``evicted_early`` counts those so
    an operator can see it and raise the cap.
    """

    def __init__(self, window_s: float, max_entries: int) -> None:
        if window_s <= 0 or max_entries <= 0:
            raise ValueError("window_s and max_entries must be positive")
        self.window_s = window_s
        self.max_entries = max_entries
        self.evicted_early = 0
        self._seen_s: OrderedDict[int, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen_s)

    def contains(self, event_id: UUID, now_s: float) -> bool:
        self._expire(now_s)
        return event_id.int in self._seen_s

    def add(self, event_id: UUID, seen_s: float, now_s: float) -> None:
        """Remember ``event_id`` as first appended at ``seen_s`` (ignored if already older)."""
        if seen_s < now_s - self.window_s or event_id.int in self._seen_s:
            return
        self._seen_s[event_id.int] = seen_s
        while len(self._seen_s) > self.max_entries:
            _, oldest_s = self._seen_s.popitem(last=False)
            if oldest_s >= now_s - self.window_s:
                self.evicted_early += 1

    def oldest_age_s(self, now_s: float) -> float:
        """How far back the window reaches now (0 when empty)."""
        self._expire(now_s)
        for seen_s in self._seen_s.values():
            return now_s - seen_s
        return 0.0

    def _expire(self, now_s: float) -> None:
        # Insertion order is close to time order (the log is read back in order at start), so
        # stopping at the first young entry is enough to keep memory bounded.
        horizon_s = now_s - self.window_s
        seen = self._seen_s
        while seen:
            first = next(iter(seen))
            if seen[first] >= horizon_s:
                break
            del seen[first]
