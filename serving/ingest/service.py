"""One ``POST /v1/events`` request from body to answer, around the pure verdicts.

Ids are checked against the dedupe window and against appends still in flight: a retry that
arrives while the first attempt's records are still unacknowledged waits for that outcome
instead of appending the events a second time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache, partial
from uuid import UUID

from serving.ingest.body import decompress, split_events
from serving.ingest.config import IngestConfig
from serving.ingest.dedupe import DedupeWindow
from serving.ingest.kafka_io import EventLog
from serving.ingest.keys import ApiKey, pseudonymise
from serving.ingest.limits import RateLimiter
from serving.ingest.metrics import IngestMetrics
from serving.ingest.verdicts import Accepted, Rejected, judge_event, response_status

__all__ = ["IngestOutcome", "IngestService", "KafkaUnavailable", "RateLimited"]


class KafkaUnavailable(Exception):
    """Kafka did not acknowledge in time; the answer is 503 and nothing counts as accepted."""


@dataclass(frozen=True)
class RateLimited(Exception):
    retry_after_s: float


@dataclass
class IngestOutcome:
    status: int
    accepted: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


class IngestService:
    def __init__(self, config: IngestConfig, log: EventLog, metrics: IngestMetrics) -> None:
        self.config = config
        self.log = log
        self.metrics = metrics
        self.dedupe = DedupeWindow(config.dedupe_window_s, config.dedupe_max_entries)
        self._limiter = RateLimiter()
        self._in_flight: dict[int, asyncio.Future[None]] = {}
        # The same users send event after event; caching their pseudonyms saves an HMAC each.
        self._pseudonym = lru_cache(maxsize=65_536)(partial(pseudonymise, config.pseudonym_secret))

    def remember(self, seen: Sequence[tuple[UUID, float]]) -> None:
        now_s = time.time()
        for event_id, seen_s in seen:
            self.dedupe.add(event_id, seen_s, now_s)
        self._update_gauges()

    async def ingest(self, key: ApiKey, body: bytes, content_encoding: str | None) -> IngestOutcome:
        caps = self.config.caps
        raws = split_events(decompress(body, content_encoding, caps.max_batch_bytes), caps)
        wait_s = self._limiter.take(key.key_sha256, key.rate_per_s, key.burst, len(raws),
                                    time.monotonic())
        if wait_s > 0:
            raise RateLimited(wait_s)
        received_at = datetime.now(timezone.utc)
        max_future = timedelta(seconds=self.config.max_future_s)
        verdicts = [judge_event(i, raw, key, received_at, self._pseudonym, caps.max_event_bytes,
                                max_future) for i, raw in enumerate(raws)]
        accepted = [v for v in verdicts if isinstance(v, Accepted)]
        rejected = [v for v in verdicts if isinstance(v, Rejected)]
        fresh, duplicates = await self._split_duplicates(accepted)
        await self._append(fresh, rejected, key, received_at)
        self._count(fresh, duplicates, rejected)
        return IngestOutcome(
            status=response_status(len(fresh) + len(duplicates), rejected),
            accepted=[str(a.event_id) for a in fresh],
            duplicates=[str(a.event_id) for a in duplicates], rejected=rejected,
        )

    async def _split_duplicates(
        self, accepted: list[Accepted],
    ) -> tuple[list[Accepted], list[Accepted]]:
        pending = {self._in_flight[a.event_id.int] for a in accepted
                   if a.event_id.int in self._in_flight}
        if pending:
            await asyncio.wait(pending, timeout=self.config.ack_timeout_s)
            if any(a.event_id.int in self._in_flight for a in accepted):
                raise KafkaUnavailable("an earlier append of these events is still unacknowledged")
        now_s = time.time()
        fresh: list[Accepted] = []
        duplicates: list[Accepted] = []
        batch_ids: set[int] = set()
        for event in accepted:
            as_int = event.event_id.int
            if as_int in batch_ids or self.dedupe.contains(event.event_id, now_s):
                duplicates.append(event)
            else:
                batch_ids.add(as_int)
                fresh.append(event)
        return fresh, duplicates

    async def _append(
        self, fresh: list[Accepted], rejected: list[Rejected], key: ApiKey, received_at: datetime,
    ) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        for event in fresh:
            self._in_flight[event.event_id.int] = done
        try:
            futures = await self.log.append(fresh, int(received_at.timestamp() * 1000))
            futures += await self.log.deadletter(rejected, key, received_at)
        except Exception:
            self._settle(fresh, received_at.timestamp(), [], done)
            raise KafkaUnavailable("the producer refused the records") from None
        if not futures:
            self._settle(fresh, received_at.timestamp(), [], done)
            return
        # Settled on the real delivery outcome, which may come after this request gave up.
        gathered = asyncio.gather(*futures, return_exceptions=True)
        gathered.add_done_callback(
            lambda g: self._settle(fresh, received_at.timestamp(), g.result(), done))
        finished, _ = await asyncio.wait({gathered}, timeout=self.config.ack_timeout_s)
        if not finished or any(isinstance(r, BaseException) for r in gathered.result()):
            raise KafkaUnavailable("Kafka did not acknowledge every record in time")

    def _settle(self, fresh: list[Accepted], seen_s: float, results: list[object],
                done: asyncio.Future[None]) -> None:
        now_s = time.time()
        for event, result in zip(fresh, results):
            if not isinstance(result, BaseException):
                self.dedupe.add(event.event_id, seen_s, now_s)
        for event in fresh:
            if self._in_flight.get(event.event_id.int) is done:
                del self._in_flight[event.event_id.int]
        if not done.done():
            done.set_result(None)
        self._update_gauges()

    def _count(self, fresh: list[Accepted], duplicates: list[Accepted],
               rejected: list[Rejected]) -> None:
        self.metrics.accepted.inc(len(fresh))
        self.metrics.duplicates.inc(len(duplicates))
        for event in rejected:
            self.metrics.rejected.labels(reason=event.kind).inc()

    def _update_gauges(self) -> None:
        self.metrics.dedupe_entries.set(len(self.dedupe))
        self.metrics.dedupe_evicted_early.set(self.dedupe.evicted_early)
