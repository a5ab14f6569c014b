"""The ``completion.served`` event of one finished (or cut-short) completion (pure)."""

from __future__ import annotations

from datetime import datetime

from schemas.events import CompletionServed, CompletionServedPayload, SamplingParams
from schemas.ids import uuid7
from serving.gateway.metadata import RequestMetadata
from serving.gateway.registry import Target
from serving.gateway.stream import StreamAccumulator

__all__ = ["completion_served", "event_finish_reason"]

_FINISH_REASONS = {"stop", "length", "abort", "error"}


def event_finish_reason(backend_reason: str | None) -> str:
    """The schema's finish reason for a backend's (``tool_calls`` is a kind of stop)."""
    if backend_reason is None:
        return "abort"
    return backend_reason if backend_reason in _FINISH_REASONS else "stop"


def completion_served(
    *, meta: RequestMetadata, arm: str, target: Target, completion_id: str,
    sampling: SamplingParams, acc: StreamAccumulator, ttft_ms: float, latency_ms: float,
    finish_reason: str, now: datetime,
) -> CompletionServed:
    """The event, or for a cut-short stream the tokens that do have a logprob."""
    kept = min(len(acc.token_ids), len(acc.logprobs))
    return CompletionServed(
        event_id=uuid7(), trajectory_id=meta.trajectory_id, session_id=meta.session_id,
        user=meta.user, checkpoint_id=target.checkpoint_id, arm=arm, occurred_at=now,
        sent_at=now,
        payload=CompletionServedPayload(
            completion_id=completion_id, model=target.served_name,
            prompt_token_ids=list(acc.prompt_token_ids),
            completion_token_ids=acc.token_ids[:kept],
            # float rounding can put a near-certain token a hair above 0
            behaviour_logprobs=[min(lp, 0.0) for lp in acc.logprobs[:kept]],
            sampling=sampling, ttft_ms=ttft_ms, latency_ms=latency_ms,
            finish_reason=finish_reason,  # type: ignore[arg-type]
        ),
    )
