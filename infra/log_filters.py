"""A log filter for client libraries that report the same failure many times a second while a
broker is away (aiokafka logs each refused connection and each failed fetch)."""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RepeatLimiter"]


class RepeatLimiter(logging.Filter):
    """Lets a message of the named loggers through the first time, then at most once per
    ``interval_s``, saying how many like it were held back meanwhile."""

    def __init__(self, loggers: tuple[str, ...], interval_s: float = 60.0) -> None:
        super().__init__()
        self.loggers, self.interval_s = loggers, interval_s
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # -> (let through, held)

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.loggers):
            return True
        key, now = (record.name, record.getMessage()), time.monotonic()
        with self._lock:
            when, held = self._last.get(key, (float("-inf"), 0))
            if now - when < self.interval_s:
                self._last[key] = (when, held + 1)
                return False
            self._last[key] = (now, 0)
        if held:
            record.msg, record.args = (f"{record.getMessage()} ({held} more like this in the "
                                       f"last {now - when:.0f} s)"), ()
        return True


def limit_repeats(loggers: tuple[str, ...] = ("aiokafka", "kafka"),
                  root: logging.Logger | None = None) -> None:
    """Hold back the repeats of ``loggers``' lines on every handler of the root logger (the
    handlers see the lines their descendants propagate; a logger's own filters would not)."""
    repeats = RepeatLimiter(loggers)
    for handler in (root or logging.getLogger()).handlers:
        handler.addFilter(repeats)
