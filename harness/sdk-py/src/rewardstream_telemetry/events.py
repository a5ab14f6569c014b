"""Typed constructors, one per event type; each event is checked against its published schema
before it is queued.

Every constructor takes the :class:`Trajectory` the event belongs to, the payload's fields as
keyword arguments, and an optional ``occurred_at``: an aware ``datetime`` or an ISO-8601 string
with a zone (default: now). It returns the new event id. A field that breaks the schema, or an
``occurred_at`` of any other kind (a naive datetime included: its zone would be a guess), raises
:class:`~rewardstream_telemetry.errors.InvalidEventError` naming the field, at the call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Literal
from uuid import UUID

from rewardstream_telemetry.errors import InvalidEventError, TelemetryError
from rewardstream_telemetry.ids import uuid7
from rewardstream_telemetry.published import SCHEMA_VERSIONS
from rewardstream_telemetry.tracecontext import parse_traceparent, trajectory_id_of_trace
from rewardstream_telemetry.validation import parse_date_time

__all__ = ["EditDecision", "EventConstructors", "FinishReason", "Sentiment", "ToolErrorKind",
           "Trajectory", "TrajectoryOutcome", "timestamp"]

# The closed sets of the shipped schemas (a test compares them), for type checkers and editors;
# the schema decides at run time.
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "abort", "error"]
ToolErrorKind = Literal["malformed_call", "unknown_tool", "bad_arguments", "timeout",
                        "sandbox_violation", "tool_error"]
EditDecision = Literal["accepted", "rejected", "reverted"]
Sentiment = Literal["dissatisfied", "neutral", "satisfied"]
TrajectoryOutcome = Literal["completed", "aborted", "error"]

_UNSET: Any = object()  # a payload field left to its schema's default


@dataclass(frozen=True)
class Trajectory:
    """Who and where: the envelope fields shared by every event of one trajectory."""

    trajectory_id: str
    session_id: str
    user: str  # the client's own user id; ingest replaces it with a keyed pseudonym
    checkpoint_id: str
    arm: str = "default"

    @classmethod
    def from_traceparent(cls, traceparent: str, *, user: str, checkpoint_id: str,
                         session_id: str | None = None, arm: str = "default") -> Trajectory:
        """The trajectory of a W3C trace (a ``traceparent`` header, e.g. the one an agent's
        request carried): the id the gateway gives that trace's completions and OTLP ingest its
        spans, so these events join them. Raises :class:`InvalidEventError` for a header that
        is not a valid traceparent."""
        parsed = parse_traceparent(traceparent)
        if parsed is None:
            raise InvalidEventError(f"traceparent: not a W3C traceparent: {traceparent[:80]!r}")
        trajectory_id = trajectory_id_of_trace(parsed.trace_id)
        return cls(trajectory_id, session_id or trajectory_id, user, checkpoint_id, arm)

    @classmethod
    def from_current_span(cls, *, user: str, checkpoint_id: str, session_id: str | None = None,
                          arm: str = "default") -> Trajectory:
        """The trajectory of the OpenTelemetry trace this code runs in (needs
        ``opentelemetry-api``, which this SDK does not install); raises
        :class:`TelemetryError` without it or outside a recording span."""
        try:
            from opentelemetry import trace
        except ImportError:
            raise TelemetryError("Trajectory.from_current_span needs opentelemetry-api; "
                                 "pass the traceparent to from_traceparent instead") from None
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            raise TelemetryError("no OpenTelemetry span is current: call this inside the "
                                 "agent's span, or use from_traceparent")
        trajectory_id = trajectory_id_of_trace(context.trace_id)
        return cls(trajectory_id, session_id or trajectory_id, user, checkpoint_id, arm)


def timestamp(value: datetime | str | None, field: str = "occurred_at") -> datetime:
    """``value`` as an aware UTC datetime (now when None); raises naming ``field`` otherwise."""
    if value is None:
        return datetime.now(timezone.utc)
    if isinstance(value, str):
        parsed = parse_date_time(value)
        if parsed is None:
            raise InvalidEventError(f"{field}: must be an ISO-8601 date-time with a time zone "
                                    f"(2025-01-31T12:00:00Z), got {value!r}")
        return parsed.astimezone(timezone.utc)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidEventError(f"{field}: a naive datetime has no time zone; pass an aware "
                                    "one (datetime.now(timezone.utc)) or an ISO-8601 string")
        return value.astimezone(timezone.utc)
    raise InvalidEventError(f"{field}: must be a datetime or an ISO-8601 string, got "
                            f"{type(value).__name__}")


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _plain(value: Any) -> Any:
    """A payload part as JSON-ready values: a pydantic model (``model_dump``) becomes a dict."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


class EventConstructors:
    """Mixed into the client, which supplies :meth:`emit`."""

    def emit(self, event: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def _new(self, event_type: str, trajectory: Trajectory, payload: Mapping[str, Any],
             occurred_at: datetime | str | None) -> UUID:
        when = timestamp(occurred_at)
        event_id = uuid7(int(when.timestamp() * 1000))
        at = _iso(when)
        # sent_at is rewritten on every send attempt; occurred_at is its placeholder until then.
        self.emit({"event_id": str(event_id), "type": event_type,
                   "schema_version": SCHEMA_VERSIONS[event_type], **asdict(trajectory),
                   "occurred_at": at, "sent_at": at,
                   "payload": {k: v for k, v in payload.items() if v is not _UNSET}})
        return event_id

    def completion_served(
        self, trajectory: Trajectory, *, completion_id: str, model: str,
        prompt_token_ids: Sequence[int], completion_token_ids: Sequence[int],
        behaviour_logprobs: Sequence[float], ttft_ms: float, latency_ms: float,
        sampling: Mapping[str, Any] | Any = None, finish_reason: FinishReason = "stop",
        occurred_at: datetime | str | None = None,
    ) -> UUID:
        """``sampling``: a mapping of the SamplingParams fields (or a model with model_dump)."""
        payload = {"completion_id": completion_id, "model": model,
                   "prompt_token_ids": list(prompt_token_ids),
                   "completion_token_ids": list(completion_token_ids),
                   "behaviour_logprobs": list(behaviour_logprobs),
                   "sampling": _UNSET if sampling is None else _plain(sampling),
                   "ttft_ms": ttft_ms, "latency_ms": latency_ms, "finish_reason": finish_reason}
        return self._new("completion.served", trajectory, payload, occurred_at)

    def tool_called(
        self, trajectory: Trajectory, *, call_id: str, tool: str, valid: bool,
        error_kind: ToolErrorKind | None = None, duration_ms: float = 0.0,
        parallel_group: int | None = None, occurred_at: datetime | str | None = None,
    ) -> UUID:
        payload = {"call_id": call_id, "tool": tool, "valid": valid, "error_kind": error_kind,
                   "duration_ms": duration_ms, "parallel_group": parallel_group}
        return self._new("tool.called", trajectory, payload, occurred_at)

    def edit_proposed(
        self, trajectory: Trajectory, *, edit_id: str, path: str, lines_added: int = 0,
        lines_removed: int = 0, occurred_at: datetime | str | None = None,
    ) -> UUID:
        payload = {"edit_id": edit_id, "path": path, "lines_added": lines_added,
                   "lines_removed": lines_removed}
        return self._new("edit.proposed", trajectory, payload, occurred_at)

    def edit_decided(
        self, trajectory: Trajectory, *, edit_id: str, decision: EditDecision,
        occurred_at: datetime | str | None = None,
    ) -> UUID:
        return self._new("edit.decided", trajectory, {"edit_id": edit_id, "decision": decision},
                         occurred_at)

    def edit_persistence(
        self, trajectory: Trajectory, *, edit_id: str, horizon_s: int, surviving_fraction: float,
        occurred_at: datetime | str | None = None,
    ) -> UUID:
        payload = {"edit_id": edit_id, "horizon_s": horizon_s,
                   "surviving_fraction": surviving_fraction}
        return self._new("edit.persistence", trajectory, payload, occurred_at)

    def followup_sent(
        self, trajectory: Trajectory, *, sentiment: Sentiment,
        occurred_at: datetime | str | None = None,
    ) -> UUID:
        return self._new("followup.sent", trajectory, {"sentiment": sentiment}, occurred_at)

    def clarification_asked(
        self, trajectory: Trajectory, *, request_ambiguity: float | None = None,
        occurred_at: datetime | str | None = None,
    ) -> UUID:
        return self._new("clarification.asked", trajectory,
                         {"request_ambiguity": request_ambiguity}, occurred_at)

    def trajectory_ended(
        self, trajectory: Trajectory, *, outcome: TrajectoryOutcome, turns: int,
        task_family: str = "default",
        occurred_at: datetime | str | None = None,
    ) -> UUID:
        payload = {"outcome": outcome, "turns": turns, "task_family": task_family}
        return self._new("trajectory.ended", trajectory, payload, occurred_at)
