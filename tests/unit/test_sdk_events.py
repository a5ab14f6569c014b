"""The telemetry SDK's events: what the typed constructors write (the same as the platform's own
models make of them), ``occurred_at`` as a datetime or an ISO string, and the errors that name
the field."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from rewardstream_telemetry import (
    InvalidEventError,
    Request,
    Response,
    Telemetry,
    TelemetryError,
    Trajectory,
)
from schemas.events import SCHEMA_VERSION, parse_event
from schemas.ids import is_uuid7, uuid7, uuid7_time_ms

TRAJ = Trajectory("traj-u", "session-u", "user-u", "ckpt-u", arm="treatment")


class Ingest:
    """Takes every batch (as ingest's 200 says it) and keeps its events."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, request: Request) -> Response:
        lines = gzip.decompress(request.body).splitlines()
        self.events += [json.loads(line) for line in lines]
        return Response.of_json(200, {"accepted": ["x"] * len(lines), "duplicates": [],
                                      "rejected": []})


@pytest.fixture
def sent(tmp_path: Path) -> tuple[Telemetry, Ingest]:
    ingest = Ingest()
    return Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=0.01,
                     transport=ingest), ingest


def _one_of_each(tel: Telemetry) -> None:
    tel.completion_served(TRAJ, completion_id="c0", model="tiny", prompt_token_ids=[1, 2],
                          completion_token_ids=[3], behaviour_logprobs=[-0.1], ttft_ms=5.0,
                          latency_ms=9.0, sampling={"temperature": 0.7, "seed": 3})
    tel.tool_called(TRAJ, call_id="t0", tool="edit_file", valid=False, error_kind="timeout")
    tel.edit_proposed(TRAJ, edit_id="e0", path="a.py", lines_added=2)
    tel.edit_decided(TRAJ, edit_id="e0", decision="accepted")
    tel.edit_persistence(TRAJ, edit_id="e0", horizon_s=600, surviving_fraction=0.5)
    tel.followup_sent(TRAJ, sentiment="neutral")
    tel.clarification_asked(TRAJ)
    tel.trajectory_ended(TRAJ, outcome="completed", turns=2)


def test_each_constructor_writes_what_the_platforms_models_make_of_it(
        sent: tuple[Telemetry, Ingest]) -> None:
    tel, ingest = sent
    _one_of_each(tel)
    assert tel.close(timeout_s=10)
    assert len(ingest.events) == 8
    for event in ingest.events:
        model = parse_event(json.dumps(event))  # what ingest validates with
        assert is_uuid7(model.event_id)
        same = model.model_dump(mode="json")
        for field in ("occurred_at", "sent_at"):  # the same instants, written alike or not
            assert datetime.fromisoformat(same.pop(field)) == \
                datetime.fromisoformat(event.pop(field))
        assert same == event, model.type  # every default filled as the models fill it


def test_occurred_at_is_a_datetime_with_a_zone_or_an_iso_string(
        sent: tuple[Telemetry, Ingest]) -> None:
    tel, ingest = sent
    paris = timezone(timedelta(hours=1))
    given = [datetime(2026, 1, 31, 13, 0, 0, 123456, tzinfo=paris), "2026-01-31T12:00:00Z",
             "2026-01-31T13:00:00.5+01:00", "2026-01-31t12:00:00.123456789z"]
    ids = [tel.followup_sent(TRAJ, sentiment="neutral", occurred_at=when) for when in given]
    assert tel.close(timeout_s=10)
    written = [event["occurred_at"] for event in ingest.events]
    assert written == ["2026-01-31T12:00:00.123456Z", "2026-01-31T12:00:00.000000Z",
                       "2026-01-31T12:00:00.500000Z", "2026-01-31T12:00:00.123456Z"]
    for event_id, event in zip(ids, ingest.events, strict=True):
        assert str(event_id) == event["event_id"]
        assert uuid7_time_ms(event_id) == int(datetime.fromisoformat(
            event["occurred_at"].replace("Z", "+00:00")).timestamp() * 1000)


@pytest.mark.parametrize("when, says", [
    (datetime(2026, 1, 31, 12, 0), "a naive datetime has no time zone"),
    ("2026-01-31T12:00:00", "must be an ISO-8601 date-time with a time zone"),
    ("2026-02-30T12:00:00Z", "must be an ISO-8601 date-time with a time zone"),
    ("yesterday", "must be an ISO-8601 date-time with a time zone"),
    (1769860800, "must be a datetime or an ISO-8601 string, got int"),
    (1769860800.0, "must be a datetime or an ISO-8601 string, got float"),
])
def test_any_other_occurred_at_is_refused_at_the_call_naming_the_field(
        sent: tuple[Telemetry, Ingest], when: Any, says: str) -> None:
    tel, _ = sent
    with pytest.raises(InvalidEventError, match=f"^occurred_at: {says}"):
        tel.tool_called(TRAJ, call_id="c", tool="read_file", valid=True, occurred_at=when)
    assert tel.stats().queued == 0
    assert tel.close(timeout_s=1)


@pytest.mark.parametrize("call, says", [
    (lambda t: t.tool_called(TRAJ, call_id="", tool="t", valid=True),
     "tool.called payload.call_id: must have at least 1 character"),
    (lambda t: t.tool_called(TRAJ, call_id="c", tool="t", valid=False),
     "tool.called payload.error_kind: an invalid tool call (valid=False) needs an error_kind"),
    (lambda t: t.tool_called(TRAJ, call_id="c", tool="t", valid=True, parallel_group=True),
     "tool.called payload.parallel_group: must be an integer, got true"),
    (lambda t: t.completion_served(TRAJ, completion_id="c", model="m", prompt_token_ids=[],
                                   completion_token_ids=[1, 2], behaviour_logprobs=[-1.0],
                                   ttft_ms=1.0, latency_ms=2.0),
     "completion.served payload.behaviour_logprobs: has 1 entries but completion_token_ids has "
     "2; they must match"),
    (lambda t: t.completion_served(TRAJ, completion_id="c", model="m", prompt_token_ids=[],
                                   completion_token_ids=[], behaviour_logprobs=[], ttft_ms=1.0,
                                   latency_ms=2.0, sampling={"temprature": 0.5}),
     "completion.served payload.sampling.temprature: unknown field"),
    (lambda t: t.edit_persistence(TRAJ, edit_id="e", horizon_s=60,
                                  surviving_fraction=float("nan")),
     "edit.persistence payload.surviving_fraction: must be a finite number, got nan"),
    (lambda t: t.followup_sent(Trajectory("t", "s", "", "c"), sentiment="neutral"),
     "followup.sent user: must have at least 1 character"),
    (lambda t: t.followup_sent(Trajectory("traj\x00", "s", "u", "c"), sentiment="neutral"),
     "followup.sent trajectory_id: contains the control character U+0000 at index 4; ids and "
     "names must be printable"),
    (lambda t: t.edit_proposed(TRAJ, edit_id="e", path="src/a.py\n"),
     "edit.proposed payload.path: contains the control character U+000A at index 8"),
    (lambda t: t.emit({"event_id": "6f9619ff-8b86-4d01-b42d-00c04fc964ff", "type": "followup.sent",
                       "trajectory_id": "t", "session_id": "s", "user": "u", "checkpoint_id": "c",
                       "occurred_at": "2026-01-31T12:00:00Z", "sent_at": "2026-01-31T12:00:00Z",
                       "payload": {"sentiment": "neutral"}}),
     "followup.sent event_id: must be a UUIDv7"),
    (lambda t: t.emit({"type": "tool.broken"}),
     "type: must be one of clarification.asked, completion.served, edit.decided, "),
    (lambda t: t.emit(["not", "an", "event"]), "(event): must be a mapping of fields, got list"),
])
def test_an_invalid_event_raises_at_the_call_naming_the_field(
        sent: tuple[Telemetry, Ingest], call: Any, says: str) -> None:
    tel, _ = sent
    with pytest.raises(InvalidEventError) as raised:
        call(tel)
    assert str(raised.value).startswith(says)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, TelemetryError)
    assert tel.stats().queued == 0


def test_emit_takes_a_dict_or_a_platform_model(sent: tuple[Telemetry, Ingest]) -> None:
    tel, ingest = sent
    now = datetime.now(UTC).isoformat()
    as_dict = {"event_id": str(uuid7()), "type": "edit.decided", "trajectory_id": "traj-d",
               "session_id": "s", "user": "u", "checkpoint_id": "c", "occurred_at": now,
               "sent_at": now, "payload": {"edit_id": "e1", "decision": "rejected"}}
    as_model = parse_event(json.dumps({**as_dict, "event_id": str(uuid7())}))
    assert tel.emit(as_dict) and tel.emit(as_model)
    assert tel.close(timeout_s=10)
    first, second = ingest.events
    assert first["arm"] == "default" and first["schema_version"] == SCHEMA_VERSION  # defaults
    assert {**first, "event_id": "", "sent_at": ""} == {**second, "event_id": "", "sent_at": "",
                                                       "occurred_at": first["occurred_at"]}
