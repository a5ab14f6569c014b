"""The OpenAI request fields the gateway reads: typed, bounded, refused naming the field."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from serving.gateway.backend import BackendStream
from serving.gateway.errors import BackendError, GatewayError
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
