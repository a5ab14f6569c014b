"""One ``POST /v1/events`` request from body to answer, around the pure verdicts.

Ids are checked against the dedupe window and against appends still in flight: a retry that
arrives while the first attempt's records are still unacknowledged waits for that outcome
instead of appending the events a second time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache, partial
from uuid import UUID

from schemas.dedupe import DedupeWindow
from serving.ingest.body import decompress, split_events
from serving.ingest.config import IngestConfig
from serving.ingest.errors import IngestError
from serving.ingest.kafka_io import EventLog
from serving.ingest.keys import ApiKey, pseudonymise
from serving.ingest.limits import RateLimiter
from serving.ingest.metrics import IngestMetrics
from serving.ingest.verdicts import (
    Accepted,
    EventRules,
    Rejected,
    judge_events,
    response_status,
)

__all__ = ["IngestOutcome", "IngestService", "KafkaUnavailable", "RateLimited"]


def _as_judged(rejected: Rejected) -> Rejected:
    return rejected


class KafkaUnavailable(IngestError):
    """Kafka did not acknowledge in time: nothing counts as accepted yet. ``may_land``: records
    were handed to the producer, which keeps trying, so they may still be written (a resend of
    the same event ids is then answered as duplicates); False when nothing was sent."""

    status_code = 503

    def __init__(self, reason: str, may_land: bool = True) -> None:
        super().__init__(reason)
        self.may_land = may_land

    def answer(self) -> str:
        """The 503's detail: what became of the batch, and what to do."""
        fate = ("nothing is accepted yet, but the batch may still be written once Kafka "
                "answers: resend it after Retry-After, and the events already written are "
                "answered as duplicates" if self.may_land else
                "nothing was accepted: resend the batch after Retry-After")
        return f"Kafka is unavailable ({self}); {fate}"


class RateLimited(IngestError):
    """The key is over its rate; retry after ``retry_after_s``."""

    status_code = 429

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"over the key's rate; retry after {retry_after_s:.1f} s")
        self.retry_after_s = retry_after_s


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
        # Keyed by (org, event id): another org's event with the same id is another event.
        self.dedupe: DedupeWindow[tuple[str, int]] = DedupeWindow(config.dedupe_max_entries,
                                                                  config.dedupe_window_s)
        self._limiter = RateLimiter()
        self._rules = EventRules(
            max_event_bytes=config.caps.max_event_bytes, max_json_depth=config.caps.max_json_depth,
            max_age=timedelta(seconds=config.timestamp_max_age_s),
            max_ahead=timedelta(seconds=config.timestamp_max_ahead_s),
            max_future=timedelta(seconds=config.max_future_s), text_policy=config.text_policy)
        self._in_flight: dict[tuple[str, int], asyncio.Future[None]] = {}
        self.accepting = False  # until the dedupe window is rebuilt (remember)
        # The same users send event after event; caching their pseudonyms saves an HMAC each.
        self._pseudonym = lru_cache(maxsize=65_536)(partial(pseudonymise, config.pseudonym_secret))

    def remember(self, seen: Sequence[tuple[str, UUID, float]]) -> None:
        """Take the ids appended before this process started; from then on it accepts."""
        now_s = time.time()
        for org_id, event_id, seen_s in seen:
            self.dedupe.add((org_id, event_id.int), seen_s, now_s)
        self._update_gauges()
        self.accepting = True

    async def ingest(self, key: ApiKey, body: bytes, content_encoding: str | None) -> IngestOutcome:
        caps = self.config.caps
        raws = split_events(decompress(body, content_encoding, caps), caps)
        return await self.ingest_events(key, raws)

    async def ingest_events(
        self, key: ApiKey, raws: Sequence[bytes], *,
        relabel: Callable[[Rejected], Rejected] = _as_judged,
        prejudged: Sequence[Rejected] = (),
    ) -> IngestOutcome:
        """Judge each event's bytes, append the fresh ones and dead-letter the rejected ones.

        Another encoding (OTLP) passes the events it made, ``relabel`` to name its own fields in
        the rejections before they are answered and dead-lettered, and the items it could not
        make into events at all (``prejudged``, indexed after ``raws``)."""
        if not self.accepting:
            raise KafkaUnavailable("ingest has not reached Kafka since it started (it is "
                                   "connecting and rebuilding its dedupe window)", False)
        wait_s = self._limiter.take(key.key_sha256, key.rate_per_s, key.burst,
                                    len(raws) + len(prejudged), time.monotonic())
        if wait_s > 0:
            raise RateLimited(wait_s)
        received_at = datetime.now(UTC)
        verdicts = judge_events(raws, key, received_at, self._pseudonym, self._rules)
        accepted = [v for v in verdicts if isinstance(v, Accepted)]
        rejected = [relabel(v) for v in verdicts if isinstance(v, Rejected)] + list(prejudged)
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
        pending = {self._in_flight[a.dedupe_key] for a in accepted
                   if a.dedupe_key in self._in_flight}
        if pending:
            await asyncio.wait(pending, timeout=self.config.ack_timeout_s)
            if any(a.dedupe_key in self._in_flight for a in accepted):
                raise KafkaUnavailable("an earlier append of these events is still unacknowledged")
        now_s = time.time()
        fresh: list[Accepted] = []
        duplicates: list[Accepted] = []
        batch_ids: set[tuple[str, int]] = set()
        for event in accepted:
            key = event.dedupe_key
            if key in batch_ids or self.dedupe.contains(key, now_s):
                duplicates.append(event)
            else:
                batch_ids.add(key)
                fresh.append(event)
        return fresh, duplicates

    async def _append(
        self, fresh: list[Accepted], rejected: list[Rejected], key: ApiKey, received_at: datetime,
    ) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        for event in fresh:
            self._in_flight[event.dedupe_key] = done
        try:
            futures = await self.log.append(fresh, key.org_id, int(received_at.timestamp() * 1000))
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
        for event, result in zip(fresh, results, strict=False):
            if not isinstance(result, BaseException):
                self.dedupe.add(event.dedupe_key, seen_s, now_s)
        for event in fresh:
            if self._in_flight.get(event.dedupe_key) is done:
                del self._in_flight[event.dedupe_key]
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
