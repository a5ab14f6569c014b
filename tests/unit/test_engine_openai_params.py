"""The torch engine's OpenAI parameters: stop sequences (whole and streamed, the stop text never
shown, its tokens kept), presence/frequency penalties and logit_bias in the sampler with
behaviour logprobs of exactly the distribution sampled (checked against an independent
recomputation of OpenAI's formula), null as the default, and every refusal in OpenAI's error
shape naming its parameter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from infra.models import load_policy
from serving.engine.cli import build_engine_app
from serving.engine.generator import GenerationRequest, TorchGenerator
from serving.engine.sampling import LogitShift, processed_logprobs
from serving.engine.stops import StopText

TOLERANCE = 1e-4  # float32 on CPU: KV-cached steps vs one full pass


# ------------------------------------------------------------------------- stop sequences


def _fed(stops: tuple[str, ...], pieces: list[str]) -> tuple[list[str], StopText]:
    """The deltas shown as the text grows by ``pieces`` (the last piece ends generation)."""
    text, state, deltas = "", StopText(stops), []
    for index, piece in enumerate(pieces):
        text += piece
        deltas.append(state.feed(text, final=index == len(pieces) - 1))
        if state.stopped:
            break
    return deltas, state


def test_the_text_ends_before_the_first_stop_sequence_and_a_possible_start_is_held() -> None:
    deltas, state = _fed(("Observation:", "Calling tools:"),
                         ["Thought: read", " it\nObs", "erv", "ation: 42", " more"])
    assert deltas == ["Thought: read", " it\n", "", ""]
    assert state.stopped and state.visible == "Thought: read it\n"


def test_the_earliest_of_several_stops_wins_even_inside_one_piece() -> None:
    deltas, state = _fed(("</code>", "END", "Calling tools:"), ["x = 1\nENDy</code>"])
    assert deltas == ["x = 1\n"] and state.stopped


def test_held_text_that_does_not_become_a_stop_is_shown_and_the_end_flushes_it() -> None:
    deltas, state = _fed(("Observation:",), ["a Obs", "cure", " Ob"])
    assert deltas == ["a ", "Obscure", " Ob"] and not state.stopped
    assert _fed((), ["abc", "def"])[0] == ["abc", "def"]


def test_a_stop_at_the_very_start_shows_nothing() -> None:
    deltas, state = _fed(("\n\n",), ["\n\nanswer"])
    assert deltas == [""] and state.stopped and state.visible == ""


# ------------------------------------------------------------------- penalties and bias


def _independent(logits: torch.Tensor, history: list[int], presence: float, frequency: float,
                 bias: dict[int, float], temperature: float) -> torch.Tensor:
    """OpenAI's documented formula written out element by element (no shared code)."""
    shifted = logits.clone().float()
    for token in range(shifted.shape[-1]):
        count = history.count(token)
        shifted[token] += bias.get(token, 0.0) - count * frequency - (count > 0) * presence
    return torch.log_softmax(shifted / temperature, dim=-1)


def test_bias_and_penalties_follow_openais_formula_on_generated_tokens_only() -> None:
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0])
    shift = LogitShift(presence_penalty=0.5, frequency_penalty=0.25, logit_bias=((3, 4.0),))
    for token in (0, 0, 2):
        shift.count(token, 4)
    got = processed_logprobs(logits, 0.8, -1, 1.0, shift)
    want = _independent(logits, [0, 0, 2], 0.5, 0.25, {3: 4.0}, 0.8)
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.allclose(processed_logprobs(logits, 1.0, -1, 1.0, LogitShift()),
                          torch.log_softmax(logits, -1))


def test_engine_logprobs_are_those_of_the_penalised_biased_distribution(
        tiny_model_dir: Path) -> None:
    engine = TorchGenerator(tiny_model_dir)
    prompt = engine.tokenizer("def add(a, b):").input_ids
    bias = {5: 3.0, 7: -100.0}
    request = GenerationRequest(prompt, max_tokens=16, temperature=0.9, seed=11,
                                ignore_eos=True, presence_penalty=1.5, frequency_penalty=0.7,
                                logit_bias=tuple(bias.items()))
    steps = list(engine.generate(request))
    ids = [step.token_id for step in steps]
    model, _ = load_policy(tiny_model_dir)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0].float()
    expected = [float(_independent(logits[len(prompt) - 1 + t], ids[:t], 1.5, 0.7, bias,
                                   0.9)[token]) for t, token in enumerate(ids)]
    assert max(abs(s.logprob - e) for s, e in zip(steps, expected, strict=True)) < TOLERANCE
    assert 7 not in ids  # -100: banned in practice
    plain = list(engine.generate(GenerationRequest(prompt, max_tokens=16, temperature=0.9,
                                                   seed=11, ignore_eos=True)))
    assert [s.logprob for s in plain] != [s.logprob for s in steps]


def test_a_bias_of_100_makes_a_token_certain_and_its_logprob_near_zero(
        tiny_model_dir: Path) -> None:
    engine = TorchGenerator(tiny_model_dir)
    prompt = engine.tokenizer("return a + b").input_ids
    steps = list(engine.generate(GenerationRequest(prompt, max_tokens=5, seed=1,
                                                   ignore_eos=True, logit_bias=((42, 100.0),))))
    assert [s.token_id for s in steps] == [42] * 5
    assert all(-1e-3 < s.logprob <= 0.0 for s in steps)


# --------------------------------------------------------------------------- the HTTP API


@pytest.fixture(scope="module")
def engine_client(tiny_model_dir: Path) -> TestClient:
    return TestClient(build_engine_app(tiny_model_dir, "tiny"))


CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 24,
        "temperature": 1.0, "seed": 7, "ignore_eos": True, "return_token_ids": True}


def _streamed(client: TestClient, body: dict[str, Any]) -> tuple[str, str | None, list[int]]:
    text, finish, ids = "", None, []
    with client.stream("POST", "/v1/chat/completions", json=body | {"stream": True}) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if not line.startswith("data: {"):
                continue
            choice = json.loads(line[len("data: "):])["choices"][0]
            text += choice["delta"].get("content") or ""
            finish = choice["finish_reason"] or finish
            ids += choice.get("token_ids") or []
    return text, finish, ids


def test_a_stop_sequence_ends_whole_and_streamed_replies_alike(engine_client: TestClient,
                                                               tiny_model_dir: Path) -> None:
    free = engine_client.post("/v1/chat/completions", json=CHAT).json()["choices"][0]
    tokenizer = load_policy(tiny_model_dir)[1]
    # A stop made of the text of tokens 6 and 7: generation ends right after token 7 (or one
    # later, when a partial UTF-8 character is only complete, so shown, with the next token).
    stop = tokenizer.decode(free["token_ids"][6:8])
    cut = free["message"]["content"].index(stop)
    body = CHAT | {"stop": [stop, "never-written"]}
    whole = engine_client.post("/v1/chat/completions", json=body).json()["choices"][0]
    assert whole["message"]["content"] == free["message"]["content"][:cut]
    assert whole["finish_reason"] == "stop"
    kept = whole["token_ids"]  # the tokens that wrote the stop were sampled: they stay
    assert kept == free["token_ids"][:len(kept)] and stop in tokenizer.decode(kept)
    assert 8 <= len(kept) <= 9
    assert _streamed(engine_client, body) == (whole["message"]["content"], "stop", kept)
    assert _streamed(engine_client, CHAT | {"stop": stop})[0] == whole["message"]["content"]


def test_null_is_the_default_for_every_optional_parameter(engine_client: TestClient) -> None:
    nulls = dict.fromkeys(["n", "stream", "stop", "presence_penalty", "frequency_penalty",
                           "logit_bias", "temperature", "top_p", "response_format",
                           "reasoning_effort", "tools", "tool_choice", "stream_options",
                           "logprobs", "top_logprobs", "user", "metadata", "store"])
    answer = engine_client.post("/v1/chat/completions", json=CHAT | nulls)
    assert answer.status_code == 200, answer.text
    assert answer.json() | {"id": None, "created": None} == engine_client.post(
        "/v1/chat/completions", json=CHAT).json() | {"id": None, "created": None}


@pytest.mark.parametrize(("extra", "param", "code"), [
    ({"response_format": {"type": "json_object"}}, "response_format", "unsupported_value"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
     "response_format", "unsupported_value"),
    ({"reasoning_effort": "low"}, "reasoning_effort", "unsupported_parameter"),
    ({"n": 2}, "n", "unsupported_value"),
    ({"frobnicate": True}, "frobnicate", "unsupported_parameter"),
    ({"stop": ["ok", ""]}, "stop.1", "invalid_value"),
    ({"stop": [str(n) for n in range(17)]}, "stop", "invalid_value"),
    ({"presence_penalty": 2.5}, "presence_penalty", "invalid_value"),
    ({"logit_bias": {"5": 101}}, "logit_bias.5", "invalid_value"),
    ({"logit_bias": {"299999": 1}}, "logit_bias", "invalid_value"),
    ({"tools": [{"type": "function"}]}, "tools[0].function", "invalid_value"),
])
def test_refusals_name_the_parameter_in_openais_shape(engine_client: TestClient,
                                                      extra: dict[str, Any], param: str,
                                                      code: str) -> None:
    answer = engine_client.post("/v1/chat/completions", json=CHAT | extra)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param,
                                                              code)
    assert error["message"].startswith(param.split(".")[0].split("[")[0])


def test_an_unknown_model_is_not_found_naming_model(engine_client: TestClient) -> None:
    answer = engine_client.post("/v1/completions", json={"model": "nope", "prompt": "x"})
    assert answer.status_code == 404
    assert answer.json()["error"] | {"message": ""} == {
        "message": "", "type": "invalid_request_error", "param": "model",
        "code": "model_not_found"}
