"""Generators of hostile events for the ingest API, one per class of bad input, each event with
the verdict it must get: accepted, or rejected with a kind and the field at fault.

Every event has a fresh UUIDv7, so "accepted" means appended exactly once. Values that JSON
libraries will not write (``NaN``, ``1e999``, a 5,000-digit integer, invalid UTF-8) are put in
as raw text through a placeholder.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from harness.samples import sample_trajectory
from schemas.events import EventAdapter
from schemas.ids import uuid7

__all__ = ["EVENT_CLASSES", "Expect", "Hostile", "HostileEvents"]

_HOLE = "\u0000HOLE\u0000"

# Every field of every type, by the kind of value it holds.
PAYLOAD_FIELDS: dict[str, dict[str, str]] = {
    "completion.served": {
        "ttft_ms": "float", "latency_ms": "float", "prompt_token_ids.0": "token",
        "completion_token_ids.1": "token", "behaviour_logprobs.0": "logprob",
        "sampling.temperature": "float", "sampling.top_p": "fraction", "sampling.top_k": "int",
        "sampling.max_tokens": "int", "sampling.seed": "int", "completion_id": "str",
        "model": "str", "finish_reason": "enum"},
    "tool.called": {"duration_ms": "float", "parallel_group": "int", "tool": "str",
                    "call_id": "str", "valid": "bool", "error_kind": "enum"},
    "edit.proposed": {"lines_added": "int", "lines_removed": "int", "path": "str",
                      "edit_id": "str"},
    "edit.decided": {"decision": "enum", "edit_id": "str"},
    "edit.persistence": {"horizon_s": "int", "surviving_fraction": "fraction", "edit_id": "str"},
    "followup.sent": {"sentiment": "enum"},
    "clarification.asked": {"request_ambiguity": "fraction"},
    "trajectory.ended": {"turns": "int", "outcome": "enum", "task_family": "str"},
}
ENVELOPE_FIELDS = {"schema_version": "int", "trajectory_id": "str", "session_id": "str",
                   "user": "str", "checkpoint_id": "str", "arm": "str", "clock_skew_ms": "int"}
TIME_FIELDS = ("occurred_at", "sent_at", "received_at", "event_time")
_NON_FINITE = ("1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1e309", "-2e400")
_NUMBER_KINDS = ("float", "fraction", "logprob", "int", "token")
# JSON values of the wrong type for each kind of field (null is left out: some are nullable).
_WRONG: dict[str, tuple[Any, ...]] = {
    "number": ("12", "", [], {}, True, [1, "x"], {"a": 1}),
    "integer": ("12", 1.5, [], {}, False, [1], "-1"),
    "text": (12, 1.5, [], {}, True, ["a"], {"text": "a"}),
    "bool": ("true", 1, 0, "", [], {}),
}
_WRONG_OF = {"float": "number", "fraction": "number", "logprob": "number", "int": "integer",
             "token": "integer", "str": "text", "enum": "text", "bool": "bool"}


@dataclass(frozen=True)
class Expect:
    """The verdict one event must get: ``kind`` None means accepted."""

    kind: str | None = None
    field: str | None = None  # the rejection's field starts with this (None: any field)


@dataclass(frozen=True)
class Hostile:
    raw: bytes
    expect: Expect

    @property
    def event_id(self) -> str:
        """The id of an event that must be accepted (so it is well-formed)."""
        return str(json.loads(self.raw)["event_id"])


def _set(event: dict[str, Any], path: str, value: Any) -> None:
    *parents, name = path.split(".")
    target: Any = event
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(name)] = value
    else:
        target[name] = value


def _text(event: dict[str, Any], literal: str | None = None) -> bytes:
    text = json.dumps(event, ensure_ascii=False)
    return (text if literal is None else text.replace(json.dumps(_HOLE), literal)).encode()


class HostileEvents:
    """Fresh events, good or bad in one chosen way, from a seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        samples = sample_trajectory("abuse")
        self._templates = {e.type: json.loads(EventAdapter.dump_json(e)) for e in samples}

    def good(self, event_type: str | None = None) -> dict[str, Any]:
        event = copy.deepcopy(self._templates[event_type or self.rng.choice(list(PAYLOAD_FIELDS))])
        now = datetime.now(UTC).isoformat()
        event |= {"event_id": str(uuid7()), "occurred_at": now, "sent_at": now,
                  "trajectory_id": f"abuse-{self.rng.getrandbits(40):x}"}
        return event

    def good_event(self) -> Hostile:
        return Hostile(_text(self.good()), Expect())

    def _field(self, kinds: tuple[str, ...]) -> tuple[dict[str, Any], str]:
        """A fresh event and the path of one of its fields holding one of these kinds."""
        choices = [(t, f"payload.{f}") for t, fields in PAYLOAD_FIELDS.items()
                   for f, k in fields.items() if k in kinds]
        choices += [(t, f) for t in PAYLOAD_FIELDS for f, k in ENVELOPE_FIELDS.items()
                    if k in kinds]
        event_type, path = self.rng.choice(choices)
        return self.good(event_type), path

    def non_finite(self) -> Hostile:
        event, path = self._field(("float", "fraction", "logprob"))
        _set(event, path, _HOLE)
        return Hostile(_text(event, self.rng.choice(_NON_FINITE)),
                       Expect("schema_violation", path))

    def huge_number(self) -> Hostile:
        event, path = self._field(_NUMBER_KINDS)
        digits = self.rng.choice([20, 64, 300, 400, 4000, 5000])
        literal = self.rng.choice(["", "-"]) + "9" * digits
        _set(event, path, _HOLE)
        if digits > 4300:  # beyond any parser's integers: the event is not readable JSON
            return Hostile(_text(event, literal), Expect("malformed_json", "(event)"))
        return Hostile(_text(event, literal), Expect("schema_violation", path))

    def timestamp(self) -> Hostile:
        event = self.good()
        name = self.rng.choice(TIME_FIELDS)
        now = datetime.now(UTC)
        offsets = {"in": [timedelta(days=-29), timedelta(hours=23), timedelta(0)],
                   "window": [timedelta(days=-31), timedelta(hours=25), timedelta(days=-400)],
                   "range": [datetime(1, 1, 1, tzinfo=UTC) - now,
                             datetime(1999, 12, 31, tzinfo=UTC) - now,
                             datetime(2100, 1, 1, tzinfo=UTC) - now,
                             datetime(9999, 12, 31, 23, 59, tzinfo=UTC) - now]}
        where = self.rng.choice(list(offsets))
        value = (now + self.rng.choice(offsets[where]))
        zone = timezone(timedelta(hours=self.rng.choice([0, 14, -12, 5.5])))
        event[name] = value.astimezone(zone).isoformat() if where != "range" else \
            value.isoformat()
        if where == "range":
            return Hostile(_text(event), Expect("schema_violation", name))
        if where == "window" and name in ("occurred_at", "sent_at"):
            return Hostile(_text(event), Expect("time_out_of_window", name))
        return Hostile(_text(event), Expect())  # receipt times are the server's own anyway

    def bad_timestamp_text(self) -> Hostile:
        event = self.good()
        name = self.rng.choice(TIME_FIELDS)
        event[name] = self.rng.choice(["2026-02-30T00:00:00Z", "yesterday", "",
                                       "2026-01-01T00:00:00", "0000-00-00T00:00:00Z",
                                       "2026-01-01T25:61:61Z", "+275760-09-13T00:00:00Z",
                                       1_767_225_600, None])
        if event[name] is None and name in ("received_at", "event_time"):
            return Hostile(_text(event), Expect())  # optional: the server sets them
        return Hostile(_text(event), Expect("schema_violation", name))

    def deep(self) -> Hostile:
        event = self.good()
        depth = self.rng.choice([33, 64, 1_000, 20_000])  # 100,000: see the body classes
        event["payload"]["x"] = _HOLE
        opener, closer = self.rng.choice([("[", "]"), ('{"a":', "}")])
        return Hostile(_text(event, opener * depth + "1" + closer * depth),
                       Expect("malformed_json", "(event)"))

    def shallow_unknown(self) -> Hostile:
        event = self.good()
        event["payload"]["x"] = json.loads("[" * 20 + "]" * 20)
        return Hostile(_text(event), Expect("schema_violation", "payload.x"))

    def invalid_utf8(self) -> Hostile:
        event = self.good()
        event["user"] = _HOLE
        bad = self.rng.choice([b"\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                               b"\xe2\x82", b"\x80abc"])
        raw = _text(event).replace(json.dumps(_HOLE).encode(), b'"u' + bad + b'"')
        return Hostile(raw, Expect("malformed_json", "(event)"))

    def lone_surrogate(self) -> Hostile:
        event = self.good()
        event["user"] = _HOLE
        return Hostile(_text(event, self.rng.choice(['"\\ud800"', '"a\\udfffb"', '"\\ud83d"'])),
                       Expect("malformed_json", "(event)"))

    def duplicated_key(self) -> Hostile:
        event = self.good()
        in_payload = self.rng.random() < 0.4 and len(event["payload"]) > 0
        target = event["payload"] if in_payload else event
        key = self.rng.choice(list(target))
        text = _text(event).decode()
        # Sometimes spelled with an escape: a parser compares keys after unescaping them.
        escaped = f"\\u{ord(key[0]):04x}" + key[1:]
        spelled = key if self.rng.random() < 0.7 else escaped
        again = f'"{spelled}": {json.dumps(target[key])}, '
        anchor = '"payload": {' if in_payload else "{"
        text = text.replace(anchor, anchor + again, 1)
        return Hostile(text.encode(), Expect("malformed_json", key))

    def wrong_type(self) -> Hostile:
        kind = self.rng.choice(list(_WRONG_OF))
        event, path = self._field((kind,))
        _set(event, path, self.rng.choice(_WRONG[_WRONG_OF[kind]]))
        return Hostile(_text(event), Expect("schema_violation", path))

    def missing_or_unknown(self) -> Hostile:
        event = self.good()
        if self.rng.random() < 0.5:
            name = self.rng.choice(["event_id", "type", "trajectory_id", "user", "occurred_at",
                                    "payload"])
            del event[name]
            return Hostile(_text(event), Expect("schema_violation", None))
        name = self.rng.choice(["org", "payload.extra", "priority"])
        _set(event, name, 1)
        return Hostile(_text(event), Expect("schema_violation", name))


EVENT_CLASSES: dict[str, Callable[[HostileEvents], Hostile]] = {
    "non-finite numbers": HostileEvents.non_finite,
    "huge numbers": HostileEvents.huge_number,
    "extreme timestamps": HostileEvents.timestamp,
    "malformed timestamps": HostileEvents.bad_timestamp_text,
    "nesting": HostileEvents.deep,
    "shallow unknown nesting": HostileEvents.shallow_unknown,
    "invalid UTF-8": HostileEvents.invalid_utf8,
    "lone surrogates": HostileEvents.lone_surrogate,
    "duplicated keys": HostileEvents.duplicated_key,
    "wrong types": HostileEvents.wrong_type,
    "missing or unknown fields": HostileEvents.missing_or_unknown,
}
