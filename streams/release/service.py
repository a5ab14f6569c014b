"""``rewardstream release run``: the release controller, a thin shell around its pure parts.

It folds ``checkpoints`` (all of it), ``rewards`` and ``alerts`` (from ``horizon_s`` ago, by
record time) into a :class:`~streams.release.fold.ReleaseFold`, then follows them: after each
poll it publishes the events :func:`~streams.release.plan.plan` says are due (acks=all) and
folds them at once, so it never acts twice on one state. Its state is the log's: a controller
killed at any point and started again folds the same records and goes on from there. A record
it cannot read is quarantined and skipped. When the broker goes away it logs, waits (backoff up
to 30 s) and starts over from the log; it never exits because of Kafka.

Run one controller per deployment: two would both act on the same canary.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from infra.kafka_io import TopicReader, make_producer, send
from infra.quarantine import QuarantineSink
from infra.settings import Settings
from schemas.alerts import AlertEvent
from schemas.checkpoints import CheckpointEvent
from schemas.quarantine import UnusableRecord, decode_record
from schemas.rewards import RewardRecord
from schemas.topics import TopicName, topic_name
from streams.release.fold import ReleaseFold
from streams.release.plan import ControllerConfig, plan

__all__ = ["CONSUMER_NAME", "publish", "read_fold", "run_controller"]

log = logging.getLogger(__name__)
CONSUMER_NAME = "release"
_TOPICS: tuple[TopicName, ...] = ("checkpoints", "rewards", "alerts")
_PRUNE_EVERY_S = 60.0


def _now() -> datetime:
    return datetime.now(UTC)


class _Folder:
    """Decodes records of the three topics into a fold; quarantines what it cannot read."""

    def __init__(self, settings: Settings, fold: ReleaseFold) -> None:
        self.fold = fold
        self.settings = settings
        self._names = {topic_name(settings.topic_prefix, name): name for name in _TOPICS}
        self._quarantine: QuarantineSink | None = None

    def __call__(self, record: Any) -> None:
        name = self._names[record.topic]
        try:
            if name == "checkpoints":
                self.fold.add_checkpoint(decode_record(CheckpointEvent, record.value))
            elif name == "rewards":
                self.fold.add_reward(decode_record(RewardRecord, record.value))
            else:
                self.fold.add_alert(decode_record(AlertEvent, record.value))
        except UnusableRecord as exc:
            self._quarantine = self._quarantine or QuarantineSink(self.settings, CONSUMER_NAME)
            self._quarantine.put(record.topic, record.partition, record.offset, record.value,
                                 str(exc))

    def close(self) -> None:
        if self._quarantine is not None:
            self._quarantine.close()


def _open(settings: Settings, horizon_s: float) -> TopicReader:
    """A reader of the three topics: checkpoints from the start, the others from
    ``horizon_s`` ago (by record time)."""
    reader = TopicReader(settings, _TOPICS, client_id=CONSUMER_NAME)
    since_ms = int((time.time() - horizon_s) * 1000)
    recent = [tp for tp in reader.partitions
              if tp.topic != topic_name(settings.topic_prefix, "checkpoints")]
    found = reader.consumer.offsets_for_times({tp: since_ms for tp in recent})
    for tp in recent:
        at = found.get(tp)
        if at is None:
            reader.consumer.seek_to_end(tp)
        else:
            reader.consumer.seek(tp, at.offset)
    return reader


def read_fold(settings: Settings, horizon_s: float | None = None) -> ReleaseFold:
    """The fold of what the topics hold now (the commands' one-shot view): the registry, and
    the rewards and alerts of the last ``horizon_s`` (default: what the running canaries need,
    since their start less their covariate's lookback)."""
    folder = _Folder(settings, ReleaseFold(horizon_s=0.0))
    try:
        if horizon_s is None:
            with TopicReader(settings, ["checkpoints"], client_id=CONSUMER_NAME) as reader:
                for record in reader.until_end():
                    folder(record)
            now = _now()
            horizon_s = max([(now - e.canary.started_at).total_seconds()
                             + e.canary.covariate_lookback_s
                             for e in folder.fold.registry.latest.values()
                             if e.canary is not None and e.status == "canary"], default=0.0)
        fold = folder.fold = ReleaseFold(horizon_s=horizon_s)
        with _open(settings, horizon_s) as reader:
            for record in reader.until_end():
                folder(record)
    finally:
        folder.close()
    return fold


def publish(settings: Settings, events: list[CheckpointEvent], producer: Any = None) -> None:
    """Publish registry events (acks=all), keyed by checkpoint id."""
    own = producer is None
    producer = producer or make_producer(settings, CONSUMER_NAME)
    try:
        for event in events:
            send(producer, settings, "checkpoints", event.checkpoint_id.encode(),
                 event.model_dump_json().encode())
    finally:
        if own:
            producer.close()


def _serve(settings: Settings, config: ControllerConfig, stop: threading.Event,
           clock: Callable[[], datetime], on_event: Callable[[CheckpointEvent], None]) -> None:
    horizon_s = config.rule.max_duration_s + config.covariate_lookback_s
    fold = ReleaseFold(horizon_s=horizon_s)
    folder = _Folder(settings, fold)
    producer = make_producer(settings, CONSUMER_NAME)
    try:
        with _open(settings, horizon_s) as reader:
            for record in reader.until_end():
                folder(record)
            log.info("release controller caught up: %d checkpoints, %d trajectories",
                     len(fold.registry.latest), len(fold.trajectories))
            pruned_s = time.monotonic()
            while not stop.is_set():
                for event in plan(fold, clock(), config):
                    publish(settings, [event], producer)
                    fold.add_checkpoint(event)
                    on_event(event)
                for record in reader.poll(timeout_ms=500):
                    folder(record)
                if time.monotonic() - pruned_s > _PRUNE_EVERY_S:
                    fold.prune()
                    pruned_s = time.monotonic()
    finally:
        producer.close()
        folder.close()


def run_controller(settings: Settings, config: ControllerConfig, stop: threading.Event,
                   clock: Callable[[], datetime] = _now,
                   on_event: Callable[[CheckpointEvent], None] = lambda _: None) -> None:
    """Run until ``stop`` is set, starting over from the log whenever the broker is lost."""
    backoff_s = 1.0
    while not stop.is_set():
        started = time.monotonic()
        try:
            _serve(settings, config, stop, clock, on_event)
        except Exception as exc:  # the broker went away: the log is still the state
            if time.monotonic() - started > 60:
                backoff_s = 1.0
            log.error("release controller lost Kafka (%s); starting over from the log in %g s",
                      exc, backoff_s)
            stop.wait(backoff_s)
            backoff_s = min(30.0, backoff_s * 2)
