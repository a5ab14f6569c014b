"""Every field of every event type is bounded: finite numbers in range, capped strings and
arrays, timestamps in a sanity range; the largest valid event fits the event and record caps."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.samples import sample_trajectory
from schemas import bounds as b
from schemas.events import (
    SCHEMA_VERSION,
    CompletionServed,
    CompletionServedPayload,
    EventAdapter,
    SamplingParams,
    first_error,
    parse_event,
    with_ingest_fields,
)
from schemas.ids import uuid7

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# The broker's default message.max.bytes (1 MiB + 12): one stored envelope must fit a record.
BROKER_RECORD_BYTES = 1_048_588
EVENT_CAP_BYTES = 1 << 20


def _by_type() -> dict[str, dict[str, Any]]:
    events = [json.loads(EventAdapter.dump_json(e)) for e in sample_trajectory("t", NOW)]
    return {e["type"]: e for e in events}


def _error_of_text(text: str) -> tuple[str, str]:
    with pytest.raises(ValidationError) as info:
        parse_event(text)
    return first_error(info.value)


def _error_of(event_type: str, path: str, value: Any) -> tuple[str, str]:
    event = _by_type()[event_type]
    *parents, name = path.split(".")
    target = event
    for part in parents:
        target = target[part]
    target[name] = value
    return _error_of_text(json.dumps(event))


@pytest.mark.parametrize("literal", ["1e999", "-1e999", "NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused(literal: str) -> None:
    text = json.dumps(_by_type()["completion.served"]).replace(
        '"latency_ms": 40.0', f'"latency_ms": {literal}')
    assert literal in text
    field, reason = _error_of_text(text)
    assert field == "payload.latency_ms"


@pytest.mark.parametrize("event_type, path, value", [
    ("completion.served", "payload.latency_ms", b.MAX_DURATION_MS * 1.01),
    ("completion.served", "payload.ttft_ms", -1.0),
    ("completion.served", "payload.prompt_token_ids", [1, b.TOKEN_ID_BOUND]),
    ("completion.served", "payload.prompt_token_ids", [-1]),
    ("completion.served", "payload.prompt_token_ids", [1] * (b.MAX_PROMPT_TOKENS + 1)),
    ("completion.served", "payload.behaviour_logprobs", [-0.5, b.MIN_LOGPROB * 2]),
    ("completion.served", "payload.sampling", {"temperature": b.MAX_TEMPERATURE + 1}),
    ("completion.served", "payload.sampling", {"top_k": b.TOKEN_ID_BOUND + 1}),
    ("completion.served", "payload.sampling", {"max_tokens": b.MAX_COMPLETION_TOKENS + 1}),
    ("completion.served", "payload.sampling", {"seed": b.MAX_SEED + 1}),
    ("completion.served", "payload.sampling", {"seed": b.MIN_SEED - 1}),
    ("completion.served", "payload.prompt_text", "é" * (b.PROMPT_TEXT_MAX_BYTES // 2 + 1)),
    ("completion.served", "payload.completion_text", "x" * (b.COMPLETION_TEXT_MAX_BYTES + 1)),
    ("completion.served", "payload.completion_text", "a NUL \x00 in text"),
    ("completion.served", "payload.tools_offered", ["read"] * (b.MAX_TOOLS_OFFERED + 1)),
    ("completion.served", "payload.tools_offered", ["not a name"]),
    ("tool.called", "payload.duration_ms", 1e300),
    ("tool.called", "payload.parallel_group", b.MAX_PARALLEL_GROUP + 1),
    ("tool.called", "payload.tool", "x" * (b.TOOL_NAME_MAX_CHARS + 1)),
    ("edit.proposed", "payload.lines_added", b.MAX_LINES_CHANGED + 1),
    ("edit.proposed", "payload.path", "p" * (b.PATH_MAX_CHARS + 1)),
    ("edit.persistence", "payload.horizon_s", b.MAX_HORIZON_S + 1),
    ("clarification.asked", "payload.request_ambiguity", 1.5),
    ("trajectory.ended", "payload.turns", 10 ** 400),  # a 401-digit integer
    ("trajectory.ended", "payload.turns", b.MAX_TURNS + 1),
    ("edit.decided", "user", "u" * (b.USER_MAX_CHARS + 1)),
    ("edit.decided", "trajectory_id", "t" * (b.IDENTIFIER_MAX_CHARS + 1)),
    ("edit.decided", "clock_skew_ms", b.MAX_CLOCK_SKEW_MS + 1),
])
def test_each_number_string_and_array_is_bounded(event_type: str, path: str, value: Any) -> None:
    field, _ = _error_of(event_type, path, value)
    assert field.startswith(path), field


@pytest.mark.parametrize("name", ["occurred_at", "sent_at", "received_at", "event_time"])
@pytest.mark.parametrize("when", ["0001-01-01T00:00:00Z", "1999-12-31T23:59:59Z",
                                  "2100-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
                                  "0001-01-01T00:00:00+14:00"])
def test_timestamps_outside_the_sanity_range_are_refused(name: str, when: str) -> None:
    field, reason = _error_of("followup.sent", name, when)
    assert field == name
    assert ("greater than or equal to 2000-01-01T00:00:00Z" in reason
            or "less than 2100-01-01T00:00:00Z" in reason), reason


def test_values_at_the_bounds_are_accepted() -> None:
    event = _by_type()["completion.served"]
    payload = event["payload"]
    payload |= {"latency_ms": b.MAX_DURATION_MS, "prompt_token_ids": [0, b.TOKEN_ID_BOUND - 1],
                "completion_token_ids": [b.TOKEN_ID_BOUND - 1],
                "behaviour_logprobs": [b.MIN_LOGPROB],
                "sampling": {"temperature": b.MAX_TEMPERATURE, "top_k": b.TOKEN_ID_BOUND,
                             "max_tokens": b.MAX_COMPLETION_TOKENS, "seed": b.MIN_SEED}}
    parse_event(json.dumps(event))


def test_clients_of_either_version_are_read_and_stored_as_the_current_one() -> None:
    event = _by_type()["edit.decided"]
    for version in (1, 2, 3, 4):
        parsed = parse_event(json.dumps(event | {"schema_version": version}))
        assert parsed.schema_version == version
        stored = with_ingest_fields(parsed, org_id="o", user="u", received_at=NOW,
                                    event_time=NOW, clock_skew_ms=0, producer="ingest:k")
        assert stored.schema_version == SCHEMA_VERSION == 4 and stored.producer == "ingest:k"
    assert _error_of("edit.decided", "schema_version", 5)[0] == "schema_version"


def _longest_float_below_zero() -> float:
    # 24 characters is the longest repr a float has ("-2.2250738585072014e-308"); inside
    # [MIN_LOGPROB, 0] the longest is a negative number with 17 significant digits and e-XXX.
    return -4.9406564584124654e-300


def test_the_largest_valid_event_fits_the_event_cap_and_a_broker_record() -> None:
    longest_id = "\u0001" * b.IDENTIFIER_MAX_CHARS  # escaped as \\u0001: 6 bytes a character
    payload = CompletionServedPayload(
        completion_id=longest_id, model=longest_id,
        prompt_token_ids=[b.TOKEN_ID_BOUND - 1] * b.MAX_PROMPT_TOKENS,
        completion_token_ids=[b.TOKEN_ID_BOUND - 1] * b.MAX_COMPLETION_TOKENS,
        behaviour_logprobs=[_longest_float_below_zero()] * b.MAX_COMPLETION_TOKENS,
        sampling=SamplingParams(temperature=1 / 3, top_p=1 / 3, top_k=b.TOKEN_ID_BOUND,
                                max_tokens=b.MAX_COMPLETION_TOKENS, seed=b.MIN_SEED),
        ttft_ms=1 / 3, latency_ms=1 / 3, finish_reason="length",
        # every byte of text one that JSON escapes (a quote), every tool name at its longest
        prompt_text='"' * b.PROMPT_TEXT_MAX_BYTES,
        completion_text="\n" * b.COMPLETION_TEXT_MAX_BYTES, text_truncated=True,
        tools_offered=["t" * 64] * b.MAX_TOOLS_OFFERED,
    )
    event = CompletionServed(
        event_id=uuid7(), trajectory_id=longest_id, session_id=longest_id,
        user="\u0001" * b.USER_MAX_CHARS, checkpoint_id=longest_id, arm=longest_id,
        occurred_at=NOW, sent_at=NOW, payload=payload,
    )
    stored = with_ingest_fields(event, org_id=longest_id, user="u_" + "f" * 32,
                                received_at=NOW, event_time=NOW,
                                clock_skew_ms=-b.MAX_CLOCK_SKEW_MS,
                                producer="ingest:" + "k" * (b.IDENTIFIER_MAX_CHARS - 7))
    sent, kept = EventAdapter.dump_json(event), EventAdapter.dump_json(stored)
    assert parse_event(kept) == stored
    assert len(sent) < EVENT_CAP_BYTES
    # Batch and record headers take well under 1 KiB; leave the broker 64 KiB of room.
    assert len(kept) < BROKER_RECORD_BYTES - (64 << 10), len(kept)


def _renderings(value: object) -> set[str]:
    """How the docs may write a bound: 86,400,000; 1 MiB; 30 days; 2000-01-01."""
    if isinstance(value, datetime):
        return {f"{value:%Y-%m-%d}"}
    number = float(value)  # type: ignore[arg-type]
    if not number.is_integer():
        return {str(value)}
    whole = int(number)
    found = {f"{whole:,}"}
    if whole and whole % (1 << 20) == 0:
        found.add(f"{whole >> 20} MiB")
    if whole and whole % 86_400 == 0:
        days = whole // 86_400
        found.add(f"{days} day{'s' if days != 1 else ''}")
    return found


def test_the_docs_state_every_bound_with_the_same_number() -> None:
    from dataclasses import fields

    from serving.ingest.config import IngestConfig
    from serving.ingest.limits import Caps

    page = (Path(__file__).parents[2] / "docs" / "ingest-and-sdks.md").read_text()
    section = page.split("\n## Bad input\n", 1)[1]
    table = next(block for block in section.split("\n\n") if block.startswith("| what |"))
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    settings = {f"_{f.name.upper()}": f.default for f in fields(Caps)}
    settings |= {f"_{f.name.upper()}": f.default for f in fields(IngestConfig)
                 if f.name.startswith("timestamp_")}
    named: set[str] = set()
    for _, bound, names, *_ in rows:
        for name in re.findall(r"`([^`]+)`", names):
            if name == "allow_inf_nan=False":
                continue
            value = getattr(b, name) if name in b.__all__ else settings[name]
            assert any(text in bound.replace("−", "-") for text in _renderings(value)), \
                (name, bound)
            named.add(name)
    bounds = {name for name in b.__all__ if not callable(getattr(b, name))}
    assert bounds <= named  # every bound of the schema is documented


@pytest.mark.parametrize("org", ["acme", "org-1", "a.b_c", "A" * 64])
def test_org_ids_that_need_no_escaping_anywhere_are_org_ids(org: str) -> None:
    assert b.org_id_problem(org) is None


@pytest.mark.parametrize("org", ["", "-acme", ".", "..", "a/b", "a|b", "a b", "é", "*",
                                 "A" * 65, "org\n"])
def test_anything_else_is_not_an_org_id(org: str) -> None:
    assert b.org_id_problem(org) is not None
