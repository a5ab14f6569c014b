"""The OpenAI request fields the gateway reads: typed, bounded, refused naming the field."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from serving.gateway.backend import BackendStream
from serving.gateway.errors import BackendError, GatewayError, refused_by_backend
from serving.gateway.request import ChatCompletionRequest, CompletionRequest, validate_request

CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
COMPLETION: dict[str, Any] = {"model": "m", "prompt": [1, 2, 3]}


def test_valid_requests_pass_with_fields_the_gateway_does_not_read() -> None:
    validate_request(ChatCompletionRequest, CHAT | {"stream": True, "tools": [{"x": 1}],
                                                    "temperature": 0, "top_logprobs": 5})
    validate_request(CompletionRequest, COMPLETION | {"logprobs": 1, "echo": False})


@pytest.mark.parametrize("model, body, field", [
    (ChatCompletionRequest, CHAT | {"messages": []}, "messages"),
    (ChatCompletionRequest, CHAT | {"messages": [{"role": "user", "content": 5}]},
     "messages.0.content"),
    (ChatCompletionRequest, CHAT | {"stream": "yes"}, "stream"),
    (ChatCompletionRequest, CHAT | {"stream_options": []}, "stream_options"),
    (ChatCompletionRequest, CHAT | {"n": 2}, "n"),
    (ChatCompletionRequest, CHAT | {"max_tokens": "8"}, "max_tokens"),
    (ChatCompletionRequest, CHAT | {"temperature": 1e300}, "temperature"),
    (ChatCompletionRequest, CHAT | {"seed": 2 ** 70}, "seed"),
    (ChatCompletionRequest, CHAT | {"top_logprobs": 100}, "top_logprobs"),
    (CompletionRequest, COMPLETION | {"prompt": [-1]}, "prompt"),
    (CompletionRequest, COMPLETION | {"prompt": ""}, "prompt"),
    (CompletionRequest, {"model": "m"}, "prompt"),
    (CompletionRequest, COMPLETION | {"metadata": []}, "metadata"),
])
def test_bad_fields_are_refused_naming_them(model: type, body: dict[str, Any],
                                             field: str) -> None:
    with pytest.raises(GatewayError) as info:
        validate_request(model, body)
    assert str(info.value).startswith(field), str(info.value)
    assert info.value.status_code == 400
    assert info.value.body()["error"] | {"message": ""} == {
        "message": "", "type": "invalid_request_error", "param": field, "code": "invalid_value"}


def test_null_is_the_default_wherever_openai_takes_null() -> None:
    nulls = dict.fromkeys(["n", "stream", "stream_options", "frequency_penalty",
                           "presence_penalty", "temperature", "top_p", "max_tokens",
                           "max_completion_tokens", "seed", "stop", "logit_bias", "user",
                           "logprobs", "top_logprobs", "response_format", "metadata"])
    validate_request(ChatCompletionRequest, CHAT | nulls)
    validate_request(CompletionRequest, COMPLETION | nulls | {"logprobs": None})


@pytest.mark.parametrize(("status", "body", "want"), [
    (400, {"error": {"message": "stop.0: too short", "type": "invalid_request_error",
                     "param": "stop.0", "code": "invalid_value"}},
     (400, "invalid_request_error", "stop.0", "invalid_value")),
    (404, {"error": {"message": "no model", "type": "NotFoundError", "param": None,
                     "code": 404}}, (404, "invalid_request_error", None, None)),
    (400, {"object": "error", "message": "vLLM's older shape", "code": 400},
     (400, "invalid_request_error", None, None)),
    (500, "Internal Server Error", (500, "server_error", None, None)),
])
def test_a_backend_refusal_reaches_the_client_as_openais_error_with_its_param(
        status: int, body: Any, want: tuple[Any, ...]) -> None:
    refusal = refused_by_backend(status, body, "fallback")
    error = refusal.body()["error"]
    assert (refusal.status_code, error["type"], error["param"], error["code"]) == want
    assert error["message"] and error["message"] != "fallback"


@pytest.mark.parametrize("payload", [b"data: {not json}\n\n", b'data: {"a": 1}\n\ndata: {"b'])
def test_a_backend_stream_that_is_not_sse_json_is_a_bad_gateway(payload: bytes) -> None:
    async def read() -> list[dict[str, Any]]:
        transport = httpx.MockTransport(lambda _: httpx.Response(200, content=payload))
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.send(client.build_request("GET", "http://b/"), stream=True)
            return [chunk async for chunk in BackendStream(response)]

    with pytest.raises(BackendError) as info:
        asyncio.run(read())
    assert info.value.status_code == 502 and "broke off" in str(info.value)
