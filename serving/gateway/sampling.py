"""The sampling parameters a request is served with, and the ones that bias importance ratios.

The trainer corrects for off-policy data with ratios pi(token) / mu(token), where mu is the
logged behaviour log-probability. That ratio is only unbiased when mu is the distribution the
trainer assumes: the full softmax at the reference temperature. Truncation (top-p, top-k,
min-p), penalties and ``logit_bias`` change the distribution the token was drawn from, and a
different temperature rescales it; such requests are still served and logged, their logprobs
those of the distribution that was actually sampled (bias, penalties, temperature and truncation
applied, as the torch engine and vLLM's ``processed_logprobs`` report them), but each one is
flagged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.events import SamplingParams
from serving.gateway.errors import GatewayError

__all__ = ["resolve_sampling", "sampling_bias_warnings"]

_PENALTIES = ("frequency_penalty", "presence_penalty")


def _number(body: Mapping[str, Any], field: str, default: float) -> float:
    value = body.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GatewayError(f"{field}={str(value)[:40]!r} must be a number", field)
    return float(value)


def _integer(body: Mapping[str, Any], field: str) -> int | None:
    value = body.get(field)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise GatewayError(f"{field}={str(value)[:40]!r} must be an integer", field)
    return value


def resolve_sampling(body: Mapping[str, Any], default_max_tokens: int) -> SamplingParams:
    """The explicit parameters sent to the backend: unset ones get the unbiased defaults
    (temperature 1, top_p 1, no top-k), never the backend's or the model's own defaults."""
    max_tokens = _integer(body, "max_completion_tokens") or _integer(body, "max_tokens")
    top_k = _integer(body, "top_k") or -1
    try:
        return SamplingParams(
            temperature=_number(body, "temperature", 1.0),
            top_p=_number(body, "top_p", 1.0),
            top_k=-1 if top_k <= 0 else top_k,
            max_tokens=max_tokens or default_max_tokens,
            seed=_integer(body, "seed"),
        )
    except ValueError as exc:
        raise GatewayError(f"invalid sampling parameters: {exc}") from None


def sampling_bias_warnings(
    params: SamplingParams, body: Mapping[str, Any], reference_temperature: float = 1.0
) -> list[str]:
    """One line per parameter that makes the logged behaviour distribution differ from the
    full-softmax distribution at ``reference_temperature``; empty when none does."""
    warnings = []
    if params.temperature == 0.0:
        warnings.append("temperature=0 (greedy): the token was not sampled; ratios are invalid")
    elif params.temperature != reference_temperature:
        warnings.append(
            f"temperature={params.temperature} differs from the reference "
            f"{reference_temperature}: logprobs are of the tempered distribution"
        )
    if params.top_p < 1.0:
        warnings.append(f"top_p={params.top_p} truncates the distribution")
    if params.top_k > 0:
        warnings.append(f"top_k={params.top_k} truncates the distribution")
    if _number(body, "min_p", 0.0) > 0.0:
        warnings.append(f"min_p={body['min_p']} truncates the distribution")
    for field in _PENALTIES:
        if _number(body, field, 0.0) != 0.0:
            warnings.append(f"{field}={body[field]} reshapes the distribution")
    if _number(body, "repetition_penalty", 1.0) != 1.0:
        warnings.append(f"repetition_penalty={body['repetition_penalty']} reshapes it")
    if body.get("logit_bias"):
        warnings.append(f"logit_bias on {len(body['logit_bias'])} tokens reshapes it")
    return warnings
