"""Reading the backend's stream and writing the client's view of it (pure, no I/O).

The gateway always streams from the backend, asking for token ids and per-token logprobs, so
that time to first token is measured for every request and the behaviour logprobs come from the
sampler itself. :class:`StreamAccumulator` reads vLLM's chunk shapes (chat: ``prompt_token_ids``
on the first chunk, ``choices[0].token_ids`` and ``choices[0].logprobs.content``; completions:
``choices[0].prompt_token_ids``, ``choices[0].token_ids``, ``choices[0].logprobs.token_logprobs``),
and chat ``tool_calls`` deltas (index, id and name first, argument fragments after) into whole
calls. The client gets back only what it asked for, stamped with the checkpoint and arm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from serving.gateway.errors import BackendError, refused_by_backend

__all__ = ["ClientView", "Kind", "StreamAccumulator", "assemble_response", "client_chunk"]

Kind = Literal["chat", "completion"]
_COMPLETION_LOGPROB_FIELDS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


@dataclass(frozen=True)
class ClientView:
    """What the client asked to see of what the gateway always requests from the backend."""

    kind: Kind
    logprobs: bool = False
    token_ids: bool = False
    usage: bool = False


@dataclass
class StreamAccumulator:
    kind: Kind
    prompt_token_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    chat_logprobs: list[dict[str, Any]] = field(default_factory=list)
    completion_logprobs: dict[str, list[Any]] = field(
        default_factory=lambda: {name: [] for name in _COMPLETION_LOGPROB_FIELDS}
    )

    def add(self, chunk: dict[str, Any]) -> int:
        """Fold one backend chunk in; returns how many completion tokens it carried."""
        if "error" in chunk:
            raise refused_by_backend(502, chunk, "the backend's stream failed")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("prompt_token_ids"):
            self.prompt_token_ids = list(chunk["prompt_token_ids"])
        choices = chunk.get("choices") or []
        if not choices:
            return 0
        choice = choices[0]
        if choice.get("prompt_token_ids"):
            self.prompt_token_ids = list(choice["prompt_token_ids"])
        new_ids = list(choice.get("token_ids") or [])
        self.token_ids.extend(new_ids)
        self._add_logprobs(choice.get("logprobs"))
        delta = choice.get("delta") or {}
        self.text += delta.get("content") or choice.get("text") or ""
        self._add_tool_calls(delta.get("tool_calls") or [])
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return len(new_ids)

    def _add_tool_calls(self, deltas: list[dict[str, Any]]) -> None:
        for delta in deltas:
            index = delta.get("index", len(self.tool_calls))
            while len(self.tool_calls) <= index:
                self.tool_calls.append({"id": None, "type": "function",
                                        "function": {"name": "", "arguments": ""}})
            call, function = self.tool_calls[index], delta.get("function") or {}
            call["id"] = delta.get("id") or call["id"]
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""

    def _add_logprobs(self, logprobs: dict[str, Any] | None) -> None:
        if not logprobs:
            return
        if self.kind == "chat":
            entries = logprobs.get("content") or []
            self.chat_logprobs.extend(entries)
            self.logprobs.extend(float(entry["logprob"]) for entry in entries)
        else:
            for name in _COMPLETION_LOGPROB_FIELDS:
                self.completion_logprobs[name].extend(logprobs.get(name) or [])
            self.logprobs.extend(float(lp) for lp in logprobs.get("token_logprobs") or [])

    def behaviour(self) -> tuple[list[int], list[int], list[float]]:
        """(prompt ids, completion ids, one behaviour logprob per completion id)."""
        if not self.prompt_token_ids or len(self.logprobs) != len(self.token_ids):
            raise BackendError(
                f"backend returned {len(self.prompt_token_ids)} prompt ids, "
                f"{len(self.token_ids)} completion ids and {len(self.logprobs)} logprobs; it "
                "must support return_token_ids and logprobs (vLLM >= 0.10.2)"
            )
        return self.prompt_token_ids, self.token_ids, self.logprobs


def client_chunk(chunk: dict[str, Any], view: ClientView, stamp: dict[str, Any]) -> dict | None:
    """The chunk as the client sees it, or None when it only carries what the client did not
    ask for (the usage chunk the gateway requested for itself)."""
    if not chunk.get("choices") and chunk.get("usage") and not view.usage:
        return None
    out = {**chunk, **stamp}
    if not view.token_ids:
        out.pop("prompt_token_ids", None)
    choices = []
    for choice in chunk.get("choices") or []:
        choice = dict(choice)
        if not view.logprobs:
            choice["logprobs"] = None
        if not view.token_ids:
            choice.pop("token_ids", None)
            choice.pop("prompt_token_ids", None)
        choices.append(choice)
    out["choices"] = choices
    return out


def assemble_response(
    acc: StreamAccumulator, view: ClientView, stamp: dict[str, Any], created_s: int
) -> dict[str, Any]:
    """The non-streaming reply built from a finished stream."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": acc.finish_reason or "stop"}
    if acc.kind == "chat":
        choice["message"] = {"role": "assistant", "content": acc.text}
        if acc.tool_calls:
            choice["message"] |= {"content": acc.text if acc.text.strip() else None,
                                  "tool_calls": acc.tool_calls}
        logprobs: Any = {"content": acc.chat_logprobs}
    else:
        choice["text"] = acc.text
        logprobs = dict(acc.completion_logprobs)
    choice["logprobs"] = logprobs if view.logprobs else None
    if view.token_ids:
        choice["token_ids"] = list(acc.token_ids)
    response: dict[str, Any] = {
        "object": "chat.completion" if acc.kind == "chat" else "text_completion",
        "created": created_s,
        "choices": [choice],
        "usage": acc.usage or {
            "prompt_tokens": len(acc.prompt_token_ids),
            "completion_tokens": len(acc.token_ids),
            "total_tokens": len(acc.prompt_token_ids) + len(acc.token_ids),
        },
        **stamp,
    }
    if view.token_ids:
        target = response if acc.kind == "chat" else choice
        target["prompt_token_ids"] = list(acc.prompt_token_ids)
    return response
