"""SSE framing, request metadata, and reading vLLM-shaped stream chunks into a completion."""

from __future__ import annotations

import pytest

from schemas.events import finish_reason_of
from serving.gateway.errors import BackendError
from serving.gateway.stream import ClientView, StreamAccumulator, assemble_response, client_chunk
from serving.sse import DONE, SseFormatError, parse_sse_line, parse_sse_lines, sse_data, sse_done

STAMP = {"id": "cmpl-1", "model": "m", "checkpoint_id": "c1", "arm": "production"}


def test_sse_frames_round_trip() -> None:
    payloads = [{"a": 1}, {"b": [1, 2]}]
    text = b"".join([sse_data(p) for p in payloads] + [sse_done(), sse_data({"late": 1})])
    assert text.startswith(b'data: {"a":1}\n\n')
    assert list(parse_sse_lines(text.decode().splitlines())) == payloads
    assert parse_sse_line(": keep-alive") is None and parse_sse_line("data: [DONE]") == DONE
    with pytest.raises(SseFormatError, match="not JSON"):
        parse_sse_line("data: {oops")


def _chat_chunks() -> list[dict]:
    return [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                      "logprobs": None, "finish_reason": None}], "prompt_token_ids": [1, 2, 3]},
        {"choices": [{"index": 0, "delta": {"content": "he"}, "token_ids": [7],
                      "logprobs": {"content": [{"token": "he", "logprob": -0.5}]}}]},
        {"choices": [{"index": 0, "delta": {"content": "y"}, "token_ids": [8],
                      "logprobs": {"content": [{"token": "y", "logprob": -1.25}]},
                      "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
    ]


def test_chat_chunks_accumulate_into_tokens_logprobs_and_a_response() -> None:
    acc = StreamAccumulator("chat")
    assert [acc.add(chunk) for chunk in _chat_chunks()] == [0, 1, 1, 0]
    assert acc.behaviour() == ([1, 2, 3], [7, 8], [-0.5, -1.25])
    view = ClientView("chat", logprobs=False, token_ids=False, usage=False)
    response = assemble_response(acc, view, STAMP, created_s=0)
    assert response["choices"][0]["message"]["content"] == "hey"
    assert response["choices"][0]["logprobs"] is None and "prompt_token_ids" not in response
    assert response["checkpoint_id"] == "c1" and response["usage"]["total_tokens"] == 5


def test_completion_chunks_keep_the_logprobs_object_when_asked() -> None:
    acc = StreamAccumulator("completion")
    for ids, lp, text in (([4], -0.1, "a"), ([5], -0.2, "b")):
        acc.add({"choices": [{"text": text, "token_ids": ids, "prompt_token_ids": [9],
                              "logprobs": {"tokens": [text], "token_logprobs": [lp],
                                           "top_logprobs": [{text: lp}], "text_offset": [0]}}]})
    view = ClientView("completion", logprobs=True, token_ids=True)
    choice = assemble_response(acc, view, STAMP, 0)["choices"][0]
    assert choice["text"] == "ab" and choice["logprobs"]["token_logprobs"] == [-0.1, -0.2]
    assert choice["token_ids"] == [4, 5] and choice["prompt_token_ids"] == [9]


def test_a_stream_without_logprobs_is_refused_as_a_backend_error() -> None:
    acc = StreamAccumulator("completion")
    acc.add({"choices": [{"text": "a", "token_ids": [4], "prompt_token_ids": [9]}]})
    with pytest.raises(BackendError, match="logprobs"):
        acc.behaviour()
    with pytest.raises(BackendError, match="boom"):
        acc.add({"error": {"message": "boom"}})


def test_client_chunks_carry_only_what_the_client_asked_for() -> None:
    chunks = _chat_chunks()
    plain = ClientView("chat")
    first = client_chunk(chunks[0], plain, STAMP)
    assert first is not None and "prompt_token_ids" not in first and first["arm"] == "production"
    second = client_chunk(chunks[1], plain, STAMP)
    assert second is not None and second["choices"][0]["logprobs"] is None
    assert "token_ids" not in second["choices"][0]
    assert client_chunk(chunks[3], plain, STAMP) is None
    full = ClientView("chat", logprobs=True, token_ids=True, usage=True)
    assert client_chunk(chunks[3], full, STAMP)["usage"]["total_tokens"] == 5  # type: ignore[index]
    assert client_chunk(chunks[1], full, STAMP)["choices"][0]["token_ids"] == [7]  # type: ignore[index]


def test_the_logged_finish_reason_is_the_backends_own() -> None:
    assert [finish_reason_of(r, missing="abort") for r in (
        "stop", "length", "tool_calls", "content_filter", None, "function_call")] == [
        "stop", "length", "tool_calls", "content_filter", "abort", "stop"]
