"""vLLM's OpenAI-compatible wire format, as far as the torch engine speaks it (pure).

Requests accept and ignore OpenAI fields that do not change generation; fields that would change
it in ways the engine does not implement (``n > 1``, stop strings, penalties) are refused with
the field's name, rather than silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from schemas import bounds as b
from serving.engine.errors import UnsupportedRequest
from serving.engine.generator import StepOutput

__all__ = ["DEFAULT_CHAT_TEMPLATE", "ChatRequest", "CompletionRequest", "IncrementalText",
           "LoraRequest", "chat_logprobs", "completion_logprobs", "usage"]

# Used when the model's tokenizer has none (the tiny local models); vLLM takes the same file via
# ``--chat-template`` so both backends tokenize a conversation identically.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


_MAX_LOGPROBS = 20  # as vLLM's default max_logprobs
_Positive = Annotated[int, Field(ge=1, le=b.MAX_COMPLETION_TOKENS)]


class _Open(BaseModel):
    # Non-finite numbers (JSON's 1e999 parses as inf) would reach torch as nan: refused.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class _Sampling(_Open):
    model: Annotated[str, Field(max_length=256)]
    temperature: Annotated[float, Field(ge=0.0, le=b.MAX_TEMPERATURE)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    top_k: Annotated[int, Field(ge=-1, le=b.TOKEN_ID_BOUND)] = -1
    seed: Annotated[int, Field(ge=b.MIN_SEED, le=b.MAX_SEED)] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    return_token_ids: bool = False
    ignore_eos: bool = False
    n: int = 1
    stop: str | list[str] | None = None
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_p: float = 0.0

    def refuse_unsupported(self) -> None:
        defaults = {"n": 1, "frequency_penalty": 0.0, "presence_penalty": 0.0,
                    "repetition_penalty": 1.0, "min_p": 0.0}
        for name, default in defaults.items():
            if getattr(self, name) != default:
                raise UnsupportedRequest(f"{name}={getattr(self, name)} is not supported by the "
                                         f"torch engine; leave it at {default}")
        if self.stop:
            raise UnsupportedRequest("stop is not supported by the torch engine; omit it")

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class ContentPart(_Open):
    text: str = ""


class Message(_Open):
    # Other fields (name, tool_calls, tool_call_id) are kept for whoever renders the prompt.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    role: Annotated[str, Field(min_length=1, max_length=64)] = "user"
    content: str | list[ContentPart] | None = None


class CompletionRequest(_Sampling):
    # Token ids are checked against the model's vocabulary when the request is served.
    prompt: str | list[Annotated[int, Field(ge=0, lt=b.TOKEN_ID_BOUND)]]
    max_tokens: _Positive = 16
    logprobs: Annotated[int, Field(ge=0, le=_MAX_LOGPROBS)] | None = None  # the top N too


class ChatRequest(_Sampling):
    messages: Annotated[list[Message], Field(min_length=1)]
    max_tokens: _Positive | None = None
    max_completion_tokens: _Positive | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=_MAX_LOGPROBS)] | None = None
    # Checked by schemas.tooldefs when the prompt is rendered (errors name the field).
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: Any = None


class LoraRequest(_Open):
    lora_name: Annotated[str, Field(min_length=1, max_length=256)]
    lora_path: Annotated[str, Field(max_length=4096)] | None = None


@dataclass
class IncrementalText:
    """Text deltas of a growing token sequence; a partial UTF-8 character is held back."""

    tokenizer: Any
    ids: list[int] = field(default_factory=list)
    text: str = ""

    def add(self, token_id: int, final: bool = False) -> str:
        self.ids.append(token_id)
        full = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if full.endswith("\ufffd") and not final:
            return ""
        delta, self.text = full[len(self.text):], full
        return delta


def _token_text(tokenizer: Any, token_id: int) -> str:
    return tokenizer.decode([token_id])


def _clamp(logprob: float) -> float:
    return max(logprob, -9999.0)  # JSON has no -inf; OpenAI and vLLM send -9999.0


def completion_logprobs(steps: list[StepOutput], tokenizer: Any, offset: int) -> dict[str, Any]:
    """The ``logprobs`` object of a completions choice; ``offset`` is the text offset of the
    first step (nonzero in later stream chunks)."""
    tokens, offsets = [], []
    for step in steps:
        offsets.append(offset)
        tokens.append(_token_text(tokenizer, step.token_id))
        offset += len(tokens[-1])
    return {
        "tokens": tokens,
        "token_logprobs": [_clamp(step.logprob) for step in steps],
        "top_logprobs": [
            {_token_text(tokenizer, step.token_id): _clamp(step.logprob)}
            | {_token_text(tokenizer, tid): _clamp(lp) for tid, lp in step.top}
            for step in steps
        ],
        "text_offset": offsets,
    }


def _chat_entry(tokenizer: Any, token_id: int, logprob: float) -> dict[str, Any]:
    text = _token_text(tokenizer, token_id)
    return {"token": text, "logprob": _clamp(logprob), "bytes": list(text.encode())}


def chat_logprobs(steps: list[StepOutput], tokenizer: Any) -> dict[str, Any]:
    return {"content": [
        _chat_entry(tokenizer, step.token_id, step.logprob)
        | {"top_logprobs": [_chat_entry(tokenizer, tid, lp) for tid, lp in step.top]}
        for step in steps
    ]}


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
