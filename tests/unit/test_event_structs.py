"""The msgspec structs read events exactly as the pydantic models do.

The join reads an event with the structs and falls back to the models when the structs refuse
it, so every answer is right as long as the structs never accept what the models refuse and
never read an accepted event differently. Each case below compares the join's reader with the
reader that has only the models: the same fact (its repr, so 5 and 5.0 differ) or the same
error, the same field named. And the structs must refuse only what they are documented to be
stricter about (timestamp and UUID spellings ingest never writes, a schema version written as
``true`` or ``1.0``), else the fast path would quietly stop being used.
"""

from __future__ import annotations

import json

import pytest

from schemas.event_structs import decode_stored_event
from schemas.events import EVENT_TYPES, parse_event
from streams import facts
from streams.errors import MalformedEventError
from streams.simlog import SimConfig, poison_log, simulate_log
from tests.support.event_mutations import STRICTER, mutations
from tests.support.poisoned_logs import event_poison, stored_event

LOGS = [simulate_log(200, seed=seed, config=config) for seed, config in (
    (0, SimConfig()), (1, SimConfig(mean_start_gap_s=45.0)), (2, SimConfig(duplicate_p=0.3)))]
EVENTS = [value for log in LOGS for _, value in log]


def _answer(raw: bytes | str | None) -> str:
    try:
        return repr(facts.fact_from_json(raw, 7))
    except MalformedEventError as exc:
        return f"refused: {exc}"


def _models_answer(raw: bytes | str | None) -> str:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(facts, "decode_stored_event", lambda _: None)
        return _answer(raw)


def _models_accept(raw: bytes | str) -> bool:
    try:
        parse_event(raw)
    except ValueError:  # pydantic's ValidationError is one
        return False
    return True


def _assert_same(raw: bytes | str | None) -> None:
    assert _answer(raw) == _models_answer(raw), raw if raw is None else raw[:400]


def test_every_simulated_event_takes_the_fast_path_to_the_same_fact() -> None:
    assert {json.loads(raw)["type"] for raw in EVENTS} == set(EVENT_TYPES)
    for raw in EVENTS:
        assert decode_stored_event(raw) is not None, raw[:400]
        _assert_same(raw)
        _assert_same(raw.decode())


def test_the_poison_corpus_gets_the_models_answers() -> None:
    poisoned, kinds = poison_log(LOGS[0], seed=4)
    for index in kinds:
        _assert_same(poisoned[index][1])
    for poison in event_poison(stored_event(facts.ms_to_datetime(1_772_323_200_000))):
        _assert_same(poison.value)
        if poison.value is not None:
            assert decode_stored_event(poison.value) is None, poison.kind


def test_every_field_at_every_bound_gets_the_models_answer() -> None:
    fast = fallbacks = 0
    for where, raw in mutations([json.loads(raw) for raw in EVENTS]):
        _assert_same(raw)
        accepted = decode_stored_event(raw) is not None
        if accepted:
            fast += 1
        elif _models_accept(raw):
            # The structs are stricter only about spellings ingest never writes.
            assert where in STRICTER, where
            fallbacks += 1
    assert fast > 1_000 and fallbacks > 0, (fast, fallbacks)
