"""A metrics worker killed at any point of a fold, and restarted on what its changelog kept,
publishes exactly the windows of an uninterrupted fold (pure: the changelog is a list).

The model of a kill: the changelog holds a prefix of the writes, in order; the input offsets
committed are at most the inputs whose folds are whole in it (the worker flushes its changelog
before it commits), perhaps fewer; the next worker restores the prefix, reads again from the
committed offset and publishes what it closes. Windows published before the kill are those of
the folds completed by then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, partial
from typing import Any

import pytest

from schemas.rewards import RewardRecord
from streams.monitors.config import MonitorConfig
from streams.monitors.journal import BufferedWrites, fold_atomically
from streams.monitors.simulate import PROFILES, Segment, simulate
from streams.monitors.windows import fold_reward

Acc = dict[str, Any]
Fold = Callable[[MutableMapping[str, Any], RewardRecord, str], tuple[list[Acc], list[Acc]]]
CONFIG = MonitorConfig(window_s=10, grace_s=2)
RECORDS = list(simulate([Segment({"a": ("c0", PROFILES["healthy"]),
                                  "b": ("c1", PROFILES["healthy"])}, 300)],
                        seed=11, start=datetime(2026, 3, 1, tzinfo=UTC)))


class Changelog(MutableMapping[str, Any]):
    """A dict that logs each write as a changelog would: (key, value), None for a delete."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.log: list[tuple[str, Any]] = []

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.log.append((key, value))

    def __delitem__(self, key: str) -> None:
        del self.data[key]
        self.log.append((key, None))

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.data))

    def __len__(self) -> int:
        return len(self.data)


def _journalled(state: MutableMapping[str, Any], record: RewardRecord,
                writer: str) -> tuple[list[Acc], list[Acc]]:
    return fold_atomically(state, writer, partial(
        fold_reward, record=record, window_ms=CONFIG.window_s * 1000,
        grace_ms=CONFIG.grace_s * 1000))


def _plain(state: MutableMapping[str, Any], record: RewardRecord,
           _writer: str) -> tuple[list[Acc], list[Acc]]:
    return [], fold_reward(state, record, window_ms=CONFIG.window_s * 1000,
                           grace_ms=CONFIG.grace_s * 1000)


def _identity(acc: Acc) -> tuple[int, tuple[str, ...]]:
    return acc["start_ms"], tuple(acc["key"])


@dataclass(frozen=True)
class _FirstWorker:
    log: list[tuple[str, Any]]  # its changelog
    ends: list[int]  # the changelog's length after each fold
    published: list[list[Acc]]  # by each fold


@cache
def _first_worker(fold: Fold) -> _FirstWorker:
    state = Changelog()
    ends, published = [], []
    for record in RECORDS:
        again, closed = fold(state, record, "first")
        ends.append(len(state.log))
        published.append(again + closed)
    return _FirstWorker(state.log, ends, published)


def _killed_and_restarted(fold: Fold, crash_at: int, lag: int) -> list[Acc]:
    """Every window published by a worker whose changelog kept ``crash_at`` writes, then by
    the next one, reading again from ``lag`` inputs before the first fold not kept whole."""
    first = _first_worker(fold)
    whole = sum(1 for end in first.ends if end <= crash_at)
    published = [acc for accs in first.published[:whole] for acc in accs]
    restored = _restore(first.log[:crash_at])
    for record in RECORDS[max(whole - lag, 0):]:
        again, closed = fold(restored, record, "second")
        published += again + closed
    return published


def _restore(log: list[tuple[str, Any]]) -> dict[str, Any]:
    """The state a changelog restores: its writes in order, None deleting."""
    state: dict[str, Any] = {}
    for key, value in log:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def _uninterrupted() -> dict[tuple[int, tuple[str, ...]], Acc]:
    state: dict[str, Any] = {}
    out: dict[tuple[int, tuple[str, ...]], Acc] = {}
    for record in RECORDS:
        for acc in _plain(state, record, "")[1]:
            out[_identity(acc)] = acc
    return out


def _crash_points(fold: Fold) -> list[int]:
    """Every place in the changelog inside the folds that closed windows (the ids of closed
    windows are forgotten there)."""
    first = _first_worker(fold)
    starts = [0, *first.ends[:-1]]
    return [at for start, end, closed in zip(starts, first.ends, first.published, strict=True)
            if closed for at in range(start, end + 1)]


@pytest.mark.parametrize("lag", [0, 3])
def test_a_kill_anywhere_in_a_journalled_fold_changes_and_loses_no_window(lag: int) -> None:
    expected = _uninterrupted()
    points = _crash_points(_journalled)
    assert len(points) > 100 and len(expected) > 20
    for crash_at in points:
        published = _killed_and_restarted(_journalled, crash_at, lag)
        assert {_identity(acc) for acc in published} == expected.keys(), crash_at
        changed = [acc for acc in published if acc != expected[_identity(acc)]]
        assert not changed, (crash_at, changed[:1])


def test_without_the_journal_a_kill_inside_a_fold_changes_a_window() -> None:
    """The failure the journal prevents: a kill inside a plain fold leaves a window that counts
    an input once too few (its id kept, its windows not), or a state the next worker cannot
    fold into (a window listed open, never written)."""
    expected = _uninterrupted()
    changed, broken = 0, 0
    for crash_at in _crash_points(_plain):
        try:
            published = _killed_and_restarted(_plain, crash_at, 0)
        except KeyError:
            broken += 1
            continue
        changed += any(acc != expected.get(_identity(acc)) for acc in published)
    assert changed and broken


def test_buffered_writes_read_their_own_writes_and_deletes_and_touch_nothing_else() -> None:
    base = {"kept": 1, "gone": 2, "changed": 3}
    view = BufferedWrites(base)
    view["changed"], view["new"] = 30, 4
    del view["gone"]
    assert dict(view) == {"kept": 1, "changed": 30, "new": 4} and len(view) == 3
    assert "gone" not in view and view.get("gone") is None
    with pytest.raises(KeyError):
        del view["gone"]
    with pytest.raises(ValueError, match="new: a state value cannot be None"):
        view["new"] = None
    assert base == {"kept": 1, "gone": 2, "changed": 3}
    assert view.writes == {"changed": 30, "new": 4, "gone": None}


def test_the_next_writer_completes_a_cut_fold_and_publishes_its_windows_again() -> None:
    cut = Changelog()
    for record in RECORDS:
        before = len(cut.log)
        _, closed = _journalled(cut, record, "first")
        if closed:
            break
    kept = _restore(cut.log[:before + 1])  # the closing fold's journal entry, none of its writes
    again, _ = _journalled(kept, record, "second")  # the same input read again: a repeat
    assert again == closed
    skip = {"__journal__", "__repeated__"}
    assert {k: v for k, v in kept.items() if k not in skip} == {
        k: v for k, v in cut.data.items() if k not in skip}
