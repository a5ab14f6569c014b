"""Token-level truncated importance sampling against the behaviour policy logged at serving time.

The denominator of the ratio is always the log-probability the serving checkpoint reported when
it sampled the token. Recomputing it with the current actor would make every ratio 1 and silently
turn stale data into "on-policy" data, so this module never sees a model.
"""

from __future__ import annotations

import torch

__all__ = ["truncated_is_weights"]


def truncated_is_weights(
    actor_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weights, ratios)``: ``min(pi/mu, cap)`` detached, and the untruncated ``pi/mu``.

    actor_logprobs:     (B, T) log pi(token) under the actor being trained
    behaviour_logprobs: (B, T) log mu(token) as logged by the serving checkpoint
    """
    log_ratio = actor_logprobs.detach() - behaviour_logprobs  # (B, T)
    ratios = torch.exp(log_ratio)  # (B, T)
    return ratios.clamp(max=cap), ratios
