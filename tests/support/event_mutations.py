"""Every field of an event set to every value near its bounds, removed, beside an unknown one:
the corpus that holds the msgspec structs to the pydantic models (the join's read and ingest's
judging)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from schemas import bounds as b
from schemas.events import EVENT_TYPES

__all__ = ["STRICTER", "TIMESTAMPS", "mutations"]

TIMESTAMPS = ("occurred_at", "sent_at", "received_at", "event_time")
# What the structs are stricter about than the models (schemas/event_structs.py): an event
# the models accept with one of these changed may be read by the models instead.
STRICTER = (*TIMESTAMPS, "event_id", "schema_version")


def _near(bound: float) -> list[float]:
    return [bound - 1, bound, bound + 1, bound - 0.5, bound + 0.5]


_NUMBERS: list[Any] = [
    0, 1, -1, 0.5, -0.0, 1.0, 2, 1e100, -1e100, 2**64, -(2**64), 10**400,
    *[value for bound in (b.MAX_DURATION_MS, b.TOKEN_ID_BOUND, b.MIN_LOGPROB, b.MAX_TEMPERATURE,
                          b.MIN_SEED, b.MAX_SEED, b.MAX_TURNS, b.MAX_LINES_CHANGED,
                          b.MAX_PARALLEL_GROUP, b.MAX_HORIZON_S, b.MAX_CLOCK_SKEW_MS,
                          -b.MAX_CLOCK_SKEW_MS, b.MAX_COMPLETION_TOKENS)
      for value in (*_near(bound), int(bound) - 1, int(bound), int(bound) + 1)],
]
_STRINGS: list[Any] = [
    "", "x", "a\n", "\x00", "\x07 bell", "tab\tand\nline", "ok-name_1", "ok name", "é" * 3,
    *["x" * n for bound in (b.IDENTIFIER_MAX_CHARS, b.USER_MAX_CHARS, b.TOOL_NAME_MAX_CHARS,
                            b.PATH_MAX_CHARS) for n in (bound, bound + 1)],
    "é" * (b.PROMPT_TEXT_MAX_BYTES // 2), "é" * (b.PROMPT_TEXT_MAX_BYTES // 2 + 1),
]
_OTHERS: list[Any] = [None, True, False, [], [1], [-0.5], ["x"], {}, {"a": 1}]
_VALUES = [*_NUMBERS, *_STRINGS, *_OTHERS]
_INSTANTS = [
    "2026-03-01T00:00:00Z", "2026-03-01T00:00:00.123456+05:30", "2026-03-01T00:00:00.1234567Z",
    "1999-12-31T23:59:59.9999995Z", "1999-12-31T23:59:59.999999Z", "2000-01-01T00:00:00Z",
    "2000-01-01T00:30:00+01:00", "2099-12-31T23:59:59.999999Z", "2099-12-31T23:59:59.9999999Z",
    "2100-01-01T00:00:00Z", "2099-12-31T23:30:00-01:00", "2026-03-01 00:00:00Z",
    "2026-03-01t00:00:00z", "2026-03-01T00:00Z", "2026-03-01T00:00:00", "2026-02-30T00:00:00Z",
    "2026-03-01T24:00:00Z", "2026-03-01T00:00:60Z", "2026-03-01T00:00:00+24:00",
    "2026-03-01T00:00:00+23:59", "2026-W09-1T00:00:00Z", "\u0662\u0660\u0662\u0666-03-01T00:00:00Z",
    "2026-03-01T00:00:00.Z", "2026-03-01T00:00:00Z\n", "20260301T000000Z", 1_772_323_200,
    "2026-03-01T00:00:00+0530", "2026-03-01T00:00:00,5Z", "2026-03-01T00:00:00 +05:30",
    "2000-01-01T00:00:00.0000001Z", "2000-01-01T00:00:00.000001Z", "1999-12-31T23:59:59.999999999Z",
    "2026-03-01T00:00:00.000000Z", "2026-03-01T00:00:00.100000Z", "2026-03-01T00:00:00+00:00",
    "2026-03-01T00:00:00.000001-00:00",
]
_IDS = ["0195a0b1-7c3e-7a9b-8f2d-8b2a1e4f0a11", "0195A0B17C3E7A9B8F2D8B2A1E4F0A11",
        "{0195a0b1-7c3e-7a9b-8f2d-8b2a1e4f0a11}", "urn:uuid:0195a0b1-7c3e-7a9b-8f2d-8b2a1e4f0a11",
        "0195a0b1-7c3e-4a9b-8f2d-8b2a1e4f0a11", "0195a0b1-7c3e-7a9b-cf2d-8b2a1e4f0a11", "x"]


def _fullest_of_each_type(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One event of each type, the one with the most fields to change."""
    return [max((e for e in events if e["type"] == kind), key=lambda e: len(list(_leaves(e))))
            for kind in EVENT_TYPES]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield path + (key,)
            yield from _leaves(inner, path + (key,))
    elif isinstance(value, list) and value:
        yield from _leaves(value[0], path + (0,))


def _set(event: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(event))
    target = copy
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return copy


def mutations(events: list[dict[str, Any]]) -> Iterator[tuple[str, bytes]]:
    """(what was changed, the record), from the fullest event of each type in ``events``:
    each field set to each value, removed, an unknown field beside it, a repeated key."""
    for event in _fullest_of_each_type(events):
        for path in _leaves(event):
            where = ".".join(map(str, path))
            values = _INSTANTS if path[-1] in TIMESTAMPS else _IDS if path == ("event_id",) \
                else _VALUES
            for value in values:
                yield where, json.dumps(_set(event, path, value)).encode()
            parent = _set(event, path, None)
            target = parent
            for part in path[:-1]:
                target = target[part]
            if isinstance(target, dict):
                del target[path[-1]]
                yield f"{where} removed", json.dumps(parent).encode()
                target[path[-1]] = None
                target["unknown_field"] = 1
                yield f"{where}: an unknown field", json.dumps(parent).encode()
        raw = json.dumps(event).encode()
        yield "1e999 latency", raw.replace(b'"latency_ms": ', b'"latency_ms": 1e999, "x": ')
        yield "a repeated key", raw[:-1] + b', "arm": "repeated"}'
        yield "a repeated type", raw[:-1] + b', "type": "followup.sent"}'
        yield "text after the object", raw + b" {}"
        yield "a byte-order mark", b"\xef\xbb\xbf" + raw
        tokens = event["payload"].get("completion_token_ids")
        if tokens is not None:
            for size in (b.MAX_COMPLETION_TOKENS, b.MAX_COMPLETION_TOKENS + 1):
                longer = _set(_set(event, ("payload", "completion_token_ids"), [1] * size),
                              ("payload", "behaviour_logprobs"), [-0.5] * size)
                yield f"{size} completion tokens", json.dumps(longer).encode()
            yield "one logprob short", json.dumps(_set(event, ("payload", "behaviour_logprobs"),
                                                       [-0.5] * (len(tokens) - 1))).encode()
