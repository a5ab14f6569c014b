"""Event schemas v1: the envelope and one typed payload per event type.

pydantic v2 was chosen over msgspec because FastAPI speaks it natively (request validation and an
accurate OpenAPI document come from the same models), its errors carry the full field path
(``payload.behaviour_logprobs.3``), and its JSON Schema output is what the compatibility registry
stores. Models are strict (no silent str→int coercion), frozen, and forbid unknown fields, which
exports as ``additionalProperties: false``.

Type names are stable strings (``edit.persistence``), never Python import paths.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.ids import is_uuid7

__all__ = [
    "EVENT_MODELS",
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "ClarificationAsked",
    "ClarificationAskedPayload",
    "CompletionServed",
    "CompletionServedPayload",
    "EditDecided",
    "EditDecidedPayload",
    "EditPersistence",
    "EditPersistencePayload",
    "EditProposed",
    "EditProposedPayload",
    "Event",
    "EventAdapter",
    "FollowupSent",
    "FollowupSentPayload",
    "SamplingParams",
    "ToolCalled",
    "ToolCalledPayload",
    "TrajectoryEnded",
    "TrajectoryEndedPayload",
    "first_error",
    "parse_event",
    "with_ingest_fields",
]

SCHEMA_VERSION = 1

Identifier = Annotated[str, Field(min_length=1, max_length=128)]
Milliseconds = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# ---------------------------------------------------------------------------------- payloads


class SamplingParams(_Strict):
    temperature: Annotated[float, Field(ge=0.0)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    top_k: Annotated[int, Field(ge=-1)] = -1  # -1: no top-k truncation
    max_tokens: Annotated[int, Field(ge=1)] = 256
    seed: int | None = None


class CompletionServedPayload(_Strict):
    completion_id: Identifier
    model: Identifier
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    # Log-probability of each completion token under the policy that sampled it, as served.
    behaviour_logprobs: list[Annotated[float, Field(le=0.0)]]
    sampling: SamplingParams = SamplingParams()
    ttft_ms: Milliseconds
    latency_ms: Milliseconds
    finish_reason: Literal["stop", "length", "abort", "error"] = "stop"

    @model_validator(mode="after")
    def _one_logprob_per_token(self) -> CompletionServedPayload:
        if len(self.behaviour_logprobs) != len(self.completion_token_ids):
            raise ValueError(
                f"behaviour_logprobs has {len(self.behaviour_logprobs)} entries but "
                f"completion_token_ids has {len(self.completion_token_ids)}; they must match"
            )
        return self


ToolErrorKind = Literal[
    "malformed_call", "unknown_tool", "bad_arguments", "timeout", "sandbox_violation", "tool_error"
]


class ToolCalledPayload(_Strict):
    call_id: Identifier
    tool: Annotated[str, Field(min_length=1, max_length=64)]
    valid: bool
    error_kind: ToolErrorKind | None = None
    duration_ms: Milliseconds = 0.0
    parallel_group: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _invalid_calls_say_why(self) -> ToolCalledPayload:
        if not self.valid and self.error_kind is None:
            raise ValueError("an invalid tool call (valid=false) needs an error_kind")
        return self


class EditProposedPayload(_Strict):
    edit_id: Identifier
    path: Annotated[str, Field(min_length=1, max_length=1024)]
    lines_added: Annotated[int, Field(ge=0)] = 0
    lines_removed: Annotated[int, Field(ge=0)] = 0


class EditDecidedPayload(_Strict):
    edit_id: Identifier
    decision: Literal["accepted", "rejected", "reverted"]


class EditPersistencePayload(_Strict):
    edit_id: Identifier
    horizon_s: Annotated[int, Field(gt=0)]
    surviving_fraction: Fraction


class FollowupSentPayload(_Strict):
    sentiment: Literal["dissatisfied", "neutral", "satisfied"]


class ClarificationAskedPayload(_Strict):
    # How ambiguous the request was (0 clear .. 1 ambiguous), when the client knows.
    request_ambiguity: Fraction | None = None


class TrajectoryEndedPayload(_Strict):
    outcome: Literal["completed", "aborted", "error"]
    turns: Annotated[int, Field(ge=0)]
    task_family: Identifier = "default"


# ---------------------------------------------------------------------------------- envelope


class _Envelope(_Strict):
    event_id: UUID
    schema_version: Literal[1] = 1
    trajectory_id: Identifier
    session_id: Identifier
    org_id: Identifier | None = None  # set from the API key at ingest, never trusted from a client
    user: Annotated[str, Field(min_length=1, max_length=256)]
    checkpoint_id: Identifier
    arm: Identifier = "default"
    occurred_at: AwareDatetime
    sent_at: AwareDatetime
    received_at: AwareDatetime | None = None
    event_time: AwareDatetime | None = None
    clock_skew_ms: int | None = None

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
    "completion.served": CompletionServed,
    "tool.called": ToolCalled,
    "edit.proposed": EditProposed,
    "edit.decided": EditDecided,
    "edit.persistence": EditPersistence,
    "followup.sent": FollowupSent,
    "clarification.asked": ClarificationAsked,
    "trajectory.ended": TrajectoryEnded,
}
EVENT_TYPES: tuple[str, ...] = tuple(EVENT_MODELS)

Event = Annotated[
    Union[
        CompletionServed, ToolCalled, EditProposed, EditDecided, EditPersistence,
        FollowupSent, ClarificationAsked, TrajectoryEnded,
    ],
    Field(discriminator="type"),
]
EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(raw: bytes | str) -> Event:
    """Validate one event from its JSON bytes; raises pydantic's ValidationError."""
    return EventAdapter.validate_json(raw)


def first_error(error: ValidationError) -> tuple[str, str]:
    """The (field path, reason) of a validation error's first problem, for per-event answers."""
    detail: dict[str, Any] = error.errors(include_url=False)[0]
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
    clock_skew_ms: int,
) -> Event:
    """The event as stored: org from the API key, pseudonymised user, server-side times."""
    return event.model_copy(update={
        "org_id": org_id, "user": user, "received_at": received_at,
        "event_time": event_time, "clock_skew_ms": clock_skew_ms,
    })
