"""Per-event verdicts: each event is judged on its own, so one bad event never sinks a batch.

In order: size, JSON structure (nesting, repeated keys, UTF-8, syntax), the schema's bounds,
ids and names free of control characters, the key's event types, and the timestamps' window
around the server clock. Whatever is wrong is named by its field and a reason; both are
clipped, so a hostile key name of a megabyte cannot make the answer or the dead-letter headers
too large for the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import jiter
import msgspec
from pydantic import BaseModel, ValidationError

from schemas.bounds import control_character_problem
from schemas.event_structs import (
    CompletionServedPayload,
    Decoded,
    StoredEvent,
    decode_stored_event,
    encode_event,
    respelled,
    rfc3339,
)
from schemas.event_time import DEFAULT_MAX_FUTURE, DerivedTime, ReceiptClock
from schemas.events import (
    EVENT_MODELS,
    SCHEMA_VERSION,
    TEXT_FIELDS,
    CompletionServed,
    Event,
    dump_event,
    first_error,
    parse_event,
    with_ingest_fields,
)
from serving.ingest.keys import ApiKey
from serving.jsonscan import DEFAULT_MAX_DEPTH, check_document
from serving.textpolicy import TextPolicy

__all__ = [
    "Accepted",
    "EventRules",
    "REJECTION_KINDS",
    "Rejected",
    "Verdict",
    "judge_event",
    "judge_events",
    "response_status",
]

log = logging.getLogger(__name__)

# Why an event was rejected; these are the metric labels and the dead-letter "kind" header.
REJECTION_KINDS = ("event_too_large", "malformed_json", "schema_violation", "type_not_allowed",
                   "time_out_of_window", "unprocessable")
_FIELD_MAX_CHARS = 200
_REASON_MAX_CHARS = 1000
_ENVELOPE_IDS = ("trajectory_id", "session_id", "user", "checkpoint_id", "arm")


def _payload_names(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """(name, path) of the payload fields of an event type that may hold a name or an id, in
    the schema's order. Text (prompts, completions) may hold line breaks; its schema refuses
    other controls."""
    payload = model.model_fields["payload"].annotation
    assert isinstance(payload, type) and issubclass(payload, BaseModel)
    return tuple((name, f"payload.{name}") for name in payload.model_fields
                 if name not in TEXT_FIELDS)


_PAYLOAD_NAMES = {kind: _payload_names(model) for kind, model in EVENT_MODELS.items()}


@dataclass(frozen=True)
class EventRules:
    """What an event must satisfy beyond its schema, and how its time is derived."""

    max_event_bytes: int = 1 << 20
    max_json_depth: int = DEFAULT_MAX_DEPTH
    max_age: timedelta = timedelta(days=30)  # occurred_at / sent_at this far before receipt
    max_ahead: timedelta = timedelta(days=1)  # ... and this far after it
    max_future: timedelta = DEFAULT_MAX_FUTURE  # event times later than receipt + this clamp
    text_policy: TextPolicy = field(default_factory=TextPolicy)  # completion.served's text


@dataclass(frozen=True, slots=True)
class Accepted:
    index: int
    event_id: str  # as ``str(uuid)`` spells it
    trajectory_id: str
    stored: bytes  # the envelope as appended to events.raw, ingest fields set
    org_id: str
    # (org, the id's 128 bits): another org's event with the same id is another event
    dedupe_key: tuple[str, int]


@dataclass(frozen=True, slots=True)
class Rejected:
    index: int
    event_id: str | None
    kind: str
    field: str | None
    reason: str  # names the field and says what is wrong
    original: bytes


Verdict = Accepted | Rejected


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _claimed_event_id(raw: bytes) -> str | None:
    """The event_id a rejected event claims, if it has a readable one (for the client's map)."""
    try:  # jiter does not recurse without bound; a cut-off head still yields its first fields
        value = jiter.from_json(raw[:4096], partial_mode="trailing-strings")
    except ValueError:
        return None
    claimed = value.get("event_id") if isinstance(value, dict) else None
    return claimed[:64] if isinstance(claimed, str) else None


def _rejected(index: int, raw: bytes, kind: str, field: str | None, reason: str,
              event_id: str | None = None) -> Rejected:
    claimed = event_id if event_id is not None else _claimed_event_id(raw)
    return Rejected(index, claimed, kind, field, _clip(reason, _REASON_MAX_CHARS), raw)


def _span(delta: timedelta) -> str:
    days, seconds = divmod(int(delta.total_seconds()), 86_400)
    if seconds == 0:
        return f"{days} day{'s' if days != 1 else ''}"
    return f"{delta.total_seconds() / 3600:g} hours"


@dataclass(frozen=True, slots=True)
class _Receipt:
    """What every event of one request is judged against, worked out once per request."""

    key: ApiKey
    pseudonym: Callable[[str, str], str]
    rules: EventRules
    clock: ReceiptClock
    earliest: datetime  # client timestamps before this are too old
    latest: datetime  # ... and after this too far ahead
    producer: str
    received_text: str  # the receipt as the stored events spell it
    # The key's org's pseudonym of each user seen in the request: a batch is mostly one
    # session's events, and each pseudonym is an HMAC.
    pseudonyms: dict[str, str] = field(default_factory=dict)

    def pseudonym_of(self, user: str) -> str:
        known = self.pseudonyms.get(user)
        if known is None:
            known = self.pseudonyms[user] = self.pseudonym(self.key.org_id, user)
        return known

    @classmethod
    def at(cls, received_at: datetime, key: ApiKey, pseudonym: Callable[[str, str], str],
           rules: EventRules) -> _Receipt:
        return cls(key, pseudonym, rules,
                   ReceiptClock(received_at, rules.max_future, rules.max_age + rules.max_ahead),
                   received_at - rules.max_age, received_at + rules.max_ahead,
                   f"ingest:{key.name}", rfc3339(received_at))


def _outside_window(occurred_at: datetime, sent_at: datetime,
                    receipt: _Receipt) -> tuple[str, str] | None:
    """(field, why) when a client timestamp is too far from the server clock, naming the time as
    the client wrote it; None when fine."""
    received_at, rules = receipt.clock.received_at, receipt.rules
    for name, value in (("occurred_at", occurred_at), ("sent_at", sent_at)):
        if value < receipt.earliest:
            return name, (f"{name}: {value.isoformat()} is more than {_span(rules.max_age)} "
                          f"before the server clock ({received_at.isoformat()}); the client's "
                          "clock is wrong or the event was held too long")
        if value > receipt.latest:
            return name, (f"{name}: {value.isoformat()} is more than {_span(rules.max_ahead)} "
                          f"after the server clock ({received_at.isoformat()}); the client's "
                          "clock is wrong")
    return None


def _control_character(event: Event | StoredEvent) -> tuple[str, str] | None:
    """(field, why) for the first id or name holding a control character (a NUL in a
    trajectory id would reach reward keys and file names); None when all are printable."""
    for name in _ENVELOPE_IDS:
        if (problem := control_character_problem(getattr(event, name))) is not None:
            return name, f"{name}: {problem}"
    payload = event.payload
    for name, label in _PAYLOAD_NAMES[event.type]:
        value = getattr(payload, name)
        if isinstance(value, str) and (problem := control_character_problem(value)) is not None:
            return label, f"{label}: {problem}"
    return None


def _judge(index: int, raw: bytes, receipt: _Receipt) -> Verdict:
    rules, key = receipt.rules, receipt.key
    if len(raw) > rules.max_event_bytes:
        return _rejected(index, raw, "event_too_large", None,
                         f"the event is {len(raw)} bytes, over the {rules.max_event_bytes} byte "
                         "cap")
    problem = check_document(raw, rules.max_json_depth)
    if problem is not None:
        field = problem.field or "(event)"
        return _rejected(index, raw, "malformed_json", field, f"{field}: {problem.reason}")
    fast = decode_stored_event(raw)
    event: Event | StoredEvent
    if fast is not None:  # the structs accept it: the models would too, and read it alike
        event, occurred_at, sent_at = fast.event, fast.occurred_at, fast.sent_at
    else:
        try:
            event = parse_event(raw)
        except ValidationError as exc:
            field, message = first_error(exc)
            field = _clip(field, _FIELD_MAX_CHARS)  # an unknown key's name may be a megabyte
            return _rejected(index, raw, "schema_violation", field, f"{field}: {message}")
        occurred_at, sent_at = event.occurred_at, event.sent_at
    event_id = str(event.event_id)
    if (unprintable := _control_character(event)) is not None:
        return _rejected(index, raw, "schema_violation", *unprintable, event_id)
    if not key.allows(event.type):
        return _rejected(index, raw, "type_not_allowed", "type",
                         f"type: API key {key.name!r} may not send {event.type!r} events",
                         event_id)
    # Converted once, the window and the event time cost plain comparisons (pydantic's own
    # tzinfo makes every comparison with another zone call utcoffset() again).
    occurred_utc, sent_utc = occurred_at.astimezone(UTC), sent_at.astimezone(UTC)
    earliest, latest = receipt.earliest, receipt.latest
    if not (earliest <= occurred_utc <= latest and earliest <= sent_utc <= latest):
        late_or_early = _outside_window(occurred_at, sent_at, receipt)
        if late_or_early is not None:
            return _rejected(index, raw, "time_out_of_window", *late_or_early, event_id)
    derived = receipt.clock.derive(occurred_utc, sent_utc)
    user = receipt.pseudonym_of(event.user)
    if fast is not None:
        stored = _stored_struct(fast, receipt, user, derived)
    else:
        assert not isinstance(event, StoredEvent)
        stored = _stored_model(event, receipt, user, derived)
    return Accepted(index, event_id, event.trajectory_id, stored, key.org_id,
                    (key.org_id, int(event_id.replace("-", ""), 16)))


def _stored_model(event: Event, receipt: _Receipt, user: str, derived: DerivedTime) -> bytes:
    """The envelope to append, from the event the models read."""
    if isinstance(event, CompletionServed):
        p = event.payload
        text = receipt.rules.text_policy.stored_text(receipt.key.org_id, p.prompt_text,
                                                     p.completion_text, p.text_truncated)
        if text is not None:
            event = event.model_copy(update={"payload": p.model_copy(update=text)})
    return dump_event(with_ingest_fields(
        event, org_id=receipt.key.org_id, user=user, received_at=receipt.clock.received_at,
        event_time=derived.event_time, clock_skew_ms=derived.clock_skew_ms,
        producer=receipt.producer))


def _stored_struct(fast: Decoded, receipt: _Receipt, user: str, derived: DerivedTime) -> bytes:
    """The envelope to append, from the event the structs read: the bytes :func:`_stored_model`
    writes of the same event."""
    event = fast.event
    payload = event.payload
    if isinstance(payload, CompletionServedPayload):
        text = receipt.rules.text_policy.stored_text(receipt.key.org_id, payload.prompt_text,
                                                     payload.completion_text,
                                                     payload.text_truncated)
        if text is not None:
            payload = msgspec.structs.replace(payload, **text)
    return encode_event(msgspec.structs.replace(
        event, payload=payload, schema_version=SCHEMA_VERSION, org_id=receipt.key.org_id,
        user=user, occurred_at=respelled(event.occurred_at, fast.occurred_at),
        sent_at=respelled(event.sent_at, fast.sent_at),
        received_at=receipt.received_text, event_time=rfc3339(derived.event_time),
        clock_skew_ms=derived.clock_skew_ms, producer=receipt.producer))


def _judge_or_dead_letter(index: int, raw: bytes, receipt: _Receipt) -> Verdict:
    try:
        verdict = _judge(index, raw, receipt)
    except Exception as exc:  # a bug here must cost this event (dead-lettered), not the batch
        log.exception("ingest could not judge event %d", index)
        verdict = _rejected(index, raw, "unprocessable", None,
                            f"ingest could not process this event ({type(exc).__name__}); it "
                            "is kept on the dead-letter topic for replay once fixed")
    if isinstance(verdict, Rejected):  # the dead letter keeps no text the org did not allow
        kept = receipt.rules.text_policy.scrub_raw(receipt.key.org_id, verdict.original)
        if kept is not verdict.original:
            verdict = replace(verdict, original=kept)
    return verdict


def judge_events(
    raws: Sequence[bytes],
    key: ApiKey,
    received_at: datetime,
    pseudonym: Callable[[str, str], str],
    rules: EventRules = EventRules(),
) -> list[Verdict]:
    """Each of ``raws`` (indexed from 0) accepted as the envelope to store, or rejected with the
    field at fault; each on its own, so one bad event never costs another."""
    receipt = _Receipt.at(received_at, key, pseudonym, rules)
    return [_judge_or_dead_letter(i, raw, receipt) for i, raw in enumerate(raws)]


def judge_event(
    index: int,
    raw: bytes,
    key: ApiKey,
    received_at: datetime,
    pseudonym: Callable[[str, str], str],
    rules: EventRules = EventRules(),
) -> Verdict:
    """Accept ``raw`` as the envelope to store, or reject it with the field at fault."""
    return _judge_or_dead_letter(index, raw, _Receipt.at(received_at, key, pseudonym, rules))


def response_status(accepted_or_duplicate: int, rejections: Sequence[Rejected]) -> int:
    """200 when nothing was rejected; 403 when the key may send none of the batch's events
    (every rejection is ``type_not_allowed`` and nothing else got in); 207 otherwise."""
    if not rejections:
        return 200
    if accepted_or_duplicate == 0 and all(r.kind == "type_not_allowed" for r in rejections):
        return 403
    return 207
