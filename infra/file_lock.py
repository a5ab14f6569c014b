"""Processes that make the same thing take turns: an exclusive lock on a file, and a directory
built once by whichever process gets there first (the others wait, then reuse it)."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["build_once", "exclusive"]


@contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (created if missing) for the block; released
    when the block ends or the process dies."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_once(final: Path, build: Callable[[Path], object]) -> bool:
    """Make the directory ``final`` with ``build`` (given an empty scratch directory beside it,
    renamed into place when it returns) unless it exists; True when this call built it.
    Concurrent callers wait for the one building, so ``final`` is built once and never seen
    half-made."""
    with exclusive(final.with_name(final.name + ".lock")):
        if final.exists():
            return False
        scratch = final.with_name(final.name + ".tmp")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        build(scratch)
        scratch.rename(final)
        return True
