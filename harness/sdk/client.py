"""The :class:`Telemetry` client: events on disk first, then batched, gzip'd, retried to ingest.

One background thread sends; ``emit`` only validates and appends a line to the disk queue, so it
is cheap from both threads and asyncio code (``aflush``/``aclose`` for the latter).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

import httpx

from harness.sdk.events import EventConstructors
from harness.sdk.queue import DiskQueue
from harness.sdk.retry import Action, backoff_delay_s, classify, parse_retry_after_s
from schemas.events import Event, EventAdapter

__all__ = ["Telemetry", "TelemetryStats"]

_log = logging.getLogger("rewardstream.sdk")
_MAX_BODY_BYTES = 4 << 20  # decompressed; well under the server's 10 MiB batch cap


@dataclass(frozen=True)
class TelemetryStats:
    queued: int  # on disk, not yet taken by the server
    sent: int  # accepted by the server (appended to events.raw)
    duplicates: int  # already appended earlier (a retry of a batch the server had taken)
    rejected: int  # refused by the server, which dead-lettered them with a reason
    dropped_queue_full: int  # refused by emit() because the disk queue was full
    dropped_undeliverable: int  # bodies the server can never accept (400/415, oversize event)
    dropped_torn: int  # half-written lines found after a crash
    retries: int


def _default_queue_dir(endpoint_url: str, api_key: str) -> Path:
    digest = hashlib.sha256(f"{endpoint_url}\x00{api_key}".encode()).hexdigest()[:16]
    return Path.home() / ".cache" / "rewardstream" / "telemetry" / digest


class Telemetry(EventConstructors):
    """Telemetry(endpoint_url, api_key, queue_dir=...): emit typed events, never lose them.

    ``endpoint_url`` is the ingest service's base URL (``http://host:8400``). Events are sent
    when ``batch_size`` are waiting or the oldest has waited ``linger_s``. Failed sends retry with
    exponential backoff and jitter (``backoff_base_s`` doubling up to ``backoff_cap_s``), never
    sooner than the server's Retry-After. The queue holds at most ``max_queue_events`` /
    ``max_queue_bytes``; beyond that ``emit`` returns False, logs a warning and counts the drop.
    """

    def __init__(
        self, endpoint_url: str, api_key: str, queue_dir: str | Path | None = None, *,
        batch_size: int = 500, linger_s: float = 0.25, max_queue_events: int = 200_000,
        max_queue_bytes: int = 128 << 20, timeout_s: float = 30.0, backoff_base_s: float = 0.25,
        backoff_cap_s: float = 30.0, gzip_level: int = 5, fsync: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base = endpoint_url.rstrip("/")
        self._url = base if base.endswith("/v1/events") else base + "/v1/events"
        self._headers = {"Authorization": f"Bearer {api_key}",
                         "Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"}
        directory = Path(queue_dir) if queue_dir else _default_queue_dir(base, api_key)
        self._queue = DiskQueue(directory, max_queue_bytes, max_queue_events, fsync)
        self._batch_size, self._linger_s, self._gzip_level = batch_size, linger_s, gzip_level
        self._backoff = (backoff_base_s, backoff_cap_s)
        self._http = httpx.Client(timeout=timeout_s, transport=transport)
        self._cond = threading.Condition()
        self._flush_wanted = False
        self._closing = False
        self._deadline_s = float("inf")  # once past it the sender stops retrying
        self._abort = threading.Event()
        self._counts = {"sent": 0, "duplicates": 0, "rejected": 0, "retries": 0}
        self._thread = threading.Thread(target=self._run, name="rewardstream-telemetry",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------- public

    def emit(self, event: Event) -> bool:
        """Queue any ``schemas.events`` event; False (counted, logged) when the queue is full."""
        if self._closing:
            raise RuntimeError("Telemetry.emit() after close()")
        if not self._queue.put(EventAdapter.dump_json(event)):
            dropped = self._queue.counters.get("dropped_queue_full", 0)
            if dropped & (dropped - 1) == 0:  # log the 1st, 2nd, 4th, 8th ... drop
                _log.warning("telemetry queue %s is full: %d events dropped so far",
                             self._queue.directory, dropped)
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
        """Flush for up to ``timeout_s``, then stop; unsent events stay on disk for next time."""
        if self._closing:
            return self._queue.pending_events == 0
        flushed = self.flush(timeout_s)
        with self._cond:
            self._closing = True
            self._deadline_s = time.monotonic()
            self._abort.set()
            self._cond.notify_all()
        self._thread.join()
        self._http.close()
        self._queue.close()
        return flushed

    async def aflush(self, timeout_s: float = 30.0) -> bool:
        return await asyncio.to_thread(self.flush, timeout_s)

    async def aclose(self, timeout_s: float = 30.0) -> bool:
        return await asyncio.to_thread(self.close, timeout_s)

    def stats(self) -> TelemetryStats:
        counters = self._queue.counters
        return TelemetryStats(
            queued=self._queue.pending_events, **self._counts,
            dropped_queue_full=counters.get("dropped_queue_full", 0),
            dropped_undeliverable=counters.get("dropped_undeliverable", 0),
            dropped_torn=counters.get("dropped_torn", 0))

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
            if self._due():
                self._queue.seal()
            try:
                for path in self._queue.sealed():
                    if not self._send_file(path):
                        break
            except (OSError, ValueError):
                # A damaged queue file must not kill the sender: say so and keep going.
                _log.exception("telemetry: cannot send from %s", self._queue.directory)
                self._abort.wait(1.0)
            with self._cond:
                if self._queue.pending_events == 0:
                    self._flush_wanted = False
                self._cond.notify_all()

    def _send_file(self, path: Path) -> bool:
        lines = self._queue.read(path)
        chunk: list[bytes] = []
        size = 0
        for line in lines:
            if chunk and (len(chunk) >= self._batch_size or size + len(line) > _MAX_BODY_BYTES):
                if not self._deliver(chunk):
                    return False
                chunk, size = [], 0
            chunk.append(line)
            size += len(line) + 1
        if chunk and not self._deliver(chunk):
            return False
        self._queue.remove(path)
        return True

    def _body(self, lines: list[bytes]) -> bytes:
        sent_at = datetime.now(timezone.utc).isoformat()
        stamped = []
        for line in lines:
            event = json.loads(line)
            event["sent_at"] = sent_at
            stamped.append(json.dumps(event, separators=(",", ":")).encode())
        return gzip.compress(b"\n".join(stamped), compresslevel=self._gzip_level)

    def _deliver(self, lines: list[bytes]) -> bool:
        """Send until the server takes responsibility; False only when closing gives up."""
        attempt = 0
        while time.monotonic() < self._deadline_s:
            retry_after_s = None
            try:
                response = self._http.post(self._url, content=self._body(lines),
                                           headers=self._headers)
            except httpx.HTTPError as exc:
                _log.info("telemetry send failed (%s); retrying", exc)
                action = Action.RETRY
            else:
                action = classify(response.status_code)
                retry_after_s = parse_retry_after_s(response.headers.get("retry-after"))
            if action is Action.DONE:
                self._record(response)
                return True
            if action is Action.SPLIT and len(lines) > 1:
                half = len(lines) // 2
                return self._deliver(lines[:half]) and self._deliver(lines[half:])
            if action is not Action.RETRY:
                _log.warning("telemetry: server answered %d; %d events dropped: %s",
                             response.status_code, len(lines), response.text[:300])
                self._queue.count("dropped_undeliverable", len(lines))
                return True
            self._counts["retries"] += 1
            delay_s = backoff_delay_s(attempt, *self._backoff, retry_after_s, random.random())
            attempt += 1
            self._abort.wait(min(delay_s, max(0.0, self._deadline_s - time.monotonic())))
        return False

    def _record(self, response: httpx.Response) -> None:
        body = response.json()
        self._counts["sent"] += len(body.get("accepted", []))
        self._counts["duplicates"] += len(body.get("duplicates", []))
        rejected = body.get("rejected", [])
        self._counts["rejected"] += len(rejected)
        for rejection in rejected[:5]:
            _log.warning("telemetry event %s rejected: %s", rejection.get("event_id"),
                         rejection.get("reason"))
