"""The partition join: watermark finalisation, late events, crash recovery, replay equality."""

from __future__ import annotations

import random
import zlib

from schemas.rewards import reward_record_key
from streams.fold import TrajectoryState, fold_all
from streams.join import Checkpoint, Finalised, PartitionJoin, Stored
from streams.replay import replay_rows
from streams.reward import reward_record
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec

SPEC = load_spec()
# Trajectories 20 s apart, so the log spans several horizons of event time.
LOG = simulate_log(200, seed=3, config=SimConfig(mean_start_gap_s=45.0))


def single_partition() -> list[tuple[int, bytes]]:
    return list(enumerate(value for _, value in LOG))


def clean_run(rows: list[tuple[int, bytes]]) -> tuple[dict[bytes, str], list[str], int]:
    result = replay_rows([(0, offset, raw) for offset, raw in rows], SPEC)
    records = {reward_record_key(r.trajectory_id, r.spec_version): r.model_dump_json()
               for r in result.records}
    return records, [event_id for _, event_id in result.late], len(result.late)


def test_the_log_has_late_events_watermark_and_complete_finalisations() -> None:
    result = replay_rows([(0, o, raw) for o, raw in single_partition()], SPEC)
    by = {r.finalized_by for r in result.records}
    assert by == {"complete", "watermark"}
    assert {r.outcome for r in result.records} >= {"completed", "aborted", "error", "unfinished"}
    assert result.late and result.open_trajectories > 0
    assert len({r.trajectory_id for r in result.records}) == len(result.records)


def test_each_record_is_its_own_events_folded_in_any_order() -> None:
    facts_by_id = {}
    from streams.facts import fact_from_json
    for offset, raw in single_partition():
        fact = fact_from_json(raw, offset)
        facts_by_id.setdefault(fact.event_id, fact)
    rng = random.Random(1)
    for record in replay_rows([(0, o, raw) for o, raw in single_partition()], SPEC).records:
        facts = [facts_by_id[event_id] for event_id in record.event_ids]
        rng.shuffle(facts)
        again = reward_record(fold_all(record.trajectory_id, 0, facts), SPEC,
                              record.finalized_by, int(record.finalized_at.timestamp() * 1000))
        assert again == record


def test_partitioning_does_not_change_records() -> None:
    offsets: dict[int, int] = {}
    rows = []
    for key, value in LOG:
        partition = zlib.crc32(key) % 3
        offsets[partition] = offsets.get(partition, -1) + 1
        rows.append((partition, offsets[partition], value))
    one = {r.trajectory_id: r for r in
           replay_rows([(0, o, raw) for o, raw in single_partition()], SPEC).records}
    three = replay_rows(rows, SPEC).records
    # Watermarks differ per partition, so which trajectories are final may differ; a
    # trajectory that is final in both with the same events has the same record.
    same = [r for r in three if r.trajectory_id in one and
            one[r.trajectory_id].event_ids == r.event_ids]
    assert len(same) > 0.9 * len(three)
    assert all(one[r.trajectory_id] == r for r in same)


def test_late_events_are_counted_and_duplicates_of_folded_events_are_not() -> None:
    rows = single_partition()
    records, late_ids, _ = clean_run(rows)
    final_tid = next(iter(records)).split(b"|")[0].decode()
    folded = next(raw for _, raw in rows if f'"trajectory_id":"{final_tid}"'.encode() in raw)
    extra = (len(rows), folded)  # a duplicate of an event the record already folded
    _, late_again, _ = clean_run(rows + [extra])
    assert late_again == late_ids
    assert len(late_ids) == len(set(late_ids))


def _crash_and_resume(rows: list[tuple[int, bytes]], rng: random.Random,
                      batch: int) -> tuple[dict[bytes, str], int]:
    store: dict[str, Stored] = {}
    checkpoint_box = [Checkpoint()]
    records: dict[bytes, str] = {}

    def run(join: PartitionJoin, start: int, crash_at: int | None) -> bool:
        for first in range(start, len(rows), batch):
            for offset, raw in rows[first:first + batch]:
                for record in join.step(raw, offset).records:
                    key = reward_record_key(record.trajectory_id, record.spec_version)
                    assert records.setdefault(key, record.model_dump_json()) == \
                        record.model_dump_json(), "a restart changed a record"
            dirty, checkpoint = join.take_writes()
            if crash_at is not None and first >= crash_at:
                # Killed while persisting: some states were written, the checkpoint was not.
                for key, value in list(dirty.items())[:rng.randrange(len(dirty) + 1)]:
                    store[key] = value
                return False
            store.update(dirty)
            checkpoint_box[0] = checkpoint
        return True

    crash_at = rng.randrange(len(rows))
    run(PartitionJoin(SPEC, 0, store.get), 0, crash_at)
    checkpoint = checkpoint_box[0]
    restored = [v for v in store.values() if isinstance(v, TrajectoryState)]
    join = PartitionJoin(SPEC, 0, lambda t: store.get(t), checkpoint, restored)
    # The consumer resumes from a committed offset at or before the checkpoint.
    resume = rng.randrange(max(0, checkpoint.offset - 3 * batch), checkpoint.offset + 2)
    assert run(join, resume - resume % batch if resume > 0 else 0, None)
    return records, join.take_writes()[1].late_events


def test_a_crash_mid_write_repeats_records_but_never_changes_or_loses_one() -> None:
    rows = single_partition()
    clean, _, late_count = clean_run(rows)
    rng = random.Random(11)
    for _ in range(4):
        records, late_after = _crash_and_resume(rows, rng, batch=rng.choice([7, 50, 400]))
        assert records == clean
        assert late_after == late_count


def test_finalised_markers_are_what_restarts_check_late_events_against() -> None:
    store: dict[str, Stored] = {}
    join = PartitionJoin(SPEC, 0, store.get)
    for offset, raw in single_partition():
        join.step(raw, offset)
    dirty, checkpoint = join.take_writes()
    markers = [v for v in dirty.values() if isinstance(v, Finalised)]
    assert markers and all(m.event_ids and m.offset <= checkpoint.offset for m in markers)
    assert checkpoint.watermark_ms is not None and checkpoint.late_events > 0
