"""The event-time window fold: contributions, closing by watermark, late data, gap filling."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.rewards import RewardRecord, Sample
from streams.join import ORG_IDLE_LAG_MS
from streams.monitors.windows import (
    ALL,
    advance,
    fold_in,
    ingest_contributions,
    ingest_window_keys,
    reward_contributions,
    reward_record_id,
    reward_window_keys,
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
    assert c["kept_edits"] == (1.0, 2.0)  # half of the 4 proposed
    assert c["kept_edit_rate"] == (4.0, 2.0)
    assert c["on_policy_fraction"] == (2.0, 1.0)  # one of two samples from ck1
    assert c["reward"] == (1.0, 1.0)
    assert c["reward.accepted"] == (1.0, 2.0)
    assert c["log_latency"][1] == pytest.approx(6.907755, abs=1e-6)


def _at(state: dict[str, Any], seconds: float, value: float,
        key: tuple[str, str, str] = ("ck", "a", "*")):
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


def _reward_at(state: dict[str, Any], record: RewardRecord, seconds: float):
    return fold_in(state, [("ck1", "a", "*")], seconds * 1000, reward_contributions(record),
                   window_ms=WINDOW_MS, grace_ms=GRACE_MS, latency_ms=100.0,
                   record_id=reward_record_id(record))


def test_a_repeated_reward_record_is_folded_once_and_its_id_forgotten_when_its_window_closes(
) -> None:
    state: dict[str, Any] = {}
    first = _record(edits_proposed=1)
    other = first.model_copy(update={"trajectory_id": "t2"})
    assert _reward_at(state, first, 10) == []
    assert _reward_at(state, first, 10) == []  # the join repeated it after a restart
    assert _reward_at(state, other, 20) == []
    assert _reward_at(state, first, 10) == []
    assert state["__repeated__"] == 2
    [closed] = _reward_at(state, other.model_copy(update={"trajectory_id": "t3"}), 95)
    window = to_metric_window(closed, "rewards", WINDOW_MS)
    assert window.trajectories == 2 and window.stats["reward"].n == 2  # t and t2, once each
    assert not [key for key in state if key.startswith("__seen__|") and "t3" not in key]
    assert _reward_at(state, first, 10) == []  # after its window closed: late, not folded
    assert state["__late__"] == 1 and state["__repeated__"] == 2


def test_a_repeated_event_counts_once_in_ingest_volume() -> None:
    state: dict[str, Any] = {}
    for event_id in ("e1", "e2", "e1", "e3", "e2"):
        fold_in(state, [(ALL, ALL, ALL)], 5_000, ingest_contributions(False),
                window_ms=WINDOW_MS, grace_ms=GRACE_MS, record_id=event_id)
    closed = advance(state, 200_000, window_ms=WINDOW_MS, grace_ms=GRACE_MS)
    assert to_metric_window(closed[0], "ingest", WINDOW_MS).values["ingest_events"] == 3.0


def test_a_reward_counts_for_its_org_and_for_the_fleet_and_orgs_stay_apart() -> None:
    acme = _record(edits_proposed=1).model_copy(update={"org_id": "acme"})
    evil = _record(edits_proposed=0).model_copy(update={"org_id": "evil"})
    assert reward_window_keys(acme) == [("ck1", "a", "acme"), ("ck1", "a", ALL)]
    state: dict[str, Any] = {}
    for record in (acme, evil):
        fold_in(state, reward_window_keys(record), T0.timestamp() * 1000,
                reward_contributions(record), window_ms=WINDOW_MS, grace_ms=GRACE_MS)
    closed = advance(state, T0.timestamp() * 1000 + 10 * WINDOW_MS, window_ms=WINDOW_MS,
                     grace_ms=GRACE_MS)
    edit_rate = {tuple(acc["key"]): acc["stats"]["edit_rate"] for acc in closed}
    assert edit_rate == {("ck1", "a", "acme"): [1.0, 1.0, 1.0],
                         ("ck1", "a", "evil"): [1.0, 0.0, 0.0],
                         ("ck1", "a", ALL): [2.0, 1.0, 1.0]}


def test_ingest_counts_for_all_traffic_its_org_and_its_checkpoint() -> None:
    assert ingest_window_keys("acme", "ck1", "a") == [(ALL, ALL, ALL), (ALL, ALL, "acme"),
                                                      ("ck1", "a", ALL)]
    assert ingest_window_keys(None) == [(ALL, ALL, ALL)]  # a dead letter that names no org


def test_keys_that_join_to_the_same_string_are_different_windows() -> None:
    # Ids may hold any character: ("x|y", "z") and ("x", "y|z") must not share a window.
    state: dict[str, Any] = {}
    for key in [("x|y", "z", ALL), ("x", "y|z", ALL)]:
        fold_in(state, [key], T0.timestamp() * 1000, ingest_contributions(False),
                window_ms=WINDOW_MS, grace_ms=GRACE_MS)
    closed = advance(state, T0.timestamp() * 1000 + 10 * WINDOW_MS, window_ms=WINDOW_MS,
                     grace_ms=GRACE_MS)
    assert sorted(tuple(acc["key"]) for acc in closed) == [("x", "y|z", ALL), ("x|y", "z", ALL)]


def _org_reward(state: dict[str, Any], org: str, at_ms: float) -> list[dict[str, Any]]:
    record = _record(edits_proposed=1).model_copy(update={"org_id": org})
    return fold_in(state, reward_window_keys(record), at_ms, reward_contributions(record),
                   window_ms=WINDOW_MS, grace_ms=GRACE_MS, latency_ms=100.0)


def _keys(closed: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return sorted(tuple(acc["key"]) for acc in closed)


def test_an_org_far_ahead_closes_the_fleets_windows_but_never_another_orgs() -> None:
    state: dict[str, Any] = {}
    t0 = T0.timestamp() * 1000
    assert _org_reward(state, "acme", t0) == []
    # evil's record an hour ahead closes the fleet's window, not acme's ...
    assert _keys(_org_reward(state, "evil", t0 + 3_600_000)) == [("ck1", "a", ALL)]
    # ... so acme's next record, in the same minute, still counts in acme's window (late only
    # for the fleet's window, which has closed).
    assert _org_reward(state, "acme", t0 + 1_000) == []
    assert state["__late__"] == 1
    [acme] = _org_reward(state, "acme", t0 + WINDOW_MS + GRACE_MS)
    assert tuple(acme["key"]) == ("ck1", "a", "acme") and acme["trajectories"] == 2


def test_an_org_gone_quiet_has_its_windows_closed_by_the_fleet_an_idle_lag_behind() -> None:
    state: dict[str, Any] = {}
    t0 = T0.timestamp() * 1000
    assert _org_reward(state, "acme", t0) == []
    assert _keys(_org_reward(state, "evil", t0 + ORG_IDLE_LAG_MS)) == [("ck1", "a", ALL)]
    later = _org_reward(state, "evil", t0 + ORG_IDLE_LAG_MS + WINDOW_MS + GRACE_MS)
    assert _keys(later) == [("ck1", "a", ALL), ("ck1", "a", "acme"), ("ck1", "a", "evil")]
