"""Facts: the part of an event the reward needs, tagged with its place in the log.

Every ``events.raw`` record is validated again with the same models ingest uses before it is
folded: ingest validates what it accepts, but a topic can hold what ingest never saw (an event
written before a bound was added, a record written by another tool). A record that is not a
valid event raises :class:`MalformedEventError` naming the field, and its consumer quarantines
it. The join reads each record with the msgspec structs of :mod:`schemas.event_structs` (the
same bounds, about half the models' cost), and with the models where the structs refuse it, so
its answers are the models'.

Only the fields the reward folds are kept (``streams.join_codec`` stores them). Every fact
carries its organisation (an event without one is refused), and its trajectory key is (org,
trajectory): two orgs' equal trajectory ids never meet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from schemas.bounds import org_id_problem
from schemas.event_structs import StoredEvent, decode_stored_event
from schemas.events import (
    CLARIFICATION_ASKED,
    COMPLETION_SERVED,
    EDIT_DECIDED,
    EDIT_PERSISTENCE,
    EDIT_PROPOSED,
    FOLLOWUP_SENT,
    TOOL_CALLED,
    TRAJECTORY_ENDED,
    Event,
    first_error,
    parse_event,
)
from schemas.quarantine import EMPTY_VALUE
from schemas.rewards import trajectory_key
from streams.errors import MalformedEventError

__all__ = ["Fact", "fact_from_event", "fact_from_json", "ms_to_datetime", "read_event"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

# Per event type, the payload fields the reward reads under their short stored names. Written
# out per type: this runs once per event, and plain attribute reads are the cheapest form.
_PAYLOAD_DATA: dict[str, Callable[[Any], dict[str, Any]]] = {
    COMPLETION_SERVED: lambda p: {
        "cid": p.completion_id, "prompt": p.prompt_token_ids, "tokens": p.completion_token_ids,
        "logprobs": p.behaviour_logprobs, "ttft_ms": p.ttft_ms, "latency_ms": p.latency_ms,
        "finish": p.finish_reason, "temperature": p.sampling.temperature,
        "top_p": p.sampling.top_p, "top_k": p.sampling.top_k, "ptext": p.prompt_text,
        "ctext": p.completion_text, "cut": p.text_truncated, "offered": p.tools_offered},
    TOOL_CALLED: lambda p: {"valid": p.valid, "error": p.error_kind, "call": p.call_id,
                            "tool": p.tool},
    EDIT_PROPOSED: lambda p: {"edit": p.edit_id},
    EDIT_DECIDED: lambda p: {"edit": p.edit_id, "decision": p.decision},
    EDIT_PERSISTENCE: lambda p: {"edit": p.edit_id, "horizon_s": p.horizon_s,
                                 "fraction": p.surviving_fraction},
    FOLLOWUP_SENT: lambda p: {"sentiment": p.sentiment},
    CLARIFICATION_ASKED: lambda p: {"ambiguity": p.request_ambiguity},
    TRAJECTORY_ENDED: lambda p: {"outcome": p.outcome, "turns": p.turns,
                                 "family": p.task_family},
}
# Event times a consumer accepts whatever ingest allowed: far outside them, event-time arithmetic
# (deadlines, windows) would leave the range of a datetime.
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(2200, 1, 1, tzinfo=UTC)
_EARLIEST_MS = (_EARLIEST - _EPOCH) // _MS
_LATEST_MS = (_LATEST - _EPOCH) // _MS


@dataclass(slots=True)
class Fact:
    """One event as the reward reads it (never changed once made; not frozen because a frozen
    dataclass costs a microsecond more per event). ``key`` identifies its trajectory within its
    organisation (:func:`schemas.rewards.trajectory_key`): state, markers and the reward
    record's Kafka key all carry the org."""

    event_id: str
    type: str
    trajectory_id: str
    time_ms: int  # event time as ingest derived it
    offset: int  # position in its events.raw partition
    checkpoint_id: str
    arm: str
    org_id: str
    data: dict[str, Any]
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = trajectory_key(self.org_id, self.trajectory_id)


def _epoch_ms(moment: datetime) -> int:
    """Unix milliseconds of an aware datetime, rounded down: ``(moment - epoch) // 1 ms`` in
    integers (a third cheaper per event than timedelta division, and comparing ints is
    cheaper than comparing datetimes of two tzinfo classes)."""
    delta = moment - _EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


@lru_cache(maxsize=4096)
def _org_id_problem(org_id: str) -> str | None:
    """:func:`schemas.bounds.org_id_problem`, remembered: a partition sees few orgs, each
    on many events."""
    return org_id_problem(org_id)


def ms_to_datetime(time_ms: int) -> datetime:
    return _EPOCH + time_ms * _MS


def read_event(raw: bytes | str | None) -> Event:
    """An ``events.raw`` record as the event ingest stored, read with the pydantic models;
    raises :class:`MalformedEventError` whose message names the field at fault."""
    event = _parsed(raw)
    _time_ms(event, event.event_time)
    return event


def _parsed(raw: bytes | str | None) -> Event:
    if raw is None:
        raise MalformedEventError(f"(event): {EMPTY_VALUE}")
    try:
        return parse_event(raw)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise MalformedEventError(f"{field}: {message}") from None


def _time_ms(event: Event | StoredEvent, event_time: datetime | None) -> int:
    """The event time of ``event`` in Unix ms, if it came through ingest; else raises
    :class:`MalformedEventError`."""
    if event.org_id is None or event_time is None:
        missing = "org_id" if event.org_id is None else "event_time"
        raise MalformedEventError(f"{missing}: missing; ingest sets it on every stored event, so "
                                  "this record did not come through ingest")
    if (problem := _org_id_problem(event.org_id)) is not None:
        raise MalformedEventError(f"org_id: {problem}; ingest stamps the org of a key, so this "
                                  "record did not come through ingest")
    time_ms = _epoch_ms(event_time)
    if not _EARLIEST_MS <= time_ms < _LATEST_MS:
        raise MalformedEventError(f"event_time: {event_time.isoformat()} is outside "
                                  f"{_EARLIEST.year}..{_LATEST.year}")
    return time_ms


def fact_from_event(event: Event, offset: int) -> Fact:
    """The fact of a validated event at ``offset`` (as :func:`read_event` returns it)."""
    return _fact(event, _time_ms(event, event.event_time), offset)


def _fact(event: Event | StoredEvent, time_ms: int, offset: int) -> Fact:
    data = _PAYLOAD_DATA[event.type](event.payload)
    if event.type == COMPLETION_SERVED:
        data["producer"] = event.producer  # the trainer learns only from the gateway's
    org_id = event.org_id
    assert org_id is not None  # _time_ms refuses
    return Fact(
        event_id=str(event.event_id), type=event.type, trajectory_id=event.trajectory_id,
        time_ms=time_ms, offset=offset, checkpoint_id=event.checkpoint_id, arm=event.arm,
        org_id=org_id, data=data, key=trajectory_key(org_id, event.trajectory_id),
    )


def fact_from_json(raw: bytes | str | None, offset: int) -> Fact:
    """The fact of one ``events.raw`` record; raises :class:`MalformedEventError`. Read with
    the msgspec structs, and with the pydantic models when the structs do not accept it (the
    models name the field at fault, or accept what the structs are stricter about)."""
    fast = None if raw is None else decode_stored_event(raw)
    if fast is not None:
        return _fact(fast.event, _time_ms(fast.event, fast.event_time), offset)
    model = _parsed(raw)
    return _fact(model, _time_ms(model, model.event_time), offset)
