"""The sampling distribution, checked against hand-computed examples."""

from __future__ import annotations

import math

import torch

from serving.engine.sampling import choose_token, processed_logprobs

LOGITS = torch.tensor([2.0, 1.0, 0.0, -1.0])


def _log_softmax(values: list[float]) -> list[float]:
    total = math.log(sum(math.exp(v) for v in values))
    return [v - total for v in values]


def test_temperature_scales_logits_before_the_softmax() -> None:
    got = processed_logprobs(LOGITS, temperature=0.5, top_k=-1, top_p=1.0)
    assert torch.allclose(got, torch.tensor(_log_softmax([4.0, 2.0, 0.0, -2.0])), atol=1e-6)


def test_top_k_keeps_the_k_largest_and_renormalises() -> None:
    got = processed_logprobs(LOGITS, temperature=1.0, top_k=2, top_p=1.0)
    assert torch.allclose(got[:2], torch.tensor(_log_softmax([2.0, 1.0])), atol=1e-6)
    assert torch.isinf(got[2:]).all()


def test_top_p_keeps_the_smallest_prefix_reaching_p() -> None:
    # Probabilities are about [0.644, 0.237, 0.087, 0.032]: 0.644 < 0.8 <= 0.881.
    got = processed_logprobs(LOGITS, temperature=1.0, top_k=-1, top_p=0.8)
    assert torch.allclose(got[:2], torch.tensor(_log_softmax([2.0, 1.0])), atol=1e-6)
    assert torch.isinf(got[2:]).all()
    only_first = processed_logprobs(LOGITS, temperature=1.0, top_k=-1, top_p=0.5)
    assert only_first[0] == 0.0 and torch.isinf(only_first[1:]).all()


def test_greedy_takes_the_argmax_with_untempered_logprobs() -> None:
    got = processed_logprobs(LOGITS, temperature=0.0, top_k=-1, top_p=1.0)
    assert torch.allclose(got, torch.log_softmax(LOGITS, -1))
    assert choose_token(got, greedy=True) == 0


def test_sampling_never_draws_a_truncated_token() -> None:
    logprobs = processed_logprobs(LOGITS, temperature=1.0, top_k=2, top_p=1.0)
    generator = torch.Generator().manual_seed(0)
    draws = {choose_token(logprobs, greedy=False, generator=generator) for _ in range(200)}
    assert draws == {0, 1}


def test_temperatures_and_top_p_too_small_for_float32_are_greedy_not_nan() -> None:
    for temperature, top_p in ((5e-324, 1.0), (1e-6, 1.0), (1.0, 5e-324), (1.0, 1e-300)):
        got = processed_logprobs(LOGITS, temperature=temperature, top_k=-1, top_p=top_p)
        assert not torch.isnan(got).any(), (temperature, top_p)
        assert choose_token(got, greedy=temperature < 1e-5) == 0
