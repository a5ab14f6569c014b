"""The consumer API's selection (orgs, spec, staleness in checkpoints and in hours, dedupe,
every drop counted) and its batches over a records file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schemas.checkpoints import CheckpointEvent, Registry
from schemas.dedupe import DedupeWindow
from schemas.rewards import RewardRecord
from trainer.consumer import Lineage, RewardConsumer, Selection, Staleness, select
from trainer.errors import TrainerConfigError
from trainer.source import ConsumedRecord
from trainer.synthetic import synthetic_records

NOW = datetime(2026, 1, 2, tzinfo=UTC)


class _Tokenizer:
    bos_token_id = 1

    def __call__(self, text: str) -> object:
        return type("Encoded", (), {"input_ids": [ord(c) % 50 + 2 for c in text[:6]]})()


def _record(index: int, *, org: str = "acme", checkpoint: str = "c1",
            served_hours_ago: float | None = 1.0) -> RewardRecord:
    record = synthetic_records(_Tokenizer(), 1, first_index=index)[0]
    served = NOW - timedelta(hours=served_hours_ago) if served_hours_ago is not None else None
    sample = record.samples[0].model_copy(update={"checkpoint_id": checkpoint,
                                                  "served_at": served})
    return record.model_copy(update={"org_id": org, "samples": [sample]})


def _consumed(records: list[RewardRecord]) -> list[ConsumedRecord]:
    return [ConsumedRecord(f"k{r.trajectory_id}", r, "rewards", 0, i)
            for i, r in enumerate(records)]


LINEAGE = Lineage(3, {"c1": 1, "c2": 2, "c3": 3}.get)


def test_selection_drops_and_counts_by_org_spec_checkpoints_and_hours() -> None:
    records = [_record(0), _record(1, org="beta"), _record(2, checkpoint="c2"),
               _record(3, checkpoint="zz"), _record(4, checkpoint="c3", served_hours_ago=7),
               _record(5, checkpoint="c3", served_hours_ago=None),
               _record(6, checkpoint="c3").model_copy(update={"spec_version": "other"})]
    chosen = select([*_consumed(records), ConsumedRecord("bad", None, "rewards", 0, 9)],
                    Selection(frozenset({"acme"}), records[0].spec_version,
                              Staleness(max_checkpoints=1, max_hours=6.0)),
                    lineage=LINEAGE, now=NOW)
    assert chosen.counts == {"records": 8, "records_unparseable": 1, "skipped_other_org": 1,
                             "skipped_spec_version": 1, "samples_dropped_stale": 1,
                             "samples_dropped_unknown_checkpoint": 1,
                             "samples_dropped_too_old": 1, "samples_dropped_unknown_age": 1,
                             "samples_kept": 1}
    [kept] = chosen.samples
    assert (kept.row.trajectory_id, kept.lag, kept.record_key) == (
        records[2].trajectory_id, 1, f"k{records[2].trajectory_id}")
    # token-level fields: one behaviour logprob per completion token, as served
    assert len(kept.row.behaviour_logprobs) == len(kept.row.completion_token_ids) > 0
    assert kept.row.behaviour_logprobs == records[2].samples[0].behaviour_logprobs


def test_a_duplicate_record_is_counted_apart_and_a_trainers_own_problem_comes_first() -> None:
    records = _consumed([_record(0), _record(1)])
    dedupe: DedupeWindow[str] = DedupeWindow(10)
    chosen = select([*records, records[0]], Selection(), now=NOW, dedupe=dedupe,
                    problem=lambda s: "dropped_too_long" if s.completion_id.startswith("syn-1")
                    else None)
    assert chosen.counts == {"records": 2, "records_duplicate": 1, "samples_kept": 1,
                             "samples_dropped_too_long": 1}
    assert select(records, Selection(), now=NOW, dedupe=dedupe).counts == {
        "records_duplicate": 2}


def test_a_bound_in_checkpoints_needs_the_registrys_lineage() -> None:
    with pytest.raises(TrainerConfigError, match="needs the registry's lineage"):
        select([], Selection(staleness=Staleness(max_checkpoints=1)))
    with pytest.raises(TrainerConfigError, match="max_hours=0 must be positive"):
        Staleness(max_hours=0)
    base = CheckpointEvent(event_id="e1", sequence=1, occurred_at=NOW, kind="promoted",
                           status="production", checkpoint_id="base", model="m", path="/m")
    assert Lineage.of(Registry([base]), "m").current_generation == 0
    assert Lineage.of(Registry(), "m").generation_of("base") is None


def test_batches_of_a_records_file_move_positions_and_select_lazily(tmp_path: Path) -> None:
    records = [_record(i, org="acme" if i % 2 else "beta") for i in range(5)]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in records) + "not json\n")
    consumer = RewardConsumer(None, "g", Selection(frozenset({"acme"})), records_file=path,
                              clock=lambda: NOW)
    first = consumer.next_batch(4)
    assert first.positions == {"file:records.jsonl:0": 4} and not consumer.exhausted()
    assert [s.row.org_id for s in first.samples] == ["acme", "acme"]
    second = consumer.next_batch(4)
    assert second.positions == {"file:records.jsonl:0": 6} and consumer.exhausted()
    assert second.counts == {"records": 2, "records_unparseable": 1, "skipped_other_org": 1}
    again = RewardConsumer(None, "g", records_file=path, positions=first.positions)
    assert [r.offset for r in again.next_batch(10).records] == [4, 5]
    with pytest.raises(TrainerConfigError, match="the Kafka settings or a records file"):
        RewardConsumer(None, "g")
