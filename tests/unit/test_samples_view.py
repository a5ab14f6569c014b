"""Per-completion samples: which events are a completion's, its labels and credit (the stated
rule: credits add up to the total), and the samples view as a pure function of the record."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.events import (
    GATEWAY_PRODUCER,
    CompletionServed,
    CompletionServedPayload,
    EditDecided,
    EditDecidedPayload,
    EditPersistence,
    EditPersistencePayload,
    EditProposed,
    EditProposedPayload,
    Event,
    FollowupSent,
    FollowupSentPayload,
    ToolCalled,
    ToolCalledPayload,
    TrajectoryEnded,
    TrajectoryEndedPayload,
)
from schemas.ids import uuid7
from schemas.rewards import RewardRecord
from schemas.samples import sample_rows
from streams.facts import fact_from_event
from streams.fold import fold_all
from streams.join import PartitionJoin
from streams.replay import replay_rows
from streams.reward import reward_record
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec

SPEC = load_spec()
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _event(model: type[Any], payload: Any, seconds: float, **extra: Any) -> Event:
    when = T0 + timedelta(seconds=seconds)
    return model(event_id=uuid7(int(when.timestamp() * 1000)), trajectory_id="t1",
                 session_id="s1", user="u1", checkpoint_id="ckpt-1", arm="control",
                 org_id="acme", occurred_at=when, sent_at=when, received_at=when,
                 event_time=when, clock_skew_ms=0, producer=extra.pop("producer", "ingest:k"),
                 payload=payload)


def _served(cid: str, seconds: float, latency_ms: float, text: str) -> Event:
    return _event(CompletionServed, CompletionServedPayload(
        completion_id=cid, model="m", prompt_token_ids=[1, 2], completion_token_ids=[3, 4],
        behaviour_logprobs=[-0.5, -0.25], ttft_ms=5.0, latency_ms=latency_ms,
        prompt_text=f"user: {text}?", completion_text=text, tools_offered=["read", "edit"]),
        seconds, producer=GATEWAY_PRODUCER)


def _trajectory() -> list[Event]:
    """c0 reads, proposes e0 (accepted, kept); c1's broken call is logged by the gateway a
    moment before c1 itself; c1 proposes e1 (rejected) and draws a dissatisfied follow-up."""
    return [
        _served("c0", 0, 1000.0, "first"),
        _event(ToolCalled, ToolCalledPayload(call_id="t1-c0", tool="read", valid=True), 1),
        _event(EditProposed, EditProposedPayload(edit_id="e0", path="a.py"), 2),
        _event(ToolCalled, ToolCalledPayload(call_id="c1-t0", tool="edit", valid=False,
                                             error_kind="bad_arguments"), 9.999),
        _served("c1", 10, 3000.0, "second"),
        _event(EditProposed, EditProposedPayload(edit_id="e1", path="b.py"), 11),
        _event(EditDecided, EditDecidedPayload(edit_id="e0", decision="accepted"), 12),
        _event(EditDecided, EditDecidedPayload(edit_id="e1", decision="rejected"), 13),
        _event(FollowupSent, FollowupSentPayload(sentiment="dissatisfied"), 14),
        _event(TrajectoryEnded, TrajectoryEndedPayload(outcome="completed", turns=2), 15),
        *[_event(EditPersistence, EditPersistencePayload(edit_id="e0", horizon_s=h,
                                                         surviving_fraction=1.0), 12 + h)
          for h in SPEC.horizons_s],
    ]


def _record(events: list[Event]) -> RewardRecord:
    facts = [fact_from_event(event, offset) for offset, event in enumerate(events)]
    return reward_record(fold_all(facts, partition=3), SPEC, "complete", facts[-1].time_ms)


def test_each_completion_gets_its_own_calls_edits_and_follow_ups() -> None:
    record = _record(_trajectory())
    first, second = sample_rows(record)
    assert (first.turn, second.turn) == (0, 1)
    assert (first.source_partition, first.source_offset, second.source_offset) == (3, 0, 4)
    assert [(t.tool, t.valid) for t in first.tools_called] == [("read", True)]
    assert [(t.tool, t.valid, t.error_kind) for t in second.tools_called] == [
        ("edit", False, "bad_arguments")]  # by its call id, though logged before c1
    assert first.labels is not None and second.labels is not None
    assert (first.labels.edits_accepted, first.labels.kept_fraction) == (1, 1.0)
    assert (second.labels.edits_rejected, second.labels.kept_fraction) == (1, 0.0)
    assert (first.labels.dissatisfied_followups, second.labels.dissatisfied_followups) == (0, 1)
    assert (first.prompt, first.completion, first.tools_offered) == (
        "user: first?", "first", ["read", "edit"])
    assert first.spec_version == SPEC.version and first.reward == record.total


def test_credit_shares_each_component_by_each_completions_part_and_adds_up() -> None:
    record = _record(_trajectory())
    first, second = sample_rows(record)
    c = record.components
    w = SPEC.weights
    assert c["broken_tool_calls"] == w.broken_tool_call and c["accepted_edits"] == w.accepted_edit
    # e0 (c0's, kept) is one of the two edits counted: all of the kept terms are c0's
    kept = sum(value for name, value in c.items() if name.startswith("kept_"))
    assert first.credit == pytest.approx(
        kept + c["accepted_edits"] + c["latency"] * 1 / 4 + (c["turns"] + c["outcome"]) / 2)
    assert second.credit == pytest.approx(
        c["rejected_edits"] + c["dissatisfied_followups"] + c["broken_tool_calls"]
        + c["latency"] * 3 / 4 + (c["turns"] + c["outcome"]) / 2)
    assert math.isclose(first.credit + second.credit, record.total, abs_tol=1e-12)


def test_on_a_messy_log_every_records_credits_add_up_to_its_total() -> None:
    records = replay_rows([(0, o, v) for o, (_, v) in enumerate(simulate_log(80, seed=5))],
                          SPEC).records
    assert len(records) > 40
    for record in records:
        rows = sample_rows(record)
        assert [row.turn for row in rows] == list(range(len(record.samples)))
        assert math.isclose(sum(row.credit for row in rows), record.total, abs_tol=1e-9)
        labels = [row.labels for row in rows if row.labels is not None]
        assert sum(lab.edits_accepted for lab in labels) == record.signals["edits_accepted"]
        assert sum(not t.valid for row in rows for t in row.tools_called) == \
            record.signals["broken_tool_calls"]


def test_rows_are_the_records_however_it_travelled() -> None:
    record = _record(_trajectory())
    travelled = RewardRecord.model_validate_json(record.model_dump_json())
    assert sample_rows(travelled) == sample_rows(record)


def test_a_record_written_before_per_completion_fields_shares_its_total_equally() -> None:
    record = _record(_trajectory())
    old = record.model_validate({**record.model_dump(), "partition": None, "samples": [
        {k: v for k, v in s.model_dump().items() if k in (
            "completion_id", "checkpoint_id", "prompt_token_ids", "completion_token_ids",
            "behaviour_logprobs")} for s in record.samples]})
    rows = sample_rows(old)
    assert [row.credit for row in rows] == [record.total / 2] * 2
    assert rows[0].labels is None and rows[0].prompt is None and rows[0].turn is None


def test_a_record_too_large_for_the_topic_keeps_its_samples_without_text() -> None:
    events = _trajectory()
    facts = [fact_from_event(event, offset) for offset, event in enumerate(events)]
    size = len(_record(events).model_dump_json().encode())
    join = PartitionJoin(SPEC, 0, lambda key: None, max_record_bytes=size - 1)
    records = [r for f, e in zip(facts, events, strict=True)
               for r in join.apply(f, e.model_dump_json().encode()).records]
    assert len(records) == 1 and len(records[0].samples) == 2
    assert all(s.prompt_text is None and s.text_truncated for s in records[0].samples)
    assert [s.completion_token_ids for s in records[0].samples] == [[3, 4], [3, 4]]


def test_simulated_text_logs_are_what_the_simulator_is_asked_for() -> None:
    plain = simulate_log(5, seed=1)
    assert b"prompt_text\":null" in plain[0][1] or b"completion.served" not in plain[0][1]
    assert simulate_log(5, seed=1) == plain  # unchanged by the text option's existence
    texts = simulate_log(5, seed=1, config=SimConfig(texts=True))
    assert any(b'"completion_text":"' in value for _, value in texts)
