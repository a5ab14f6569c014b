"""The one memory of recent keys: ingest's time window and the trainer's count bound."""

from __future__ import annotations

from schemas.dedupe import DedupeWindow
from schemas.ids import uuid7


def test_dedupe_window_forgets_after_the_window() -> None:
    window = DedupeWindow(max_entries=10, window_s=100)
    first, second = uuid7(), uuid7()
    window.add(first, seen_s=0, now_s=0)
    window.add(second, seen_s=50, now_s=50)
    assert window.contains(first, now_s=99) and window.contains(second, now_s=99)
    assert not window.contains(first, now_s=101)
    assert window.contains(second, now_s=101)
    assert window.oldest_age_s(now_s=101) == 51
    window.add(first, seen_s=0, now_s=200)  # already outside the window: not remembered
    assert not window.contains(first, now_s=200) and len(window) == 0


def test_dedupe_window_is_bounded_and_counts_early_evictions() -> None:
    window = DedupeWindow(max_entries=3, window_s=1000)
    ids = [uuid7() for _ in range(5)]
    for i, event_id in enumerate(ids):
        window.add(event_id, seen_s=i, now_s=i)
    assert len(window) == 3
    assert window.evicted_early == 2
    assert [window.contains(e, now_s=5) for e in ids] == [False, False, True, True, True]


def test_without_a_window_it_remembers_the_newest_keys_only() -> None:
    window = DedupeWindow(2, keys=["a"])
    assert [window.first_time(k) for k in ("a", "b", "c", "a")] == [False, True, True, True]
    assert window.keys() == ["c", "a"] and window.evicted_early == 2
