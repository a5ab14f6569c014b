"""Log lines for conditions that can repeat once per event: the first at once, then at most one
per interval, saying how many were held back, so a full disk cannot flood the host's logs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["ThrottledLog"]


class ThrottledLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, int]] = {}  # key -> (when logged, held back since)

    def log(self, level: int, key: str, message: str, *args: object,
            exc_info: bool = False) -> bool:
        """Log ``message`` unless a line of the same ``key`` went out within the interval;
        True when it was logged."""
        now = self._clock()
        with self._lock:
            when, held = self._last.get(key, (float("-inf"), 0))
            if now - when < self._interval_s:
                self._last[key] = (when, held + 1)
                return False
            self._last[key] = (now, 0)
        if held:
            message += f" ({held} more like this since the last report)"
        self._logger.log(level, message, *args, exc_info=exc_info)
        return True
