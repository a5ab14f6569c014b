"""vLLM's OpenAI-compatible wire format, as far as the torch engine speaks it (pure).

Every parameter of OpenAI's chat and completions APIs either works or is refused naming it
(``serving.openai_errors``): ``stop``, ``presence_penalty``, ``frequency_penalty`` and
``logit_bias`` work (``serving.engine.sampling``, ``serving.engine.stops``); parameters that do
not change what is generated (``user``, ``store``, ``service_tier``, ``metadata``,
``prompt_cache_key`` ...) are accepted; those that would change it in ways the engine does not
implement (``n`` > 1, ``response_format`` other than text, ``reasoning_effort``, audio ...) are
refused, and so is any parameter OpenAI does not define (as OpenAI does), rather than silently
ignored. ``null`` means the parameter's default wherever it is given, as in OpenAI's API.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from schemas import bounds as b
from serving.engine.errors import UnsupportedRequest
from serving.engine.generator import StepOutput

__all__ = ["DEFAULT_CHAT_TEMPLATE", "MAX_STOP_SEQUENCES", "ChatRequest", "CompletionRequest",
           "LoraRequest", "chat_logprobs", "completion_logprobs", "usage"]

# Used when the model's tokenizer has none (the tiny local models); vLLM takes the same file via
# ``--chat-template`` so both backends tokenize a conversation identically.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


_MAX_LOGPROBS = 20  # as vLLM's default max_logprobs
MAX_STOP_SEQUENCES = 16  # OpenAI allows 4; agent frameworks send 2 or 3
_MAX_STOP_CHARS = 256
_MAX_LOGIT_BIAS = 1024
_Positive = Annotated[int, Field(ge=1, le=b.MAX_COMPLETION_TOKENS)]
_Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]
# A string or a list of them; read as a list, so an error names its entry (``stop.1``).
_StopList = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=_MAX_STOP_CHARS)]],
    BeforeValidator(lambda value: [value] if isinstance(value, str) else value),
    Field(max_length=MAX_STOP_SEQUENCES)]
_Free = Annotated[Any, Field(description="accepted; does not change what is generated")]


class _Open(BaseModel):
    # Non-finite numbers (JSON's 1e999 parses as inf) would reach torch as nan: refused.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class _Request(BaseModel):
    """A request body: unknown parameters are refused, null is the default."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


def _refuse(param: str, message: str, code: str = "unsupported_value") -> None:
    raise UnsupportedRequest(f"{param}: {message}", param, code)


class _Sampling(_Request):
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
    stop: _StopList | None = None
    frequency_penalty: _Penalty = 0.0
    presence_penalty: _Penalty = 0.0
    # OpenAI's map of token id (as a JSON key) to a bias from -100 to 100.
    logit_bias: Annotated[dict[Annotated[str, Field(pattern=r"^[0-9]{1,7}$")],
                               Annotated[float, Field(ge=-100.0, le=100.0)]],
                          Field(max_length=_MAX_LOGIT_BIAS)] | None = None
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    user: _Free = None
    store: _Free = None
    metadata: _Free = None
    service_tier: _Free = None
    safety_identifier: _Free = None
    prompt_cache_key: _Free = None
    prompt_cache_retention: _Free = None

    def refuse_unsupported(self) -> None:
        if self.n != 1:
            _refuse("n", f"{self.n} choices: the torch engine makes one completion per request")
        if self.repetition_penalty != 1.0:
            _refuse("repetition_penalty", "the torch engine implements OpenAI's "
                    "presence_penalty and frequency_penalty; leave it at 1")
        if self.min_p != 0.0:
            _refuse("min_p", "not implemented by the torch engine; leave it at 0")

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))

    @property
    def stop_sequences(self) -> tuple[str, ...]:
        return tuple(self.stop or ())

    @property
    def token_biases(self) -> tuple[tuple[int, float], ...]:
        return tuple((int(token), bias) for token, bias in (self.logit_bias or {}).items())


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
    echo: bool = False
    best_of: int = 1
    suffix: _Free = None

    def refuse_unsupported(self) -> None:
        super().refuse_unsupported()
        if self.echo:
            _refuse("echo", "the torch engine does not echo the prompt; leave it false")
        if self.best_of != 1:
            _refuse("best_of", "the torch engine makes one completion per request")
        if self.suffix is not None:
            _refuse("suffix", "insertion is not implemented by the torch engine",
                    "unsupported_parameter")


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
    response_format: dict[str, Any] | None = None
    modalities: list[str] | None = None
    prediction: _Free = None  # predicted outputs change latency, never the output
    reasoning_effort: Any = None
    verbosity: Any = None
    audio: Any = None
    web_search_options: Any = None
    functions: Any = None
    function_call: Any = None

    def refuse_unsupported(self) -> None:
        super().refuse_unsupported()
        kind = (self.response_format or {}).get("type", "text")
        if kind != "text":
            _refuse("response_format", f"{kind!r} needs constrained decoding, which the torch "
                    "engine does not implement; serve it from a vLLM backend, or omit "
                    "response_format and ask for JSON in the prompt")
        if self.modalities not in (None, ["text"]):
            _refuse("modalities", "the torch engine writes text only")
        for name in ("reasoning_effort", "verbosity", "audio", "web_search_options",
                     "functions", "function_call"):
            if getattr(self, name) is not None:
                _refuse(name, "not implemented by the torch engine"
                        + ("; use tools and tool_choice" if name.startswith("function") else ""),
                        "unsupported_parameter")


class LoraRequest(_Open):
    lora_name: Annotated[str, Field(min_length=1, max_length=256)]
    lora_path: Annotated[str, Field(max_length=4096)] | None = None


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
