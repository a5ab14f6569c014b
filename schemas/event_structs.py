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
from typing import Annotated, ClassVar, Literal

import msgspec
from msgspec import Meta

from schemas import bounds as b

__all__ = ["StoredEvent", "decode_stored_event"]

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
# A timestamp whose range alone matters: msgspec's own parsing. It rounds a fraction beyond
# microseconds where the models truncate, so the range is checked with the lower end excluded
# (an instant rounded up onto it could be one truncated below it).
Timestamp = Annotated[datetime, Meta(tz=True)]
# The event time, which the fact keeps to the millisecond: RFC 3339 as ingest writes it, at most
# six fraction digits (ASCII digits only: "\d" would take any script's), parsed by Python as
# the models parse it.
EventTime = Annotated[str, Meta(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
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
    type: ClassVar[str]
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
    event_time: EventTime | None = None
    clock_skew_ms: SkewMs | None = None


class CompletionServed(_Envelope, tag="completion.served", kw_only=True):
    type: ClassVar[str] = "completion.served"
    payload: CompletionServedPayload


class ToolCalled(_Envelope, tag="tool.called", kw_only=True):
    type: ClassVar[str] = "tool.called"
    payload: ToolCalledPayload


class EditProposed(_Envelope, tag="edit.proposed", kw_only=True):
    type: ClassVar[str] = "edit.proposed"
    payload: EditProposedPayload


class EditDecided(_Envelope, tag="edit.decided", kw_only=True):
    type: ClassVar[str] = "edit.decided"
    payload: EditDecidedPayload


class EditPersistence(_Envelope, tag="edit.persistence", kw_only=True):
    type: ClassVar[str] = "edit.persistence"
    payload: EditPersistencePayload


class FollowupSent(_Envelope, tag="followup.sent", kw_only=True):
    type: ClassVar[str] = "followup.sent"
    payload: FollowupSentPayload


class ClarificationAsked(_Envelope, tag="clarification.asked", kw_only=True):
    type: ClassVar[str] = "clarification.asked"
    payload: ClarificationAskedPayload


class TrajectoryEnded(_Envelope, tag="trajectory.ended", kw_only=True):
    type: ClassVar[str] = "trajectory.ended"
    payload: TrajectoryEndedPayload


StoredEvent = (CompletionServed | ToolCalled | EditProposed | EditDecided | EditPersistence
               | FollowupSent | ClarificationAsked | TrajectoryEnded)
_DECODER = msgspec.json.Decoder(StoredEvent)


def _event_time(text: str | None) -> datetime | None | Literal[False]:
    """The event time's instant, None for none, False when the models would refuse it."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return False
    return moment if b.EARLIEST_TIME <= moment < b.LATEST_TIME else False


def _within(moment: datetime | None) -> bool:
    return moment is None or b.EARLIEST_TIME < moment < b.LATEST_TIME


def decode_stored_event(raw: bytes | str) -> tuple[StoredEvent, datetime | None] | None:
    """The event of ``raw`` and its ``event_time`` when the structs accept it, None when they
    do not (the models then give the answer: an event or the field at fault)."""
    try:
        event = _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    event_time = _event_time(event.event_time)
    if (event_time is False or not _within(event.occurred_at) or not _within(event.sent_at)
            or not _within(event.received_at)):
        return None
    payload = event.payload
    if isinstance(payload, CompletionServedPayload):
        if not payload.valid():
            return None
    elif (isinstance(payload, ToolCalledPayload) and not payload.valid
          and payload.error_kind is None):
        return None
    return event, event_time
