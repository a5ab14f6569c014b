"""Explicit sampling parameters and the warnings for those that bias importance ratios."""

from __future__ import annotations

import pytest

from schemas.events import SamplingParams
from serving.gateway.errors import GatewayError
from serving.gateway.sampling import resolve_sampling, sampling_bias_warnings


def test_unset_parameters_get_the_unbiased_defaults() -> None:
    params = resolve_sampling({"max_tokens": 8}, default_max_tokens=256)
    assert params == SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=8)
    assert sampling_bias_warnings(params, {}) == []
    assert resolve_sampling({}, 64).max_tokens == 64
    assert resolve_sampling({"max_completion_tokens": 5, "top_k": 0}, 64).max_tokens == 5


@pytest.mark.parametrize(("body", "fragment"), [
    ({"top_p": 0.9}, "top_p=0.9"),
    ({"top_k": 40}, "top_k=40"),
    ({"temperature": 0.7}, "temperature=0.7"),
    ({"temperature": 0}, "greedy"),
    ({"min_p": 0.05}, "min_p"),
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"repetition_penalty": 1.1}, "repetition_penalty"),
])
def test_each_biasing_parameter_is_flagged(body: dict, fragment: str) -> None:
    params = resolve_sampling(body, 16)
    warnings = sampling_bias_warnings(params, body)
    assert len(warnings) == 1 and fragment in warnings[0]


def test_the_reference_temperature_is_not_flagged() -> None:
    params = resolve_sampling({"temperature": 0.7}, 16)
    assert sampling_bias_warnings(params, {}, reference_temperature=0.7) == []


def test_bad_values_name_the_field() -> None:
    with pytest.raises(GatewayError, match="temperature"):
        resolve_sampling({"temperature": "hot"}, 16)
    with pytest.raises(GatewayError, match="top_p"):
        resolve_sampling({"top_p": 1.5}, 16)
