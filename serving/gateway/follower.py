"""The gateway's background consumer of the ``checkpoints`` topic.

It replays the compacted topic from the beginning (no consumer group: every gateway replica
needs the whole registry), folds each batch, and hands the registry to the router whenever it
changes. ``caught_up`` is set once the replay reaches the end offsets seen at start, so the
gateway can wait for it before taking traffic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from pydantic import ValidationError

from schemas.checkpoints import CheckpointEvent
from schemas.topics import topic_name
from serving.gateway.registry import fold

__all__ = ["follow_checkpoints"]

log = logging.getLogger(__name__)
_RETRY_S = 2.0


async def _consume(bootstrap_servers: str, topic: str,
                   on_registry: Callable[[dict[str, CheckpointEvent]], Awaitable[object]],
                   caught_up: asyncio.Event, model_family: str | None,
                   registry: dict[str, CheckpointEvent]) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap_servers, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        while not consumer.assignment():
            await asyncio.sleep(0.05)
        end = await consumer.end_offsets(list(consumer.assignment()))
        while True:
            batch = await consumer.getmany(timeout_ms=500)
            before = registry.copy()
            for record in (r for records in batch.values() for r in records):
                try:
                    event = CheckpointEvent.model_validate_json(record.value)
                except ValidationError as exc:
                    log.error("skipping malformed checkpoint event at offset %s: %s",
                              record.offset, exc)
                    continue
                if model_family is None or event.model == model_family:
                    registry.update(fold(registry, event))
            if registry != before:
                await on_registry(dict(registry))
            if not caught_up.is_set():
                positions = {tp: await consumer.position(tp) for tp in end}
                if all(positions[tp] >= offset for tp, offset in end.items()):
                    caught_up.set()
    finally:
        await consumer.stop()


async def follow_checkpoints(bootstrap_servers: str, topic_prefix: str,
                             on_registry: Callable[[dict[str, CheckpointEvent]], Awaitable[object]],
                             caught_up: asyncio.Event, model_family: str | None = None) -> None:
    """Run until cancelled, reconnecting when the broker is unavailable."""
    topic = topic_name(topic_prefix, "checkpoints")
    registry: dict[str, CheckpointEvent] = {}
    while True:
        try:
            await _consume(bootstrap_servers, topic, on_registry, caught_up, model_family,
                           registry)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the broker went away: keep serving the last routing
            log.error("checkpoint follower lost %s (%s); retrying in %ss", topic, exc, _RETRY_S)
            await asyncio.sleep(_RETRY_S)
