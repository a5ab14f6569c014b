"""The ingest service's pure parts: body decoding, caps, verdicts, rate limits, dedupe, keys."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from functools import partial

import pytest
import zstandard

from harness.samples import sample_trajectory
from schemas.events import EventAdapter
from serving.ingest.body import decompress, split_events
from serving.ingest.errors import BadBody, PayloadTooLarge, UnsupportedEncoding
from serving.ingest.keys import ApiKey, KeyRing, hash_key, pseudonymise
from serving.ingest.limits import Caps, TokenBucket
from serving.ingest.verdicts import (
    Accepted,
    EventRules,
    Rejected,
    judge_event,
    judge_events,
    response_status,
)

CAPS = Caps(max_event_bytes=2000, max_batch_bytes=10_000, max_batch_events=3)
KEY = ApiKey("k", hash_key("secret"), "org-a", frozenset({"*"}))
EDITS_ONLY = ApiKey("e", hash_key("other"), "org-a", frozenset({"edit.decided"}))
PSEUDONYM = partial(pseudonymise, b"0123456789abcdef")
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
RULES = EventRules(max_event_bytes=CAPS.max_event_bytes)


def _event_bytes(index: int = 1) -> bytes:
    return EventAdapter.dump_json(sample_trajectory("traj-1", start=NOW)[index])


# ------------------------------------------------------------------------------- body


def test_decompress_gzip_zstd_and_identity_give_the_same_bytes() -> None:
    data = b'[{"a": 1}]'
    assert decompress(data, None, CAPS) == data
    assert decompress(gzip.compress(data), "gzip", CAPS) == data
    assert decompress(zstandard.ZstdCompressor().compress(data), "zstd", CAPS) == data


def test_caps_are_measured_after_decompression() -> None:
    bomb = gzip.compress(b" " * 50_000)  # ~100 bytes on the wire
    assert len(bomb) < 1000
    no_ratio_cap = replace(CAPS, max_compression_ratio=1 << 30)
    with pytest.raises(PayloadTooLarge, match="10000 byte batch cap"):
        decompress(bomb, "gzip", no_ratio_cap)
    with pytest.raises(PayloadTooLarge, match="10000 byte batch cap"):
        decompress(zstandard.ZstdCompressor().compress(b" " * 50_000), "zstd", no_ratio_cap)


def test_the_compression_ratio_is_capped_above_one_event() -> None:
    caps = Caps(max_event_bytes=1000, max_batch_bytes=1 << 20, max_compression_ratio=10)
    bomb = b" " * 200_000
    for encoding, packed in (("gzip", gzip.compress(bomb)),
                             ("zstd", zstandard.ZstdCompressor().compress(bomb))):
        with pytest.raises(PayloadTooLarge, match="over 10 times its"):
            decompress(packed, encoding, caps)
    # However well one event compresses, a body may always grow to one event's size.
    one_event = b"0" * 900
    assert decompress(gzip.compress(one_event), "gzip", caps) == one_event


def test_broken_compression_and_unknown_encoding_are_refused() -> None:
    with pytest.raises(BadBody):
        decompress(b"not gzip", "gzip", CAPS)
    with pytest.raises(BadBody):
        decompress(gzip.compress(b"[1, 2, 3]")[:-6], "gzip", CAPS)  # truncated
    with pytest.raises(UnsupportedEncoding):
        decompress(b"[]", "br", CAPS)


def test_split_keeps_each_array_element_exact_bytes() -> None:
    body = b'[ {"a": 1} ,\n{"b": [1, {"c": "]"}]}]'
    assert split_events(body, CAPS) == [b'{"a": 1}', b'{"b": [1, {"c": "]"}]}']
    assert split_events(b"[]", CAPS) == []


def test_split_ndjson_skips_blank_lines() -> None:
    assert split_events(b'{"a":1}\n\n{"b":2}\n', CAPS) == [b'{"a":1}', b'{"b":2}']


@pytest.mark.parametrize("body", [b"", b"   ", b"42", b'[{"a": 1}', b'[{"a": 1} {"b": 2}]',
                                  b'[{"a": 1}] trailing', b"\xff\xfe["])
def test_unparseable_bodies_are_bad(body: bytes) -> None:
    with pytest.raises(BadBody):
        split_events(body, CAPS)


def test_too_many_events_is_413_in_both_formats() -> None:
    with pytest.raises(PayloadTooLarge):
        split_events(b"[" + b",".join([b"{}"] * 4) + b"]", CAPS)
    with pytest.raises(PayloadTooLarge):
        split_events(b"\n".join([b"{}"] * 4), CAPS)


# --------------------------------------------------------------------------- verdicts


def _judge(raw: bytes, key: ApiKey = KEY, index: int = 0) -> Accepted | Rejected:
    return judge_event(index, raw, key, NOW, PSEUDONYM, RULES)


def test_valid_event_gets_org_from_key_pseudonymised_user_and_server_times() -> None:
    original = json.loads(_event_bytes())
    original["org_id"] = "org-forged"
    original["sent_at"] = (NOW + timedelta(hours=1)).isoformat()  # client clock 1 h fast
    original["occurred_at"] = (NOW + timedelta(hours=1, seconds=-10)).isoformat()
    verdict = _judge(json.dumps(original).encode())
    assert isinstance(verdict, Accepted)
    stored = EventAdapter.validate_json(verdict.stored)
    assert stored.org_id == "org-a"
    assert stored.user == PSEUDONYM("org-a", "user-1") != "user-1"
    assert stored.received_at == NOW
    assert stored.event_time == NOW - timedelta(seconds=10)
    assert stored.clock_skew_ms == -3_600_000


def test_future_event_time_is_clamped() -> None:
    original = json.loads(_event_bytes())
    original["occurred_at"] = (NOW + timedelta(hours=2)).isoformat()
    original["sent_at"] = NOW.isoformat()
    verdict = _judge(json.dumps(original).encode())
    assert isinstance(verdict, Accepted)
    assert EventAdapter.validate_json(verdict.stored).event_time == NOW + timedelta(seconds=1)


def test_schema_violation_names_the_field_and_keeps_original_bytes() -> None:
    original = json.loads(EventAdapter.dump_json(sample_trajectory("t", start=NOW)[-2]))
    original["payload"]["turns"] = -1  # trajectory.ended
    raw = json.dumps(original).encode()
    verdict = _judge(raw, index=4)
    assert isinstance(verdict, Rejected)
    assert (verdict.index, verdict.kind, verdict.field) == (4, "schema_violation", "payload.turns")
    assert verdict.reason.startswith("payload.turns:")
    assert verdict.event_id == original["event_id"]
    assert verdict.original == raw


@pytest.mark.parametrize(("field", "value"), [
    ("trajectory_id", "traj\x00-1"), ("session_id", "s\n1"), ("user", "u\x1b[31m"),
    ("checkpoint_id", "c\x7f"), ("arm", "a\x85"), ("payload.tool", "read\tfile")])
def test_ids_and_names_with_a_control_character_are_rejected_naming_the_field(
        field: str, value: str) -> None:
    original = json.loads(_event_bytes())  # tool.called
    target = original["payload"] if field.startswith("payload.") else original
    target[field.removeprefix("payload.")] = value
    verdict = _judge(json.dumps(original).encode())
    assert isinstance(verdict, Rejected)
    assert (verdict.kind, verdict.field) == ("schema_violation", field)
    assert verdict.reason.startswith(f"{field}: contains the control character U+")
    assert verdict.event_id == original["event_id"]
    printable = dict(json.loads(_event_bytes()), trajectory_id="traj-\u00e9\u4e2d")  # fine
    assert isinstance(_judge(json.dumps(printable).encode()), Accepted)


def test_missing_event_id_is_rejected() -> None:
    original = json.loads(_event_bytes())
    del original["event_id"]
    verdict = _judge(json.dumps(original).encode())
    assert isinstance(verdict, Rejected) and verdict.field == "event_id"
    assert verdict.event_id is None


def test_non_uuid7_event_id_is_rejected() -> None:
    original = json.loads(_event_bytes())
    original["event_id"] = "6ba7b810-9dad-41d1-80b4-00c04fd430c8"  # version 4
    verdict = _judge(json.dumps(original).encode())
    assert isinstance(verdict, Rejected) and verdict.field == "event_id"


def test_key_may_not_send_other_types() -> None:
    verdict = _judge(_event_bytes(), key=EDITS_ONLY)  # a tool.called event
    assert isinstance(verdict, Rejected)
    assert (verdict.kind, verdict.field) == ("type_not_allowed", "type")


def test_a_client_key_may_not_send_completion_served() -> None:
    verdict = _judge(_event_bytes(0))  # KEY's "*" is every type a client sends
    assert isinstance(verdict, Rejected)
    assert (verdict.kind, verdict.field) == ("type_not_allowed", "type")
    assert "'completion.served'" in verdict.reason
    serving = ApiKey("s", hash_key("s"), "org-a", frozenset({"completion.served"}))
    assert isinstance(_judge(_event_bytes(0), key=serving), Accepted)


def test_oversize_event_is_rejected_alone() -> None:
    raw = b'{"event_id": "' + b"x" * 3000 + b'"}'
    verdict = _judge(raw)
    assert isinstance(verdict, Rejected) and verdict.kind == "event_too_large"


def test_a_batch_is_judged_as_each_event_alone() -> None:
    events = [json.loads(e) for e in map(EventAdapter.dump_json, sample_trajectory("t", NOW))]
    events[2]["payload"]["tool"] = ""  # schema violation
    events[3]["sent_at"] = (NOW + timedelta(days=2)).isoformat()  # out of the window
    raws = [json.dumps(e).encode() for e in events] + [b'{"event_id": 1, "event_id": 2}']
    batch = judge_events(raws, KEY, NOW, PSEUDONYM, RULES)
    assert batch == [judge_event(i, raw, KEY, NOW, PSEUDONYM, RULES) for i, raw in enumerate(raws)]
    assert [v.kind for v in batch if isinstance(v, Rejected)] == [
        "type_not_allowed", "schema_violation", "time_out_of_window", "malformed_json"]


def test_times_in_any_offset_are_judged_by_their_instant_and_named_as_written() -> None:
    east = timezone(timedelta(hours=14))
    event = json.loads(_event_bytes())
    event["occurred_at"] = (NOW - timedelta(seconds=10)).astimezone(east).isoformat()
    event["sent_at"] = (NOW + timedelta(hours=1)).astimezone(east).isoformat()
    verdict = _judge(json.dumps(event).encode())
    assert isinstance(verdict, Accepted)
    stored = EventAdapter.validate_json(verdict.stored)
    assert stored.event_time == NOW - timedelta(hours=1, seconds=10)
    assert stored.clock_skew_ms == -3_600_000
    event["occurred_at"] = (NOW - timedelta(days=30, seconds=1)).astimezone(east).isoformat()
    verdict = _judge(json.dumps(event).encode())
    assert isinstance(verdict, Rejected) and verdict.field == "occurred_at"
    assert verdict.reason.startswith(f"occurred_at: {event['occurred_at']} is more than 30 days")


def test_response_status() -> None:
    forbidden = Rejected(0, None, "type_not_allowed", "type", "no", b"")
    invalid = Rejected(1, None, "schema_violation", "x", "no", b"")
    assert response_status(3, []) == 200
    assert response_status(2, [invalid]) == 207
    assert response_status(0, [invalid]) == 207
    assert response_status(0, [forbidden, forbidden]) == 403
    assert response_status(1, [forbidden]) == 207
    assert response_status(0, [forbidden, invalid]) == 207


# ------------------------------------------------------------------- rate and dedupe


def test_token_bucket_admits_burst_then_paces_at_rate() -> None:
    bucket = TokenBucket(rate_per_s=10, burst=20, now_s=0.0)
    assert bucket.take(20, now_s=0.0) == 0.0
    assert bucket.take(5, now_s=0.0) == pytest.approx(0.5)  # 5 tokens at 10/s
    assert bucket.take(5, now_s=0.5) == 0.0
    assert bucket.take(100, now_s=0.5) == pytest.approx(2.0)  # charged as a full bucket (20)
    assert bucket.take(100, now_s=2.5) == 0.0


# ---------------------------------------------------------------------------- keys


def test_keyring_finds_keys_by_hash_only() -> None:
    ring = KeyRing.from_json(json.dumps([
        {"key_sha256": hash_key("k1"), "org_id": "acme", "event_types": ["tool.called"]},
    ]), "inline")
    found = ring.lookup("k1")
    assert found is not None and found.org_id == "acme"
    assert found.allows("tool.called") and not found.allows("edit.decided")
    assert ring.lookup("k2") is None and ring.lookup(None) is None


@pytest.mark.parametrize("entry, words", [
    ({"org_id": "a"}, "key_sha256"),
    ({"key_sha256": "ab", "org_id": "a"}, "64 hex"),
    ({"key_sha256": "a" * 64, "org_id": "a", "event_types": ["nope"]}, "unknown types"),
])
def test_bad_key_entries_say_what_to_fix(entry: dict[str, object], words: str) -> None:
    from serving.ingest.errors import KeyConfigError

    with pytest.raises(KeyConfigError, match=words):
        KeyRing.from_json(json.dumps([entry]), "inline")


def test_pseudonyms_are_stable_keyed_and_per_org() -> None:
    assert pseudonymise(b"s" * 16, "a", "bob") == pseudonymise(b"s" * 16, "a", "bob")
    assert pseudonymise(b"s" * 16, "a", "bob") != pseudonymise(b"t" * 16, "a", "bob")
    assert pseudonymise(b"s" * 16, "a", "bob") != pseudonymise(b"s" * 16, "b", "bob")


# -------------------------------------------------------------------------- config


def test_config_from_environment() -> None:
    from serving.ingest.config import load_ingest_config

    keys = json.dumps([{"key_sha256": hash_key("k"), "org_id": "acme"}])
    config = load_ingest_config({"REWARDSTREAM_INGEST_KEYS": keys,
                                 "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": "s" * 16,
                                 "REWARDSTREAM_INGEST_MAX_BATCH_EVENTS": "100"})
    assert config.caps.max_batch_events == 100 and config.caps.max_event_bytes == 1 << 20
    assert config.dedupe_window_s == 86_400 and len(config.keys) == 1


@pytest.mark.parametrize("env, words", [
    ({"REWARDSTREAM_INGEST_KEYS": "[]"}, "PSEUDONYM_SECRET"),
    ({"REWARDSTREAM_INGEST_PSEUDONYM_SECRET": "s" * 16}, "no API keys"),
    ({"REWARDSTREAM_INGEST_PSEUDONYM_SECRET": "s" * 16, "REWARDSTREAM_INGEST_KEYS": "[]",
      "REWARDSTREAM_INGEST_ACK_TIMEOUT_S": "soon"}, "ACK_TIMEOUT_S"),
])
def test_config_errors_name_the_variable(env: dict[str, str], words: str) -> None:
    from serving.ingest.config import load_ingest_config
    from serving.ingest.errors import IngestConfigError, KeyConfigError

    with pytest.raises((IngestConfigError, KeyConfigError), match=words):
        load_ingest_config(env)
