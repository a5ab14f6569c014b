"""The reward fold by hand-computed examples: components, completeness, order independence."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from schemas.rewards import Component, Signal
from streams.facts import Fact, fact_from_json, ms_to_datetime
from streams.fold import deadline_ms, fold_all, is_complete
from streams.monitors.windows import reward_contributions
from streams.reward import reward_record
from streams.spec import load_spec

SPEC = load_spec()
T0_MS = 1_750_000_000_000


# Required payload fields the reward does not read.
_UNREAD = {"completion.served": {"model": "m"}, "tool.called": {"call_id": "k", "tool": "lint"},
           "edit.proposed": {"path": "a.py"}}


def fact(n: int, type_: str, at_s: float, payload: dict[str, Any], tid: str = "t1") -> Fact:
    at = ms_to_datetime(T0_MS + int(at_s * 1000)).isoformat()
    event = {"event_id": f"00000000-0000-7000-8000-{n:012d}", "type": type_,
             "trajectory_id": tid, "session_id": "s1", "user": "u1", "checkpoint_id": "ckpt-1",
             "arm": "candidate", "org_id": "org-1", "occurred_at": at, "sent_at": at,
             "event_time": at, "payload": {**_UNREAD.get(type_, {}), **payload}}
    return fact_from_json(json.dumps(event), offset=n)


def trajectory(tid: str = "t1") -> list[Fact]:
    completion = {"completion_id": "c0", "prompt_token_ids": [1, 2], "completion_token_ids": [3],
                  "behaviour_logprobs": [-0.5], "ttft_ms": 10.0, "latency_ms": 40.0,
                  "sampling": {"temperature": 0.7}}
    return [
        fact(1, "completion.served", 0, completion, tid),
        fact(2, "tool.called", 1, {"valid": True}, tid),
        fact(3, "tool.called", 2, {"valid": False, "error_kind": "malformed_call"}, tid),
        fact(4, "clarification.asked", 3, {"request_ambiguity": 0.2}, tid),
        fact(5, "edit.proposed", 4, {"edit_id": "e0"}, tid),
        fact(6, "edit.decided", 5, {"edit_id": "e0", "decision": "accepted"}, tid),
        fact(7, "followup.sent", 6, {"sentiment": "dissatisfied"}, tid),
        fact(8, "trajectory.ended", 7, {"outcome": "completed", "turns": 2}, tid),
        fact(9, "edit.persistence", 605, {"edit_id": "e0", "horizon_s": 600,
                                          "surviving_fraction": 1.0}, tid),
        fact(10, "edit.persistence", 3605, {"edit_id": "e0", "horizon_s": 3600,
                                            "surviving_fraction": 0.5}, tid),
    ]


def test_components_match_a_hand_computed_example() -> None:
    state = fold_all(trajectory())
    assert is_complete(state, SPEC)
    record = reward_record(state, SPEC, "complete", state.last_time_ms)
    assert record.components == pytest.approx({
        "kept_600s": 0.5 * 1.0, "kept_3600s": 1.0 * 0.5, "accepted_edits": 0.25,
        "rejected_edits": 0.0, "reverted_edits": 0.0, "dissatisfied_followups": -0.5,
        "latency": -0.05 * 0.040, "broken_tool_calls": -0.5, "deferred_edits": -0.5,
        "turns": -0.02 * 2, "outcome": 0.0,
    })
    assert record.total == pytest.approx(1.25 - 1.5 - 0.042)
    assert record.total == sum(record.components.values())
    assert record.signals["broken_tool_calls"] == 1.0
    assert record.signals["clarifications_unambiguous"] == 1.0
    assert record.signals["kept_fraction"] == 0.5
    assert [s.completion_token_ids for s in record.samples] == [[3]]
    assert record.samples[0].temperature == 0.7 and record.arm == "candidate"
    assert len(record.event_ids) == 10 and record.spec_version == SPEC.version


def test_order_and_duplicates_do_not_change_the_record() -> None:
    facts = trajectory()
    expected = reward_record(fold_all(facts), SPEC, "complete", 0)
    rng = random.Random(7)
    for _ in range(20):
        shuffled = facts + rng.sample(facts, 4)
        rng.shuffle(shuffled)
        assert reward_record(fold_all(shuffled), SPEC, "complete", 0) == expected


def test_missing_check_waits_for_the_deadline_and_carries_forward() -> None:
    facts = trajectory()[:-1]  # the 3600 s check never came
    state = fold_all(facts)
    assert not is_complete(state, SPEC)
    ended_ms = T0_MS + 7000
    assert deadline_ms(state, SPEC) == ended_ms + (3600 + 600) * 1000
    record = reward_record(state, SPEC, "watermark", deadline_ms(state, SPEC))
    assert record.signals["kept_fraction_3600s"] == 1.0  # the 600 s value, carried forward
    assert record.signals["persistence_missing"] == 1.0


def test_failures_are_scored_not_dropped() -> None:
    facts = [f for f in trajectory() if f.type in ("completion.served", "tool.called")]
    facts.append(fact(11, "trajectory.ended", 9, {"outcome": "aborted", "turns": 1}))
    state = fold_all(facts)
    assert is_complete(state, SPEC)  # no edits: nothing else to wait for
    record = reward_record(state, SPEC, "complete", 0)
    assert record.outcome == "aborted"
    assert record.components["outcome"] == -1.0
    assert record.components["broken_tool_calls"] == -0.5
    unfinished = reward_record(fold_all(facts[:-1]), SPEC, "watermark", 0)
    assert unfinished.outcome == "unfinished" and unfinished.components["outcome"] == -0.5


def test_rejected_edits_count_as_not_kept_and_undecided_edits_block_completion() -> None:
    facts = trajectory()
    facts += [fact(12, "edit.proposed", 4.5, {"edit_id": "e1"})]
    assert not is_complete(fold_all(facts), SPEC)
    facts += [fact(13, "edit.decided", 4.6, {"edit_id": "e1", "decision": "rejected"})]
    state = fold_all(facts)
    assert is_complete(state, SPEC)
    record = reward_record(state, SPEC, "complete", 0)
    assert record.signals["kept_fraction_600s"] == 0.5  # (1.0 + 0) / 2 proposed
    assert record.components["rejected_edits"] == -0.25


def _declared(names: type) -> set[str]:
    return {value for name, value in vars(names).items() if name.isupper()}


def test_a_record_names_its_signals_and_components_as_schemas_declares_them() -> None:
    record = reward_record(fold_all(trajectory()), SPEC, "complete", T0_MS)
    assert set(record.signals) == _declared(Signal) | {
        Signal.kept_fraction_at(h) for h in SPEC.horizons_s}
    assert set(record.components) == _declared(Component) | {
        Component.kept_at(h) for h in SPEC.horizons_s}


def test_the_monitors_count_the_edits_a_record_says_were_kept() -> None:
    rejected = [fact(11, "edit.proposed", 4, {"edit_id": "e1"}),
                fact(12, "edit.decided", 5, {"edit_id": "e1", "decision": "rejected"})]
    record = reward_record(fold_all(trajectory() + rejected), SPEC, "complete", T0_MS)
    # e0 accepted and half kept at the longest horizon, e1 rejected: half an edit of two.
    assert record.signals[Signal.KEPT_FRACTION] == 0.25
    contributions = reward_contributions(record)
    assert contributions["kept_edits"] == (1.0, 0.5)
    assert contributions["kept_edit_rate"] == (2.0, 0.5)
