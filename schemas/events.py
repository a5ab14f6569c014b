"""Event schemas: the envelope and one typed payload per event type.

pydantic v2 defines the events because FastAPI speaks it natively (request validation and an
accurate OpenAPI document come from the same models), its errors carry the full field path
(``payload.behaviour_logprobs.3``), and its JSON Schema output is what the compatibility registry
stores. The hot paths read events with the msgspec structs of ``schemas.event_structs`` first,
which accept a subset of what these models accept and read it alike. Models are strict (no
silent str→int coercion), frozen, and forbid unknown fields, which exports as
``additionalProperties: false``.

Every field is bounded (``schemas.bounds``): numbers are finite and inside a stated range,
strings and arrays have a maximum length, timestamps lie in a sanity range. Version 2 added
those bounds to the fields of version 1; clients built against either may send their number in
``schema_version`` and are validated against the current bounds. Version 3 added ``producer``;
version 4 lets ``completion.served`` keep the backend's own finish reason (``tool_calls``,
``content_filter``).

Version 4 also lets ``completion.served`` carry the prompt and completion text where the org
allows it (``prompt_text``, ``completion_text``: bounded, written by the gateway after its
redaction hook, absent when the org turned text capture off) and the names of the tools the
request offered; ``TEXT_FIELDS`` names the text fields.

Type names are stable strings (``edit.persistence``), never Python import paths.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal, get_args
from uuid import UUID

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas import bounds as b
from schemas.ids import is_uuid7

__all__ = [
    "CLARIFICATION_ASKED", "COMPLETION_SERVED", "EDIT_DECIDED", "EDIT_PERSISTENCE",
    "EDIT_PROPOSED", "EVENT_MODELS", "EVENT_TYPES", "FINISH_REASONS",
    "FOLLOWUP_SENT", "GATEWAY_PRODUCER",
    "SCHEMA_VERSION", "SCHEMA_VERSIONS", "TOOL_CALLED", "TRAJECTORY_ENDED", "ClarificationAsked",
    "ClarificationAskedPayload", "CompletionServed", "CompletionServedPayload", "EditDecided",
    "EditDecidedPayload", "EditDecision", "EditPersistence", "EditPersistencePayload",
    "EditProposed", "EditProposedPayload", "Event", "EventAdapter", "FinishReason", "FollowupSent",
    "FollowupSentPayload", "SamplingParams", "Sentiment", "TEXT_FIELDS", "ToolCalled",
    "ToolCalledPayload", "ToolErrorKind", "TrajectoryEnded", "TrajectoryEndedPayload",
    "TrajectoryOutcome", "dump_event", "finish_reason_of", "first_error", "parse_event",
    "with_ingest_fields",
]

SCHEMA_VERSION = 4  # what ingest validates against and stores
SCHEMA_VERSIONS = (1, 2, 3, 4)  # what clients may name in ``schema_version``
GATEWAY_PRODUCER = "gateway"  # the producer the gateway stamps on the events it writes

# The event types, as an envelope's ``type`` names them. Plain strings, not an enum: the reward
# join compares a fact's type with them for every event, where an enum member's lookup costs
# several times a module constant's.
COMPLETION_SERVED: Final = "completion.served"
TOOL_CALLED: Final = "tool.called"
EDIT_PROPOSED: Final = "edit.proposed"
EDIT_DECIDED: Final = "edit.decided"
EDIT_PERSISTENCE: Final = "edit.persistence"
FOLLOWUP_SENT: Final = "followup.sent"
CLARIFICATION_ASKED: Final = "clarification.asked"
TRAJECTORY_ENDED: Final = "trajectory.ended"


Identifier = Annotated[str, Field(min_length=1, max_length=b.IDENTIFIER_MAX_CHARS)]
Milliseconds = Annotated[float, Field(ge=0, le=b.MAX_DURATION_MS)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
TokenId = Annotated[int, Field(ge=0, lt=b.TOKEN_ID_BOUND)]
Logprob = Annotated[float, Field(ge=b.MIN_LOGPROB, le=0.0)]
SkewMs = Annotated[int, Field(ge=-b.MAX_CLOCK_SKEW_MS, le=b.MAX_CLOCK_SKEW_MS)]
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]  # what OpenAI allows


def _text_within(max_bytes: int) -> AfterValidator:
    def check(text: str) -> str:
        if (problem := b.text_problem(text, max_bytes)) is not None:
            raise ValueError(f"the text {problem}")
        return text
    return AfterValidator(check)


# The character bound is what JSON Schema can say (a character is at least a byte); the byte
# bound and the control characters are checked after it.
PromptText = Annotated[str, Field(max_length=b.PROMPT_TEXT_MAX_BYTES),
                       _text_within(b.PROMPT_TEXT_MAX_BYTES)]
CompletionText = Annotated[str, Field(max_length=b.COMPLETION_TEXT_MAX_BYTES),
                           _text_within(b.COMPLETION_TEXT_MAX_BYTES)]
# pydantic-core checks the instant; JSON Schema cannot compare date-times, so the exported
# schema states the range as the year written (the two differ only by a UTC offset at the ends).
Timestamp = Annotated[
    AwareDatetime,
    Field(ge=b.EARLIEST_TIME, lt=b.LATEST_TIME,
          json_schema_extra={"pattern": f"^{b.EARLIEST_TIME.year // 100}[0-9]{{2}}-"}),
]


# The closed sets of payload values, for the code that fills them in.
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "abort", "error"]
FINISH_REASONS: tuple[FinishReason, ...] = get_args(FinishReason)
ToolErrorKind = Literal[
    "malformed_call", "unknown_tool", "bad_arguments", "timeout", "sandbox_violation", "tool_error"
]
EditDecision = Literal["accepted", "rejected", "reverted"]
Sentiment = Literal["dissatisfied", "neutral", "satisfied"]
TrajectoryOutcome = Literal["completed", "aborted", "error"]


class _Strict(BaseModel):
    # allow_inf_nan: NaN and ±inf (JSON's 1e999 parses as inf) are refused in every field.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


# ---------------------------------------------------------------------------------- payloads


class SamplingParams(_Strict):
    temperature: Annotated[float, Field(ge=0.0, le=b.MAX_TEMPERATURE)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    top_k: Annotated[int, Field(ge=-1, le=b.TOKEN_ID_BOUND)] = -1  # -1: no top-k truncation
    max_tokens: Annotated[int, Field(ge=1, le=b.MAX_COMPLETION_TOKENS)] = 256
    seed: Annotated[int, Field(ge=b.MIN_SEED, le=b.MAX_SEED)] | None = None


TEXT_FIELDS = ("prompt_text", "completion_text")  # completion.served's text, policed per org


class CompletionServedPayload(_Strict):
    completion_id: Identifier
    model: Identifier
    prompt_token_ids: Annotated[list[TokenId], Field(max_length=b.MAX_PROMPT_TOKENS)]
    completion_token_ids: Annotated[list[TokenId], Field(max_length=b.MAX_COMPLETION_TOKENS)]
    # Log-probability of each completion token under the policy that sampled it, as served.
    behaviour_logprobs: Annotated[list[Logprob], Field(max_length=b.MAX_COMPLETION_TOKENS)]
    sampling: SamplingParams = SamplingParams()
    ttft_ms: Milliseconds
    latency_ms: Milliseconds
    # The backend's own reason (OpenAI's), else the gateway's: "abort" when the client went away
    # or the stream was cut short, "error" when the backend failed mid-reply.
    finish_reason: FinishReason = "stop"
    # What the org allows of the text (version 4): the prompt as the client sent it (a chat's
    # messages one per line as ``role: content``), the completion as the backend wrote it
    # (tool calls in the ``rewardstream`` syntax), both after the redaction hook; None when the
    # org turned capture off. ``text_truncated``: one of them was cut to its bound.
    prompt_text: PromptText | None = None
    completion_text: CompletionText | None = None
    text_truncated: bool = False
    tools_offered: Annotated[list[ToolName], Field(max_length=b.MAX_TOOLS_OFFERED)] | None = None

    @model_validator(mode="after")
    def _one_logprob_per_token(self) -> CompletionServedPayload:
        if len(self.behaviour_logprobs) != len(self.completion_token_ids):
            raise ValueError(
                f"behaviour_logprobs has {len(self.behaviour_logprobs)} entries but "
                f"completion_token_ids has {len(self.completion_token_ids)}; they must match"
            )
        return self


class ToolCalledPayload(_Strict):
    call_id: Identifier
    tool: Annotated[str, Field(min_length=1, max_length=b.TOOL_NAME_MAX_CHARS)]
    valid: bool
    error_kind: ToolErrorKind | None = None
    duration_ms: Milliseconds = 0.0
    parallel_group: Annotated[int, Field(ge=0, le=b.MAX_PARALLEL_GROUP)] | None = None

    @model_validator(mode="after")
    def _invalid_calls_say_why(self) -> ToolCalledPayload:
        if not self.valid and self.error_kind is None:
            raise ValueError("an invalid tool call (valid=false) needs an error_kind")
        return self


class EditProposedPayload(_Strict):
    edit_id: Identifier
    path: Annotated[str, Field(min_length=1, max_length=b.PATH_MAX_CHARS)]
    lines_added: Annotated[int, Field(ge=0, le=b.MAX_LINES_CHANGED)] = 0
    lines_removed: Annotated[int, Field(ge=0, le=b.MAX_LINES_CHANGED)] = 0


class EditDecidedPayload(_Strict):
    edit_id: Identifier
    decision: EditDecision


class EditPersistencePayload(_Strict):
    edit_id: Identifier
    horizon_s: Annotated[int, Field(gt=0, le=b.MAX_HORIZON_S)]
    surviving_fraction: Fraction


class FollowupSentPayload(_Strict):
    sentiment: Sentiment


class ClarificationAskedPayload(_Strict):
    # How ambiguous the request was (0 clear .. 1 ambiguous), when the client knows.
    request_ambiguity: Fraction | None = None


class TrajectoryEndedPayload(_Strict):
    outcome: TrajectoryOutcome
    turns: Annotated[int, Field(ge=0, le=b.MAX_TURNS)]
    task_family: Identifier = "default"


# ---------------------------------------------------------------------------------- envelope


class _Envelope(_Strict):
    event_id: UUID
    schema_version: Literal[1, 2, 3, 4] = 4  # SCHEMA_VERSION
    trajectory_id: Identifier
    session_id: Identifier
    org_id: Identifier | None = None  # set from the API key at ingest, never trusted from a client
    # The service that wrote it to the log: "gateway", or "ingest:<key name>" (version 3).
    # Set by that service, never trusted from a client: the trainer learns only from
    # completions the gateway served.
    producer: Identifier | None = None
    user: Annotated[str, Field(min_length=1, max_length=b.USER_MAX_CHARS)]
    checkpoint_id: Identifier
    arm: Identifier = "default"
    occurred_at: Timestamp
    sent_at: Timestamp
    received_at: Timestamp | None = None
    event_time: Timestamp | None = None
    clock_skew_ms: SkewMs | None = None

    @field_validator("event_id")
    @classmethod
    def _must_be_uuid7(cls, value: UUID) -> UUID:
        if not is_uuid7(value):
            raise ValueError(f"event_id must be a UUIDv7, got version {value.version}")
        return value


class CompletionServed(_Envelope):
    type: Literal["completion.served"] = "completion.served"
    payload: CompletionServedPayload


class ToolCalled(_Envelope):
    type: Literal["tool.called"] = "tool.called"
    payload: ToolCalledPayload


class EditProposed(_Envelope):
    type: Literal["edit.proposed"] = "edit.proposed"
    payload: EditProposedPayload


class EditDecided(_Envelope):
    type: Literal["edit.decided"] = "edit.decided"
    payload: EditDecidedPayload


class EditPersistence(_Envelope):
    type: Literal["edit.persistence"] = "edit.persistence"
    payload: EditPersistencePayload


class FollowupSent(_Envelope):
    type: Literal["followup.sent"] = "followup.sent"
    payload: FollowupSentPayload


class ClarificationAsked(_Envelope):
    type: Literal["clarification.asked"] = "clarification.asked"
    payload: ClarificationAskedPayload


class TrajectoryEnded(_Envelope):
    type: Literal["trajectory.ended"] = "trajectory.ended"
    payload: TrajectoryEndedPayload


EVENT_MODELS: dict[str, type[_Envelope]] = {
    COMPLETION_SERVED: CompletionServed,
    TOOL_CALLED: ToolCalled,
    EDIT_PROPOSED: EditProposed,
    EDIT_DECIDED: EditDecided,
    EDIT_PERSISTENCE: EditPersistence,
    FOLLOWUP_SENT: FollowupSent,
    CLARIFICATION_ASKED: ClarificationAsked,
    TRAJECTORY_ENDED: TrajectoryEnded,
}
EVENT_TYPES: tuple[str, ...] = tuple(EVENT_MODELS)

Event = Annotated[
    CompletionServed | ToolCalled | EditProposed | EditDecided | EditPersistence
    | FollowupSent | ClarificationAsked | TrajectoryEnded,
    Field(discriminator="type"),
]
EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(raw: bytes | str) -> Event:
    """Validate one event from its JSON bytes; raises pydantic's ValidationError."""
    return EventAdapter.validate_json(raw)


def dump_event(event: Event) -> bytes:
    """An event's JSON bytes, exactly ``EventAdapter.dump_json(event)``, from its own model's
    serializer: the union's serializer would look for the model again (twice the time)."""
    return event.__pydantic_serializer__.to_json(event)


def finish_reason_of(reported: str | None, missing: FinishReason) -> FinishReason:
    """The schema's finish reason for one a backend or an OpenAI-style API reported: ``missing``
    when none came, its own (``tool_calls``, ``length`` ...), ``stop`` for one OpenAI does not
    name."""
    if reported is None:
        return missing
    return next((reason for reason in FINISH_REASONS if reason == reported), "stop")


def first_error(error: ValidationError) -> tuple[str, str]:
    """The (field path, reason) of a validation error's first problem, for per-event answers.
    A field the model expects comes before an unknown one (pydantic's own order between the
    two changed across versions; answers must not)."""
    details = error.errors(include_url=False)
    detail = next((d for d in details if d["type"] != "extra_forbidden"), details[0])
    if detail["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return "type", detail["msg"]
    path = ".".join(str(part) for part in detail["loc"])
    # The discriminated union puts the type tag first in the path; the field is what matters.
    for event_type in EVENT_TYPES:
        if path.startswith(event_type + "."):
            path = path[len(event_type) + 1:]
    return path or "(event)", detail["msg"]


def with_ingest_fields(
    event: Event, *, org_id: str, user: str, received_at: datetime, event_time: datetime,
    clock_skew_ms: int, producer: str,
) -> Event:
    """The event as stored: org from the API key, pseudonymised user, server-side times, the
    service that wrote it, and the schema version it was validated against."""
    return event.model_copy(update={
        "schema_version": SCHEMA_VERSION, "org_id": org_id, "user": user,
        "received_at": received_at, "event_time": event_time, "clock_skew_ms": clock_skew_ms,
        "producer": producer,
    })
