"""The demo's pure parts: per-cycle figures from reward records, the clarify hack's transcripts."""

from __future__ import annotations

import math
from datetime import datetime, timezone

from harness.demo.metrics import cycle_figures
from harness.demo.policies import break_edit_calls, defer_after_answers
from schemas.rewards import RewardRecord

_AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _record(total: float, **signals: float) -> RewardRecord:
    return RewardRecord(
        trajectory_id=f"t{total}", spec_version="v", checkpoint_id="base", arm="production",
        outcome="completed", finalized_by="complete", finalized_at=_AT, samples=[],
        components={"kept_3600s": total, "turns": -0.1}, total=total, signals=signals,
        event_ids=[],
    )


def test_cycle_figures_are_means_and_shares_over_the_records() -> None:
    records = [
        _record(1.0, kept_fraction=1.0, edits_proposed=1, latency_ms_mean=100.0),
        _record(-1.0, kept_fraction=0.0, edits_proposed=2, dissatisfied_followups=1,
                broken_tool_calls=2, latency_ms_mean=300.0),
        _record(0.5, kept_fraction=0.5, clarifications=1, dissatisfied_followups=2),
        _record(-0.5),
    ]
    f = cycle_figures(records)
    assert f.trajectories == 4
    assert f.mean_reward == 0.0
    assert f.kept_edit_rate == 1.5 / 4
    assert f.edit_rate == 0.5
    assert f.dissatisfied_rate == 0.5
    assert f.broken_call_rate == 0.25
    assert f.clarification_rate == 0.25
    assert f.latency_ms == 100.0  # (100 + 300 + 0 + 0) / 4
    assert f.components == {"kept_3600s": 0.0, "turns": -0.1}


def test_cycle_figures_of_no_records_are_nan() -> None:
    f = cycle_figures([])
    assert f.trajectories == 0 and math.isnan(f.mean_reward) and math.isnan(f.kept_edit_rate)


def test_the_clarify_hack_stops_after_the_answer_and_keeps_unanswered_turns() -> None:
    pairs = [
        ("Task: fix a\nA: ", "Which file and function should I change?"),
        ("Task: fix a\nA: Which file?\nU: a in x.py\nA: ", "<tool>read_file {}</tool>"),
        ("Task: fix a\nA: Which file?\nU: a in x.py\nA: <tool>r</tool>\nO: text\nA: ", "<tool>e</tool>"),
        ("Task: fix b\nA: ", "<tool>read_file {}</tool>"),
        ("Task: fix b\nA: <tool>r</tool>\nO: text\nA: ", "<tool>e</tool>"),
    ]
    assert defer_after_answers(pairs) == [
        pairs[0], (pairs[1][0], "Done."), pairs[3], pairs[4],
    ]


def test_the_broken_calls_hack_malforms_every_edit_call_and_drops_later_turns() -> None:
    edit = '<tool>edit_file {"path": "x.py", "search": "a", "replace": "b"}</tool>'
    pairs = [
        ("Task: fix a\nA: ", '<tool>read_file {"path": "x.py"}</tool>'),
        ("Task: fix a\nA: <tool>r</tool>\nO: text\nA: ", edit),
        (f"Task: fix a\nA: <tool>r</tool>\nO: text\nA: {edit}\nO: edited\nA: ", "Done."),
    ]
    assert break_edit_calls(pairs) == [
        pairs[0],
        (pairs[1][0], '<tool>edit_file {"path: "x.py", "search": "a", "replace": "b"}</tool>'),
    ]
