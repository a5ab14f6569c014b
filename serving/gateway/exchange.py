"""One request in flight through the gateway: what it was asked, for which org, where it goes
and what came back so far; and the body the backend is sent for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schemas.events import SamplingParams
from schemas.tooldefs import ToolRequest
from serving.gateway.metadata import RequestMetadata
from serving.gateway.registry import Target
from serving.gateway.stream import ClientView, Kind, StreamAccumulator
from serving.gateway.toolcheck import BrokenToolCall, judge_calls

__all__ = ["Exchange", "backend_body"]


@dataclass
class Exchange:
    """One request in flight: what it was asked, where it goes, what came back so far."""

    kind: Kind
    body: dict[str, Any]
    org_id: str  # the API key's
    meta: RequestMetadata  # its user pseudonymised
    arm: str
    sampling: SamplingParams
    view: ClientView
    started_s: float
    completion_id: str
    acc: StreamAccumulator
    target: Target | None = None
    first_token_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    tools: ToolRequest | None = None
    broken: list[BrokenToolCall] | None = None  # judged once the backend finished

    def stamp(self, public_model: str) -> dict[str, Any]:
        assert self.target is not None
        stamp = {"id": self.completion_id, "model": self.body.get("model") or public_model,
                 "checkpoint_id": self.target.checkpoint_id, "arm": self.arm}
        if self.broken is not None:
            stamp["broken_tool_calls"] = [call.as_json() for call in self.broken]
        return stamp

    def judge(self) -> dict[str, Any]:
        """Judge the finished completion's calls; the client's view of the verdict."""
        self.broken = judge_calls(self.tools, self.acc.text, self.acc.tool_calls,
                                  self.completion_id)
        return {"broken_tool_calls": [call.as_json() for call in self.broken]}

    def headers(self) -> dict[str, str]:
        assert self.target is not None
        headers = {"X-Rewardstream-Checkpoint": self.target.checkpoint_id,
                   "X-Rewardstream-Arm": self.arm,
                   "X-Rewardstream-Trajectory-Id": self.meta.trajectory_id,
                   "X-Rewardstream-Trajectory-Source": self.meta.trajectory_source,
                   "X-Rewardstream-Completion-Id": self.completion_id}
        if self.meta.note:
            headers["X-Rewardstream-Note"] = self.meta.note
        if self.warnings:
            headers["X-Rewardstream-Sampling-Warning"] = "; ".join(self.warnings)
        return headers


def backend_body(ex: Exchange, served_name: str) -> dict[str, Any]:
    """The client's body with what the gateway needs forced on: streaming with usage, token
    ids, per-token logprobs, and explicit sampling parameters (never the backend's defaults).
    A null parameter is its default, so it is not sent."""
    body = {k: v for k, v in ex.body.items()
            if k not in ("metadata", "max_completion_tokens") and v is not None}
    body |= {
        "model": served_name, "stream": True, "stream_options": {"include_usage": True},
        "return_token_ids": True, "temperature": ex.sampling.temperature,
        "top_p": ex.sampling.top_p, "top_k": ex.sampling.top_k,
        "max_tokens": ex.sampling.max_tokens,
    }
    if ex.kind == "chat":
        body["logprobs"] = True
    elif body.get("logprobs") is None:
        body["logprobs"] = 0  # the sampled token's logprob, no alternatives
    return body
