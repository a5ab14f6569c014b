"""msgspec structs of the stored events: the cheap way to read one on a consumer's hot path.

The pydantic models of :mod:`schemas.events` define the events. These structs accept a subset
of what the models accept: the same bounds, stated with ``msgspec.Meta``, and after decoding
the checks msgspec cannot state (the timestamps' range, one logprob per token, the text's bytes
and control characters, an invalid call's reason). Where they are stricter
than the models (a timestamp in a spelling other than RFC 3339's ``T`` form with at most six
fraction digits, which is how ingest writes them; a UUID in braces or as a URN; a schema version
written as ``true`` or ``1.0``, which the models' literal lets through), the record is read
again with the models.
So every answer is the models' own, the accepted event and the field named in a refusal
included, and the structs only make the common case cheap: about half the time of pydantic's
validation (``rewardstream bench fold``). ``tests/unit/test_event_structs.py`` holds them to
the models over the simulated log, the poison corpus and every bound.

The event id is kept as the text ``str(uuid)`` would write, so the fact takes it as it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, NamedTuple

import msgspec
from msgspec import Meta

from schemas import bounds as b

__all__ = ["Decoded", "StoredEvent", "decode_stored_event", "encode_event", "respelled",
           "rfc3339"]

Identifier = Annotated[str, Meta(min_length=1, max_length=b.IDENTIFIER_MAX_CHARS)]
Milliseconds = Annotated[float, Meta(ge=0, le=b.MAX_DURATION_MS)]
Fraction = Annotated[float, Meta(ge=0.0, le=1.0)]
TokenId = Annotated[int, Meta(ge=0, lt=b.TOKEN_ID_BOUND)]
Logprob = Annotated[float, Meta(ge=b.MIN_LOGPROB, le=0.0)]
SkewMs = Annotated[int, Meta(ge=-b.MAX_CLOCK_SKEW_MS, le=b.MAX_CLOCK_SKEW_MS)]
# Python's "$" also matches before a final line break, which the models' pattern refuses.
ToolName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_-]{1,64}\Z")]
PromptText = Annotated[str, Meta(max_length=b.PROMPT_TEXT_MAX_BYTES)]
CompletionText = Annotated[str, Meta(max_length=b.COMPLETION_TEXT_MAX_BYTES)]
# RFC 3339 with at most six fraction digits (ASCII digits only: "\d" would take any script's),
# parsed by Python, which reads it as the models do. msgspec's own datetimes round a fraction
# beyond microseconds where the models truncate it.
Timestamp = Annotated[str, Meta(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
                                        r"(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})\Z")]
# A UUIDv7 of the RFC 9562 variant, spelled as ``str(uuid)`` spells it: the fact's event id.
EventId = Annotated[str, Meta(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}"
                                      r"-[0-9a-f]{12}\Z")]


class _Strict(msgspec.Struct, forbid_unknown_fields=True):
    """Each subclass says ``kw_only`` too (msgspec does not inherit it): required fields then
    follow optional ones in the models' order."""


class SamplingParams(_Strict, kw_only=True):
    temperature: Annotated[float, Meta(ge=0.0, le=b.MAX_TEMPERATURE)] = 1.0
    top_p: Annotated[float, Meta(gt=0.0, le=1.0)] = 1.0
    top_k: Annotated[int, Meta(ge=-1, le=b.TOKEN_ID_BOUND)] = -1
    max_tokens: Annotated[int, Meta(ge=1, le=b.MAX_COMPLETION_TOKENS)] = 256
    seed: Annotated[int, Meta(ge=b.MIN_SEED, le=b.MAX_SEED)] | None = None


class CompletionServedPayload(_Strict, kw_only=True):
    completion_id: Identifier
    model: Identifier
    prompt_token_ids: Annotated[list[TokenId], Meta(max_length=b.MAX_PROMPT_TOKENS)]
    completion_token_ids: Annotated[list[TokenId], Meta(max_length=b.MAX_COMPLETION_TOKENS)]
    behaviour_logprobs: Annotated[list[Logprob], Meta(max_length=b.MAX_COMPLETION_TOKENS)]
    sampling: SamplingParams = msgspec.field(default_factory=SamplingParams)
    ttft_ms: Milliseconds
    latency_ms: Milliseconds
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter", "abort",
                           "error"] = "stop"
    prompt_text: PromptText | None = None
    completion_text: CompletionText | None = None
    text_truncated: bool = False
    tools_offered: Annotated[list[ToolName], Meta(max_length=b.MAX_TOOLS_OFFERED)] | None = None

    def valid(self) -> bool:
        return (len(self.behaviour_logprobs) == len(self.completion_token_ids)
                and (self.prompt_text is None
                     or b.text_problem(self.prompt_text, b.PROMPT_TEXT_MAX_BYTES) is None)
                and (self.completion_text is None
                     or b.text_problem(self.completion_text, b.COMPLETION_TEXT_MAX_BYTES) is None))


class ToolCalledPayload(_Strict, kw_only=True):
    call_id: Identifier
    tool: Annotated[str, Meta(min_length=1, max_length=b.TOOL_NAME_MAX_CHARS)]
    valid: bool
    error_kind: Literal["malformed_call", "unknown_tool", "bad_arguments", "timeout",
                        "sandbox_violation", "tool_error"] | None = None
    duration_ms: Milliseconds = 0.0
    parallel_group: Annotated[int, Meta(ge=0, le=b.MAX_PARALLEL_GROUP)] | None = None


class EditProposedPayload(_Strict, kw_only=True):
    edit_id: Identifier
    path: Annotated[str, Meta(min_length=1, max_length=b.PATH_MAX_CHARS)]
    lines_added: Annotated[int, Meta(ge=0, le=b.MAX_LINES_CHANGED)] = 0
    lines_removed: Annotated[int, Meta(ge=0, le=b.MAX_LINES_CHANGED)] = 0


class EditDecidedPayload(_Strict, kw_only=True):
    edit_id: Identifier
    decision: Literal["accepted", "rejected", "reverted"]


class EditPersistencePayload(_Strict, kw_only=True):
    edit_id: Identifier
    horizon_s: Annotated[int, Meta(gt=0, le=b.MAX_HORIZON_S)]
    surviving_fraction: Fraction


class FollowupSentPayload(_Strict, kw_only=True):
    sentiment: Literal["dissatisfied", "neutral", "satisfied"]


class ClarificationAskedPayload(_Strict, kw_only=True):
    request_ambiguity: Fraction | None = None


class TrajectoryEndedPayload(_Strict, kw_only=True):
    outcome: Literal["completed", "aborted", "error"]
    turns: Annotated[int, Meta(ge=0, le=b.MAX_TURNS)]
    task_family: Identifier = "default"


class _Envelope(_Strict, tag_field="type", kw_only=True):
    event_id: EventId
    schema_version: Literal[1, 2, 3, 4] = 4
    trajectory_id: Identifier
    session_id: Identifier
    org_id: Identifier | None = None
    producer: Identifier | None = None
    user: Annotated[str, Meta(min_length=1, max_length=b.USER_MAX_CHARS)]
    checkpoint_id: Identifier
    arm: Identifier = "default"
    occurred_at: Timestamp
    sent_at: Timestamp
    received_at: Timestamp | None = None
    event_time: Timestamp | None = None
    clock_skew_ms: SkewMs | None = None

    @property
    def type(self) -> str:
        """The event type: the struct's tag, as the models' ``type`` field holds it."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class CompletionServed(_Envelope, tag="completion.served", kw_only=True):
    payload: CompletionServedPayload


class ToolCalled(_Envelope, tag="tool.called", kw_only=True):
    payload: ToolCalledPayload


class EditProposed(_Envelope, tag="edit.proposed", kw_only=True):
    payload: EditProposedPayload


class EditDecided(_Envelope, tag="edit.decided", kw_only=True):
    payload: EditDecidedPayload


class EditPersistence(_Envelope, tag="edit.persistence", kw_only=True):
    payload: EditPersistencePayload


class FollowupSent(_Envelope, tag="followup.sent", kw_only=True):
    payload: FollowupSentPayload


class ClarificationAsked(_Envelope, tag="clarification.asked", kw_only=True):
    payload: ClarificationAskedPayload


class TrajectoryEnded(_Envelope, tag="trajectory.ended", kw_only=True):
    payload: TrajectoryEndedPayload


StoredEvent = (CompletionServed | ToolCalled | EditProposed | EditDecided | EditPersistence
               | FollowupSent | ClarificationAsked | TrajectoryEnded)
_DECODER = msgspec.json.Decoder(StoredEvent)


class Decoded(NamedTuple):
    """An event the structs accepted, and the instants of the timestamps its readers use."""

    event: StoredEvent
    occurred_at: datetime
    sent_at: datetime
    event_time: datetime | None


def _instant(text: str) -> datetime | None:
    """The instant of a timestamp, None when the models would refuse it."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if b.EARLIEST_TIME <= moment < b.LATEST_TIME else None


def decode_stored_event(raw: bytes | str) -> Decoded | None:
    """The event of ``raw`` when the structs accept it, None when they do not (the models
    then give the answer: an event or the field at fault)."""
    try:
        event = _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    occurred_at, sent_at = _instant(event.occurred_at), _instant(event.sent_at)
    received_at = None if event.received_at is None else _instant(event.received_at)
    event_time = None if event.event_time is None else _instant(event.event_time)
    if (occurred_at is None or sent_at is None or (received_at is None) != (
            event.received_at is None) or (event_time is None) != (event.event_time is None)):
        return None
    payload = event.payload
    if isinstance(payload, CompletionServedPayload):
        if not payload.valid():
            return None
    elif (isinstance(payload, ToolCalledPayload) and not payload.valid
          and payload.error_kind is None):
        return None
    return Decoded(event, occurred_at, sent_at, event_time)


def rfc3339(moment: datetime) -> str:
    """An aware instant as pydantic writes it: microseconds when there are any, ``Z`` for UTC."""
    text = moment.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def respelled(text: str, moment: datetime) -> str:
    """A timestamp the structs accepted (``text``, the instant ``moment``) as pydantic writes
    it: ``text`` itself when it already is (the SDKs' UTC spelling, which is kept as it came:
    formatting an instant costs a microsecond), else :func:`rfc3339`."""
    # The pattern leaves one form of each length ending in "Z": no fraction, or six digits.
    if text[-1] == "Z" and (len(text) == 20 or (len(text) == 27 and text[-7:] != "000000Z")):
        return text
    return rfc3339(moment)


_ENCODER = msgspec.json.Encoder()


def encode_event(event: StoredEvent) -> bytes:
    """The event's JSON, byte for byte what :func:`schemas.events.dump_event` writes of the
    same event when its timestamps are spelled by :func:`rfc3339`: the envelope's fields in
    their order, then ``type`` and the payload (msgspec would write its tag first)."""
    fields = msgspec.structs.asdict(event)
    payload = fields.pop("payload")
    fields["type"] = event.type
    fields["payload"] = payload
    return _ENCODER.encode(fields)
