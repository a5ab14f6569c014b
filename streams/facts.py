"""Facts: the part of an event the reward needs, tagged with its place in the log.

An event on ``events.raw`` is already validated at ingest, so it is read as plain JSON here
(no second validation on the hot path). Only the fields the reward folds are kept; the stored
form is a compact JSON list so keyed state stays small.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from streams.errors import MalformedEventError

__all__ = ["Fact", "fact_from_dict", "fact_from_json", "fact_to_wire", "fact_from_wire", "ms_to_datetime"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)

# Per event type, the payload fields the reward reads, and their short stored names.
_PAYLOAD_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "completion.served": (
        ("completion_id", "cid"), ("prompt_token_ids", "prompt"),
        ("completion_token_ids", "tokens"), ("behaviour_logprobs", "logprobs"),
        ("ttft_ms", "ttft_ms"), ("latency_ms", "latency_ms"), ("finish_reason", "finish"),
    ),
    "tool.called": (("valid", "valid"), ("error_kind", "error")),
    "edit.proposed": (("edit_id", "edit"),),
    "edit.decided": (("edit_id", "edit"), ("decision", "decision")),
    "edit.persistence": (("edit_id", "edit"), ("horizon_s", "horizon_s"),
                         ("surviving_fraction", "fraction")),
    "followup.sent": (("sentiment", "sentiment"),),
    "clarification.asked": (("request_ambiguity", "ambiguity"),),
    "trajectory.ended": (("outcome", "outcome"), ("turns", "turns"),
                         ("task_family", "family")),
}
# Payload fields with a schema default, which a producer may leave out.
_DEFAULTS: dict[str, Any] = {"finish_reason": "stop", "task_family": "default"}
_SAMPLING_FIELDS = (("temperature", 1.0), ("top_p", 1.0), ("top_k", -1))


@dataclass(frozen=True, slots=True)
class Fact:
    event_id: str
    type: str
    trajectory_id: str
    time_ms: int  # event time: the ingest-derived one, else the client's occurrence time
    offset: int  # position in its events.raw partition
    checkpoint_id: str
    arm: str
    org_id: str | None
    data: dict[str, Any]



def ms_to_datetime(time_ms: int) -> datetime:
    return _EPOCH + time_ms * _MS


def _payload_data(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    data = {short: payload.get(name, _DEFAULTS.get(name)) for name, short in _PAYLOAD_FIELDS[event_type]}
    if event_type == "completion.served":
        sampling = payload.get("sampling") or {}
        data.update({name: sampling.get(name, default) for name, default in _SAMPLING_FIELDS})
    return data


def _as_ms(value: str | datetime) -> int:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return (moment - _EPOCH) // _MS


def fact_from_json(raw: bytes | str, offset: int) -> Fact:
    """The fact of one ``events.raw`` record; raises :class:`MalformedEventError`."""
    try:
        event = json.loads(raw)
    except ValueError as exc:
        raise MalformedEventError(f"events.raw record at offset {offset} is not JSON: {exc}") from None
    return fact_from_dict(event, offset)


def fact_from_dict(event: dict[str, Any], offset: int) -> Fact:
    """The fact of one decoded envelope (times as ISO text or aware datetimes)."""
    try:
        event_type = event["type"]
        if event_type not in _PAYLOAD_FIELDS:
            raise MalformedEventError(f"unknown event type {event_type!r} at offset {offset}")
        return Fact(
            event_id=str(event["event_id"]),
            type=event_type,
            trajectory_id=str(event["trajectory_id"]),
            time_ms=_as_ms(event.get("event_time") or event["occurred_at"]),
            offset=offset,
            checkpoint_id=str(event["checkpoint_id"]),
            arm=str(event.get("arm") or "default"),
            org_id=event.get("org_id"),
            data=_payload_data(event_type, event["payload"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MalformedEventError(
            f"events.raw record at offset {offset} is not an event envelope ({exc!r}); "
            "only ingest should write events.raw"
        ) from None


def fact_to_wire(fact: Fact) -> list[Any]:
    return [fact.event_id, fact.type, fact.trajectory_id, fact.time_ms, fact.offset,
            fact.checkpoint_id, fact.arm, fact.org_id, fact.data]


def fact_from_wire(wire: list[Any]) -> Fact:
    return Fact(*wire)
