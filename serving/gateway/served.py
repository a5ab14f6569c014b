"""The events the gateway writes for one finished (or cut-short) completion (pure):
``completion.served``, and a ``tool.called`` with ``valid: false`` for each broken call."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from schemas.bounds import MIN_LOGPROB
from schemas.events import (
    GATEWAY_PRODUCER,
    CompletionServed,
    CompletionServedPayload,
    FinishReason,
    SamplingParams,
    ToolCalled,
    ToolCalledPayload,
)
from schemas.ids import call_event_id, uuid7
from serving.gateway.metadata import RequestMetadata
from serving.gateway.registry import Target
from serving.gateway.stream import StreamAccumulator
from serving.gateway.toolcheck import BrokenToolCall

__all__ = ["broken_call_events", "completion_served"]


def _stamped(org_id: str, now: datetime) -> dict[str, Any]:
    """What ingest sets on the events it stores; the gateway is a server, its clock is the
    receipt time."""
    return {"org_id": org_id, "occurred_at": now, "sent_at": now, "received_at": now,
            "event_time": now, "clock_skew_ms": 0, "producer": GATEWAY_PRODUCER}


def completion_served(
    *, meta: RequestMetadata, arm: str, target: Target, completion_id: str,
    sampling: SamplingParams, acc: StreamAccumulator, ttft_ms: float, latency_ms: float,
    finish_reason: FinishReason, now: datetime, org_id: str,
    text: Mapping[str, Any] | None = None, tools_offered: list[str] | None = None,
) -> CompletionServed:
    """The event, or for a cut-short stream the tokens that do have a logprob. ``text``: the
    text fields the org's policy allows (``capture.captured_text``)."""
    kept = min(len(acc.token_ids), len(acc.logprobs))
    return CompletionServed(
        event_id=uuid7(), trajectory_id=meta.trajectory_id, session_id=meta.session_id,
        user=meta.user, checkpoint_id=target.checkpoint_id, arm=arm, **_stamped(org_id, now),
        payload=CompletionServedPayload(
            completion_id=completion_id, model=target.served_name,
            prompt_token_ids=list(acc.prompt_token_ids),
            completion_token_ids=acc.token_ids[:kept],
            # float rounding can put a near-certain token a hair above 0; an impossible one
            # (-inf, which backends send as -9999 or lower) is held at the schema's floor
            behaviour_logprobs=[max(min(lp, 0.0), MIN_LOGPROB) for lp in acc.logprobs[:kept]],
            sampling=sampling, ttft_ms=ttft_ms, latency_ms=latency_ms,
            finish_reason=finish_reason, tools_offered=tools_offered, **(text or {}),
        ),
    )


def broken_call_events(*, meta: RequestMetadata, arm: str, target: Target,
                       broken: list[BrokenToolCall], now: datetime, org_id: str,
                       completion_id: str) -> list[ToolCalled]:
    """One ``tool.called`` (``valid: false``) per broken call, on the completion's trajectory,
    checkpoint and arm: recorded by the gateway, so no client can drop it. Its id is the
    call's (``call_event_id``): a client span reporting the same call makes the same event."""
    now_ms = int(now.timestamp() * 1000)
    return [ToolCalled(
        event_id=call_event_id(org_id, call.call_id, completion_id, now_ms),
        trajectory_id=meta.trajectory_id, session_id=meta.session_id,
        user=meta.user, checkpoint_id=target.checkpoint_id, arm=arm, **_stamped(org_id, now),
        payload=ToolCalledPayload(call_id=call.call_id, tool=call.tool[:64] or "unknown",
                                  valid=False, error_kind=call.error_kind),
    ) for call in broken]
