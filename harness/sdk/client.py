"""The :class:`Telemetry` client: events on disk first, then batched, gzip'd, retried to ingest.

One background thread sends; ``emit`` only validates and appends a line to the disk queue, so it
is cheap from both threads and asyncio code (``aflush``/``aclose`` for the latter). Neither a
disk that refuses writes nor a failing server raises into the host: ``emit`` returns False and
the sender thread outlives any exception; every event lost is counted (:class:`TelemetryStats`).
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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import httpx

from harness.sdk.errors import TelemetryError
from harness.sdk.events import EventConstructors
from harness.sdk.retry import Action, backoff_delay_s, classify, parse_retry_after_s
from infra.disk_queue import DiskQueue
from infra.errors import QueueInUseError
from infra.throttle import ThrottledLog
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
    dropped_write_failed: int  # refused by emit(): the disk refused the write (full, read-only)
    dropped_undeliverable: int  # answered with a 4xx other than 429 (or 413 for one event)
    dropped_gave_up: int  # still failing (5xx, 429, no connection) when the retry budget ran out
    dropped_torn: int  # half-written or damaged lines found in the queue (after a crash)
    retries: int
    failovers: int  # moves to the next ingest replica (after a failed connection or a 5xx)
    counters_persisted: bool  # False while counters.json cannot be written (kept in memory)


def _events_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base if base.endswith("/v1/events") else base + "/v1/events"


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
        gzip_level: int = 5, fsync: bool = False, transport: httpx.BaseTransport | None = None,
    ) -> None:
        bases = [endpoint_url] if isinstance(endpoint_url, str) else list(endpoint_url)
        if not bases:
            raise TelemetryError("endpoint_url: give at least one ingest URL")
        self._urls = [_events_url(base) for base in bases]
        self._endpoint = 0  # the replica in use
        base = bases[0].rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}",
                         "Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"}
        directory = Path(queue_dir) if queue_dir else _default_queue_dir(base, api_key)
        try:
            self._queue = DiskQueue(directory, max_queue_bytes, max_queue_events, fsync,
                                    label="telemetry", dir_option="queue_dir", logger=_log)
        except QueueInUseError as exc:
            raise TelemetryError(str(exc)) from None
        self._batch_size, self._linger_s, self._gzip_level = batch_size, linger_s, gzip_level
        self._backoff = (backoff_base_s, backoff_cap_s)
        self._retry_budget = (retry_max_attempts, retry_budget_s)
        self._throttled = ThrottledLog(_log)
        self._http = httpx.Client(timeout=timeout_s, transport=transport)
        self._cond = threading.Condition()
        self._flush_wanted = False
        self._closing = False
        self._deadline_s = float("inf")  # once past it the sender stops retrying
        self._abort = threading.Event()
        self._counts = {"sent": 0, "duplicates": 0, "rejected": 0, "retries": 0, "failovers": 0}
        self._thread = threading.Thread(target=self._run, name="rewardstream-telemetry",
                                        daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------- public

    def emit(self, event: Event) -> bool:
        """Queue any ``schemas.events`` event; False (counted, logged) when the queue is full or
        the disk refuses the write."""
        if self._closing:
            raise RuntimeError("Telemetry.emit() after close()")
        if not self._queue.put(EventAdapter.dump_json(event)):
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
        drops = {name: counters.get(name, 0) for name in (
            "dropped_queue_full", "dropped_write_failed", "dropped_undeliverable",
            "dropped_gave_up", "dropped_torn")}
        return TelemetryStats(queued=self._queue.pending_events, **self._counts, **drops,
                              counters_persisted=self._queue.counters_persisted)

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
        chunk: list[dict] = []
        size = 0
        for line in self._queue.read(path):
            try:
                event = json.loads(line)
            except ValueError:  # damaged on disk: it cannot be sent, so it must be counted
                self._give_up("dropped_torn", 1, f"a damaged line in {path}")
                continue
            if chunk and (len(chunk) >= self._batch_size or size + len(line) > _MAX_BODY_BYTES):
                if not self._deliver(chunk):
                    return False
                chunk, size = [], 0
            chunk.append(event)
            size += len(line) + 1
        if chunk and not self._deliver(chunk):
            return False
        self._queue.remove(path)
        return True

    def _body(self, events: list[dict]) -> bytes:
        sent_at = datetime.now(UTC).isoformat()
        stamped = [json.dumps({**event, "sent_at": sent_at}, separators=(",", ":")).encode()
                   for event in events]
        return gzip.compress(b"\n".join(stamped), compresslevel=self._gzip_level)

    def _deliver(self, events: list[dict]) -> bool:
        """Send until the server takes responsibility, the events prove undeliverable or the
        retry budget is spent (all True); False only when closing gives up (events kept)."""
        attempts, started_s = 0, time.monotonic()
        max_attempts, budget_s = self._retry_budget
        while time.monotonic() < self._deadline_s:
            retry_after_s, response, body = None, None, self._body(events)
            attempts += 1
            try:
                response = self._http.post(self._urls[self._endpoint], content=body,
                                           headers=self._headers)
            except Exception as exc:  # httpx's errors, or anything a transport raises
                failure = f"send failed ({type(exc).__name__}: {exc})"
            else:
                failure = f"server answered {response.status_code}"
                action = classify(response.status_code)
                retry_after_s = parse_retry_after_s(response.headers.get("retry-after"))
                if action is Action.DONE:
                    self._record(response, len(events))
                    return True
                if action is Action.SPLIT and len(events) > 1:
                    half = len(events) // 2
                    return self._deliver(events[:half]) and self._deliver(events[half:])
                if action is not Action.RETRY:
                    return self._give_up("dropped_undeliverable", len(events),
                                         f"{failure}: {response.text[:300]}")
            delay_s = backoff_delay_s(attempts - 1, *self._backoff, retry_after_s,
                                      random.random())
            if attempts >= max_attempts or time.monotonic() + delay_s - started_s > budget_s:
                return self._give_up("dropped_gave_up", len(events), f"{failure}; retry budget "
                                     f"({max_attempts} attempts, {budget_s:g} s) spent after "
                                     f"{attempts} attempts")
            self._counts["retries"] += 1
            if len(self._urls) > 1 and (response is None or response.status_code >= 500):
                self._endpoint = (self._endpoint + 1) % len(self._urls)
                self._counts["failovers"] += 1
            self._throttled.log(logging.INFO, "retry", "telemetry: %s; retrying in %.1f s",
                                failure, delay_s)
            self._abort.wait(min(delay_s, max(0.0, self._deadline_s - time.monotonic())))
        return False

    def _give_up(self, counter: str, events: int, why: str) -> bool:
        self._queue.count(counter, events)
        self._throttled.log(logging.WARNING, counter, "telemetry: %d events dropped (%s); %d "
                            "so far", events, why, self._queue.counters[counter])
        return True

    def _record(self, response: httpx.Response, events: int) -> None:
        try:
            body = response.json()
            accepted, duplicates = len(body["accepted"]), len(body["duplicates"])
            reasons = [(r.get("event_id"), r.get("reason")) for r in body["rejected"]]
        except (ValueError, LookupError, TypeError, AttributeError):  # not ingest's answer
            if response.status_code >= 300:
                self._give_up("dropped_undeliverable", events,
                              f"server answered {response.status_code}: {response.text[:300]}")
            else:
                self._counts["sent"] += events  # taken, by the status; nothing more to know
            return
        self._counts["sent"] += accepted
        self._counts["duplicates"] += duplicates
        self._counts["rejected"] += len(reasons)
        for event_id, reason in reasons[:5]:
            _log.warning("telemetry event %s rejected: %s", event_id, reason)
