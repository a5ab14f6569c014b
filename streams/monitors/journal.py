"""One input's fold applied as one write: a journal entry first, then its writes.

A changelog-backed table sends each key it writes as its own changelog message, and a fold
writes several keys (the input's id, a window per key, the open windows, the watermarks). A
worker killed in the middle of a fold leaves a prefix of those writes in the changelog: the
input's id without the windows it was added to, and the restored state then skips the input
when it is read again (a window counts it once too few), or the other way round (once too
often).

So each fold first writes a single entry holding all of its writes and the windows it closed,
then the writes themselves. The changelog keeps the order of one partition's writes, so a
restored state holds either none of a fold (its input is read again and folded as new) or its
journal entry, whose writes :func:`fold_atomically` re-applies before the next fold. The
writes are values, not increments: applying them twice changes nothing, so a fold that was
not cut off is re-applied harmlessly. The windows that fold closed come back to be published
again, since the kill may have come before they were: a repeat is identical, and counted once
downstream.

Every fold runs through a :class:`BufferedWrites` overlay, so the fold itself stays the pure
function of :mod:`streams.monitors.windows`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

__all__ = ["JOURNAL", "BufferedWrites", "fold_atomically"]

JOURNAL = "__journal__"
_DELETED = None  # a buffered write that deletes its key (state values are never None)


class BufferedWrites(MutableMapping[str, Any]):
    """``base`` as a fold sees it, with the fold's writes kept aside in ``writes``."""

    def __init__(self, base: MutableMapping[str, Any]) -> None:
        self.base = base
        self.writes: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key in self.writes:
            if self.writes[key] is _DELETED:
                raise KeyError(key)
            return self.writes[key]
        return self.base[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if value is _DELETED:
            raise ValueError(f"{key}: a state value cannot be None")
        self.writes[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.writes[key] = _DELETED

    def __iter__(self) -> Iterator[str]:
        for key in self.base:
            if self.writes.get(key, True) is not _DELETED:
                yield key
        for key, value in self.writes.items():
            if value is not _DELETED and key not in self.base:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)


def fold_atomically(
    state: MutableMapping[str, Any], writer: str,
    fold: Callable[[MutableMapping[str, Any]], list[dict[str, Any]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run ``fold`` on ``state`` as one journalled write, by ``writer`` (one id per process).

    Returns the windows to publish again (those of the last fold of another writer, whose
    writes were re-applied first: its process may have died in the middle of it) and the
    windows this fold closed."""
    entry: dict[str, Any] = state.get(JOURNAL) or {"writer": writer}
    recovering = entry["writer"] != writer
    if recovering:
        _apply(state, entry["writes"])
    buffered = BufferedWrites(state)
    closed = fold(buffered)
    if buffered.writes or recovering:  # after a recovery the journal is this writer's
        state[JOURNAL] = {"writer": writer, "writes": buffered.writes, "closed": closed}
        _apply(state, buffered.writes)
    return (entry["closed"] if recovering else []), closed


def _apply(state: MutableMapping[str, Any], writes: dict[str, Any]) -> None:
    for key, value in writes.items():
        if value is not _DELETED:
            state[key] = value
        elif key in state:
            del state[key]
