"""The ingest service's pure parts against hostile input: bodies refused while read, arrays
that cannot be split safely, JSON structure per event, the timestamp window, clipped reasons,
and the per-event last resort."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from harness.samples import sample_trajectory
from schemas.events import SCHEMA_VERSION, EventAdapter
from serving.ingest.body import split_events
from serving.ingest.config import load_ingest_config
from serving.ingest.errors import BadBody, IngestConfigError, PayloadTooLarge
from serving.ingest.keys import ApiKey, hash_key, pseudonymise
from serving.ingest.limits import Caps
from serving.ingest.verdicts import Accepted, EventRules, Rejected, judge_event
from serving.request_body import BodyTooLarge, read_capped

KEY = ApiKey("k", hash_key("secret"), "org-a", frozenset({"*"}))
PSEUDONYM = partial(pseudonymise, b"0123456789abcdef")
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
RULES = EventRules()


def _event(index: int = 4, **changes: object) -> dict[str, object]:
    event = json.loads(EventAdapter.dump_json(sample_trajectory("traj-1", start=NOW)[index]))
    return event | changes


def _judge(raw: bytes, pseudonym: object = PSEUDONYM) -> Accepted | Rejected:
    return judge_event(0, raw, KEY, NOW, pseudonym, RULES)  # type: ignore[arg-type]


# -------------------------------------------------------------------------- reading


class _Chunks:
    """A request stream that counts how much of it was read."""

    def __init__(self, chunks: int, size: int) -> None:
        self.left, self.size, self.read = chunks, size, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.left:
            self.left -= 1
            self.read += 1
            yield b"x" * self.size


def test_a_declared_oversize_body_is_refused_before_reading() -> None:
    chunks = _Chunks(100, 1000)
    with pytest.raises(BodyTooLarge, match="50000 bytes, over the 10000 byte cap"):
        asyncio.run(read_capped(chunks, "50000", 10_000))
    assert chunks.read == 0


def test_an_undeclared_oversize_body_is_refused_once_past_the_cap() -> None:
    chunks = _Chunks(100, 1000)
    with pytest.raises(BodyTooLarge, match="over the 10000 byte cap"):
        asyncio.run(read_capped(chunks, None, 10_000))
    assert chunks.read == 11  # not the 100 the client would have sent
    assert asyncio.run(read_capped(_Chunks(10, 1000), "10000", 10_000)) == b"x" * 10_000


# ------------------------------------------------------------------------ splitting


@pytest.mark.parametrize("body, words", [
    (b'[{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]", "deeper than 32 levels"),
    (b"[" * 100_000 + b"]" * 100_000, "deeper than 32 levels"),
    (b'[{"a": ' + b"1" * 5000 + b"}]", "malformed at element 0"),
    (b'[{"a": "\xff"}]', "not UTF-8"),
])
def test_arrays_that_cannot_be_split_safely_are_bad_bodies(body: bytes, words: str) -> None:
    with pytest.raises(BadBody, match=words):
        split_events(body, Caps())


def test_ndjson_lines_are_split_without_parsing_so_each_is_judged_alone() -> None:
    lines = [b'{"a": "\xff"}', b'{"b": ' + b"[" * 1000 + b"}", b'{"c": 1}']
    body = b"\n \r\n".join(lines) + b"\n" * 100_000
    assert split_events(body, Caps()) == lines


def test_a_flood_of_tiny_lines_stops_at_the_event_cap() -> None:
    with pytest.raises(PayloadTooLarge, match="over 5000 events"):
        split_events(b"{}\n" * 3_000_000, Caps())


def test_whitespace_between_array_elements_is_skipped() -> None:
    body = b"[" + b" " * 1_000_000 + b'{"a": 1}' + b"\n" * 1_000_000 + b"]" + b" " * 100
    assert split_events(body, Caps()) == [b'{"a": 1}']


# ------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize("raw, field, words", [
    (json.dumps(_event()).replace('"type"', '"type": "edit.decided", "type"', 1).encode(),
     "type", "appears twice"),
    (json.dumps(_event()).replace('"event_id"', '"event_id": "x", "event\\u005fid"', 1).encode(),
     "event_id", "appears twice"),
    (json.dumps(_event(payload={"edit_id": "e0", "decision": "accepted",
                                "x": json.loads("[" * 32 + "1" + "]" * 32)})).encode(),
     "(event)", "deeper than 32 levels"),
    (json.dumps(_event(user="caf\u00e9"), ensure_ascii=False).encode().replace(b"\xc3", b""),
     "(event)", "not UTF-8"),
])
def test_json_structure_problems_are_rejected_alone(raw: bytes, field: str, words: str) -> None:
    verdict = _judge(raw)
    assert isinstance(verdict, Rejected)
    assert (verdict.kind, verdict.field) == ("malformed_json", field)
    assert words in verdict.reason and verdict.original == raw


@pytest.mark.parametrize("field, when, words", [
    ("occurred_at", NOW - timedelta(days=31), "more than 30 days before the server clock"),
    ("sent_at", NOW - timedelta(days=30, seconds=1), "more than 30 days before"),
    ("occurred_at", NOW + timedelta(hours=25), "more than 1 day after the server clock"),
    ("sent_at", NOW + timedelta(days=3), "more than 1 day after"),
])
def test_timestamps_outside_the_window_are_rejected_naming_the_field(
    field: str, when: datetime, words: str,
) -> None:
    event = _event()
    event["occurred_at"] = event["sent_at"] = NOW.isoformat()
    event[field] = when.isoformat()
    verdict = _judge(json.dumps(event).encode())
    assert isinstance(verdict, Rejected)
    assert (verdict.kind, verdict.field) == ("time_out_of_window", field)
    assert verdict.reason.startswith(f"{field}: ") and words in verdict.reason
    assert verdict.event_id == event["event_id"]


def test_timestamps_at_the_edges_of_the_window_are_accepted() -> None:
    event = _event()
    event["occurred_at"] = (NOW - timedelta(days=30)).isoformat()  # waited 31 days in a queue
    event["sent_at"] = (NOW + timedelta(days=1)).isoformat()  # on a clock a day fast
    verdict = _judge(json.dumps(event).encode())
    assert isinstance(verdict, Accepted)
    stored = EventAdapter.validate_json(verdict.stored)
    assert stored.event_time == NOW - timedelta(days=31) and stored.schema_version == SCHEMA_VERSION
    assert stored.producer == "ingest:k"


def test_a_huge_field_name_is_clipped_in_the_answer_and_the_dead_letter_headers() -> None:
    raw = json.dumps(_event(**{"k" * 900_000: 1})).encode()
    verdict = _judge(raw)
    assert isinstance(verdict, Rejected) and verdict.kind == "schema_violation"
    assert verdict.field is not None and len(verdict.field) <= 200
    assert len(verdict.reason) <= 1000 and verdict.original == raw


def test_an_unexpected_error_costs_one_event_not_the_batch() -> None:
    def broken_pseudonym(org: str, user: str) -> str:
        raise KeyError(user)

    raw = json.dumps(_event()).encode()
    verdict = _judge(raw, broken_pseudonym)
    assert isinstance(verdict, Rejected)
    assert verdict.kind == "unprocessable" and "KeyError" in verdict.reason
    assert verdict.original == raw and verdict.event_id == json.loads(raw)["event_id"]


# --------------------------------------------------------------------------- config


def _env(**extra: str) -> dict[str, str]:
    keys = json.dumps([{"key_sha256": hash_key("k"), "org_id": "acme"}])
    return {"REWARDSTREAM_INGEST_KEYS": keys, "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": "s" * 16,
            **{f"REWARDSTREAM_INGEST_{k}": v for k, v in extra.items()}}


def test_the_new_bounds_come_from_the_environment() -> None:
    config = load_ingest_config(_env(TIMESTAMP_MAX_AGE_S="3600", TIMESTAMP_MAX_AHEAD_S="60",
                                     MAX_JSON_DEPTH="8", MAX_COMPRESSION_RATIO="20"))
    assert (config.timestamp_max_age_s, config.timestamp_max_ahead_s) == (3600, 60)
    assert (config.caps.max_json_depth, config.caps.max_compression_ratio) == (8, 20)
    defaults = load_ingest_config(_env())
    assert defaults.timestamp_max_age_s == 30 * 86_400 and defaults.caps.max_json_depth == 32


@pytest.mark.parametrize("name, value", [("TIMESTAMP_MAX_AGE_S", str(400 * 86_400)),
                                         ("MAX_JSON_DEPTH", "500"), ("TIMESTAMP_MAX_AHEAD_S", "0")])
def test_out_of_range_bounds_are_refused_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(IngestConfigError, match=name):
        load_ingest_config(_env(**{name: value}))
