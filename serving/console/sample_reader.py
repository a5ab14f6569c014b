"""Reading an alert's sample trajectories from the log: ``rewards`` for the records, then
``events.raw`` for the events they folded (the matching and the views: ``samples``).

Both reads are bounded. Records are appended after their event time, never long before it (an
event's time is at most a second past its receipt; clocks of other hosts may differ by
:data:`APPEND_SLACK_MS`), so each read starts at the first record appended after the window's
start, less that slack, found by Kafka's time index. ``rewards`` is read until a page is full,
:data:`REWARDS_SCANNED_MAX` records were read, or the end the topic had when the request came;
``events.raw`` from :data:`EVENTS_LOOKBACK_MS` before the earliest trajectory's end until every
event was found, :data:`EVENTS_SCANNED_MAX` records were read, or its end. The answer says how
much was read and whether the page stopped before the end (``next``).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from infra.kafka_io import TopicReader
from infra.settings import Settings
from schemas.events import Event, parse_event
from schemas.rewards import RewardRecord
from schemas.topics import header_org, topic_name
from serving.console.samples import (
    SampleQuery,
    TrajectoryKey,
    encode_cursor,
    record_key_may_match,
    reward_matches,
    trajectory_view,
)
from streams.monitors.windows import reward_event_time_ms

__all__ = ["APPEND_SLACK_MS", "EVENTS_LOOKBACK_MS", "EVENTS_SCANNED_MAX", "REWARDS_SCANNED_MAX",
           "read_samples"]

APPEND_SLACK_MS = 5 * 60 * 1000
EVENTS_LOOKBACK_MS = 3600 * 1000  # a trajectory's events are looked for this long before its end
REWARDS_SCANNED_MAX = 200_000
EVENTS_SCANNED_MAX = 1_000_000
_CLIENT_ID = "console-samples"


def _matching_rewards(settings: Settings, query: SampleQuery, cursor: dict[int, int] | None,
                      ) -> tuple[list[RewardRecord], dict[int, int] | None, dict[str, int]]:
    """The first ``query.limit`` matching records from the cursor (or the window's start),
    where each partition stopped (None: at its end), and what was read."""
    topic = topic_name(settings.topic_prefix, "rewards")
    positions = None if cursor is None else {f"{topic}:{p}": o for p, o in cursor.items()}
    found: list[RewardRecord] = []
    counts = {"read": 0, "unreadable": 0}
    with TopicReader(settings, ["rewards"], client_id=_CLIENT_ID, positions=positions) as reader:
        if cursor is None:
            reader.seek_to_time(query.since_ms - APPEND_SLACK_MS)
        ends = {tp.partition: end for tp, end in
                reader.consumer.end_offsets(reader.partitions).items()}
        stopped = {int(name.rsplit(":", 1)[1]): at for name, at in reader.positions().items()}
        for message in reader.until_end():
            counts["read"] += 1
            stopped[message.partition] = message.offset + 1
            if record_key_may_match(message.key, query):
                try:
                    record = RewardRecord.model_validate_json(message.value)
                except ValidationError:
                    counts["unreadable"] += 1
                else:
                    if reward_matches(record, query):
                        found.append(record)
            if len(found) >= query.limit or counts["read"] >= REWARDS_SCANNED_MAX:
                break
    at_end = all(stopped.get(p, 0) >= end for p, end in ends.items())
    return found, None if at_end else stopped, counts


def _their_events(settings: Settings, records: list[RewardRecord],
                  ) -> tuple[dict[TrajectoryKey, list[Event]], dict[str, int]]:
    """The events the records folded, by trajectory: each of its own org only."""
    wanted: dict[TrajectoryKey, set[str]] = {
        (r.org_id or "", r.trajectory_id): set(r.event_ids) for r in records}
    found: dict[TrajectoryKey, dict[str, Event]] = {key: {} for key in wanted}
    missing = sum(len(ids) for ids in wanted.values())
    keys = {trajectory.encode() for _, trajectory in wanted}
    orgs = {org for org, _ in wanted}
    counts = {"read": 0, "unreadable": 0}
    if not missing:
        return {}, counts
    since_ms = min(reward_event_time_ms(r) for r in records) - EVENTS_LOOKBACK_MS
    with TopicReader(settings, ["events.raw"], client_id=_CLIENT_ID) as reader:
        reader.seek_to_time(int(since_ms) - APPEND_SLACK_MS)
        for message in reader.until_end():
            counts["read"] += 1
            if counts["read"] >= EVENTS_SCANNED_MAX:
                break
            header = header_org(message.headers)
            if message.key not in keys or (header is not None and header not in orgs):
                continue
            try:
                event = parse_event(message.value)
            except ValidationError:
                counts["unreadable"] += 1
                continue
            key = (event.org_id or "", event.trajectory_id)
            event_id = str(event.event_id)
            if event_id in wanted.get(key, ()) and event_id not in found[key]:
                found[key][event_id] = event
                missing -= 1
                if not missing:
                    break
    return {key: list(events.values()) for key, events in found.items()}, counts


def read_samples(settings: Settings, query: SampleQuery,
                 cursor: dict[int, int] | None = None) -> dict[str, Any]:
    """One page of the query's trajectories with their events, reward components and
    completions; ``next`` is the cursor of the page after it (None at the end of the log)."""
    records, stopped, rewards_read = _matching_rewards(settings, query, cursor)
    events, events_read = _their_events(settings, records)
    records.sort(key=reward_event_time_ms)
    return {
        "trajectories": [trajectory_view(r, events.get((r.org_id or "", r.trajectory_id), []))
                         for r in records],
        "next": None if stopped is None else encode_cursor(stopped),
        "read": {"rewards": rewards_read, "events": events_read},
    }
