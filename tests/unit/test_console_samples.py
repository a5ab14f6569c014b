"""An alert's sample trajectories, the pure part: which reward records are behind an alert (its
org only, its checkpoint and arm, its event-time window), how a trajectory is shown, and the
page cursor."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from schemas.alert_lifecycle import AlertRecord
from schemas.alerts import Alert
from schemas.events import (
    CompletionServed,
    CompletionServedPayload,
    EditProposed,
    EditProposedPayload,
    Event,
    TrajectoryEnded,
    TrajectoryEndedPayload,
)
from schemas.ids import uuid7
from schemas.rewards import RewardRecord, Sample, reward_record_key
from serving.console.samples import (
    SampleQuery,
    decode_cursor,
    encode_cursor,
    query_for,
    record_key_may_match,
    reward_matches,
    trajectory_view,
)

END = datetime(2026, 1, 5, 14, 3, tzinfo=UTC)
QUERY = SampleQuery(org="acme", checkpoint="c1", arm="default", since=END - timedelta(minutes=1),
                    until=END)


def _record(org: str | None = "acme", checkpoint: str = "c1", arm: str = "default",
            ended_s: float = -30, trajectory: str = "t1",
            event_ids: tuple[str, ...] = ()) -> RewardRecord:
    ended = END + timedelta(seconds=ended_s)
    return RewardRecord(
        trajectory_id=trajectory, spec_version="spec", checkpoint_id=checkpoint, arm=arm,
        org_id=org, outcome="completed", ended_at=ended, finalized_by="complete",
        finalized_at=ended,
        samples=[Sample(completion_id="t1-c0", checkpoint_id=checkpoint,
                        prompt_token_ids=[1, 2, 3], completion_token_ids=[4, 5],
                        behaviour_logprobs=[-0.1, -0.2], producer="gateway")],
        components={"accepted_edits": 0.25, "broken_tool_calls": -0.5, "turns": 0.0},
        total=-0.25, signals={"tool_calls": 2.0}, event_ids=list(event_ids))


def _event(model: type, payload: object, seconds: float) -> Event:
    at = END + timedelta(seconds=seconds)
    return model(event_id=uuid7(), trajectory_id="t1", session_id="s", org_id="acme",
                 user="u", checkpoint_id="c1", occurred_at=at, sent_at=at, event_time=at,
                 payload=payload)


def test_a_record_is_behind_the_alert_by_org_checkpoint_arm_and_window() -> None:
    assert reward_matches(_record(), QUERY)
    assert reward_matches(_record(ended_s=-60), QUERY)  # the window's start is in it ...
    assert not reward_matches(_record(ended_s=0), QUERY)  # ... its end is the next window's
    for other in (_record(org="evil"), _record(org=None), _record(checkpoint="c0"),
                  _record(arm="canary"), _record(ended_s=-61)):
        assert not reward_matches(other, QUERY)
    fleet = SampleQuery(org="*", checkpoint="*", arm="*", since=QUERY.since, until=QUERY.until)
    for any_org in (_record(org="evil"), _record(org=None), _record(checkpoint="c0")):
        assert reward_matches(any_org, fleet)


def test_a_records_key_is_read_for_its_org_before_its_value() -> None:
    def key(org: str | None) -> bytes:
        return reward_record_key(org, "t1", "spec")

    assert record_key_may_match(key("acme"), QUERY)
    for other in ("evil", "acme2", "acme|x", None):
        assert not record_key_may_match(key(other), QUERY)
    piped = SampleQuery(org="ac|me", checkpoint="*", arm="*", since=END, until=END)
    assert record_key_may_match(key("ac|me"), piped) and not record_key_may_match(key("ac"),
                                                                                 piped)
    assert not record_key_may_match(None, QUERY)


def test_the_query_spans_the_windows_from_the_opening_one_to_the_latest() -> None:
    labels = {"alertname": "x", "checkpoint": "c1", "arm": "default", "org": "acme"}
    alert = Alert(detector="x", fingerprint="f", title="t", severity="warning", summary="s",
                  evidence={}, runbook="r", labels=labels, window_end=END)
    record = AlertRecord(alert=alert, status="firing", started_at=END, updated_at=END,
                         opened_window_end=END - timedelta(minutes=3))
    query = query_for(record, window_s=60, limit=5)
    assert (query.org, query.checkpoint, query.arm, query.limit) == ("acme", "c1", "default", 5)
    assert (query.since, query.until) == (END - timedelta(minutes=4), END)


def test_a_trajectory_shows_its_reward_completions_and_events_in_time_order() -> None:
    completion = _event(CompletionServed, CompletionServedPayload(
        completion_id="t1-c0", model="agent", prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4, 5], behaviour_logprobs=[-0.1, -0.2], ttft_ms=10.0,
        latency_ms=200.0), -50)
    long_path = EditProposedPayload.model_construct(edit_id="e0", path="p" * 5000,
                                                    lines_added=1, lines_removed=0)
    edit = _event(EditProposed, long_path, -40)
    ended = _event(TrajectoryEnded, TrajectoryEndedPayload(outcome="completed", turns=1), -30)
    record = _record(event_ids=tuple(str(e.event_id) for e in (completion, edit, ended)))
    view = trajectory_view(record, [ended, completion, edit])
    assert [e["type"] for e in view["events"]] == ["completion.served", "edit.proposed",
                                                    "trajectory.ended"]
    assert (view["events_found"], view["events_folded"]) == (3, 3)
    assert list(view["reward"]["components"]) == ["broken_tool_calls", "accepted_edits",
                                                  "turns"]  # the largest first
    [shown] = view["completions"]
    assert (shown["model"], shown["prompt_token_count"], shown["completion_token_count"],
            shown["producer"], shown["in_sample"]) == ("agent", 3, 2, "gateway", True)
    assert "behaviour_logprobs" not in shown and "completion_token_ids" not in shown
    cut = view["events"][1]["payload"]
    assert len(cut["path"]) == cut["cut_to_chars"] == 4000
    alone = trajectory_view(record, [])  # its events not found: the sample still shows
    assert alone["completions"][0]["completion_token_count"] == 2
    assert alone["events_found"] == 0 and alone["event_time"] == (END - timedelta(
        seconds=30)).isoformat()


def test_a_cursor_comes_back_as_it_went_and_a_forged_one_is_refused() -> None:
    positions = {0: 12, 3: 7}
    assert decode_cursor(encode_cursor(positions)) == positions

    def forged(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode()).decode()

    for bad in ("%%%", forged("[1, 2]"), forged('{"0": -1}'), forged('{"x": 1}'),
                forged('{"0": 1.5}'), forged('{"0": true}'), forged('{"\u00b2": 1}'),
                forged('{"0": 99999999999999999999}'), "A" * 9000):
        with pytest.raises(ValueError, match="cursor"):
            decode_cursor(bad)
