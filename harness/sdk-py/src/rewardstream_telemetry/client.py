"""The :class:`Telemetry` client: events on disk first, then batched, gzip'd, retried to ingest.

One background thread sends; ``emit`` only validates and appends a line to the disk queue, so it
is cheap from both threads and asyncio code (``aflush``/``aclose`` for the latter). Neither a
disk that refuses writes nor a failing server raises into the host: ``emit`` returns False and
the sender thread outlives any exception; every event lost is counted (:class:`TelemetryStats`,
from zero for each client) and ``close`` answers False when any was.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from rewardstream_telemetry.delivery import Delivery, RetryPolicy, events_url
from rewardstream_telemetry.disk_queue import DiskQueue
from rewardstream_telemetry.errors import TelemetryError
from rewardstream_telemetry.events import EventConstructors
from rewardstream_telemetry.published import checked_event
from rewardstream_telemetry.throttle import ThrottledLog
from rewardstream_telemetry.transport import HttpTransport, Transport

__all__ = ["Telemetry", "TelemetryStats"]

_log = logging.getLogger("rewardstream.sdk")
_MAX_BODY_BYTES = 4 << 20  # decompressed; well under the server's 10 MiB batch cap
_DROPS = ("dropped_queue_full", "dropped_write_failed", "dropped_undeliverable",
          "dropped_gave_up", "dropped_torn")


@dataclass(frozen=True)
class TelemetryStats:
    """What this client did since it was made (a new client starts from zero; the drop counts
    of every client that used the queue directory add up in its ``counters.json``)."""

    queued: int  # on disk, not yet taken by the server (left by earlier clients included)
    sent: int  # accepted by the server (appended to events.raw)
    duplicates: int  # already appended earlier (a retry of a batch the server had taken)
    rejected: int  # refused by the server, which dead-lettered them with a reason
    dropped_queue_full: int  # refused by emit() because the disk queue was full
    dropped_write_failed: int  # refused by emit(): the disk refused the write (full, read-only)
    dropped_undeliverable: int  # answered with a 4xx other than 429 (or 413 for one event)
    dropped_gave_up: int  # still failing (5xx, 429, no connection) when the retry budget ran out
    dropped_torn: int  # half-written or damaged lines found in the queue (after a crash)
    retries: int
    failovers: int  # moves to the next ingest replica (after a failed connection or a 5xx)
    counters_persisted: bool  # False while counters.json cannot be written (kept in memory)

    @property
    def lost(self) -> int:
        """Events this client was given that will not reach the log: dropped or rejected."""
        return self.rejected + sum(getattr(self, name) for name in _DROPS)


def _default_queue_dir(endpoint_url: str, api_key: str) -> Path:
    digest = hashlib.sha256(f"{endpoint_url}\x00{api_key}".encode()).hexdigest()[:16]
    return Path.home() / ".cache" / "rewardstream" / "telemetry" / digest


class Telemetry(EventConstructors):
    """Telemetry(endpoint_url, api_key, queue_dir=...): emit typed events, never lose them.

    ``endpoint_url`` is the ingest service's base URL (``http://host:8400``), or a list of the
    URLs of several ingest replicas: a failed connection or a 5xx moves the sender on to the
    next one (counted as a failover), where it stays while that one answers. Events are sent
    when ``batch_size`` are waiting or the oldest has waited ``linger_s``. A 5xx, a 429 or a
    failed connection is retried with exponential backoff and jitter (``backoff_base_s``
    doubling up to ``backoff_cap_s``), never sooner than the server's Retry-After, for at most
    ``retry_max_attempts`` attempts and ``retry_budget_s`` seconds per batch; then the batch is
    dropped, counted and logged. Any other 4xx is never retried: its events are counted as
    undeliverable (413 halves the batch first). The queue holds at most ``max_queue_events`` /
    ``max_queue_bytes``; beyond that, or when the disk refuses the write, ``emit`` returns False,
    counts the drop and logs (at most a line per 30 s per cause).
    """

    def __init__(
        self, endpoint_url: str | Sequence[str], api_key: str,
        queue_dir: str | Path | None = None, *,
        batch_size: int = 500, linger_s: float = 0.25, max_queue_events: int = 200_000,
        max_queue_bytes: int = 128 << 20, timeout_s: float = 30.0, backoff_base_s: float = 0.25,
        backoff_cap_s: float = 30.0, retry_max_attempts: int = 50, retry_budget_s: float = 900.0,
        gzip_level: int = 5, fsync: bool = False, transport: Transport | None = None,
    ) -> None:
        bases = [endpoint_url] if isinstance(endpoint_url, str) else list(endpoint_url)
        if not bases:
            raise TelemetryError("endpoint_url: give at least one ingest URL")
        directory = Path(queue_dir) if queue_dir else \
            _default_queue_dir(bases[0].rstrip("/"), api_key)
        self._queue = DiskQueue(directory, max_queue_bytes, max_queue_events, fsync,
                                label="telemetry", dir_option="queue_dir", logger=_log)
        self._batch_size, self._linger_s = batch_size, linger_s
        self._throttled = ThrottledLog(_log)
        self._http: HttpTransport | None = None  # the transport this client made, to close
        if transport is None:
            transport = self._http = HttpTransport(timeout_s)
        self._abort = threading.Event()
        self._delivery = Delivery(
            [events_url(base) for base in bases], api_key, transport,
            RetryPolicy(backoff_base_s, backoff_cap_s, retry_max_attempts, retry_budget_s),
            gzip_level, self._abort, self._count_drop)
        self._cond = threading.Condition()
        self._flush_wanted = False
        self._closing = False
        self._closed: bool | None = None  # what close() answered
        self._thread = threading.Thread(target=self._run, name="rewardstream-telemetry",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------- public

    def emit(self, event: Mapping[str, Any] | Any) -> bool:
        """Queue one whole event: a mapping of its fields as JSON values (or a model with
        ``model_dump``, such as the platform's ``schemas.events``). Raises
        :class:`InvalidEventError` naming the field when it breaks its published schema; False
        (counted, logged) when the queue is full or the disk refuses the write."""
        if self._closing:
            raise RuntimeError("Telemetry.emit() after close()")
        dump = getattr(event, "model_dump", None)
        complete = checked_event(dump(mode="json") if callable(dump) else event)
        if not self._queue.put(json.dumps(complete, separators=(",", ":")).encode()):
            return False
        if self._queue.unsealed_events >= self._batch_size:
            with self._cond:
                self._cond.notify_all()
        return True

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Send everything queued; True when the queue is empty, False at the timeout."""
        deadline_s = time.monotonic() + timeout_s
        with self._cond:
            self._flush_wanted = True
            self._cond.notify_all()
            while self._queue.pending_events and time.monotonic() < deadline_s:
                if not self._thread.is_alive():
                    break
                self._cond.wait(min(0.1, max(0.0, deadline_s - time.monotonic())))
            return self._queue.pending_events == 0

    def close(self, timeout_s: float = 30.0) -> bool:
        """Flush for up to ``timeout_s``, then stop; unsent events stay on disk for next time.

        True only when the queue is empty and nothing this client was given was lost (dropped
        or rejected: ``stats().lost``); :meth:`stats` says what. Closing again answers the same.
        """
        if self._closed is not None or self._closing:
            return bool(self._closed)
        flushed = self.flush(timeout_s)
        with self._cond:
            self._closing = True
            self._delivery.deadline_s = time.monotonic()
            self._abort.set()
            self._cond.notify_all()
        self._thread.join()
        if self._http is not None:
            self._http.close()
        self._queue.close()
        self._closed = flushed and self.stats().lost == 0
        return self._closed

    async def aflush(self, timeout_s: float = 30.0) -> bool:
        return await asyncio.to_thread(self.flush, timeout_s)

    async def aclose(self, timeout_s: float = 30.0) -> bool:
        return await asyncio.to_thread(self.close, timeout_s)

    def stats(self) -> TelemetryStats:
        """This client's counts (from zero when it was made) and what is queued now."""
        drops = {name: self._queue.counted.get(name, 0) for name in _DROPS}
        return TelemetryStats(queued=self._queue.pending_events, **self._delivery.counts,
                              **drops, counters_persisted=self._queue.counters_persisted)

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Telemetry:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    # ------------------------------------------------------------------------- sender

    def _due(self) -> bool:
        waiting = self._queue.unsealed_events
        if waiting >= self._batch_size or (waiting and self._flush_wanted):
            return True
        first_s = self._queue.first_unsealed_s
        return first_s is not None and time.monotonic() - first_s >= self._linger_s

    def _run(self) -> None:
        while not self._closing:
            with self._cond:
                if not self._due() and not self._queue.sealed() and not self._closing:
                    self._cond.wait(self._linger_s / 2)
            try:
                self._send_due()
            except Exception:  # a full disk, a damaged file, a bug: the sender must live on
                self._throttled.log(logging.ERROR, "sender",
                                    "telemetry: sending from %s failed; retrying in 1 s",
                                    self._queue.directory, exc_info=True)
                self._abort.wait(1.0)
            with self._cond:
                if self._queue.pending_events == 0:
                    self._flush_wanted = False
                self._cond.notify_all()

    def _send_due(self) -> None:
        self._queue.reopen_if_due()
        self._queue.save_counters()
        if self._due():
            self._queue.seal()
        for path in self._queue.sealed():
            if not self._send_file(path):
                break

    def _send_file(self, path: Path) -> bool:
        chunk: list[dict[str, Any]] = []
        size = 0
        for line in self._queue.read(path):
            try:
                event = json.loads(line)
            except ValueError:  # damaged on disk: it cannot be sent, so it must be counted
                self._delivery.give_up("dropped_torn", 1, f"a damaged line in {path}")
                continue
            if chunk and (len(chunk) >= self._batch_size or size + len(line) > _MAX_BODY_BYTES):
                if not self._delivery.deliver(chunk):
                    return False
                chunk, size = [], 0
            chunk.append(event)
            size += len(line) + 1
        if chunk and not self._delivery.deliver(chunk):
            return False
        self._queue.remove(path)
        return True

    def _count_drop(self, counter: str, events: int) -> int:
        self._queue.count(counter, events)
        return self._queue.counted[counter]
