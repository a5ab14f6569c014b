"""The OpenAI request fields the gateway reads, typed and bounded (pure).

Everything else in a request is passed to the backend as sent (``extra="allow"``), which
validates it in turn (the torch engine refuses what it does not implement, naming it; vLLM
implements more, ``response_format`` included); the fields here are the ones the gateway itself
acts on, so a wrong type or an absurd value is refused with a 400 naming the field instead of
failing later. ``null`` is the parameter's default wherever it is given, as in OpenAI's API.
The models also give the OpenAPI document its request bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from schemas import bounds as b
from serving.gateway.capture import message_text
from serving.gateway.errors import GatewayError
from serving.gateway.stream import Kind
from serving.openai_errors import from_validation_errors

__all__ = ["ChatCompletionRequest", "CompletionRequest", "RequestLimits", "check_limits",
           "check_prompt_tokens", "validate_request"]

_MAX_LOGPROBS = 20  # vLLM's default max_logprobs
_MAX_MESSAGES = 10_000
_Name = Annotated[str, Field(max_length=b.USER_MAX_CHARS)]
_TokenId = Annotated[int, Field(ge=0, lt=b.TOKEN_ID_BOUND)]


class _Open(BaseModel):
    # strict: no "true" for true or "3" for 3; allow_inf_nan: JSON's 1e999 is refused.
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class StreamOptions(_Open):
    include_usage: bool = False


class ContentPart(_Open):
    type: Annotated[str, Field(max_length=64)] = "text"
    text: str | None = None


class ChatMessage(_Open):
    role: Annotated[str, Field(min_length=1, max_length=64)]
    content: str | list[ContentPart] | None = None


class _Common(_Open):
    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data

    model: _Name | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Annotated[int, Field(ge=1, le=1)] = 1  # each completion is its own trajectory step
    max_tokens: Annotated[int, Field(ge=1, le=b.MAX_COMPLETION_TOKENS)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1, le=b.MAX_COMPLETION_TOKENS)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=b.MAX_TEMPERATURE)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    top_k: Annotated[int, Field(ge=-1, le=b.TOKEN_ID_BOUND)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0.0, le=10.0)] | None = None
    seed: Annotated[int, Field(ge=b.MIN_SEED, le=b.MAX_SEED)] | None = None
    user: _Name | None = None
    metadata: dict[str, Any] | None = None
    return_token_ids: bool | None = None
    # Checked by the backend (the torch engine: up to 16 sequences, biases from -100 to 100).
    stop: str | list[str] | None = None
    logit_bias: dict[str, float] | None = None


class ChatCompletionRequest(_Common):
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=_MAX_MESSAGES)]
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=_MAX_LOGPROBS)] | None = None
    # vLLM constrains decoding to these; the torch engine refuses json_object / json_schema.
    response_format: dict[str, Any] | None = None


class CompletionRequest(_Common):
    prompt: Annotated[str, Field(min_length=1)] | Annotated[
        list[_TokenId], Field(min_length=1, max_length=b.MAX_PROMPT_TOKENS)]
    logprobs: Annotated[int, Field(ge=0, le=_MAX_LOGPROBS)] | None = None


def validate_request(model: type[_Common], body: dict[str, Any]) -> None:
    """Refuse ``body`` with a :class:`GatewayError` naming its first bad field."""
    try:
        model.model_validate(body)
    except ValidationError as exc:
        refusal = from_validation_errors(exc.errors(include_url=False))
        raise GatewayError(str(refusal), refusal.param, refusal.code) from None



@dataclass(frozen=True)
class RequestLimits:
    """What one request may ask of the backend, at most the bounds ``completion.served`` can
    record (a longer prompt or completion would be served but could not be logged)."""

    max_prompt_chars: int = 4 * b.MAX_PROMPT_TOKENS  # about the token bound in English text
    max_prompt_tokens: int = b.MAX_PROMPT_TOKENS
    max_completion_tokens: int = b.MAX_COMPLETION_TOKENS

    def __post_init__(self) -> None:
        for name, bound in (("max_prompt_tokens", b.MAX_PROMPT_TOKENS),
                            ("max_completion_tokens", b.MAX_COMPLETION_TOKENS),
                            ("max_prompt_chars", None)):
            value = getattr(self, name)
            if value < 1 or (bound is not None and value > bound):
                raise GatewayError(f"{name} must be from 1 to {bound or 'any size'}, got {value}")


def _prompt_field(kind: Kind) -> str:
    return "messages" if kind == "chat" else "prompt"


def _prompt_chars(kind: Kind, body: dict[str, Any]) -> int:
    if kind == "completion":
        prompt = body.get("prompt")
        return len(prompt) if isinstance(prompt, str) else 0
    messages = body.get("messages") or []
    return sum(len(message_text(m.get("content"))) for m in messages if isinstance(m, dict))


def check_limits(kind: Kind, body: dict[str, Any],
                 limits: RequestLimits) -> None:
    """Refuse (400, naming the field) a request over the gateway's limits; run it after
    :func:`validate_request`, which checks the types."""
    for field in ("max_tokens", "max_completion_tokens"):
        asked = body.get(field)
        if isinstance(asked, int) and asked > limits.max_completion_tokens:
            raise GatewayError(f"{field}: {asked} is over this gateway's limit of "
                               f"{limits.max_completion_tokens} tokens", field)
    field = _prompt_field(kind)
    chars = _prompt_chars(kind, body)
    if chars > limits.max_prompt_chars:
        raise GatewayError(f"{field}: the prompt has {chars} characters, over this gateway's "
                           f"limit of {limits.max_prompt_chars}", field)
    prompt = body.get("prompt")
    if kind == "completion" and isinstance(prompt, list):
        check_prompt_tokens(kind, len(prompt), limits)


def check_prompt_tokens(kind: Kind, tokens: int,
                        limits: RequestLimits) -> None:
    """Refuse a prompt the backend tokenised to more tokens than the limit (the gateway sees
    the count on the backend's first chunk, before the client gets anything)."""
    if tokens > limits.max_prompt_tokens:
        raise GatewayError(f"{_prompt_field(kind)}: the prompt is {tokens} tokens, over this "
                           f"gateway's limit of {limits.max_prompt_tokens}", _prompt_field(kind))
