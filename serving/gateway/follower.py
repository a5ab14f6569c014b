"""The gateway's follower of the ``checkpoints`` topic.

A thread replays the compacted topic from the beginning (no consumer group: every gateway
replica needs the whole registry) with the platform's topic reader, folds it into the registry
(``schemas.checkpoints``) and hands the router a copy whenever it changes. ``caught_up`` is set
once the replay reaches the end offsets the topic had at start, so the gateway can wait for it
before taking traffic. A record that is not a checkpoint event is quarantined (again on each
start, under the same key) and the replay goes on; a lost broker is retried every 2 s while the
gateway keeps serving its last routing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from infra.kafka_io import TopicReader
from infra.quarantine import QuarantineSink
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent, Registry
from schemas.quarantine import UnusableRecord, decode_record

__all__ = ["CONSUMER_NAME", "follow_checkpoints"]

log = logging.getLogger(__name__)
_RETRY_S = 2.0
_HANDOVER_TIMEOUT_S = 60.0
CONSUMER_NAME = "gateway"  # how quarantined records name this consumer


def _fold(registry: Registry, records: Iterable[Any], model_family: str | None,
          quarantine: QuarantineSink) -> bool:
    """Fold ``records`` into ``registry``; True when the newest event of a checkpoint changed."""
    before = dict(registry.latest)
    for record in records:
        try:
            event = decode_record(CheckpointEvent, record.value)
        except UnusableRecord as exc:
            quarantine.put(record.topic, record.partition, record.offset, record.value, str(exc))
            continue
        if model_family is None or event.model == model_family:
            registry.add(event)
    return registry.latest != before


def _follow(settings: Settings, model_family: str | None,
            on_registry: Callable[[Registry], None], on_caught_up: Callable[[], None],
            stop: threading.Event) -> None:
    registry = Registry()
    while not stop.is_set():
        try:
            with TopicReader(settings, ["checkpoints"], client_id=CONSUMER_NAME) as reader:
                quarantine = QuarantineSink(settings, CONSUMER_NAME)
                try:
                    if _fold(registry, reader.until_end(), model_family, quarantine):
                        on_registry(Registry(registry.latest.values()))
                    on_caught_up()
                    while not stop.is_set():
                        if _fold(registry, reader.poll(timeout_ms=500), model_family,
                                 quarantine):
                            on_registry(Registry(registry.latest.values()))
                finally:
                    quarantine.close()
        except Exception as exc:  # the broker went away: keep serving the last routing
            log.error("checkpoint follower lost the checkpoints topic (%s); retrying in %ss",
                      exc, _RETRY_S)
            stop.wait(_RETRY_S)


async def follow_checkpoints(settings: Settings,
                             on_registry: Callable[[Registry], Coroutine[Any, Any, object]],
                             caught_up: asyncio.Event, model_family: str | None = None) -> None:
    """Run until cancelled: each registry change is applied (awaited on this loop) before the
    follower reads on."""
    loop = asyncio.get_running_loop()
    stop = threading.Event()

    def hand_over(registry: Registry) -> None:
        asyncio.run_coroutine_threadsafe(on_registry(registry), loop).result(
            _HANDOVER_TIMEOUT_S)

    def mark_caught_up() -> None:
        loop.call_soon_threadsafe(caught_up.set)

    try:
        await asyncio.to_thread(_follow, settings, model_family, hand_over, mark_caught_up, stop)
    finally:
        stop.set()
