"""The policy-gradient loss: token-mean REINFORCE with truncated IS weights, optional k3 KL.

For token t of a sample with advantage A, weight w = min(pi/mu, cap) (no gradient), the
per-token loss is ``-w * A * log pi(t)`` plus ``beta * k3`` where
``k3 = exp(log ref - log pi) - (log ref - log pi) - 1`` (an unbiased, non-negative estimate of
KL(pi || ref)). Losses are summed over tokens and divided by ``token_count``, the number of
completion tokens in the *global* batch, so micro-batches and data-parallel ranks add up to
exactly the full-batch token mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LossParts", "k3_kl", "policy_gradient_loss"]


@dataclass(frozen=True)
class LossParts:
    loss: torch.Tensor  # () the value to backpropagate
    pg: torch.Tensor  # () the policy-gradient part, detached
    kl: torch.Tensor  # () the KL part before beta, detached (0 when there is no reference)


def k3_kl(actor_logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """(B, T) per-token k3 estimate of KL(actor || ref); differentiable in the actor."""
    log_ratio = ref_logprobs - actor_logprobs  # (B, T)
    return torch.exp(log_ratio) - log_ratio - 1.0


def policy_gradient_loss(
    actor_logprobs: torch.Tensor,
    is_weights: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    token_count: int,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> LossParts:
    """actor_logprobs, is_weights, mask: (B, T); advantages: (B,); ref_logprobs: (B, T) or None.

    ``mask`` is 1 on completion tokens and 0 on padding; ``token_count`` is the global count.
    """
    if token_count <= 0:
        raise ValueError("token_count must be positive: the batch has no completion tokens")
    mask = mask.to(actor_logprobs.dtype)
    per_token = -is_weights.detach() * advantages[:, None] * actor_logprobs  # (B, T)
    pg = (per_token * mask).sum() / token_count
    loss = pg
    kl = torch.zeros((), dtype=actor_logprobs.dtype)
    if ref_logprobs is not None and kl_coef > 0.0:
        kl = (k3_kl(actor_logprobs, ref_logprobs) * mask).sum() / token_count
        loss = loss + kl_coef * kl
    return LossParts(loss=loss, pg=pg.detach(), kl=kl.detach())
