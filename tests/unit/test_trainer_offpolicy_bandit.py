"""The trainer's off-policy correction on a bandit whose answer is known in closed form.

Data logged several checkpoints back (behaviour policy mu) trains the current policy pi. The
trainer's estimate of the policy gradient is ``-grad`` of ``policy_gradient_loss`` with
``truncated_is_weights`` against the logged log-probabilities. On a softmax bandit its
expectation is exact: ``sum_a mu_a * min(pi_a / mu_a, cap) * (rbar_a - b) * (e_a - pi)``, and the
true gradient of ``J = sum_a pi_a rbar_a`` is ``pi * (rbar - J)``. So the bias of each choice
(no cap, the configured cap, no correction at all) is known, not guessed.
"""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from trainer.config import TrainConfig
from trainer.importance import truncated_is_weights
from trainer.loss import policy_gradient_loss

MEANS = torch.tensor([1.0, 0.2, -0.5, 0.0], dtype=torch.float64)  # each arm's mean reward
NOISE_SD = 0.5
NOW = torch.tensor([0.0, 1.0, 0.5, -0.5], dtype=torch.float64)  # the policy being trained
# The checkpoint that served the data: it rarely chose the best arm, so pi/mu reaches 3.7.
LOGGED = torch.tensor([-1.0, 1.5, 0.8, 0.0], dtype=torch.float64)
BASELINE = 0.25
SAMPLES = 200_000
SEEDS = (3, 7, 11)
CAP = next(f.default for f in fields(TrainConfig) if f.name == "is_cap")
TOLERANCE_SE = 4.5  # standard errors; the draws are seeded, so this is a margin, not a gamble


def _policy(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits, 0)


def true_gradient(logits: torch.Tensor) -> torch.Tensor:
    pi = _policy(logits)
    return pi * (MEANS - (pi * MEANS).sum())


def capped_ratios(cap: float) -> torch.Tensor:
    """(K,) each arm's weight under the cap: min(pi/mu, cap)."""
    return torch.clamp(_policy(NOW) / _policy(LOGGED), max=cap)


def expected_estimate(weights: torch.Tensor) -> torch.Tensor:
    """What the estimator converges to: each arm drawn at mu, weighted ``weights[a]``."""
    per_arm = _policy(LOGGED) * weights * (MEANS - BASELINE)  # (K,)
    return per_arm - per_arm.sum() * _policy(NOW)  # sum_a per_arm_a * (e_a - pi)


def estimate(seed: int, cap: float, *, corrected: bool = True) -> tuple[torch.Tensor,
                                                                         torch.Tensor]:
    """(the trainer's gradient estimate from SAMPLES logged draws, its standard errors)."""
    generator = torch.Generator().manual_seed(seed)
    mu = _policy(LOGGED)
    arms = torch.multinomial(mu, SAMPLES, replacement=True, generator=generator)
    rewards = MEANS[arms] + NOISE_SD * torch.randn(SAMPLES, generator=generator,
                                                   dtype=torch.float64)
    advantages = rewards - BASELINE
    logits = NOW.clone().requires_grad_(True)
    actor = torch.log_softmax(logits, 0)[arms][:, None]  # (B, 1): one token a sample
    # Uncorrected means the denominator recomputed with the actor: every ratio 1.
    behaviour = torch.log(mu)[arms][:, None] if corrected else actor.detach()
    weights, _ = truncated_is_weights(actor, behaviour, cap)
    parts = policy_gradient_loss(actor, weights, advantages, torch.ones(SAMPLES, 1), SAMPLES)
    parts.loss.backward()
    assert logits.grad is not None
    chosen = torch.nn.functional.one_hot(arms, len(MEANS)).to(torch.float64)
    per_sample = weights.detach() * advantages[:, None] * (chosen - _policy(NOW))  # (B, K)
    return -logits.grad, per_sample.std(0) / SAMPLES ** 0.5


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).norm() / want.norm())


@pytest.mark.parametrize("seed", SEEDS)
def test_untruncated_ratios_recover_the_true_gradient_from_stale_data(seed: int) -> None:
    got, se = estimate(seed, cap=1e9)
    assert torch.all((got - true_gradient(NOW)).abs() <= TOLERANCE_SE * se), (got, se)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_configured_cap_converges_to_its_closed_form_and_keeps_the_direction(
        seed: int) -> None:
    cap = CAP
    got, se = estimate(seed, cap=cap)
    want = expected_estimate(capped_ratios(cap))
    assert torch.all((got - want).abs() <= TOLERANCE_SE * se), (got, want, se)
    # Its bias, known exactly: a quarter of the gradient's length here, where one arm's ratio
    # is 3.7 against a cap of 2; the direction stays (cosine 0.98).
    bias = _relative_error(want, true_gradient(NOW))
    assert 0.2 < bias < 0.3
    assert torch.nn.functional.cosine_similarity(got, true_gradient(NOW), 0) > 0.95
    # Truncation buys variance: every component's error is at most the untruncated one's.
    _, untruncated_se = estimate(seed, cap=1e9)
    assert torch.all(se <= untruncated_se)


@pytest.mark.parametrize("seed", SEEDS)
def test_without_the_logged_logprobs_stale_data_trains_towards_the_old_policy(seed: int) -> None:
    got, se = estimate(seed, cap=CAP, corrected=False)
    # Every ratio 1 is the expectation under mu, not pi: a different gradient altogether.
    naive = expected_estimate(torch.ones(len(MEANS), dtype=torch.float64))
    assert torch.all((got - naive).abs() <= TOLERANCE_SE * se)
    error = (got - true_gradient(NOW)).abs() / se
    assert float(error.max()) > 50  # far outside any sampling error
    # Off by 0.39 of the gradient's length, against the cap's 0.25.
    corrected = expected_estimate(capped_ratios(CAP))
    assert 0.35 < _relative_error(naive, true_gradient(NOW)) < 0.45
    assert _relative_error(naive, true_gradient(NOW)) > _relative_error(corrected,
                                                                        true_gradient(NOW))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_on_the_corrected_estimate_raises_the_true_value(seed: int) -> None:
    got, _ = estimate(seed, cap=CAP)
    value = float((_policy(NOW) * MEANS).sum())
    stepped = float((_policy(NOW + 0.5 * got) * MEANS).sum())
    assert stepped > value + 0.02
