"""The partition join: watermark finalisation, late events, orgs, crash recovery, replay equality.

The crash tests keep the join's state in Quix Streams' own RocksDB store (``join_support``).
"""

from __future__ import annotations

import heapq
import json
import random
import zlib
from datetime import datetime, timedelta
from pathlib import Path

from schemas.rewards import reward_record_key, trajectory_key
from streams.facts import fact_from_json
from streams.fold import fold_all
from streams.join import DEFAULT_RETENTION_MS
from streams.replay import ReplayResult, of_org, replay_rows
from streams.reward import reward_record
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from tests.support.join_support import Checkpointed, streamed, unplaced, unplaced_all

SPEC = load_spec()
# Trajectories 45 s apart on average, so the log spans several horizons of event time.
LOG = simulate_log(200, seed=3, config=SimConfig(mean_start_gap_s=45.0))


def single_partition(log: list[tuple[bytes, bytes]] = LOG) -> list[tuple[int, bytes]]:
    return list(enumerate(value for _, value in log))


def replay(rows: list[tuple[int, bytes]], retention_ms: int = DEFAULT_RETENTION_MS
           ) -> ReplayResult:
    return replay_rows([(0, offset, raw) for offset, raw in rows], SPEC, retention_ms)


def keyed(result: ReplayResult) -> dict[bytes, str]:
    return {reward_record_key(r.org_id, r.trajectory_id, r.spec_version): r.model_dump_json()
            for r in result.records}


def with_org(log: list[tuple[bytes, bytes]], org: str) -> list[tuple[bytes, bytes]]:
    return [(key, json.dumps({**json.loads(value), "org_id": org}).encode())
            for key, value in log]


def test_the_log_has_late_events_watermark_and_complete_finalisations() -> None:
    result = replay(single_partition())
    assert {r.finalized_by for r in result.records} == {"complete", "watermark"}
    assert {r.outcome for r in result.records} >= {"completed", "aborted", "error", "unfinished"}
    assert result.late and result.open_trajectories > 0
    assert not any(expired for _, _, expired in result.late)
    assert len({r.trajectory_id for r in result.records}) == len(result.records)


def test_each_record_is_its_own_events_folded_in_any_order() -> None:
    facts_by_id = {}
    for offset, raw in single_partition():
        fact = fact_from_json(raw, offset)
        facts_by_id.setdefault(fact.event_id, fact)
    rng = random.Random(1)
    for record in replay(single_partition()).records:
        facts = [facts_by_id[event_id] for event_id in record.event_ids]
        rng.shuffle(facts)
        again = reward_record(fold_all(facts), SPEC, record.finalized_by,
                              int(record.finalized_at.timestamp() * 1000))
        assert again == record


def test_two_orgs_with_the_same_trajectory_and_event_ids_get_independent_records() -> None:
    alone = {org: replay(single_partition(with_org(LOG, org))) for org in ("org-a", "org-b")}
    mixed_log = [pair for both in zip(with_org(LOG, "org-a"), with_org(LOG, "org-b"), strict=True)
                 for pair in both]
    mixed = replay(single_partition(mixed_log))
    for org, result in alone.items():
        # equal but for where on the log each completion was (its lineage)
        assert [unplaced(r) for r in mixed.records if r.org_id == org] == \
            [unplaced(r) for r in result.records]
        assert [late[1] for late in mixed.late if late[0].startswith(org + "|")] == \
            [late[1] for late in result.late]
    keys = keyed(mixed)
    assert len(keys) == 2 * len(alone["org-a"].records)
    assert {k.split(b"|")[0] for k in keys} == {b"org-a", b"org-b"}


def shifted(log: list[tuple[bytes, bytes]], minutes: int) -> list[tuple[bytes, bytes]]:
    """The log with every event's times ``minutes`` later."""
    out = []
    for key, value in log:
        event = json.loads(value)
        for name in ("occurred_at", "sent_at", "received_at", "event_time"):
            if event.get(name):
                at = datetime.fromisoformat(event[name]) + timedelta(minutes=minutes)
                event[name] = at.isoformat()
        out.append((key, json.dumps(event).encode()))
    return out


def _time(value: bytes) -> datetime:
    return datetime.fromisoformat(json.loads(value)["event_time"])


def test_another_orgs_events_ahead_in_time_change_nothing_of_an_org() -> None:
    # evil replays acme's trajectory and event ids 20 minutes ahead of acme's own traffic (as
    # far ahead as a client that waits could be): under one watermark for the partition,
    # acme's trajectories would close early and its events would come late.
    acme, evil = with_org(LOG, "acme"), shifted(with_org(LOG, "evil"), 20)
    # Interleaved by time, each org's own events in their own order.
    arrival = list(heapq.merge(acme, evil, key=lambda pair: _time(pair[1])))
    alone, mixed = replay(single_partition(acme)), replay(single_partition(arrival))
    assert unplaced_all([r for r in mixed.records if r.org_id == "acme"]) == \
        unplaced_all(alone.records)
    assert [late[1] for late in mixed.late if late[0].startswith("acme|")] == \
        [late[1] for late in alone.late]


def test_an_idle_orgs_trajectories_close_by_the_partitions_watermark() -> None:
    acme = with_org(LOG, "acme")
    quiet = with_org(LOG[:40], "quiet")  # stops early, its last trajectories left open
    later = shifted(with_org(LOG, "busy"), 24 * 60)  # a day of another org's traffic after
    result = replay(single_partition(quiet + acme + later))
    alone = replay(single_partition(quiet))
    assert alone.open_trajectories > 0  # on its own its last trajectories stay open
    closed = [r for r in result.records if r.org_id == "quiet"]
    assert len(closed) == len(alone.records) + alone.open_trajectories


def test_keys_keep_orgs_apart_whatever_their_ids_contain() -> None:
    assert trajectory_key("a|b", "c") != trajectory_key("a", "b|c")
    assert reward_record_key("o", "t", "v1") == b"o|t|v1"
    assert trajectory_key("50%", "x|y") == "50%25|x%7Cy"


def test_partitioning_does_not_change_records() -> None:
    offsets: dict[int, int] = {}
    rows = []
    for key, value in LOG:
        partition = zlib.crc32(key) % 3
        offsets[partition] = offsets.get(partition, -1) + 1
        rows.append((partition, offsets[partition], value))
    one = {r.trajectory_id: r for r in replay(single_partition()).records}
    three = replay_rows(rows, SPEC).records
    # Watermarks differ per partition, so which trajectories are final may differ; a
    # trajectory that is final in both with the same events has the same record.
    same = [r for r in three if r.trajectory_id in one and
            one[r.trajectory_id].event_ids == r.event_ids]
    assert len(same) > 0.9 * len(three)
    assert all(unplaced(one[r.trajectory_id]) == unplaced(r) for r in same)


def test_late_events_are_counted_and_duplicates_of_folded_events_are_not() -> None:
    rows = single_partition()
    clean = replay(rows)
    final_tid = clean.records[0].trajectory_id
    folded = next(raw for _, raw in rows if f'"trajectory_id":"{final_tid}"'.encode() in raw)
    again = replay(rows + [(len(rows), folded)])  # a duplicate of an event it folded
    assert again.late == clean.late
    assert len({event_id for _, event_id, _ in clean.late}) == len(clean.late)


def test_crashes_repeat_records_but_never_change_or_lose_one(tmp_path: Path) -> None:
    mixed = [pair for both in zip(with_org(LOG, "org-a"), with_org(LOG, "org-b"), strict=True)
             for pair in both]
    rows = single_partition(mixed)
    clean = replay(rows)
    rng = random.Random(11)
    for run, batch in enumerate((7, 50, 400)):
        records, late, node = streamed(rows, tmp_path / str(run), rng, batch, crashes=3)
        assert records == keyed(clean)
        assert late == clean.late
        assert node.join.checkpoint().late_events == len(clean.late)


def test_state_written_and_read_back_gives_the_same_join(tmp_path: Path) -> None:
    rows = single_partition()
    node = Checkpointed(tmp_path / "db", DEFAULT_RETENTION_MS)
    for offset, raw in rows[:len(rows) // 2]:
        node.join.step(raw, offset)
    node.commit()
    before = {key: sorted(state.facts) for key, state in node.join.open_states.items()}
    assert before
    node.restart()
    assert {key: sorted(s.facts) for key, s in node.join.open_states.items()} == before
    assert node.store.size.open_trajectories == len(before)
    assert node.store.size.markers > 0


def test_one_orgs_replay_is_its_records_of_the_whole_log() -> None:
    acme, evil = with_org(LOG, "acme"), with_org(LOG, "evil")
    whole = replay(single_partition([pair for both in zip(acme, evil, strict=True)
                                     for pair in both]))
    mine = of_org(whole, "acme")
    assert unplaced_all(mine.records) == unplaced_all(replay(single_partition(acme)).records)
    assert mine.late and all(late[0].startswith("acme|") for late in mine.late)
