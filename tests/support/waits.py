"""Waiting on a condition instead of sleeping for a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout_s: float = 30.0, what: str = "the condition",
             interval_s: float = 0.1, alive: Callable[[], bool] | None = None) -> T:
    """Call ``condition`` until it returns something true, and return that. AssertionError,
    naming ``what``, past ``timeout_s`` or as soon as ``alive`` (the process that should make it
    come true) says it is gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert alive is None or alive(), f"gone before {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        time.sleep(interval_s)
