"""Advantages, truncated IS and the loss on examples small enough to compute by hand."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.advantages import EmaBaseline, compute_advantages, whiten
from trainer.importance import truncated_is_weights
from trainer.loss import k3_kl, policy_gradient_loss


def test_advantage_uses_the_baseline_before_the_batch_and_then_updates_it() -> None:
    baseline = EmaBaseline(decay=0.5, values={"a": 1.0})
    raw = compute_advantages([3.0, 1.0, 2.0], ["a", "a", "b"], baseline, whiten_batch=False)
    # a: 3-1, 1-1; b is new, so it starts from its batch mean 2.0.
    assert raw == [2.0, 0.0, 0.0]
    # a: 0.5*1+0.5*3 = 2, then 0.5*2+0.5*1 = 1.5; b: 2.
    assert baseline.values == {"a": 1.5, "b": 2.0}


def test_advantage_whitening_on_a_hand_computed_batch() -> None:
    got = compute_advantages([3.0, 1.0, 2.0], ["a", "a", "b"], EmaBaseline(0.5, {"a": 1.0}))
    std = math.sqrt(8 / 9)  # raw [2, 0, 0]: mean 2/3, variance 8/9
    assert got == pytest.approx([(4 / 3) / std, -(2 / 3) / std, -(2 / 3) / std], rel=1e-5)


def test_whitening_leaves_a_single_record_alone_and_round_trips_the_baseline() -> None:
    assert whiten([0.7]) == [0.7]
    baseline = EmaBaseline(0.9, {"b": 0.25, "a": -1.0})
    assert EmaBaseline.from_dict(baseline.to_dict()) == baseline


def test_truncated_is_weights_cap_the_ratio_against_the_logged_logprobs() -> None:
    actor = torch.tensor([[-1.0, -2.0]])
    behaviour = torch.tensor([[-1.5, -1.0]])
    weights, ratios = truncated_is_weights(actor, behaviour, cap=1.5)
    assert ratios.tolist()[0] == pytest.approx([math.exp(0.5), math.exp(-1.0)])
    assert weights.tolist()[0] == pytest.approx([1.5, math.exp(-1.0)])
    assert not weights.requires_grad


def test_loss_is_the_token_mean_of_weighted_reinforce_terms() -> None:
    actor = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], requires_grad=True)
    weights = torch.tensor([[1.5, 0.5], [1.0, 1.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    parts = policy_gradient_loss(actor, weights, torch.tensor([2.0, -1.0]), mask, token_count=3)
    # -w*A*logp over the three real tokens: 3 + 2 - 0.5 = 4.5, over 3 tokens.
    assert parts.loss.item() == pytest.approx(1.5)
    parts.loss.backward()
    assert actor.grad.flatten().tolist() == pytest.approx([-1.0, -1 / 3, 1 / 3, 0.0])


def test_k3_kl_by_hand_and_added_with_its_coefficient() -> None:
    actor = torch.tensor([[-1.0]])
    ref = torch.tensor([[-2.0]])
    assert k3_kl(actor, ref).item() == pytest.approx(math.exp(-1.0))
    assert k3_kl(ref, ref).item() == 0.0
    parts = policy_gradient_loss(actor, torch.ones(1, 1), torch.zeros(1), torch.ones(1, 1), 1,
                                 ref_logprobs=ref, kl_coef=0.1)
    assert parts.loss.item() == pytest.approx(0.1 * math.exp(-1.0))
    assert parts.kl.item() == pytest.approx(math.exp(-1.0))


def test_loss_split_across_shards_adds_up_to_the_full_batch_loss() -> None:
    torch.manual_seed(0)
    actor, weights = torch.randn(4, 3), torch.rand(4, 3)
    adv, mask = torch.randn(4), torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 1, 1]])
    full = policy_gradient_loss(actor, weights, adv, mask, token_count=8).loss
    halves = sum(policy_gradient_loss(actor[s], weights[s], adv[s], mask[s], 8).loss
                 for s in (slice(0, 2), slice(2, 4)))
    assert halves.item() == pytest.approx(full.item())
