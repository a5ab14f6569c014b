"""The gateway's durable spool: what it served reaches ``events.raw`` even while Kafka is away.

``put`` appends the event to a disk queue (the telemetry SDK's,
``rewardstream_telemetry.disk_queue``) before it returns, so neither a broker outage nor a killed
gateway loses it. A delivery thread seals what waits into batches
and hands a batch to ``deliver``, which sends it and says per event whether Kafka acknowledged
it, refused it for good, or should be asked again (it stops waiting once the spool gives up:
closing, past its deadline). A batch is removed once nothing in it is left to retry; otherwise
only the events to retry stay in its place and the thread tries again after a backoff, batch
after batch, so events reach the topic in the order they were served, with their own event
ids. A send that was not acknowledged may still have been written, so a retry can repeat an
event on the log (consumers dedupe by event id); nothing else repeats.

Lost events (the disk refused them or the queue was full, or Kafka refused them for good) are
counted in the queue's persisted counters and logged at most once per interval per cause; they,
the number of events waiting and the number delivered or sent again are Prometheus metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from infra.backoff import retry_pause_s
from rewardstream_telemetry.disk_queue import DiskQueue
from rewardstream_telemetry.throttle import ThrottledLog

__all__ = ["EventSpool", "Outcome"]

log = logging.getLogger(__name__)
_BATCH_EVENTS = 500
_LINGER_S = 0.02
_BACKOFF_S = (0.5, 5.0)
_LOST_PREFIX = "dropped_"
_FIRST_DEPTH_WARNING = 50  # events waiting; each later warning at twice the last


class Outcome(Enum):
    ACKNOWLEDGED = "acknowledged"
    RETRY = "retry"  # not acknowledged (yet): ask again
    REFUSED = "refused"  # refused for good (too large, invalid): counted as lost


Deliver = Callable[[list[bytes], Callable[[], bool]], list[Outcome]]


class _LostCollector(Collector):
    def __init__(self, queue: DiskQueue) -> None:
        self._queue = queue

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "rewardstream_gateway_events_lost",
            "Served events that never reached events.raw, by cause (kept across restarts)",
            labels=["reason"])
        for name, value in sorted(self._queue.counters.items()):
            if name.startswith(_LOST_PREFIX):
                family.add_metric([name.removeprefix(_LOST_PREFIX)], value)
        yield family


class EventSpool:
    def __init__(self, directory: Path, deliver: Deliver, registry: CollectorRegistry, *,
                 max_bytes: int, max_events: int, linger_s: float = _LINGER_S,
                 backoff_s: tuple[float, float] = _BACKOFF_S) -> None:
        self._queue = DiskQueue(directory, max_bytes, max_events, label="gateway spool",
                                dir_option="--spool-dir", logger=log)
        self._deliver = deliver
        self._linger_s, self._backoff_s = linger_s, backoff_s
        self._throttled = ThrottledLog(log)
        self._cond = threading.Condition()
        self._closing = False
        self._deadline_s = float("inf")
        self._waited_since: float | None = None  # the first sign of this outage
        self._warn_depth = _FIRST_DEPTH_WARNING
        registry.register(_LostCollector(self._queue))
        depth = Gauge("rewardstream_gateway_spool_events",
                      "Served events on disk that Kafka has not acknowledged yet",
                      registry=registry)
        depth.set_function(lambda: self._queue.pending_events)
        self.delivered = Counter("rewardstream_gateway_events_delivered_total",
                                 "Served events Kafka acknowledged", registry=registry)
        self.retried = Counter("rewardstream_gateway_events_retried_total",
                               "Sends Kafka did not acknowledge, made again from the spool",
                               registry=registry)
        self._thread = threading.Thread(target=self._run, name="gateway-spool", daemon=True)
        self._thread.start()

    @property
    def pending_events(self) -> int:
        return self._queue.pending_events

    @property
    def lost(self) -> dict[str, int]:
        return {name.removeprefix(_LOST_PREFIX): value
                for name, value in self._queue.counters.items() if name.startswith(_LOST_PREFIX)}

    def put(self, line: bytes) -> bool:
        """Keep one event (a JSON document without newlines) until Kafka acknowledges it; False
        when it is lost (counted and logged)."""
        if not self._queue.put(line):
            return False
        if self._queue.pending_events >= self._warn_depth:
            self._warn_depth *= 2
            self._note_waiting()
            log.warning("gateway spool: %d events wait for Kafka in %s",
                        self._queue.pending_events, self._queue.directory)
        if self._queue.unsealed_events >= _BATCH_EVENTS:
            # Sealed here, not only by the thread (which waits on Kafka during an outage), so a
            # batch never outgrows what one delivery should hold in memory and in flight.
            try:
                self._queue.seal()
            except OSError as exc:
                self._throttled.log(logging.ERROR, "seal", "gateway spool: cannot seal %s (%s)",
                                    self._queue.directory, exc)
            with self._cond:
                self._cond.notify_all()
        return True

    def count_lost(self, reason: str, n: int = 1) -> None:
        self._queue.count(_LOST_PREFIX + reason, n)

    def close(self, timeout_s: float = 10.0) -> bool:
        """Deliver for up to ``timeout_s``, then stop; what is left stays on disk for the next
        start (a spool left with nothing to keep is removed). True when nothing was left."""
        with self._cond:
            self._closing = True
            self._deadline_s = time.monotonic() + timeout_s
            self._cond.notify_all()
        self._thread.join()
        left = self._queue.pending_events
        self._queue.close(remove_if_empty=True)
        if left:
            log.warning("gateway spool: %d events wait in %s; they are delivered on the next "
                        "start with this --spool-dir", left, self._queue.directory)
        return left == 0

    # ------------------------------------------------------------------------ delivery

    def _gave_up(self) -> bool:
        return self._closing and time.monotonic() >= self._deadline_s

    def _run(self) -> None:
        failures = 0
        while True:
            pause = (retry_pause_s(failures, *self._backoff_s) if failures
                     else self._linger_s)
            with self._cond:
                if not self._closing:
                    self._cond.wait(pause)
                elif failures:  # closing on a broker that does not answer: retry, not spin
                    self._cond.wait(min(pause, max(0.0, self._deadline_s - time.monotonic())))
                closing = self._closing
            if closing and (self._gave_up() or self._queue.pending_events == 0):
                return
            self._queue.reopen_if_due()
            try:
                self._queue.seal()
            except OSError as exc:
                self._throttled.log(logging.ERROR, "seal", "gateway spool: cannot seal %s (%s)",
                                    self._queue.directory, exc)
                failures += 1
                continue
            failures = 0 if self._drain() else failures + 1

    def _drain(self) -> bool:
        """Deliver every sealed batch in order; False at the first that is not done."""
        for path in self._queue.sealed():
            lines = DiskQueue.read(path)
            try:
                outcomes = self._deliver(lines, self._gave_up)
            except Exception:  # the thread must outlive any bug in a sender
                log.exception("gateway spool: delivering %s failed", path.name)
                outcomes = [Outcome.RETRY] * len(lines)
            again = [line for line, o in zip(lines, outcomes, strict=True) if o is Outcome.RETRY]
            refused = sum(o is Outcome.REFUSED for o in outcomes)
            self.delivered.inc(len(lines) - len(again) - refused)
            if refused:
                self.count_lost("refused", refused)
            self._queue.retain(path, again)
            if again:
                self._note_failure(len(again), len(lines))
                return False
        self._note_recovered()
        return True

    def _note_waiting(self) -> None:
        if self._waited_since is None:
            self._waited_since = time.monotonic()

    def _note_failure(self, unacknowledged: int, sent: int) -> None:
        self.retried.inc(unacknowledged)
        self._note_waiting()
        self._throttled.log(logging.WARNING, "unacknowledged",
                            "gateway spool: Kafka did not acknowledge %d of %d events; %d wait "
                            "in %s and are sent again", unacknowledged, sent,
                            self._queue.pending_events, self._queue.directory)

    def _note_recovered(self) -> None:
        if self._waited_since is not None and self._queue.pending_events < _FIRST_DEPTH_WARNING:
            log.warning("gateway spool: Kafka acknowledges again; the backlog is delivered, "
                        "%.1f s after the first warning",
                        time.monotonic() - self._waited_since)
            self._waited_since = None
            self._warn_depth = _FIRST_DEPTH_WARNING
