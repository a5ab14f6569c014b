"""Event schemas v1: strict per-event validation whose errors name the field path."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from harness.samples import sample_trajectory
from schemas.events import (
    EVENT_MODELS,
    EVENT_TYPES,
    EventAdapter,
    dump_event,
    first_error,
    parse_event,
)
from schemas.ids import is_uuid7, uuid7, uuid7_time_ms


def _valid_tool_call() -> dict[str, object]:
    now = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    return {
        "event_id": str(uuid7()), "type": "tool.called", "trajectory_id": "t1",
        "session_id": "s1", "user": "u1", "checkpoint_id": "c1", "occurred_at": now,
        "sent_at": now, "payload": {"call_id": "x", "tool": "grep", "valid": True},
    }


def _error_of(event: dict[str, object]) -> tuple[str, str]:
    with pytest.raises(ValidationError) as info:
        parse_event(json.dumps(event))
    return first_error(info.value)


def test_every_event_type_of_a_sample_trajectory_round_trips_through_json() -> None:
    events = sample_trajectory("traj-1")
    assert {e.type for e in events} == set(EVENT_TYPES)
    for event in events:
        assert parse_event(EventAdapter.dump_json(event)) == event


def test_each_event_type_constant_is_the_type_its_model_accepts_and_writes() -> None:
    for event_type, model in EVENT_MODELS.items():
        assert model.model_fields["type"].default == event_type
        assert model.model_json_schema()["properties"]["type"]["const"] == event_type


def test_unknown_field_is_refused_with_its_path() -> None:
    event = _valid_tool_call()
    event["payload"] = {**event["payload"], "sneaky": 1}  # type: ignore[dict-item]
    field, reason = _error_of(event)
    assert field == "payload.sneaky"
    assert "Extra inputs" in reason


def test_string_is_not_coerced_to_a_number() -> None:
    event = _valid_tool_call()
    event["payload"] = {**event["payload"], "duration_ms": "12"}  # type: ignore[dict-item]
    assert _error_of(event)[0] == "payload.duration_ms"


def test_logprob_count_must_match_completion_tokens() -> None:
    served = json.loads(EventAdapter.dump_json(sample_trajectory("t")[0]))
    served["payload"]["behaviour_logprobs"] = [-0.1]
    field, reason = _error_of(served)
    assert field == "payload"
    assert "behaviour_logprobs has 1 entries" in reason


def test_positive_logprob_is_refused_at_its_index() -> None:
    served = json.loads(EventAdapter.dump_json(sample_trajectory("t")[0]))
    served["payload"]["behaviour_logprobs"] = [-0.1, 0.5]
    assert _error_of(served)[0] == "payload.behaviour_logprobs.1"


def test_invalid_tool_call_must_say_why() -> None:
    event = _valid_tool_call()
    event["payload"] = {"call_id": "x", "tool": "grep", "valid": False}
    assert "needs an error_kind" in _error_of(event)[1]


def test_event_id_must_be_uuid7() -> None:
    event = _valid_tool_call()
    event["event_id"] = str(uuid.uuid4())
    field, reason = _error_of(event)
    assert field == "event_id"
    assert "UUIDv7" in reason


def test_naive_timestamps_are_refused() -> None:
    event = _valid_tool_call()
    event["occurred_at"] = "2026-01-01T00:00:00"
    assert _error_of(event)[0] == "occurred_at"


def test_unknown_type_is_refused() -> None:
    event = _valid_tool_call()
    event["type"] = "tool.exploded"
    assert _error_of(event)[0] == "type"


def test_uuid7_layout_and_time() -> None:
    ms = 1_767_225_600_123
    value = uuid7(ms)
    assert is_uuid7(value)
    assert uuid7_time_ms(value) == ms
    assert uuid7(ms + 1) > value  # time-ordered
    assert not is_uuid7(uuid.uuid4())
    with pytest.raises(ValueError):
        uuid7(-1)


def test_sample_events_carry_time_ordered_ids() -> None:
    events = sample_trajectory("t", start=datetime(2026, 1, 1, tzinfo=UTC))
    times = [uuid7_time_ms(e.event_id) for e in events]
    assert times == sorted(times)
    assert times[-1] - times[0] == int(timedelta(seconds=600).total_seconds() * 1000)


def test_dump_event_writes_exactly_what_the_union_adapter_writes() -> None:
    built = sample_trajectory("traj-1")  # datetime's own UTC
    parsed = [parse_event(EventAdapter.dump_json(e).replace(b'Z"', b'+05:30"')) for e in built]
    assert parsed[0].occurred_at.utcoffset() == timedelta(hours=5, minutes=30)
    for event in built + parsed:
        assert dump_event(event) == EventAdapter.dump_json(event)
