"""The event-time window fold: contributions, closing by watermark, late data, gap filling."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.rewards import RewardRecord, Sample
from streams.monitors.windows import (
    ALL,
    advance,
    fold_in,
    ingest_contributions,
    reward_contributions,
    to_metric_window,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW_MS, GRACE_MS = 60_000, 30_000


def _record(**signals: float) -> RewardRecord:
    sample = Sample(completion_id="c", checkpoint_id="ck1", prompt_token_ids=[1],
                    completion_token_ids=[2], behaviour_logprobs=[-0.1])
    other = sample.model_copy(update={"checkpoint_id": "ck0"})
    return RewardRecord(
        trajectory_id="t", spec_version="v", checkpoint_id="ck1", arm="a", outcome="completed",
        ended_at=T0, finalized_by="complete", finalized_at=T0, samples=[sample, other],
        components={"accepted": 2.0, "broken": -1.0}, total=1.0, signals=signals, event_ids=[])


def test_reward_contributions() -> None:
    c = reward_contributions(_record(edits_proposed=4, edits_accepted=2, kept_fraction=0.5,
                                     tool_calls=5, broken_tool_calls=1, clarifications=0,
                                     latency_ms_mean=1000.0))
    assert c["edit_rate"] == (1.0, 1.0)
    assert c["clarification_rate"] == (1.0, 0.0)
    assert c["broken_tool_call_rate"] == (5.0, 1.0)
    assert c["broken_call_trajectory_rate"] == (1.0, 1.0)
    assert c["kept_edits"] == (1.0, 1.0)  # 0.5 · 2 accepted
    assert c["kept_edit_rate"] == (4.0, 1.0)
    assert c["on_policy_fraction"] == (2.0, 1.0)  # one of two samples from ck1
    assert c["reward"] == (1.0, 1.0)
    assert c["reward.accepted"] == (1.0, 2.0)
    assert c["log_latency"][1] == pytest.approx(6.907755, abs=1e-6)


def _at(state: dict[str, Any], seconds: float, value: float, key: tuple[str, str, str] = ("ck", "a", "*")):
    return fold_in(state, [key], seconds * 1000, {"m": (1.0, value)}, window_ms=WINDOW_MS,
                   grace_ms=GRACE_MS, latency_ms=100.0)


def test_windows_close_when_the_watermark_passes_and_late_data_is_dropped() -> None:
    state: dict[str, Any] = {}
    assert _at(state, 10, 1.0) == []
    assert _at(state, 20, 3.0) == []
    assert _at(state, 70, 5.0) == []  # watermark 40 s: window [0, 60) still open
    closed = _at(state, 95, 7.0)  # watermark 65 s
    assert len(closed) == 1
    window = to_metric_window(closed[0], "rewards", WINDOW_MS)
    assert window.window_start == T0.replace(year=1970, month=1, day=1)
    assert window.window_end - window.window_start == timedelta(seconds=60)
    assert window.trajectories == 2
    assert window.stats["m"].n == 2 and window.stats["m"].sum == 4.0
    assert window.stats["m"].sumsq == 10.0
    assert window.values["m"] == 2.0
    assert "latency_p95_ms" in window.values
    assert _at(state, 5, 100.0) == []  # late for the closed window
    assert state["__late__"] == 1


def test_the_all_key_gets_empty_windows_for_quiet_periods() -> None:
    state: dict[str, Any] = {}
    key = (ALL, ALL, ALL)
    fold_in(state, [key], 1_000, ingest_contributions(False), window_ms=WINDOW_MS, grace_ms=0)
    fold_in(state, [key], 61_000, ingest_contributions(True), window_ms=WINDOW_MS, grace_ms=0)
    fold_in(state, [key], 250_000, ingest_contributions(False), window_ms=WINDOW_MS, grace_ms=0)
    closed = advance(state, 400_000, window_ms=WINDOW_MS, grace_ms=0)
    starts = [acc["start_ms"] for acc in closed]
    assert starts == [120_000, 180_000, 240_000]  # gap 120–240 s filled; 0 and 60 closed before
    windows = [to_metric_window(acc, "ingest", WINDOW_MS) for acc in closed]
    assert [w.values["ingest_events"] for w in windows] == [0.0, 0.0, 1.0]


def test_one_input_feeds_several_keys() -> None:
    state: dict[str, Any] = {}
    keys = [("ck", "a", "*"), (ALL, ALL, ALL)]
    fold_in(state, keys, 1_000, ingest_contributions(False), window_ms=WINDOW_MS, grace_ms=0)
    closed = advance(state, 120_000, window_ms=WINDOW_MS, grace_ms=0)
    assert sorted(tuple(acc["key"]) for acc in closed) == sorted(keys)


def test_secondary_inputs_do_not_move_the_watermark_and_late_ones_count_in_an_open_window() -> None:
    state: dict[str, Any] = {}
    key = (ALL, ALL, ALL)

    def add(seconds: float, dead: bool) -> list[dict[str, Any]]:
        return fold_in(state, [key], seconds * 1000, ingest_contributions(dead),
                       window_ms=WINDOW_MS, grace_ms=GRACE_MS, secondary=dead)

    assert add(500, True) == []  # far ahead, but no window closes
    add(10, False)
    closed = add(95, False)  # watermark 65 s closes [0, 60)
    assert [acc["stats"]["dead_letter_rate"] for acc in closed] == [[1.0, 0.0, 0.0]]
    add(5, True)  # late for [0, 60): lands in [60, 120), which holds the watermark
    closed = advance(state, 200_000, window_ms=WINDOW_MS, grace_ms=GRACE_MS)
    window = next(acc for acc in closed if acc["start_ms"] == 60_000)
    assert window["stats"]["dead_letter_rate"] == [2.0, 1.0, 1.0]  # 95 s accepted + late reject
    assert "__late__" not in state
