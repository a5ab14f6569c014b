"""Records that are not usable events: quarantined with a reason, nothing else changes."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.join import PartitionJoin
from streams.replay import replay_rows
from streams.simlog import SimConfig, poison_log, simulate_log
from streams.spec import load_spec
from tests.support.join_support import unplaced_all

SPEC = load_spec()
LOG = simulate_log(150, seed=5, config=SimConfig(mean_start_gap_s=45.0))


def no_marker(key: str) -> None:
    return None


def rows(log: list[tuple[bytes, bytes]]) -> list[tuple[int, int, bytes]]:
    return [(0, offset, value) for offset, (_, value) in enumerate(log)]


def test_poison_at_several_offsets_is_quarantined_and_changes_no_record() -> None:
    clean = replay_rows(rows(LOG), SPEC)
    for seed in range(3):
        poisoned, kinds = poison_log(LOG, seed)
        result = replay_rows(rows(poisoned), SPEC)
        assert unplaced_all(result.records) == unplaced_all(clean.records)
        assert result.late == clean.late
        assert [offset for _, offset, _ in result.quarantined] == sorted(kinds)
        for _, offset, reason in result.quarantined:
            assert reason and ":" in reason, (kinds[offset], reason)


def test_reasons_name_the_field_at_fault() -> None:
    poisoned, kinds = poison_log(LOG, 0)
    reasons = {kinds[offset]: reason for _, offset, reason in replay_rows(rows(poisoned),
                                                                          SPEC).quarantined}
    assert reasons["non-finite latency"].startswith("payload.latency_ms:")
    assert reasons["wrong type"].startswith("payload.valid:")
    assert reasons["no org (not from ingest)"].startswith("org_id:")
    assert reasons["an org id ingest never stamps"].startswith("org_id: '../etc' is not an org")
    assert "recursion limit" in reasons["nested 100,000 deep"]


def test_a_record_over_the_size_limit_quarantines_its_trajectory_alone() -> None:
    small = PartitionJoin(SPEC, 0, no_marker, max_record_bytes=2_500)
    normal = replay_rows(rows(LOG), SPEC)
    records, quarantined = [], []
    for _, offset, raw in rows(LOG):
        step = small.step(raw, offset)
        records += step.records
        quarantined += step.quarantined
    assert quarantined and records
    assert all("byte limit" in q.reason for q in quarantined)
    too_big = {json.loads(q.raw)["trajectory_id"] for q in quarantined}
    assert {r.trajectory_id for r in records} == \
        {r.trajectory_id for r in normal.records} - too_big
    assert all(len(r.model_dump_json()) <= 2_500 for r in records)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_no_value_in_a_field_stops_the_join(data: st.DataObject) -> None:
    """Any field of a real event replaced by any JSON value: the join goes on."""
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    _, raw = LOG[rng.randrange(len(LOG))]
    event = json.loads(raw)
    where = event["payload"] if rng.random() < 0.7 and event["payload"] else event
    where[rng.choice(sorted(where))] = data.draw(_JSON)
    join = PartitionJoin(SPEC, 0, no_marker)
    step = join.step(json.dumps(event).encode(), 0)
    assert len(step.quarantined) + len(join.open_states) + len(step.records) >= 1
    for record in step.records:
        assert record.total == record.total  # finite: RewardRecord refuses NaN and inf


def test_a_record_without_a_value_is_quarantined_as_empty() -> None:
    log = rows(LOG)
    log.insert(7, (0, 7, None))  # a tombstone: Kafka hands the consumer no bytes at all
    log = [(0, offset, raw) for offset, (_, _, raw) in enumerate(log)]
    result = replay_rows(log, SPEC)
    assert unplaced_all(result.records) == unplaced_all(replay_rows(rows(LOG), SPEC).records)
    assert [(offset, reason) for _, offset, reason in result.quarantined] == [
        (7, "(event): the value is empty (a tombstone or a null record)")]
